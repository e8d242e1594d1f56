/* SPDX-License-Identifier: MIT */
/* The command line (docs/cli.md is its manual; a test keeps the two in step). */
#ifndef OPTIONS_H
#define OPTIONS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "gate/gate.h"
#include "pipeline/detect.h"
#include "source/tracer.h"

enum { EXIT_OK = 0, EXIT_FAIL = 1, EXIT_USAGE = 2 };
/* run: a gate failed; a gate could not be evaluated; the command not found or not runnable */
enum { EXIT_GATE_FAILED = 3, EXIT_GATE_UNKNOWN = 4, EXIT_CANNOT_EXEC = 126, EXIT_NOT_FOUND = 127 };

enum summary_format {
	SUMMARY_TEXT = 0,
	SUMMARY_JSON,
};

enum trace_format {
	FORMAT_AUTO = 0,	/* from the output's name */
	FORMAT_JSON,
	FORMAT_PERFETTO,
};

enum trace_compression {
	COMPRESSION_DEFAULT = 0, /* deflate */
	COMPRESSION_DEFLATE,
	COMPRESSION_NONE,
};

enum command {
	CMD_TRACE = 0,		/* asynctraced [trace] -p PID */
	CMD_RECORD,		/* asynctraced record -p PID -o CAPTURE */
	CMD_CONVERT,		/* asynctraced convert CAPTURE */
	CMD_RUN,		/* asynctraced run [options] -- CMD [ARGS...] */
	CMD_PROBE_RULES,	/* asynctraced probe-rules */
};

/* Bits of options.detect_given: the thresholds given on the command line. */
enum {
	GIVEN_LONG_POLL = 1 << 0,
	GIVEN_SCHED_DELAY = 1 << 1,
	GIVEN_STARVE_DEPTH = 1 << 2,
	GIVEN_STARVE_TIME = 1 << 3,
	GIVEN_THRASH_RATE = 1 << 4,
	GIVEN_LOST_WAKER = 1 << 5,
	GIVEN_EPISODE_GAP = 1 << 6,
};

#define OPTIONS_MAX_PIDS 1024
#define DEFAULT_MAX_TARGETS 64

struct options {
	enum command command;
	const char *capture;	/* convert: the capture to read */
	/* -p: the processes to trace; none: every process of the host with a
	 * known runtime, those that start later too (scan.h) */
	pid_t pids[OPTIONS_MAX_PIDS];
	size_t nr_pids;
	pid_t pid;		/* the first of pids (record: the one), or 0 */
	uint32_t max_targets;	/* processes traced at once, at most */
	const char *comm;	/* without -p: only processes whose name matches */
	const char *exclude_comm; /* ... and does not */
	const char *cgroup;	/* ... in this cgroup v2 subtree */
	uint64_t duration_ns;	/* 0: until stopped */
	const char *output;	/* trace file (record: the capture), or NULL */
	enum trace_format format;
	enum trace_compression trace_compression; /* of a protobuf trace's packets */
	const char *alerts;	/* JSON lines file, or NULL */
	const char *metrics;	/* --metrics [ADDR:]PORT, or NULL */
	uint32_t metrics_tasks;	/* --metrics-tasks N: series for the N busiest tasks */
	uint64_t flight_ns;	/* --flight-recorder: its window; 0 none */
	uint64_t flight_bytes;	/* its memory (0: the default) */
	const char *dump_dir;
	uint64_t dump_dir_bytes; /* the dumps' total (0: the default) */
	bool no_trace;		/* maps only */
	int live;		/* -1: when stderr is a terminal; 0 off; 1 on */
	bool quiet;
	enum summary_format summary;
	struct detect_opts detect;
	uint32_t detect_given;	/* GIVEN_* */
	uint64_t ringbuf_bytes;
	uint32_t task_slots;
	const char *btf_path;
	enum sched_hook sched_hook;
	bool verbose;
	bool empty_programs;	/* benchmarks: the floor */
	bool probe_at_entry;	/* no probe placement past single-stepped entries */
	bool no_sandbox;	/* no seccomp filter once attached */
	bool stacks;		/* --stacks: a long poll's stack, unwound */
	/* run */
	char **cmd;		/* the command and its arguments (NULL-terminated) */
	bool follow_children;	/* its descendants traced too */
	struct gate_opts gate;	/* --fail-on, --max, --baseline, --tolerance */
	const char *junit;	/* --junit FILE */
};

/* 0 to run; EXIT_USAGE after a message; -1 when done (--help, --version). */
int options__parse(int argc, char **argv, struct options *o);

#endif
