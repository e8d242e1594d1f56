/* SPDX-License-Identifier: MIT */
/*
 * Captures: the raw event stream of one tracing session, written by
 * `asynctraced record` as cheaply as possible and turned into traces, alerts
 * and reports later by `asynctraced convert`, through the same pipeline as
 * live tracing. docs/capture.md is the format's reference.
 *
 * A capture is a 16-byte file header (magic, version) followed by chunks:
 * a chunk header (size, record count, CRC32) and whole records. Every
 * record starts with struct at_hdr: kinds below AT_CAP_BASE are the BPF
 * side's event records, copied verbatim; kinds from AT_CAP_BASE up are what
 * a replay needs besides the events (the process, names read from the
 * target, thread names, the clock's ticks, the last map snapshot, the end),
 * in structs of their own: the capture never embeds a BPF map's layout.
 * Version 1 (no chunks, counters numbered from AT_EV_KIND_MAX) is still
 * read: capture_v1.c.
 */
#ifndef CAPTURE_H
#define CAPTURE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "asynctraced.h"
#include "pipeline/config.h"
#include "source/stats.h"

#define CAPTURE_MAGIC "\x89" "ATCAP\r\n"
#define CAPTURE_VERSION 5	/* what this version writes */
#define CAPTURE_VERSION_OLDEST 1 /* the oldest it reads */
#define CAPTURE_MAX_PROCESSES 4096 /* process records a capture may hold */

struct capture_file_header {
	char magic[8];		/* CAPTURE_MAGIC: not text, survives no newline mangling */
	uint32_t version;	/* CAPTURE_VERSION */
	uint32_t header_size;	/* sizeof this header; the first chunk starts here */
};

/*
 * Records come in chunks, each checked as a whole before any of its records
 * is read: a flipped bit is damage, named with its chunk's offset, never a
 * wrong number in a trace. The writer closes a chunk when the next record
 * would take it past CAPTURE_CHUNK_BYTES, and at every flush (ten times a
 * second): a recorder killed mid-run leaves whole chunks behind, but for
 * the one it was writing. From version 5 a chunk's records are deflated
 * (raw deflate, RFC 1951, by libdeflate at its fastest level) when that
 * makes them smaller: 15-30 bytes a record where they take 110-170
 * (docs/performance.md).
 */
#define CAPTURE_DEFLATE_LEVEL 1
#define CAPTURE_CHUNK_BYTES (64u << 10) /* a chunk's records, at most, as written */
#define CAPTURE_CHUNK_MAX (1u << 20)	/* ... as read: more is damage */

enum cap_chunk_encoding {
	CAP_CHUNK_STORED = 0,	/* the records as they are */
	CAP_CHUNK_DEFLATE = 1,	/* a raw deflate stream (RFC 1951) of them */
};

struct cap_chunk {
	uint32_t size;		/* bytes that follow the header */
	uint32_t records;	/* records they hold */
	uint32_t raw_size;	/* bytes of those records (size when stored) */
	uint32_t encoding;	/* enum cap_chunk_encoding */
	uint32_t crc;		/* CRC-32 of the size bytes (zlib's crc32, as gzip's) */
	uint32_t hdr_crc;	/* CRC-32 of the 20 bytes above: a damaged size is not a cut */
};

/* The chunk header of versions 2 to 4: records stored as they are. */
struct cap_chunk_v2 {
	uint32_t size;
	uint32_t records;
	uint32_t crc;
	uint32_t hdr_crc;	/* of the 12 bytes above */
};

enum capture_kind {
	AT_CAP_BASE = 0x8000,
	AT_CAP_PROCESS = 0x8001,		/* first record: struct cap_process */
	AT_CAP_NAME = 0x8002,		/* struct cap_name: a string read from the target */
	AT_CAP_THREAD = 0x8003,		/* struct cap_thread: a thread's name */
	AT_CAP_TICK = 0x8004,		/* struct at_hdr: time passed (hdr.ts) */
	AT_CAP_RUNTIME_STATS = 0x8005,	/* struct cap_runtime_stats: the last map snapshot... */
	AT_CAP_WORKER_STATS = 0x8006,	/* struct cap_worker_stats: ...one per worker */
	AT_CAP_TASK_STATS = 0x8007,	/* struct cap_task_stats: ...one per task */
	AT_CAP_IDLE_TASK = 0x8008,	/* struct cap_idle_task */
	AT_CAP_STEAL_STATS = 0x8009,	/* struct cap_steal_stats */
	AT_CAP_END = 0x800a,		/* struct cap_end: last record of a whole capture */
	AT_CAP_PROCESS_END = 0x800b,	/* struct cap_end: hdr.pid's tracing ended (version 4) */
	AT_CAP_KIND_MAX,		/* one past the last kind; grows, never shrinks */
};

enum capture_runtime {
	CAPTURE_RUNTIME_USDT = 1,
	CAPTURE_RUNTIME_TOKIO = 2,
	CAPTURE_RUNTIME_GO = 3,
};

#define CAP_COMM_LEN 16

struct cap_process {
	struct at_hdr hdr;	/* ts: time zero of the session (CLOCK_MONOTONIC) */
	uint32_t pid;
	uint32_t runtime;	/* enum capture_runtime */
	uint64_t realtime_offset; /* CLOCK_REALTIME - CLOCK_MONOTONIC at ts */
	uint8_t maps_only;	/* recorded with --no-trace */
	uint8_t pad[3];
	uint32_t sample_hz;	/* recorded in sample mode, at this rate (0: probe mode) */
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

/*
 * The last snapshot of the maps, in the capture's own structs: the BPF
 * side's map values are copied into these field by field when the capture
 * is written (capture.c), so a change to a map's layout changes nothing
 * here. Histograms are log2, as at_hist: slot i counts values (ns) with
 * 2^i <= v < 2^(i+1), slot 0 also 0, the last slot everything above.
 */
#define CAP_HIST_SLOTS 40

struct cap_hist {
	uint64_t slot[CAP_HIST_SLOTS];
};

struct cap_hist32 {
	uint32_t slot[CAP_HIST_SLOTS];
};

/* A run queue's length over time. */
struct cap_queue {
	uint64_t area;		/* depth * ns, accumulated */
	uint64_t ts;		/* of the last change */
	uint32_t depth;
	uint32_t peak;
};

struct cap_runtime_stats {
	struct at_hdr hdr;	/* ts: when the snapshot was read */
	uint64_t spawns;
	uint64_t completed;	/* polls that returned Ready */
	uint64_t wakes;		/* every wake, the workers' included */
	uint64_t self_wakes;
	uint64_t outside_wakes;	/* not from a worker thread */
	uint64_t unknown_workers; /* events naming a worker id >= AT_MAX_WORKERS */
	struct cap_queue inject;
	uint64_t dropped;	/* records the ring buffer had no room for */
	uint32_t nr_counters;	/* entries in counters */
	uint32_t pad;
	uint64_t counters[];	/* the BPF side's counters by their numbers (enum at_stat) */
};

struct cap_worker_stats {
	struct at_hdr hdr;
	uint32_t worker;
	uint32_t pad0;
	uint64_t polls;
	uint64_t busy_ns;	/* sum of poll durations */
	uint64_t oncpu_ns;
	uint64_t max_poll_ns;
	uint64_t wakes;		/* wake calls made from this worker */
	uint64_t self_wakes;	/* ... by a task waking itself */
	uint64_t steals;	/* steal operations as thief */
	uint64_t stolen;	/* tasks taken as thief */
	uint64_t parks;
	uint64_t park_ns;	/* completed parks */
	uint64_t park_since;	/* nonzero while parked */
	uint32_t tid;
	uint32_t pad1;
	struct cap_queue queue;
	struct cap_hist poll;
	struct cap_hist oncpu;
	struct cap_hist delay;	/* wake to poll */
};

struct cap_task_stats {
	struct at_hdr hdr;
	uint64_t task;
	uint64_t polls;
	uint64_t wakes;
	uint64_t self_wakes;
	uint64_t poll_ns;
	uint64_t oncpu_ns;
	uint64_t max_poll_ns;
	uint64_t name_addr;
	uint64_t first_ts;	/* counted from here */
	uint8_t done;
	uint8_t pad[7];
	struct cap_hist32 poll;
	struct cap_hist32 oncpu;
	struct cap_hist32 delay;
};

/* A live task that returned Pending and has not been woken since. */
struct cap_idle_task {
	struct at_hdr hdr;
	uint64_t task;
	uint64_t idle_since;
	uint64_t name_addr;
};

struct cap_steal_stats {
	struct at_hdr hdr;
	uint32_t thief;
	uint32_t victim;
	uint64_t ops;
	uint64_t tasks;
};

#define CAP_REASON_LEN 32

struct cap_end {
	struct at_hdr hdr;	/* ts: when tracing stopped */
	char reason[CAP_REASON_LEN]; /* "target exited", "interrupted", ... */
};

/* The snapshot records, read back into a snapshot of the maps. */
void cap_runtime_stats__get(const struct cap_runtime_stats *c, struct at_runtime_stats *rt);
void cap_worker_stats__get(const struct cap_worker_stats *c, struct at_worker_stats *w);
void cap_task_stats__get(const struct cap_task_stats *c, struct task_entry *e);
void cap_idle_task__get(const struct cap_idle_task *c, struct idle_entry *e);
void cap_steal_stats__get(const struct cap_steal_stats *c, struct steal_entry *e);

/* --- writing -------------------------------------------------------------- */

struct capture_writer;

/* Creates path (so an unwritable one fails early); writes nothing yet. */
int capture_writer__open(struct capture_writer **w, const char *path);
/* Chunks stored as they are, not deflated (the tests damage records in place). */
void capture_writer__store(struct capture_writer *w);
/* The detectors' thresholds into a process record, and out of one. */
void cap_process__set_config(struct cap_process *p, const struct detect_config *c);
void cap_process__config(const struct cap_process *p, struct detect_config *c);
/*
 * A process recorded from here: its record (the first one after the file
 * header, written with it). Every record of it after this carries its pid.
 */
void capture__begin(struct capture_writer *w, const struct cap_process *proc);
/* An event record as the BPF side made it (or a sample). */
void capture__event(struct capture_writer *w, const void *rec, size_t size);
/*
 * What a replay cannot look up in the target: names at addresses and thread
 * names, each written once. has_*() says whether it is written (or the
 * table is full), so callers read the target only when needed.
 */
bool capture__has_name(const struct capture_writer *w, uint32_t pid, uint64_t addr);
bool capture__has_thread(const struct capture_writer *w, uint32_t tid);
/* A name that could not be read: not looked for again, not written. */
void capture__no_name(struct capture_writer *w, uint32_t pid, uint64_t addr);
void capture__name(struct capture_writer *w, uint32_t pid, uint64_t addr, const char *name);
void capture__thread(struct capture_writer *w, uint32_t pid, uint32_t tid, const char *comm);
void capture__tick(struct capture_writer *w, uint64_t ts);
/* Process st->pid's last snapshot of the maps, and the BPF side's counters. */
void capture__snapshot(struct capture_writer *w, const struct stats *st,
		       const uint64_t *counters, uint32_t nr_counters);
/* Process pid's recording ended (after its snapshot): at ts, for reason. */
void capture__process_end(struct capture_writer *w, uint32_t pid, uint64_t ts,
			  const char *reason);
/* The capture's last record. */
void capture__end(struct capture_writer *w, uint64_t ts, const char *reason);
/* One process's whole end: its snapshot, its end, the capture's end. */
void capture__finish(struct capture_writer *w, const struct stats *st,
		     const uint64_t *counters, uint32_t nr_counters, uint64_t stop,
		     const char *reason);
/*
 * Closes the open chunk and writes out everything so far (a recorder killed
 * after this leaves a capture that converts up to here): 0, or the -errno
 * of the first failed write.
 */
int capture_writer__flush(struct capture_writer *w);
uint64_t capture_writer__bytes(const struct capture_writer *w);
uint64_t capture_writer__records(const struct capture_writer *w);
void capture_writer__free(struct capture_writer *w);

/* --- reading -------------------------------------------------------------- */

struct capture_reader;

/*
 * Opens a capture: checks the magic and the version and reads the process
 * record. On failure, says why in err (a sentence) and returns -errno. Every
 * version from CAPTURE_VERSION_OLDEST is read, and its records handed out
 * as this version's.
 */
int capture_reader__open(struct capture_reader **r, const char *path, char *err,
			 size_t err_len);
/* The same, over bytes in memory (not copied: they must outlive the reader). */
int capture_reader__open_mem(struct capture_reader **r, const void *data, size_t size,
			     char *err, size_t err_len);
const struct cap_process *capture_reader__process(const struct capture_reader *r);
/* The capture's format version (CAPTURE_VERSION_OLDEST to CAPTURE_VERSION). */
uint32_t capture_reader__version(const struct capture_reader *r);
/*
 * The next record: 1 with *rec and *size set (valid until the next call), 0 at
 * a clean end (after AT_CAP_END), -EINVAL for a damaged or cut capture: then
 * capture_reader__error() says what and where. A chunk's records are handed
 * out only once the whole chunk passed its checksum.
 */
int capture_reader__next(struct capture_reader *r, const struct at_hdr **rec, size_t *size);
const char *capture_reader__error(const struct capture_reader *r);
void capture_reader__free(struct capture_reader *r);

/*
 * --- the layout, pinned ----------------------------------------------------
 *
 * Captures on disk outlive this build: a record grows only at its end, and
 * anything else is a new CAPTURE_VERSION with a reader for the old one
 * (docs/capture.md). The snapshot records have kept version 1's bytes
 * (where they were the BPF map values, embedded).
 */
_Static_assert(CAP_HIST_SLOTS == AT_HIST_SLOTS, "captures keep every slot of a histogram");

AT_PIN_SIZE(struct capture_file_header, 16);
AT_PIN_OFF(struct capture_file_header, magic, 0);
AT_PIN_OFF(struct capture_file_header, version, 8);
AT_PIN_OFF(struct capture_file_header, header_size, 12);

AT_PIN_SIZE(struct cap_chunk, 24);
AT_PIN_OFF(struct cap_chunk, size, 0);
AT_PIN_OFF(struct cap_chunk, records, 4);
AT_PIN_OFF(struct cap_chunk, raw_size, 8);
AT_PIN_OFF(struct cap_chunk, encoding, 12);
AT_PIN_OFF(struct cap_chunk, crc, 16);
AT_PIN_OFF(struct cap_chunk, hdr_crc, 20);

AT_PIN_SIZE(struct cap_chunk_v2, 16);
AT_PIN_OFF(struct cap_chunk_v2, size, 0);
AT_PIN_OFF(struct cap_chunk_v2, records, 4);
AT_PIN_OFF(struct cap_chunk_v2, crc, 8);
AT_PIN_OFF(struct cap_chunk_v2, hdr_crc, 12);

AT_PIN_SIZE(struct cap_process, 112);
AT_PIN_OFF(struct cap_process, hdr, 0);
AT_PIN_OFF(struct cap_process, pid, 24);
AT_PIN_OFF(struct cap_process, runtime, 28);
AT_PIN_OFF(struct cap_process, realtime_offset, 32);
AT_PIN_OFF(struct cap_process, maps_only, 40);
AT_PIN_OFF(struct cap_process, pad, 41);
AT_PIN_OFF(struct cap_process, sample_hz, 44);
AT_PIN_OFF(struct cap_process, comm, 48);
AT_PIN_OFF(struct cap_process, long_poll_ns, 64);
AT_PIN_OFF(struct cap_process, sched_delay_ns, 72);
AT_PIN_OFF(struct cap_process, starve_ns, 80);
AT_PIN_OFF(struct cap_process, lost_waker_ns, 88);
AT_PIN_OFF(struct cap_process, episode_gap_ns, 96);
AT_PIN_OFF(struct cap_process, starve_depth, 104);
AT_PIN_OFF(struct cap_process, thrash_rate, 108);

AT_PIN_SIZE(struct cap_name, 32);
AT_PIN_OFF(struct cap_name, hdr, 0);
AT_PIN_OFF(struct cap_name, addr, 24);
AT_PIN_OFF(struct cap_name, name, 32);

AT_PIN_SIZE(struct cap_thread, 40);
AT_PIN_OFF(struct cap_thread, hdr, 0);
AT_PIN_OFF(struct cap_thread, comm, 24);

AT_PIN_SIZE(struct cap_hist, 320);
AT_PIN_OFF(struct cap_hist, slot, 0);

AT_PIN_SIZE(struct cap_hist32, 160);
AT_PIN_OFF(struct cap_hist32, slot, 0);

AT_PIN_SIZE(struct cap_queue, 24);
AT_PIN_OFF(struct cap_queue, area, 0);
AT_PIN_OFF(struct cap_queue, ts, 8);
AT_PIN_OFF(struct cap_queue, depth, 16);
AT_PIN_OFF(struct cap_queue, peak, 20);

AT_PIN_SIZE(struct cap_runtime_stats, 112);
AT_PIN_OFF(struct cap_runtime_stats, hdr, 0);
AT_PIN_OFF(struct cap_runtime_stats, spawns, 24);
AT_PIN_OFF(struct cap_runtime_stats, completed, 32);
AT_PIN_OFF(struct cap_runtime_stats, wakes, 40);
AT_PIN_OFF(struct cap_runtime_stats, self_wakes, 48);
AT_PIN_OFF(struct cap_runtime_stats, outside_wakes, 56);
AT_PIN_OFF(struct cap_runtime_stats, unknown_workers, 64);
AT_PIN_OFF(struct cap_runtime_stats, inject, 72);
AT_PIN_OFF(struct cap_runtime_stats, dropped, 96);
AT_PIN_OFF(struct cap_runtime_stats, nr_counters, 104);
AT_PIN_OFF(struct cap_runtime_stats, pad, 108);
AT_PIN_OFF(struct cap_runtime_stats, counters, 112);

AT_PIN_SIZE(struct cap_worker_stats, 1112);
AT_PIN_OFF(struct cap_worker_stats, hdr, 0);
AT_PIN_OFF(struct cap_worker_stats, worker, 24);
AT_PIN_OFF(struct cap_worker_stats, pad0, 28);
AT_PIN_OFF(struct cap_worker_stats, polls, 32);
AT_PIN_OFF(struct cap_worker_stats, busy_ns, 40);
AT_PIN_OFF(struct cap_worker_stats, oncpu_ns, 48);
AT_PIN_OFF(struct cap_worker_stats, max_poll_ns, 56);
AT_PIN_OFF(struct cap_worker_stats, wakes, 64);
AT_PIN_OFF(struct cap_worker_stats, self_wakes, 72);
AT_PIN_OFF(struct cap_worker_stats, steals, 80);
AT_PIN_OFF(struct cap_worker_stats, stolen, 88);
AT_PIN_OFF(struct cap_worker_stats, parks, 96);
AT_PIN_OFF(struct cap_worker_stats, park_ns, 104);
AT_PIN_OFF(struct cap_worker_stats, park_since, 112);
AT_PIN_OFF(struct cap_worker_stats, tid, 120);
AT_PIN_OFF(struct cap_worker_stats, pad1, 124);
AT_PIN_OFF(struct cap_worker_stats, queue, 128);
AT_PIN_OFF(struct cap_worker_stats, poll, 152);
AT_PIN_OFF(struct cap_worker_stats, oncpu, 472);
AT_PIN_OFF(struct cap_worker_stats, delay, 792);

AT_PIN_SIZE(struct cap_task_stats, 584);
AT_PIN_OFF(struct cap_task_stats, hdr, 0);
AT_PIN_OFF(struct cap_task_stats, task, 24);
AT_PIN_OFF(struct cap_task_stats, polls, 32);
AT_PIN_OFF(struct cap_task_stats, wakes, 40);
AT_PIN_OFF(struct cap_task_stats, self_wakes, 48);
AT_PIN_OFF(struct cap_task_stats, poll_ns, 56);
AT_PIN_OFF(struct cap_task_stats, oncpu_ns, 64);
AT_PIN_OFF(struct cap_task_stats, max_poll_ns, 72);
AT_PIN_OFF(struct cap_task_stats, name_addr, 80);
AT_PIN_OFF(struct cap_task_stats, first_ts, 88);
AT_PIN_OFF(struct cap_task_stats, done, 96);
AT_PIN_OFF(struct cap_task_stats, pad, 97);
AT_PIN_OFF(struct cap_task_stats, poll, 104);
AT_PIN_OFF(struct cap_task_stats, oncpu, 264);
AT_PIN_OFF(struct cap_task_stats, delay, 424);

AT_PIN_SIZE(struct cap_idle_task, 48);
AT_PIN_OFF(struct cap_idle_task, hdr, 0);
AT_PIN_OFF(struct cap_idle_task, task, 24);
AT_PIN_OFF(struct cap_idle_task, idle_since, 32);
AT_PIN_OFF(struct cap_idle_task, name_addr, 40);

AT_PIN_SIZE(struct cap_steal_stats, 48);
AT_PIN_OFF(struct cap_steal_stats, hdr, 0);
AT_PIN_OFF(struct cap_steal_stats, thief, 24);
AT_PIN_OFF(struct cap_steal_stats, victim, 28);
AT_PIN_OFF(struct cap_steal_stats, ops, 32);
AT_PIN_OFF(struct cap_steal_stats, tasks, 40);

AT_PIN_SIZE(struct cap_end, 56);
AT_PIN_OFF(struct cap_end, hdr, 0);
AT_PIN_OFF(struct cap_end, reason, 24);

#endif
