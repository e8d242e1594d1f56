/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * Aggregation helpers for the BPF side: log2 histograms and run-queue depth
 * over time. Updates of one worker's numbers come mostly from its own thread;
 * the few that cross threads (a thief setting its victim's depth) may race,
 * which costs at most a sample of precision, never a crash.
 */
#ifndef STATS_BPF_H
#define STATS_BPF_H

#include "asynctraced.h"

static __always_inline __u32 log2_u64(__u64 v)
{
	__u32 r = 0, shift;

	shift = (v > 0xffffffffull) << 5;
	v >>= shift;
	r |= shift;
	shift = (v > 0xffff) << 4;
	v >>= shift;
	r |= shift;
	shift = (v > 0xff) << 3;
	v >>= shift;
	r |= shift;
	shift = (v > 0xf) << 2;
	v >>= shift;
	r |= shift;
	shift = (v > 0x3) << 1;
	v >>= shift;
	r |= shift;
	r |= (v >> 1);
	return r;
}

static __always_inline void hist_add(struct at_hist *h, __u64 v)
{
	__u32 slot = log2_u64(v);

	if (slot >= AT_HIST_SLOTS)
		slot = AT_HIST_SLOTS - 1;
	h->slot[slot]++;
}

static __always_inline void hist32_add(struct at_hist32 *h, __u64 v)
{
	__u32 slot = log2_u64(v);

	if (slot >= AT_HIST_SLOTS)
		slot = AT_HIST_SLOTS - 1;
	h->slot[slot]++;
}

/* The queue held depth since ts; it holds new_depth from now on. */
static __always_inline void queue_set(struct at_queue_stats *q, __u32 new_depth, __u64 now)
{
	if (q->ts && now > q->ts)
		q->area += (__u64)q->depth * (now - q->ts);
	q->ts = now;
	q->depth = new_depth;
	if (new_depth > q->peak)
		q->peak = new_depth;
}

#endif
