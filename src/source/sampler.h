/* SPDX-License-Identifier: MIT */
/*
 * Turns snapshots of the BPF maps into sample records (struct
 * at_worker_sample, at_task_sample) pushed through the pipeline, so the
 * detectors that watch state over time (starvation, waker thrash, lost
 * wakers) read records like every other detector, in every mode.
 */
#ifndef SAMPLER_H
#define SAMPLER_H

#include <stddef.h>

#include "lib/u64map.h"
#include "source/stats.h"

/* Where samples go: the pipeline, or a capture. */
typedef void (*sampler_emit_fn)(void *ctx, const void *rec, size_t size);

struct sampler {
	struct u64map seen; /* task -> polls + wakes + 1 at its last sample */
	sampler_emit_fn emit;
	void *ctx;
};

void sampler__init(struct sampler *s, sampler_emit_fn emit, void *ctx);
void sampler__free(struct sampler *s);
/* One sample per worker. */
void sampler__workers(struct sampler *s, const struct stats *st);
/* One sample per task that changed since the last call, or idle (st->idle). */
void sampler__tasks(struct sampler *s, const struct stats *st);

#endif
