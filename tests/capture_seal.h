/* SPDX-License-Identifier: MIT */
/*
 * For tests and the fuzzer: recomputes the checksums of every chunk of a
 * capture in place, so that a record damaged on purpose reaches the checks
 * behind the checksum (a damaged record in a chunk that passes it).
 */
#ifndef CAPTURE_SEAL_H
#define CAPTURE_SEAL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <zlib.h>

#include "capture/capture.h"

/* The number of chunks sealed; 0 for what is not a chunked capture. */
static inline size_t capture_seal(uint8_t *data, size_t size)
{
	struct capture_file_header fh;
	struct cap_chunk c;
	struct cap_chunk_v2 old;
	size_t off, head, n = 0;
	uint32_t len;

	if (size < sizeof(fh))
		return 0;
	memcpy(&fh, data, sizeof(fh));
	if (fh.version < 2 || fh.header_size > size)
		return 0;
	head = fh.version >= 5 ? sizeof(c) : sizeof(old);
	for (off = fh.header_size; size - off >= head; off += head + len) {
		uint32_t *crc, *hdr_crc;
		size_t summed;

		if (fh.version >= 5) {
			memcpy(&c, data + off, sizeof(c));
			len = c.size;
			crc = &c.crc;
			hdr_crc = &c.hdr_crc;
			summed = offsetof(struct cap_chunk, hdr_crc);
		} else {
			memcpy(&old, data + off, sizeof(old));
			len = old.size;
			crc = &old.crc;
			hdr_crc = &old.hdr_crc;
			summed = offsetof(struct cap_chunk_v2, hdr_crc);
		}
		if (len > size - off - head)
			break;
		*crc = (uint32_t)crc32(crc32(0, Z_NULL, 0), data + off + head, len);
		*hdr_crc = (uint32_t)crc32(crc32(0, Z_NULL, 0),
					   fh.version >= 5 ? (const uint8_t *)&c : (const uint8_t *)&old,
					   (uInt)summed);
		memcpy(data + off, fh.version >= 5 ? (const void *)&c : (const void *)&old, head);
		n++;
	}
	return n;
}

#endif
