/* SPDX-License-Identifier: MIT */
/*
 * Detectors turn the record stream into alerts, one per episode: an alert
 * when a problem begins and another when it ends, however many times it
 * recurs in between. docs/alerts.md describes each detector and the alert
 * schema.
 *
 * Two kinds of input, the same in every mode:
 *  - poll records (long polls, late polls): in maps-only mode the BPF side
 *    sends only the polls these detectors need;
 *  - samples of the BPF maps (workers every tick, tasks every second), fed
 *    through the pipeline as records by src/source/sampler.c.
 */
#ifndef DETECT_H
#define DETECT_H

#include <stdbool.h>
#include <stdint.h>

#include "asynctraced.h"
#include "lib/u64map.h"
#include "pipeline/config.h"

struct model;

enum alert_kind {
	ALERT_LONG_POLL = 1,
	ALERT_SCHED_DELAY,
	ALERT_STARVATION,
	ALERT_THRASH,
	ALERT_LOST_WAKER,
	ALERT_KIND_MAX,
};

enum alert_state {
	ALERT_BEGIN = 1,
	ALERT_END,
};

/* Where a poll's time went: see poll_cause(). */
enum poll_cause {
	CAUSE_CPU = 1,		/* ran on the CPU: the task burned it */
	CAUSE_BLOCKED,		/* slept in the kernel: a blocking call */
	CAUSE_PREEMPTED,	/* runnable but not running: CPU contention */
};

enum thrash_reason {
	THRASH_SELF_WAKE = 1,	/* wakes itself and yields, over and over */
	THRASH_WAKE_STORM,	/* woken far more often than polled */
};

#define ALERT_VICTIMS 3

struct alert {
	enum alert_kind kind;
	enum alert_state state;
	uint64_t episode;	/* unique per session, shared by BEGIN and END */
	uint64_t begin_ts;	/* when the episode began */
	uint64_t ts;		/* BEGIN: when it was detected; END: when it ended */
	bool ongoing;		/* END only: tracing stopped first */
	/*
	 * Measured by samples this far apart (sample mode; a long poll then ran
	 * at least value_ns, up to a period more at each end); 0: by probes.
	 */
	uint64_t sampled_ns;
	/*
	 * Measured by probes although the session samples: what an escalation's
	 * probes saw (--escalate), or what only probes can see (wakes)
	 */
	bool by_probes;
	/* BEGIN, sample mode with --escalate: the process's probes attached this long from now */
	uint64_t escalated_ns;
	uint64_t count;		/* occurrences in the episode so far */
	uint64_t value_ns;	/* the measure: see docs/alerts.md */
	uint64_t worst_ns;	/* the worst value_ns of the episode */

	uint64_t task;		/* 0: not about one task */
	char task_name[AT_TASK_NAME_LEN];
	int32_t worker;		/* -1: not about one worker */
	uint32_t tid;

	/* long poll */
	enum poll_cause cause;
	uint64_t oncpu_ns, blocked_ns, runnable_ns;
	bool runtime_preempted;	/* its runtime preempted it for running too long (Go) */
	uint32_t stack;		/* where it spent its time (--stacks): the model's callstack, 0 none */
	uint32_t parked_at;	/* where the task waits (lost waker, live): in model.places, 0 none */
	bool stack_blocked;	/* where it went to sleep, not a sample on the CPU */
	/*
	 * END: the tasks that waited in the held worker's queue while a poll of
	 * the episode held it (its victims), the longest waits first
	 */
	struct alert_victim {
		uint64_t task;
		char name[AT_TASK_NAME_LEN];
		uint64_t waited_ns;	/* of its wait, the part the long poll held it */
		/*
		 * woken during the hold into the held worker's own queue: by the
		 * long poll itself (on tokio: into the worker's LIFO slot, which
		 * no other worker steals from)
		 */
		bool woken_by_holder;
		int8_t idle_pct;	/* another worker asleep, the most of its wait; -1 unknown */
		/* where it waited before that poll (model__idle_place): in model.places; 0 unknown */
		uint32_t waited_at;
	} victims[ALERT_VICTIMS];
	bool lifo_slot;			/* the runtime has a LIFO slot (tokio): say so */
	uint32_t nr_victims;		/* in victims[] */
	uint64_t waits_behind;		/* waits behind the episode's polls, all told */
	/* scheduling delay */
	int32_t queued_on;
	uint32_t queued_depth;
	/* starvation */
	double depth_avg;
	int32_t idle_worker;
	double idle_pct;
	/* lost waker: the runtime said nothing holds its waker (at_poll AT_POLL_UNWAKEABLE) */
	bool unwakeable;
	/* waker thrash */
	enum thrash_reason reason;
	double polls_per_s, wakes_per_s, self_wakes_per_s;
	/* the flight recorder's dump of the episode's window, if one is written */
	char dump[256];
};

typedef void (*alert_fn)(void *ctx, const struct alert *a);

struct episode;
struct worker_watch;

struct detector {
	struct detect_config config;
	uint64_t next_episode;
	uint64_t begun[ALERT_KIND_MAX];	/* episodes per kind */
	uint64_t ended[ALERT_KIND_MAX];	/* ... over (begun - ended: open now) */
	struct u64map long_polls;	/* task -> struct episode */
	struct episode *sched;		/* the runtime's scheduling delay */
	struct at_poll *pending;	/* late polls not judged yet (see judge_late()) */
	size_t nr_pending, cap_pending;
	struct u64map thrash;		/* task -> struct task_watch */
	struct u64map lost;		/* task -> struct episode */
	struct worker_watch *workers;	/* by worker id */
	uint32_t nr_workers;
	/*
	 * The runtime keeps a task woken by a poll in a slot of that worker's
	 * that no other worker steals from (tokio's LIFO slot): the long poll's
	 * END says when a victim sat there. Set by whoever knows the runtime.
	 */
	/*
	 * Tasks named with this prefix are the runtime's own work (Go: "runtime.",
	 * its GC workers, sweeper, scavenger): their long polls are not alerted
	 * on (NULL: none is)
	 */
	const char *runtime_tasks;
	/*
	 * Lost wakers only on the runtime's word (a task nothing can wake:
	 * AT_POLL_UNWAKEABLE), never on --lost-waker of silence alone (Go, by
	 * default: docs/go.md).
	 */
	bool lost_waker_exact_only;
	bool lifo_slot;
	/*
	 * Sample mode's period (0: probe mode): a sampled run began up to one
	 * before it was first seen and ended up to one after it was last seen.
	 */
	uint64_t sample_period_ns;
	/*
	 * No wake is seen (sample mode, between escalations): a task left
	 * waiting is not judged on the silence that follows, which is only
	 * what samples cannot see.
	 */
	bool wakes_unseen;
	/*
	 * A sampled run of several polls, for all the samples tell (tokio's:
	 * AT_POLL_RUNS), on a worker past --long-poll on the CPU: no long poll
	 * is proven, but one may be there (NULL: let be). The session escalates
	 * on it, or says once that it cannot tell.
	 */
	void (*suspect)(void *ctx, const struct at_poll *p, const char *task_name);
	void *suspect_ctx;
	/* Every alert raised, BEGIN and END, for the report. */
	struct alert *log;
	size_t nr_log;
	size_t dropped_log;		/* past the log's bound: counted only */
	alert_fn emit;
	void *ctx;
};

void detector__init(struct detector *d, const struct detect_config *config, alert_fn emit,
		    void *ctx);
void detector__free(struct detector *d);
/* Feeds one record (after the model has seen it). */
void detector__event(struct detector *d, struct model *m, const struct at_hdr *ev);
/* Time passes: ends episodes that went quiet. */
void detector__tick(struct detector *d, struct model *m, uint64_t now);
/* The end of the stream: ends every open episode as ongoing. */
void detector__finish(struct detector *d, struct model *m, uint64_t now);

/*
 * Where a poll's time went. With long_ns, a poll that spent that long on the
 * CPU (or asleep) is cpu-bound (blocked) even if it was preempted longer.
 */
/*
 * A poll's time on the CPU that was its own: what the kernel charged its
 * thread for (at_poll.cpu_ns), where known; else all its time on the CPU.
 * Not a host's pause of the virtual CPU, nor interrupt work, while the
 * thread was nominally running.
 */
uint64_t poll_cpu_ns(const struct at_poll *p);
enum poll_cause poll_cause(const struct at_poll *p, uint64_t long_ns);
const char *poll_cause_str(enum poll_cause c);
const char *alert_kind_str(enum alert_kind k);
const char *thrash_reason_str(enum thrash_reason r);

#endif
