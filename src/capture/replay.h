/* SPDX-License-Identifier: MIT */
/*
 * Replays a capture through a pipeline per process it holds: events and
 * samples are pushed as the ring buffer would have pushed them, names and thread names answer the
 * model's lookups instead of the (long gone) target, ticks make time pass
 * for the detectors, and the last snapshot of the maps is rebuilt for the
 * report.
 */
#ifndef REPLAY_H
#define REPLAY_H

#include <stdbool.h>

#include "capture/capture.h"
#include "lib/u64map.h"
#include "pipeline/pipeline.h"
#include "source/stats.h"

/* One process of the capture, replayed through its own pipeline. */
struct replay_proc {
	struct pipeline pipe;
	uint32_t pid;
	struct stats stats;	/* its last snapshot of the maps */
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
	uint32_t sample_hz;	/* recorded in sample mode, at this rate (0: probe mode) */
	bool ended;		/* its end record was read (or the capture's) */
	uint64_t stop;		/* when its tracing stopped (or the last timestamp seen) */
	char reason[CAP_REASON_LEN];
	uint64_t counters[AT_STAT_NR]; /* the BPF side's counters (enum at_stat) */
};

/*
 * What the replay tells its user: a process begins (its pipeline is set
 * up: add sinks), a process ends (its pipeline is to be finished; the
 * capture's end ends every process still going, in the order they began).
 */
struct replay_ops {
	int (*begin)(void *ctx, struct replay_proc *p);
	void (*end)(void *ctx, struct replay_proc *p);
	void *ctx;
};

struct replay {
	struct u64map threads;	/* tid -> thread name (char *) */
	struct replay_proc **procs; /* in the order they began */
	size_t nr;
	struct replay_proc *last;	/* the latest record's */
	struct replay_ops ops;
	struct detect_config opts; /* the thresholds every process is judged by */
	bool lost_waker_given;	/* --lost-waker was given (Go's lost wakers by silence) */
	bool ended;		/* the capture's end record was read */
	uint64_t stop;		/* when recording stopped (or the last timestamp seen) */
	char reason[CAP_REASON_LEN];
	uint64_t records;	/* records read */
	uint64_t strays;	/* records of no process the capture began */
};

/*
 * Sets up the replay of the capture r: its first process begins (ops.begin),
 * and config's thresholds not given (config->given) are taken from those
 * recorded.
 */
int replay__init(struct replay *rp, const struct capture_reader *r, struct detect_config *config,
		 const struct replay_ops *ops);
/*
 * Pushes every record to its process's pipeline, each process ended
 * (ops.end) at its end record, the rest at the capture's end; 0 at the clean
 * end, -EINVAL where the capture is damaged (then the processes still going
 * are left to replay__end).
 */
int replay__run(struct replay *rp, struct capture_reader *r);
/* Ends (ops.end) every process not ended yet: after damage, at what was read. */
void replay__end(struct replay *rp);
/* Whether process p's whole final snapshot was read (its end record follows it). */
bool replay__has_snapshot(const struct replay_proc *p);
/*
 * What p's report counts from: the final snapshot when the capture has it,
 * else the counts made from the records read (no per-task statistics): the
 * events, or in a maps-only capture the workers' last samples.
 */
const struct stats *replay__stats(struct replay_proc *p);
void replay__free(struct replay *rp);

#endif
