/* SPDX-License-Identifier: MIT */
/*
 * Inside a session, shared by its files alone: the session's state and what
 * each file does for the others.
 *
 *   session.c  the loop: records to their process, ticks, signals, the end
 *   start.c    everything up to attached: checks, outputs, BPF loaded, the
 *              first processes traced, privileges dropped
 *   traced.c   one process: examined, started (pipeline, probes), sampled,
 *              its records, ended, let go
 *   follow.c   following the host: births, scans, the examiner's results,
 *              files whose probes processes share
 *   say.c      what the console is told
 */
#ifndef SESSION_PRIV_H
#define SESSION_PRIV_H

#include <stdbool.h>
#include <stddef.h>
#include <signal.h>
#include <stdint.h>
#include <sys/types.h>

#include "capture/capture.h"
#include "lib/u64map.h"
#include "session/examiner.h"
#include "session/session.h"
#include "session/traced.h"
#include "sinks/outputs.h"
#include "sinks/report.h"
#include "source/probe_learn.h"
#include "source/tracer.h"
#include "analyser/analyser.h"
#include "targets/scan.h"

/* The flight recorder's dump holds this much after an alert (and after an escalation) */
#define FLIGHT_AFTER_NS (2 * 1000000000ull)

/* --stacks: CPU-clock samples a second of each followed thread's CPU time (in probe mode) */
#define STACK_HZ 250

/* Sample mode's period (0: probe mode): the programs', the detectors' and the dumps'. */
static inline uint64_t session__sample_period_ns(const struct session_opts *o)
{
	return o->sample_mode ? 1000000000ull / o->sample_hz : 0;
}

/* The CPU-clock samples a second of a thread's CPU time: sample mode's rate, or --stacks'. */
static inline uint32_t session__sample_hz(const struct session_opts *o)
{
	return o->sample_mode ? o->sample_hz : STACK_HZ;
}

/* Everything one tracing session holds. */
struct session {
	const struct session_opts *o;
	struct session_hooks *hooks;	/* run: the command's (or NULL) */
	int stop_signo;			/* the signal that stopped the session, or 0 */
	bool released;			/* ... and it was let go */
	int root_pidfd;			/* ... following its children: it, to end with it */
	struct tracer *tracer;
	struct outputs out;
	struct capture_writer *cap;	/* record: where its one process's records go */
	struct traced **targets;
	size_t nr;
	struct u64map by_pid;		/* pid -> struct traced * */
	struct traced *last;		/* the latest record's */
	bool follow;			/* no -p: processes that start later are traced too */
	struct scan_filter filter;	/* follow: --comm, --exclude-comm, --cgroup */
	bool filter_set;
	struct u64map seen;		/* follow: the processes looked at (scan.h) */
	struct analyser ana;		/* reads the targets' files (analyser.h) */
	/*
	 * Following the whole host (no filter), a file's probes are attached
	 * once, for every process that maps it: each of its processes is
	 * traced anyway. A filter may leave some of them out, and those would
	 * pay for probes that record nothing: then each process has its own.
	 */
	bool share_files;
	struct u64map files;		/* share_files: files whose probes processes share */
	long last_owner;		/* the owner given the last shared file's probes */
	struct examine_opts ex_opts;
	struct probe_rules rules;	/* where this kernel lets a uprobe go (probe_learn.h) */
	struct examiner *examiner;	/* follow: examines processes off the loop */
	bool said_watching;
	bool started;			/* attached and confined: the loop may begin */
	bool filtered;			/* ... under the seccomp filter (sandbox.h) */
	struct birth {
		pid_t pid;
		uint64_t due;
	} *births;			/* follow: processes to look at, once due */
	size_t nr_births, cap_births;
	uint32_t max_targets;
	size_t ever;			/* processes traced in this session */
	size_t over_max;		/* processes --max-targets left out */
	uint64_t stray;			/* records of processes already let go */
	uint64_t failed;		/* processes found and not traced */
	struct metrics *metrics;	/* --metrics: the series it serves */
	struct flight *flight;		/* --flight-recorder */
	/*
	 * The live analyser: --stacks' unwinding (its own: an examination may
	 * take long), and where Go's and tokio's tasks wait (places, for alerts)
	 */
	struct analyser stacks;
	bool unwinding;			/* ... started */
	uint32_t placing;		/* processes it was handed for alerts' places */
	/* reads of where idle tasks wait (session__place_waits): the time they may take */
	int64_t wait_budget_ns;
	uint64_t wait_budget_at;
	size_t wait_next;		/* the target whose tasks are read first next time */
	struct ksyms *ksyms;		/* --stacks: names their kernel frames; NULL unknown */
	uint64_t malformed;		/* records too short to say whose they are */
	uint64_t dropped;		/* record: records the rings had no room for */
	uint64_t start;
	uint64_t stop;			/* 0 while tracing */
	int sfd, ep;
	int ret;			/* EXIT_FAIL once a write failed */
};

/* session.c */
struct traced *session__traced_of(struct session *s, uint32_t pid);
/* A ring buffer record: to the process it names (tracer.h's callback). */
int session__on_record(void *ctx, const void *data, size_t size);
/* The flight recorder's view of process pid: its live model (names, clock). */
const struct model *session__live_model(void *ctx, uint32_t pid);
/* The signals that stop tracing cleanly. */
void session__stop_signals(sigset_t *sigs);
/* run: its command, held at its entry point, let go (once traced, or known not to be). */
void session__release_root(struct session *s);

/* start.c: everything up to attached; each failure says what. 0, or -errno. */
int session__start(struct session *s);

/* traced.c (traced.h: examined) */
int traced__start(struct session *s, struct traced *tr);
void traced__record(struct traced *tr, const void *data, size_t size);
void traced__sample(struct session *s, struct traced *tr, bool tasks, bool show, uint64_t at);
void traced__run_info(struct session *s, struct traced *tr, struct run_info *info,
		      const char *why, uint64_t end);
void traced__end(struct session *s, struct traced *tr, const char *why, uint64_t at);
void traced__drop(struct session *s, struct traced *tr);
void traced__deescalate(struct session *s, struct traced *tr, uint64_t now);
/*
 * Reads where the traced processes' idle tasks wait, for the trace's idle
 * spans, the report and long polls' victims (docs/tasks.md): within
 * --wait-reads percent of the session's time, the processes in turn.
 */
void session__place_waits(struct session *s, uint64_t now);
/* The rings drained of what waits (between two reads of where a task waits): ctx the session. */
void session__drain(void *ctx);
/*
 * At the end of process tr's tracing, the spans its tasks still wait in,
 * placed: seen there by a read now (made before the probes are detached,
 * so that a poll ending after it is drained and ends its span), or gone
 * (the process ended, or exec'd) with it, they last to the end; else to the
 * last read that saw them there. Within 1% of the run (100 ms to 1 s).
 */
void traced__confirm_waits(struct session *s, struct traced *tr, bool gone);

/* follow.c */
int follow__share_file(void *ctx, const char *path, long *owner);
void follow__release_files(struct session *s, struct traced *tr);
void follow__on_birth(void *ctx, pid_t pid);
void follow__look_at_births(struct session *s, uint64_t now);
void follow__scan_new(struct session *s);
void follow__take_examined(struct session *s);
void follow__say_watching(struct session *s);

/* say.c */
const char *say__runtime_name(enum runtime_kind kind);
void say__found(const struct session *s, const struct traced *tr, bool first);
void say__totals(const struct session *s, const char *why);
int say__capture_written(struct session *s, const char *why);

#endif
