/* SPDX-License-Identifier: MIT */
/*
 * A small streaming protobuf encoder: one message at a time is built in a
 * fixed buffer (nested messages included) and then handed to the caller to
 * write out. Nothing is allocated per message.
 *
 * Lengths of nested messages are not known until they end: pb_begin()
 * leaves one byte for the length and pb_end() writes it, moving the body up
 * in the rare case it needs more than one byte (bodies of 128 bytes or more).
 */
#ifndef PB_H
#define PB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define PB_MAX_BYTES (64 * 1024)
#define PB_MAX_DEPTH 8

enum pb_wire {
	PB_VARINT = 0,
	PB_I64 = 1,
	PB_LEN = 2,
};

struct pb {
	size_t len;
	int depth;
	bool overflow;		/* the message did not fit: it is dropped */
	size_t open[PB_MAX_DEPTH]; /* where each open message's length byte is */
	uint8_t buf[PB_MAX_BYTES];
};

static inline void pb_reset(struct pb *pb)
{
	pb->len = 0;
	pb->depth = 0;
	pb->overflow = false;
}

/* Room for n more bytes? Sets overflow when not. */
static inline bool pb_room(struct pb *pb, size_t n)
{
	if (pb->len + n <= PB_MAX_BYTES)
		return true;
	pb->overflow = true;
	return false;
}

static inline size_t pb_put_varint(uint8_t *p, uint64_t v)
{
	size_t n = 0;

	while (v >= 0x80) {
		p[n++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	p[n++] = (uint8_t)v;
	return n;
}

static inline size_t pb_varint_size(uint64_t v)
{
	size_t n = 1;

	while (v >= 0x80) {
		v >>= 7;
		n++;
	}
	return n;
}

static inline void pb_tag(struct pb *pb, uint32_t field, enum pb_wire wire)
{
	if (pb_room(pb, 5))
		pb->len += pb_put_varint(pb->buf + pb->len, (uint64_t)field << 3 | wire);
}

/* uint32/64, bool and enum fields; int32/64 too (negative ones take 10 bytes). */
static inline void pb_varint(struct pb *pb, uint32_t field, uint64_t v)
{
	pb_tag(pb, field, PB_VARINT);
	if (pb_room(pb, 10))
		pb->len += pb_put_varint(pb->buf + pb->len, v);
}

/* fixed64 and double (as its bits) fields. */
static inline void pb_fixed64(struct pb *pb, uint32_t field, uint64_t v)
{
	pb_tag(pb, field, PB_I64);
	if (!pb_room(pb, 8))
		return;
	for (int i = 0; i < 8; i++)
		pb->buf[pb->len++] = (uint8_t)(v >> (8 * i));
}

static inline void pb_bytes(struct pb *pb, uint32_t field, const void *data, size_t n)
{
	pb_tag(pb, field, PB_LEN);
	if (!pb_room(pb, 10 + n))
		return;
	pb->len += pb_put_varint(pb->buf + pb->len, n);
	memcpy(pb->buf + pb->len, data, n);
	pb->len += n;
}

static inline void pb_string(struct pb *pb, uint32_t field, const char *s)
{
	pb_bytes(pb, field, s, strlen(s));
}

/* Opens a nested message as field; every pb_begin() needs its pb_end(). */
void pb_begin(struct pb *pb, uint32_t field);
void pb_end(struct pb *pb);

#endif
