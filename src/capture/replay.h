/* SPDX-License-Identifier: MIT */
/*
 * Replays a capture through a pipeline: events and samples are pushed as the
 * ring buffer would have pushed them, names and thread names answer the
 * model's lookups instead of the (long gone) target, ticks make time pass
 * for the detectors, and the last snapshot of the maps is rebuilt for the
 * report.
 */
#ifndef REPLAY_H
#define REPLAY_H

#include <stdbool.h>

#include "capture.h"
#include "pipeline.h"
#include "stats.h"
#include "u64map.h"

struct replay {
	struct u64map threads;	/* tid -> thread name (char *) */
	struct stats stats;	/* the last snapshot of the maps */
	bool have_stats;
	/*
	 * The same counts made from the records read, for a capture that lost
	 * its snapshot (cut short, damaged): events, and the workers' samples,
	 * whose counters are cumulative (all a maps-only capture has).
	 */
	struct stats counted;
	struct at_worker_sample *samples; /* the last one of each worker, by id */
	uint32_t nr_samples;
	bool maps_only;		/* the capture holds only long and late polls */
	bool ended;		/* the end record was read */
	uint64_t stop;		/* when tracing stopped (or the last timestamp seen) */
	char reason[CAP_REASON_LEN];
	uint64_t counters[AT_STAT_NR]; /* the BPF side's counters (enum at_stat) */
	uint64_t records;	/* records read */
};

/*
 * Sets up p for the capture's process (it must not be initialised yet) and
 * makes opts' thresholds default to the recorded ones where given says not
 * given (a mask of GIVEN_* bits from options.h; ~0u keeps opts as is).
 */
int replay__init(struct replay *rp, const struct capture_reader *r, struct pipeline *p,
		 struct detect_opts *opts, uint32_t given);
/* Pushes every record; 0 at the clean end, -EINVAL where the capture is damaged. */
int replay__run(struct replay *rp, struct capture_reader *r, struct pipeline *p);
/* Whether the capture held its whole final snapshot (the end record follows it). */
bool replay__has_snapshot(const struct replay *rp);
/*
 * What the report counts from: the final snapshot when the capture has it,
 * else the counts made from the records read (no per-task statistics): the
 * events, or in a maps-only capture the workers' last samples.
 */
const struct stats *replay__stats(struct replay *rp);
void replay__free(struct replay *rp);

#endif
