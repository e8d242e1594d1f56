// SPDX-License-Identifier: MIT
#include "capture/capture_v2.h"

#include <string.h>

/* The version 2 sizes of the two records a self-wake poll is made of. */
#define V2_POLL 120
#define V2_WAKE 56

_Static_assert(sizeof(struct at_hdr) == CAPTURE_V2_HDR_SIZE + 8, "the header grew by the pid");
_Static_assert(AT_POLL_MIN_SIZE == V2_POLL + 8, "a poll is version 2's, header aside");
_Static_assert(sizeof(struct at_poll) == AT_POLL_MIN_SIZE + 8, "then cpu_ns, appended");
_Static_assert(sizeof(struct at_wake) == V2_WAKE + 8, "a wake is version 2's, header aside");

/* An old header at in, as a new one at out, size bytes long, of process pid. */
static void widen_hdr(void *out, const void *in, size_t size, uint32_t pid)
{
	struct at_hdr h;

	memset(&h, 0, sizeof(h));
	memcpy(&h, in, CAPTURE_V2_HDR_SIZE);
	h.size = (uint16_t)size;
	h.pid = pid;
	memcpy(out, &h, sizeof(h));
}

size_t capture_v2__widen(const void *rec, size_t size, uint32_t pid, void *out)
{
	const uint8_t *in = rec;
	uint8_t *o = out;
	uint16_t kind, wake_size;
	bool poll, self_wake;
	size_t grown;

	memcpy(&kind, in, sizeof(kind));
	poll = kind == AT_EV_POLL && size >= V2_POLL;
	self_wake = poll && size >= V2_POLL + V2_WAKE;
	/* the header's pid; a poll's cpu_ns (0, not known); an appended wake's pid */
	grown = size + 8 + (poll ? 8 : 0) + (self_wake ? 8 : 0);
	if (grown > UINT16_MAX)
		return 0;
	if (kind == AT_CAP_PROCESS && size >= CAPTURE_V2_HDR_SIZE + sizeof(pid))
		memcpy(&pid, in + CAPTURE_V2_HDR_SIZE, sizeof(pid));
	if (kind == AT_CAP_TICK || kind == AT_CAP_END)
		pid = 0;
	widen_hdr(o, in, grown, pid);
	if (!poll) {
		memcpy(o + sizeof(struct at_hdr), in + CAPTURE_V2_HDR_SIZE,
		       size - CAPTURE_V2_HDR_SIZE);
		return grown;
	}
	/* the poll's body, with cpu_ns not known */
	memcpy(o + sizeof(struct at_hdr), in + CAPTURE_V2_HDR_SIZE, V2_POLL - CAPTURE_V2_HDR_SIZE);
	memset(o + AT_POLL_MIN_SIZE, 0, sizeof(struct at_poll) - AT_POLL_MIN_SIZE);
	if (!self_wake) {
		memcpy(o + sizeof(struct at_poll), in + V2_POLL, size - V2_POLL);
		return grown;
	}
	/* then the wake's header and body */
	memcpy(&wake_size, in + V2_POLL + 2, sizeof(wake_size));
	widen_hdr(o + sizeof(struct at_poll), in + V2_POLL,
		  wake_size == V2_WAKE ? sizeof(struct at_wake) : wake_size, pid);
	memcpy(o + sizeof(struct at_poll) + sizeof(struct at_hdr),
	       in + V2_POLL + CAPTURE_V2_HDR_SIZE, size - V2_POLL - CAPTURE_V2_HDR_SIZE);
	return grown;
}
