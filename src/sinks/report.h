/* SPDX-License-Identifier: MIT */
/*
 * The report: at exit and on SIGUSR1. Counts, per-worker percentiles, the
 * top tasks, the steal matrix and the alerts raised, as text or as JSON
 * (schema asynctraced.summary/1, docs/alerts.md).
 */
#ifndef REPORT_H
#define REPORT_H

#include <stdbool.h>
#include <stdio.h>

#include "asynctraced.h"
#include "pipeline/detect.h"
#include "pipeline/model.h"
#include "source/stats.h"

struct outbuf;

struct run_info {
	double seconds;		/* how long we traced */
	const char *end_reason;	/* "target exited", "interrupted", ... */
	bool maps_only;
	/*
	 * A capture that lost its final snapshot of the maps: the counts come
	 * from the records read (replay.h); the BPF side's counters and the
	 * per-task statistics are not known.
	 */
	bool no_snapshot;
	/*
	 * Sample mode's rate (0: probe mode): the polls are the runs its samples
	 * saw, and what only probes see (spawns, completions, wakes, steals,
	 * parks) is not known.
	 */
	uint32_t sample_hz;
	const char *runtime;	/* "tokio", "go", "usdt"; NULL: not known */
	uint64_t stats[AT_STAT_NR]; /* BPF-side counters: drops and misses */
};

/* full: the tables too, not only the counts. */
void report__text(FILE *out, struct model *m, const struct detector *d, const struct stats *st,
		  const struct run_info *run, bool full);
void report__json(struct outbuf *ob, struct model *m, const struct detector *d,
		  const struct stats *st, const struct run_info *run);
/* "0xc8, 0x80ff": the kinds of the records skipped as unknown, for messages. */
void report__unknown_kinds(char *buf, size_t len, const struct model *m);
/* Records the BPF side could not deliver, all kinds together. */
uint64_t report__dropped(const struct run_info *run);

#endif
