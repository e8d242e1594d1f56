/* SPDX-License-Identifier: MIT */
/*
 * Inside the detectors, shared by their files alone: an episode, what is
 * watched of tasks and workers, and what detect.c does for every detector.
 */
#ifndef DETECT_PRIV_H
#define DETECT_PRIV_H

#include <stdbool.h>
#include <stdint.h>

#include "pipeline/detect.h"

/* Another worker idle at least this share of the time: room to spare (starvation, late polls). */
#define STARVE_IDLE_SHARE 0.5
/* Worker samples kept per worker (100 ms apart): the span a late poll's wait is judged over. */
#define WORKER_HISTORY 16

/* An open episode: the BEGIN alert, kept up to date until the END. */
struct episode {
	struct alert a;
	uint64_t last_ts;	/* latest occurrence */
	uint64_t polls;		/* an unwakeable task: its polls when first sampled (0: not yet) */
};

/* What a task's previous sample said, to turn counters into rates. */
struct task_watch {
	uint64_t ts, polls, wakes, self_wakes;
	struct episode *ep;	/* open thrash episode */
};

/* A worker's sample: when, and its idle time by then (see sample_idle_ns()). */
struct worker_mark {
	uint64_t ts, idle_ns;
};

struct worker_watch {
	/* the previous sample and the interval it closed */
	uint64_t ts, idle_ns, area;
	struct worker_mark hist[WORKER_HISTORY];	/* the latest samples, a ring */
	uint32_t nr_hist, hist_next;
	double depth_avg, idle_share;
	bool sampled;
	uint64_t starved_since;	/* 0: not starved */
	struct episode *ep;
	/* the latest long poll on this worker, and its task if it is an alert's */
	uint64_t hold_begin, hold_end, hold_task;
};

/* detect.c: episodes and the alert log */
void detect__alert_init(struct alert *a, enum alert_kind kind, uint64_t ts);
/* Opens an episode from a filled-in BEGIN alert, and raises it (NULL: out of memory). */
struct episode *detect__begin(struct detector *d, struct alert *a);
/* Closes an episode: raises its END and frees it. */
void detect__end(struct detector *d, struct episode *ep, uint64_t ts, bool ongoing);
void detect__recur(struct episode *ep, uint64_t ts, uint64_t value_ns);
/* Worker worker's watch, made on first use (NULL: out of range or memory). */
struct worker_watch *detect__watch_worker(struct detector *d, uint32_t worker);
/* The share of [a, b] a worker spent idle. */
double detect__idle_between(const struct worker_mark *a, const struct worker_mark *b);

/* detect_long_poll.c */
uint64_t detect__poll_own_ns(const struct at_poll *p);
uint64_t detect__long_poll_limit(const struct detector *d, const struct at_poll *p);
void long_poll__on_poll(struct detector *d, struct model *m, const struct at_poll *p);
/* detect_sched_delay.c */
void sched_delay__on_poll(struct detector *d, struct model *m, const struct at_poll *p);
/* The late polls whose wait the worker samples now cover; final: all of them. */
void sched_delay__judge_pending(struct detector *d, struct model *m, bool final);
/* detect_starvation.c */
void starvation__on_sample(struct detector *d, struct model *m, const struct at_worker_sample *s);
/* detect_thrash.c */
void thrash__on_sample(struct detector *d, struct model *m, const struct at_task_sample *s);
/* detect_lost_waker.c */
void lost_waker__on_poll(struct detector *d, struct model *m, const struct at_poll *p);
void lost_waker__on_sample(struct detector *d, struct model *m, const struct at_task_sample *s);

#endif
