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

#include "capture.h"

/* The number of chunks sealed; 0 for what is not a chunked capture. */
static inline size_t capture_seal(uint8_t *data, size_t size)
{
	struct capture_file_header fh;
	struct cap_chunk c;
	size_t off, n = 0;

	if (size < sizeof(fh))
		return 0;
	memcpy(&fh, data, sizeof(fh));
	if (fh.version < 2 || fh.header_size > size)
		return 0;
	for (off = fh.header_size; size - off >= sizeof(c); off += sizeof(c) + c.size) {
		memcpy(&c, data + off, sizeof(c));
		if (c.size > size - off - sizeof(c))
			break;
		c.crc = (uint32_t)crc32(crc32(0, Z_NULL, 0), data + off + sizeof(c), c.size);
		c.hdr_crc = (uint32_t)crc32(crc32(0, Z_NULL, 0), (const uint8_t *)&c,
					    offsetof(struct cap_chunk, hdr_crc));
		memcpy(data + off, &c, sizeof(c));
		n++;
	}
	return n;
}

#endif
