/* SPDX-License-Identifier: MIT */
/*
 * Every task of a running tokio program and where it awaits, read from its
 * memory by its type debug info (DWARF of a `debug = 2` build): the
 * scheduler's handle from a worker thread's CONTEXT thread-local, its
 * owned-task list, each task's cell (its Header's vtable names its future
 * type), and the future's state machine: an async fn's `__state` says which
 * `.await` it is suspended at (that variant's declared line), and its
 * `__awaitee` the future it awaits, down to a leaf (a channel's receive, a
 * Notified, a Sleep, a JoinHandle).
 */
#ifndef TOKIO_TASKS_H
#define TOKIO_TASKS_H

#include <elfutils/libdw.h>
#include <stddef.h>
#include <stdint.h>

#include "tasks/goroutines.h"
#include "tasks/tasks.h"

struct tokio_dwarf;

/* Frames of one task at most (its chain of awaits, select!'s branches included). */
#define TOKIO_FRAMES_MAX 64

/*
 * The program's DWARF indexed for tasks: 0; -ENOENT when it has no tokio
 * types (built without type debug info: *why says which setting is needed).
 */
int tokio_dwarf__index(Dwarf *dw, struct tokio_dwarf **out, const char **why);
void tokio_dwarf__free(struct tokio_dwarf *td);
/*
 * What is read of the program once and kept for any process of it, read
 * now rather than when first needed (an alert's question is bounded): the
 * closures' code, for a select!'s or join!'s line.
 */
void tokio_dwarf__prepare(struct tokio_dwarf *td);
/* The types' layouts found so far forgotten (the fuzzer's: each input finds them again). */
void tokio_dwarf__forget_layouts(struct tokio_dwarf *td);
/*
 * The CONTEXT thread-local's offset in the executable's TLS segment, from
 * its DWARF location; false when its variable is not in the DWARF (LTO
 * leaves it out: its symbol says then, tokio__context_tpoff).
 */
bool tokio_dwarf__context(const struct tokio_dwarf *td, uint64_t *tls_offset);

/*
 * Where the scheduler's task list begins (the address of its head field,
 * which lives as long as the runtime), from CONTEXT's address in each of
 * the process's threads (from their thread pointers; 0: none). 0, or
 * -ENOENT when no thread's CONTEXT holds a scheduler.
 */
int tokio_tasks__head_at(const struct tokio_dwarf *td, const uint64_t *context_at,
			 size_t nr_threads, const struct task_mem *m, uint64_t *head_at);
struct tokio_read_opts {
	uint64_t only;		/* that task alone, by its id or its Header's address; 0: all */
	/*
	 * may be NULL: task id -> its Header's address, kept from one read of
	 * only to the next: an only is read there first (if the task there is
	 * still that one and alive: else along the list), and the ids met along
	 * the list are kept (TOKIO_FOUND_MAX at most: then it starts again)
	 */
	struct u64map *found;
	uint64_t deadline_ns;	/* only: the walk given up at this CLOCK_MONOTONIC time; 0 none */
	/*
	 * may be NULL: the Header a walk given up stopped at, where the next
	 * begins if it is still a live task (round the list to it); 0: the head
	 */
	uint64_t *resume;
};
#define TOKIO_FOUND_MAX (1u << 20)

/*
 * The tasks of the list at head_at (bias: where the executable is loaded
 * against its link-time addresses), as o says, into l. 0, or -errno
 * (l->note says why; also why an only was not found, when the walk was
 * given up).
 */
int tokio_tasks__read(const struct tokio_dwarf *td, uint64_t bias, uint64_t head_at,
		      const struct tokio_read_opts *o, const struct task_mem *m,
		      struct task_list *l);

#endif
