/* SPDX-License-Identifier: MIT */
/*
 * Privilege separation: everything a traced process's files say (its ELF
 * notes, symbols, DWARF, Go's tables, the code probes are placed by) is
 * read by the analyser, a process of its own that asynctraced starts with
 * fork and exec (a fresh address space, no descriptor but its socket): not
 * root (nobody), no capability, no_new_privs, not dumpable, a limit on its
 * memory, and a seccomp filter that leaves it reading, writing its socket
 * and managing its memory. The privileged side opens the files (a
 * descriptor each, passed over the socket) and attaches probes; what comes
 * back is a plan (plan.h), checked before any of it is used.
 *
 * An analyser that dies, or does not answer within the timeout, is killed
 * and started again; the file it was reading is named in a warning and left
 * out, and the process is examined again without it.
 */
#ifndef ANALYSER_H
#define ANALYSER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "targets/discover.h"
#include "targets/probe_rules.h"
#include "targets/target.h"

/* How asynctraced is started as the analyser: argv[1], with its socket at fd 3. */
#define ANALYSER_ARG "--be-the-analyser"
#define ANALYSER_FD 3

/* How long an examination may take by default, in milliseconds. */
#define ANALYSER_TIMEOUT_MS 30000

struct analyser {
	pid_t pid;		/* 0: not running */
	int sock;
	uid_t uid;		/* what it runs as (when started by root) */
	gid_t gid;
	unsigned int timeout_ms;
	unsigned int restarts;	/* after a death or a timeout */
	bool failed;		/* could not be started again */
};

/* What an examination is asked to do besides finding the runtime. */
struct analyser_opts {
	bool verbose;			/* say why each file was skipped */
	bool remember;			/* keep what files hold nothing, for the next processes */
	bool probe_at_entry;		/* --probe-at entry */
	const struct probe_rules *rules; /* the kernel's, or NULL */
};

/* Starts it. 0, or -errno after a message. */
int analyser__start(struct analyser *a, unsigned int timeout_ms);
/*
 * Process t examined: its files opened here and read by the analyser, into
 * d (d->files holds them, open: the paths in d are theirs). 0, or -errno:
 * those of target__open_files(), -EIO when the analyser failed at every
 * try (each said), -EBADMSG for a plan out of bounds (said).
 */
int analyser__examine(struct analyser *a, const struct target *t, const struct analyser_opts *o,
		      struct discovery *d);
/* Stops it (its socket closed; it exits) and waits for it. */
void analyser__stop(struct analyser *a);

/* The analyser's side: main() of `asynctraced --be-the-analyser`. Its exit status. */
int analyser__main(void);

#endif
