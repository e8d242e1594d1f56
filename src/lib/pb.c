// SPDX-License-Identifier: MIT
#include "lib/pb.h"

void pb_begin(struct pb *pb, uint32_t field)
{
	pb_tag(pb, field, PB_LEN);
	if (pb->depth == PB_MAX_DEPTH || !pb_room(pb, 1)) {
		pb->overflow = true;
		pb->depth++; /* so that pb_end() still pairs */
		return;
	}
	pb->open[pb->depth++] = pb->len++;
}

void pb_end(struct pb *pb)
{
	size_t at, body, extra;

	if (pb->depth-- > PB_MAX_DEPTH || pb->overflow)
		return;
	at = pb->open[pb->depth];
	body = pb->len - at - 1;
	extra = pb_varint_size(body) - 1;
	if (extra) {
		if (!pb_room(pb, extra))
			return;
		memmove(pb->buf + at + 1 + extra, pb->buf + at + 1, body);
		pb->len += extra;
	}
	pb_put_varint(pb->buf + at, body);
}
