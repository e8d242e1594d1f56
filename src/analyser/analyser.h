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

#include "lib/u64map.h"
#include "stacks/unwind.h"
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
	unsigned int gen;	/* how many times it was started */
	bool failed;		/* could not be started again */
	bool no_restart;	/* it may not be: the caller is confined (-p, once attached) */
	/* --stacks: what it was handed of each process (pid -> its state), the last frames' strings */
	struct u64map primed;
	char *frames;
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
/* Stops it (its socket closed; it exits) and waits for it; what it held goes. */
void analyser__stop(struct analyser *a);
/* Kills it (what it was doing is lost): why it ended, into buf. */
void analyser__kill(struct analyser *a, char *buf, size_t len);

/*
 * --stacks, on an analyser of its own (stacks.c): process t's images
 * handed to it, while they may be read (the files it maps opened here, its
 * debug files too, within its root and only those anyone may read). 0, or
 * -errno (-EIO: the analyser failed, said).
 */
int analyser__prime(struct analyser *a, const struct target *t);
/*
 * A sample of primed process t unwound and symbolised into frames (at most
 * max): how many; 0 when none (an analyser that failed on t is said once,
 * and t's stacks are left out from then on). The strings live until the
 * next call.
 */
int analyser__unwind(struct analyser *a, const struct target *t, const struct stack_sample *s,
		     struct stack_frame *frames, int max, bool *by_fp);
/* Process pid gone: what the analyser holds of it goes. */
void analyser__forget(struct analyser *a, pid_t pid);
/* What was kept of every process, freed (analyser__stop does). */
void analyser__clear(struct analyser *a);

/*
 * `asynctraced tasks`: a snapshot of t's tasks (every one, with system the
 * runtime's own too), read by the analyser from t's executable and memory
 * (t->memfd) and its threads' pointers (fsbase: tokio's CONTEXT), into l (initialised here; l->note says what could not be
 * read). 0; -ENOENT: no runtime whose tasks it reads; -ENOTSUP: one, but
 * not readable (l->note says why); -EIO: the analyser failed (said);
 * -EBADMSG: an answer out of bounds (said); -errno.
 */
struct task_list;
int analyser__tasks(struct analyser *a, const struct target *t, bool system,
		    const uint64_t *fsbase, uint32_t nr_threads, struct task_list *l);
/*
 * A traced process handed over for good (its executable read, its memory's
 * descriptor kept, tokio's task list found from its threads' pointers:
 * analyser__forget lets it go), so that an alert can ask where one of its
 * tasks waits. 0; -ENOENT: no runtime whose tasks are
 * read; -errno; why says why not, when not.
 */
int analyser__tasks_prime(struct analyser *a, const struct target *t, const uint64_t *fsbase,
			  uint32_t nr_threads, char *why, size_t len);
/*
 * Where task id of primed process t waits: its frames (at most max),
 * innermost first (a tokio task's awaits too: the leaf first); 0 when it
 * is gone, running, or was torn. The strings live until the next call.
 * waits (may be NULL): it is still where it last waited (parked, or a
 * tokio task notified and not yet polled), not stopped elsewhere.
 * -EAGAIN: a tokio program whose list is not found yet (primed before its
 * runtime ran: ask again with its threads' pointers); -ETIMEDOUT: not
 * found within bound_ms (not known whether it is there); -EIO: the
 * analyser did not answer.
 */
struct where_opts {
	const uint64_t *fsbase;	/* tokio's threads' pointers while its list is not found */
	uint32_t nr_threads;
	/* a task never met before is looked for along its list this long at most; 0: 3 s */
	uint32_t bound_ms;
};
int analyser__task_where(struct analyser *a, const struct target *t, uint64_t id,
			 const struct where_opts *o, struct stack_frame *frames, int max, bool *waits);

/* The analyser's side: main() of `asynctraced --be-the-analyser`. Its exit status. */
int analyser__main(void);

#endif
