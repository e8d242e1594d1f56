/* SPDX-License-Identifier: MIT */
/*
 * What crosses the analyser's socket (a stream): each message a header and
 * its body. The privileged side sends EXAMINE (the files' ranges and names)
 * and then their descriptors, FDS messages of at most WIRE_FDS_MAX each
 * (SCM_RIGHTS); the analyser answers READING before each file it reads
 * (so that the file it dies on is known) and PLAN at the end.
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

#endif
