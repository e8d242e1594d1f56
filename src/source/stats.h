/* SPDX-License-Identifier: MIT */
/*
 * A snapshot of the aggregates the BPF side keeps in maps (per worker, per
 * task, steals, the runtime), and the arithmetic on their log2 histograms.
 * The live view diffs two snapshots; the report reads one.
 */
#ifndef STATS_H
#define STATS_H

#include <stddef.h>
#include <stdint.h>

#include "asynctraced.h"

struct task_entry {
	uint64_t id;
	struct at_task_stats s;
};

/* A live task that returned Pending and has not been woken since. */
struct idle_entry {
	uint64_t id;
	uint64_t idle_since;
	uint64_t name_addr;
};

struct steal_entry {
	struct at_steal_key key;
	struct at_steal_stats s;
};

struct stats {
	uint32_t pid;		/* whose aggregates these are */
	uint64_t ts;		/* when read, CLOCK_MONOTONIC ns */
	struct at_runtime_stats rt;
	struct at_worker_stats *workers;
	struct at_worker_idle *between;	/* per worker, between polls; NULL unknown */
	uint32_t nr_workers;	/* 1 + the highest worker seen */
	struct task_entry *tasks;
	size_t nr_tasks;
	struct idle_entry *idle;
	size_t nr_idle;
	struct steal_entry *steals;
	size_t nr_steals;
	uint64_t dropped;	/* records the ring buffer had no room for */
};

void stats__free(struct stats *s);
/* qsort order: the task with the most poll time first. */
int task_entry__by_poll_ns(const void *a, const void *b);

/* Totals over every worker. */
struct stats_totals {
	uint64_t polls, busy_ns, steals, stolen, parks;
	struct at_hist poll, oncpu, delay;
};
void stats__totals(const struct stats *s, struct stats_totals *t);

uint64_t hist_count(const struct at_hist *h);
/* Counts one value, in the slot the BPF side would count it in. */
void hist_add(struct at_hist *h, uint64_t v);
/* A per-task histogram widened, for the arithmetic below. */
void hist_widen(struct at_hist *into, const struct at_hist32 *h);
void hist_merge(struct at_hist *into, const struct at_hist *h);
/* into = a - b, slot by slot (a newer snapshot of the same histogram as b) */
void hist_delta(struct at_hist *into, const struct at_hist *a, const struct at_hist *b);
/*
 * The p-th percentile (0 < p <= 100) as the upper bound of its slot: the true
 * value lies in [bound/2, bound). 0 if the histogram is empty.
 */
uint64_t hist_percentile(const struct at_hist *h, double p);
/* The same, never above max when the exact maximum is known (max != 0). */
uint64_t hist_percentile_max(const struct at_hist *h, double p, uint64_t max);

/* "12us", "3.4ms", "1.20s": a duration in at most 6 characters. */
void fmt_ns(char *buf, size_t size, uint64_t ns);
/* "≤16ms": a duration known only as the upper bound of its log2 bucket. */
void fmt_bound(char *buf, size_t size, uint64_t ns);

#endif
