// SPDX-License-Identifier: MIT
#include "sinks/pftrace_file.h"

#include <errno.h>
#include <libdeflate.h>
#include <stdlib.h>
#include <string.h>

#include "lib/outbuf.h"
#include "lib/pb.h"

enum {
	TRACE_PACKET = 1,
	PACKET_COMPRESSED_PACKETS = 50,
};

struct pftrace_file {
	struct outbuf *ob;
	int refs;
	uint64_t next_uuid;
	struct libdeflate_compressor *z; /* NULL: packets go out as they are */
	uint8_t *batch;		/* PFTRACE_BATCH bytes of whole packets */
	size_t len;
	uint8_t *zbuf;		/* a batch deflated */
	size_t zroom;
};

int pftrace_file__new(struct pftrace_file **fp, struct outbuf *ob, bool deflate)
{
	struct pftrace_file *f = calloc(1, sizeof(*f));

	if (!f)
		return -ENOMEM;
	f->refs = 1;
	f->next_uuid = 1;
	if (deflate) {
		f->z = libdeflate_alloc_compressor(1);
		f->batch = malloc(PFTRACE_BATCH);
		f->zroom = f->z ? libdeflate_zlib_compress_bound(f->z, PFTRACE_BATCH) : 0;
		f->zbuf = f->zroom ? malloc(f->zroom) : NULL;
		if (!f->z || !f->batch || !f->zbuf) {
			pftrace_file__free(f);
			return -ENOMEM;
		}
	}
	f->ob = outbuf__get(ob);
	*fp = f;
	return 0;
}

struct pftrace_file *pftrace_file__get(struct pftrace_file *f)
{
	f->refs++;
	return f;
}

uint64_t pftrace_file__uuid(struct pftrace_file *f)
{
	return f->next_uuid++;
}

/* The batch as one packet of compressed packets (or as it is, should deflating fail). */
static void write_batch(struct pftrace_file *f)
{
	uint8_t head[3 * 10];
	size_t zlen, n, inner;

	if (!f->len)
		return;
	zlen = libdeflate_zlib_compress(f->z, f->batch, f->len, f->zbuf, f->zroom);
	if (!zlen) {
		ob_write(f->ob, f->batch, f->len);
		f->len = 0;
		return;
	}
	/* Trace.packet { compressed_packets: zbuf } */
	inner = pb_varint_size((uint64_t)PACKET_COMPRESSED_PACKETS << 3 | PB_LEN) +
		pb_varint_size(zlen) + zlen;
	n = pb_put_varint(head, (uint64_t)TRACE_PACKET << 3 | PB_LEN);
	n += pb_put_varint(head + n, inner);
	n += pb_put_varint(head + n, (uint64_t)PACKET_COMPRESSED_PACKETS << 3 | PB_LEN);
	n += pb_put_varint(head + n, zlen);
	ob_write(f->ob, head, n);
	ob_write(f->ob, f->zbuf, zlen);
	f->len = 0;
}

void pftrace_file__packet(struct pftrace_file *f, const void *data, size_t len)
{
	if (!f->z || len > PFTRACE_BATCH) {
		if (f->z)
			write_batch(f); /* in order */
		ob_write(f->ob, data, len);
		return;
	}
	if (f->len + len > PFTRACE_BATCH)
		write_batch(f);
	memcpy(f->batch + f->len, data, len);
	f->len += len;
}

int pftrace_file__flush(struct pftrace_file *f)
{
	if (f->z)
		write_batch(f);
	return outbuf__flush(f->ob);
}

void pftrace_file__free(struct pftrace_file *f)
{
	if (!f || --f->refs > 0)
		return;
	if (f->ob)
		pftrace_file__flush(f);
	outbuf__free(f->ob);
	if (f->z)
		libdeflate_free_compressor(f->z);
	free(f->batch);
	free(f->zbuf);
	free(f);
}
