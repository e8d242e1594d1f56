/* SPDX-License-Identifier: MIT */
/* A tracing session: trace and record (session.c). */
#ifndef SESSION_H
#define SESSION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "pipeline/config.h"
#include "sinks/outputs.h"
#include "source/tracer.h"

#define SESSION_MAX_PIDS 1024
#define DEFAULT_MAX_TARGETS 64

/* What a session traces, how, and what it writes (cmd/options.c fills it in). */
struct session_opts {
	bool record;		/* record: the records go to a capture (out.output) */
	/* -p: the processes to trace; none: every process of the host with a
	 * known runtime, those that start later too (scan.h) */
	pid_t pids[SESSION_MAX_PIDS];
	size_t nr_pids;
	uint32_t max_targets;	/* processes traced at once, at most */
	const char *comm;	/* without -p: only processes whose name matches */
	const char *exclude_comm; /* ... and does not */
	const char *cgroup;	/* ... in this cgroup v2 subtree */
	uint64_t duration_ns;	/* 0: until stopped */
	struct outputs_opts out;
	struct detect_config detect;
	const char *metrics;	/* --metrics [ADDR:]PORT, or NULL */
	uint32_t metrics_tasks;	/* --metrics-tasks N: series for the N busiest tasks */
	uint64_t flight_ns;	/* --flight-recorder: its window; 0 none */
	uint64_t flight_bytes;	/* its memory (0: the default) */
	const char *dump_dir;
	uint64_t dump_dir_bytes; /* the dumps' total (0: the default) */
	bool no_trace;		/* maps only */
	uint64_t ringbuf_bytes;
	uint32_t task_slots;
	const char *btf_path;
	enum sched_hook sched_hook;
	bool verbose;
	bool empty_programs;	/* benchmarks: the floor */
	bool probe_at_entry;	/* no probe placement past single-stepped entries */
	unsigned int examine_timeout_ms; /* the analyser's watchdog (0: its default) */
	bool no_sandbox;	/* no seccomp filter once attached */
	bool stacks;		/* --stacks: a long poll's stack, unwound */
	/* --mode sample: no probe; the running task read sample_hz times a second */
	bool sample_mode;
	uint32_t sample_hz;	/* --sample-hz: sample mode's and --stacks' rate */
	/* --wait-reads: the percent of its time reads of where idle tasks wait may take */
	uint32_t wait_read_pct;
	/*
	 * --escalate: sample mode's alert attaches that process's probes for
	 * this long (0: never), at most once every escalate_every_ns
	 */
	uint64_t escalate_ns;
	uint64_t escalate_every_ns;
	bool escalate_every_set;
};

/* --sample-hz's default: about 1 kHz, a prime against lockstep with periodic work */
#define DEFAULT_SAMPLE_HZ 997
/* --escalate-every's default: a process's probes attached at most once a minute */
#define DEFAULT_ESCALATE_EVERY_NS (60 * 1000000000ull)

/* Runs trace or record as o says; returns the exit status. */
int session__run(const struct session_opts *o);

/*
 * What `run` (src/cmd/run.c) asks of a session tracing the command it
 * started, root, held at its entry point: release is called once root is
 * traced (or known not to be traceable), and summary with each process's
 * summary at its end. Without -p in o (--follow-children), root and its
 * descendants are followed, and the session ends when root exits.
 */
struct session_hooks {
	pid_t root;
	void (*release)(void *ctx);
	void (*summary)(void *ctx, const char *json, size_t len);
	void *ctx;
	int stopped_by;		/* out: the signal that stopped the session, or 0 */
};

int session__run_with(const struct session_opts *o, struct session_hooks *h);

#endif
