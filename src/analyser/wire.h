/* SPDX-License-Identifier: MIT */
/*
 * What crosses the analyser's socket (a stream): each message a header and
 * its body. The privileged side sends EXAMINE (the files' ranges and names)
 * and then their descriptors, FDS messages of at most WIRE_FDS_MAX each
 * (SCM_RIGHTS); the analyser answers READING before each file it reads
 * (so that the file it dies on is known) and PLAN at the end.
 *
 * Stacks (--stacks) go to an analyser of their own: PRIME hands it a
 * process's maps text and files (then FDS); it answers WANT, the debug
 * files it would read; DEBUG hands over those that were found (then FDS)
 * and PRIMED says it is ready. UNWIND is a sample, FRAMES its frames;
 * FORGET a process gone (no answer).
 */
#ifndef WIRE_H
#define WIRE_H

#include <stdint.h>

#include "targets/probe_rules.h"

#define WIRE_MAGIC 0x31415441u /* "ATA1" */
/* descriptors in one FDS message: below Linux's SCM_MAX_FD (253) */
#define WIRE_FDS_MAX 200
/* files in one examination: a process maps a few hundred at most */
#define WIRE_FILES_MAX 65536
/* an EXAMINE body: the files' names are most of it */
#define WIRE_EXAMINE_MAX ((uint64_t)64 << 20)

enum wire_kind {
	WIRE_EXAMINE = 1,	/* -> struct wire_examine, its files, then FDS messages */
	WIRE_FDS,		/* -> uint32_t how many, the descriptors as SCM_RIGHTS */
	WIRE_READING,		/* <- uint32_t the file read next */
	WIRE_PLAN,		/* <- int32_t 0 or -errno, then the plan (plan.h) */
	WIRE_PRIME,		/* -> struct wire_prime, names, maps text, then FDS messages */
	WIRE_WANT,		/* <- uint32_t how many, then each a uint32_t length and path */
	WIRE_DEBUG,		/* -> uint32_t how many, each a uint32_t index in WANT; FDS */
	WIRE_PRIMED,		/* <- int32_t 0 or -errno */
	WIRE_UNWIND,		/* -> struct wire_unwind, the stack's bytes, returns, fp */
	WIRE_FRAMES,		/* <- struct wire_frames, each a struct wire_frame and strings */
	WIRE_FORGET,		/* -> int32_t the pid */
	WIRE_TASKS,		/* -> struct wire_tasks_req; FDS: its memory, its executable,
				 * then WANT and DEBUG (its debug file) */
	WIRE_TASKLIST,		/* <- int32_t 0 or -errno, then the list (tasks/tasks.h) */
};

struct wire_hdr {
	uint32_t magic;
	uint32_t kind;
	uint64_t len;		/* of the body that follows */
};

#define WIRE_VERBOSE 1
#define WIRE_REMEMBER 2
#define WIRE_PROBE_AT_ENTRY 4
#define WIRE_RULES 8		/* rules holds the kernel's */

struct wire_examine {
	int32_t pid;
	int32_t exe;		/* the executable's file; -1: none */
	uint32_t nr_files;
	uint32_t flags;
	struct probe_rules rules;
	/* then nr_files of struct wire_file, each followed by its name */
};

struct wire_file {
	uint64_t start, end, offset;	/* its first executable mapping */
	uint64_t dev, ino;
	uint32_t name_len;		/* the name the target knows it by, no NUL */
	uint32_t pad;
};

/* the maps text of one process: a few hundred KB for the largest */
#define WIRE_MAPS_MAX ((uint64_t)16 << 20)
/* debug files asked for at once: four paths an image, some thousands of images */
#define WIRE_WANT_MAX 16384
/* a frame's string at most, and what a FRAMES body may hold */
#define WIRE_STR_MAX 4096
#define WIRE_FRAMES_MAX ((uint64_t)4 << 20)
/* a string not there: NULL, not "" */
#define WIRE_NO_STR 0xffffu

struct wire_prime {
	int32_t pid;
	uint32_t nr_files;
	uint64_t maps_len;
	/* then nr_files names, each a uint32_t length and its bytes; then the maps text */
};

struct wire_unwind {
	uint32_t pid, tid;
	uint64_t ip, sp, bp;
	uint32_t len;		/* the stack's bytes that follow */
	uint32_t nr_returns;	/* then this many (slot, ret) pairs of uint64_t */
	uint32_t nr_fp;		/* then this many uint64_t */
	uint32_t max;		/* frames wanted at most */
};

/*
 * `asynctraced tasks`, and an alert's place: process pid's tasks, read from
 * its memory. With WIRE_TASKS_FDS, its memory and executable follow (FDS:
 * two), read then; else those kept from an earlier request with
 * WIRE_TASKS_KEEP (until FORGET). WIRE_TASKS_NONE: none listed (the
 * executable read and kept, an empty list).
 */
#define WIRE_TASKS_SYSTEM 1	/* the runtime's own too */
#define WIRE_TASKS_FDS 2
#define WIRE_TASKS_KEEP 4
#define WIRE_TASKS_NONE 8
/* the list's bytes at most: 16M tasks would not fit anyway */
#define WIRE_TASKLIST_MAX ((uint64_t)1 << 30)

struct wire_tasks_req {
	int32_t pid;
	uint32_t flags;
	uint64_t start, end, offset;	/* the executable's first executable mapping (FDS) */
	uint64_t only;			/* only the task of this id; 0: every one */
	uint32_t nr_threads;		/* then this many thread pointers (FS bases), u64 each */
	uint32_t name_len;		/* then the executable's name in its root, no NUL (FDS) */
	uint32_t bound_ms;		/* only: looking for it given up after this long; 0 never */
	uint32_t pad;
};
/* thread pointers in a request at most */
#define WIRE_THREADS_MAX 65536

struct wire_frames {
	int32_t n;		/* frames, or -errno */
	uint8_t by_fp;
	uint8_t no_image;	/* ip lies in no image it was given: something mapped since */
	uint16_t pad;
};

struct wire_frame {
	uint64_t pc, rel_pc;
	int32_t line;
	uint8_t inlined;
	uint8_t pad;
	/* lengths of the strings that follow (function, module, file); WIRE_NO_STR: none */
	uint16_t len[3];
};

/*
 * The socket's reads and writes. deadline: CLOCK_MONOTONIC ns after which
 * a read gives up (-ETIMEDOUT); 0: waits for good. -EPIPE: the other end
 * is gone (or EOF mid-message).
 */
int wire__send(int fd, uint32_t kind, const void *body, uint64_t len);
/* n descriptors in one FDS message. */
int wire__send_fds(int fd, const int *fds, uint32_t n);
int wire__read(int fd, void *buf, size_t len, uint64_t deadline);
/* The next header; 1 with *h, 0 at EOF before it, -errno. */
int wire__read_hdr(int fd, struct wire_hdr *h, uint64_t deadline);
/* The body of an FDS message: its descriptors into fds (room for max); how many, or -errno. */
int wire__read_fds(int fd, const struct wire_hdr *h, int *fds, uint32_t max);
/*
 * h's body, of min to max bytes, read whole (waiting for good) and ended by
 * a NUL past it; NULL: -errno in *err (-EBADMSG: out of bounds).
 */
uint8_t *wire__read_body(int fd, const struct wire_hdr *h, uint64_t min, uint64_t max, int *err);
/* n descriptors, in as many FDS messages as it takes. */
int wire__send_all_fds(int fd, const int *fds, size_t n);
/* n descriptors from the FDS messages that come next (any more are closed). 0, or -errno. */
int wire__take_fds(int fd, int *fds, uint32_t n, uint64_t deadline);

#endif
