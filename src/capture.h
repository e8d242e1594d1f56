/* SPDX-License-Identifier: MIT */
/*
 * Captures: the raw event stream of one tracing session, written by
 * `asynctraced record` as cheaply as possible and turned into traces, alerts
 * and reports later by `asynctraced convert`, through the same pipeline as
 * live tracing. docs/capture.md is the format's reference.
 *
 * A capture is a 16-byte file header (magic, version) followed by records.
 * Every record starts with struct at_hdr: kinds below AT_CAP_BASE are the
 * BPF side's event records, copied verbatim; kinds from AT_CAP_BASE up are
 * what a replay needs besides the events (the process, names read from the
 * target, thread names, the clock's ticks, the last map snapshot, the end).
 */
#ifndef CAPTURE_H
#define CAPTURE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "asynctraced.h"
#include "stats.h"

#define CAPTURE_MAGIC "\x89" "ATCAP\r\n"
#define CAPTURE_VERSION 1

struct capture_file_header {
	char magic[8];		/* CAPTURE_MAGIC: not text, survives no newline mangling */
	uint32_t version;	/* CAPTURE_VERSION */
	uint32_t header_size;	/* sizeof this header; records start here */
};

enum capture_kind {
	AT_CAP_BASE = 0x8000,
	AT_CAP_PROCESS = AT_CAP_BASE + 1, /* first record: struct cap_process */
	AT_CAP_NAME,		/* struct cap_name: a string read from the target */
	AT_CAP_THREAD,		/* struct cap_thread: a thread's name */
	AT_CAP_TICK,		/* struct at_hdr: time passed (hdr.ts) */
	AT_CAP_RUNTIME_STATS,	/* struct cap_runtime_stats: the last map snapshot... */
	AT_CAP_WORKER_STATS,	/* struct cap_worker_stats: ...one per worker */
	AT_CAP_TASK_STATS,	/* struct cap_task_stats: ...one per task */
	AT_CAP_IDLE_TASK,	/* struct cap_idle_task */
	AT_CAP_STEAL_STATS,	/* struct cap_steal_stats */
	AT_CAP_END,		/* struct cap_end: last record of a whole capture */
	AT_CAP_KIND_MAX,
};

enum capture_runtime {
	CAPTURE_RUNTIME_USDT = 1,
	CAPTURE_RUNTIME_TOKIO = 2,
};

#define CAP_COMM_LEN 16

struct cap_process {
	struct at_hdr hdr;	/* ts: time zero of the session (CLOCK_MONOTONIC) */
	uint32_t pid;
	uint32_t runtime;	/* enum capture_runtime */
	uint64_t realtime_offset; /* CLOCK_REALTIME - CLOCK_MONOTONIC at ts */
	uint8_t maps_only;	/* recorded with --no-trace */
	uint8_t pad[7];
	char comm[CAP_COMM_LEN];
	/*
	 * The detectors' thresholds when recorded: the BPF side filtered with
	 * some (maps only), the sampler with lost_waker; convert's defaults.
	 */
	uint64_t long_poll_ns;
	uint64_t sched_delay_ns;
	uint64_t starve_ns;
	uint64_t lost_waker_ns;
	uint64_t episode_gap_ns;
	uint32_t starve_depth;
	uint32_t thrash_rate;
};

/* A name by its address in the target; NUL-terminated, record padded to 8. */
struct cap_name {
	struct at_hdr hdr;
	uint64_t addr;
	char name[];
};

struct cap_thread {
	struct at_hdr hdr;	/* tid: the thread */
	char comm[CAP_COMM_LEN];
};

struct cap_runtime_stats {
	struct at_hdr hdr;	/* ts: when the snapshot was read */
	struct at_runtime_stats rt;
	uint64_t dropped;	/* records the ring buffer had no room for */
	uint32_t nr_counters;	/* entries in counters (enum at_stat) */
	uint32_t pad;
	uint64_t counters[];
};

struct cap_worker_stats {
	struct at_hdr hdr;
	uint32_t worker;
	uint32_t pad;
	struct at_worker_stats s;
};

struct cap_task_stats {
	struct at_hdr hdr;
	struct task_entry e;
};

struct cap_idle_task {
	struct at_hdr hdr;
	struct idle_entry e;
};

struct cap_steal_stats {
	struct at_hdr hdr;
	struct steal_entry e;
};

#define CAP_REASON_LEN 32

struct cap_end {
	struct at_hdr hdr;	/* ts: when tracing stopped */
	char reason[CAP_REASON_LEN]; /* "target exited", "interrupted", ... */
};

/* --- writing -------------------------------------------------------------- */

struct capture_writer;

/* Creates path (so an unwritable one fails early); writes nothing yet. */
int capture_writer__open(struct capture_writer **w, const char *path);
/* The file header and the process record: before anything else. */
void capture__begin(struct capture_writer *w, const struct cap_process *proc);
/* An event record as the BPF side made it (or a sample). */
void capture__event(struct capture_writer *w, const void *rec, size_t size);
/*
 * What a replay cannot look up in the target: names at addresses and thread
 * names, each written once. has_*() says whether it is written (or the
 * table is full), so callers read the target only when needed.
 */
bool capture__has_name(const struct capture_writer *w, uint64_t addr);
bool capture__has_thread(const struct capture_writer *w, uint32_t tid);
/* A name that could not be read: not looked for again, not written. */
void capture__no_name(struct capture_writer *w, uint64_t addr);
void capture__name(struct capture_writer *w, uint64_t addr, const char *name);
void capture__thread(struct capture_writer *w, uint32_t tid, const char *comm);
void capture__tick(struct capture_writer *w, uint64_t ts);
/* The last snapshot of the maps and the BPF side's counters, then the end. */
void capture__finish(struct capture_writer *w, const struct stats *st,
		     const uint64_t *counters, uint32_t nr_counters, uint64_t stop,
		     const char *reason);
/* 0, or the -errno of the first failed write. */
int capture_writer__flush(struct capture_writer *w);
uint64_t capture_writer__bytes(const struct capture_writer *w);
uint64_t capture_writer__records(const struct capture_writer *w);
void capture_writer__free(struct capture_writer *w);

/* --- reading -------------------------------------------------------------- */

struct capture_reader;

/*
 * Opens a capture: checks the magic and the version and reads the process
 * record. On failure, says why in err (a sentence) and returns -errno.
 */
int capture_reader__open(struct capture_reader **r, const char *path, char *err,
			 size_t err_len);
/* The same, over bytes in memory (not copied: they must outlive the reader). */
int capture_reader__open_mem(struct capture_reader **r, const void *data, size_t size,
			     char *err, size_t err_len);
const struct cap_process *capture_reader__process(const struct capture_reader *r);
/*
 * The next record: 1 with *rec and *size set (valid until the next call), 0 at
 * a clean end (after AT_CAP_END), -EINVAL for a damaged or cut capture: then
 * capture_reader__error() says what and where.
 */
int capture_reader__next(struct capture_reader *r, const struct at_hdr **rec, size_t *size);
const char *capture_reader__error(const struct capture_reader *r);
void capture_reader__free(struct capture_reader *r);

#endif
