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

/*
 * The program's DWARF indexed for tasks: 0; -ENOENT when it has no tokio
 * types (built without type debug info: *why says which setting is needed).
 */
int tokio_dwarf__index(Dwarf *dw, struct tokio_dwarf **out, const char **why);
void tokio_dwarf__free(struct tokio_dwarf *td);
/*
 * The CONTEXT thread-local's offset in the executable's TLS segment, from
 * its DWARF location; false when its variable is not in the DWARF (LTO
 * leaves it out: its symbol says then, tokio__context_tpoff).
 */
bool tokio_dwarf__context(const struct tokio_dwarf *td, uint64_t *tls_offset);

/*
 * The tasks of the process (bias: where its executable is loaded against its
 * link-time addresses; context_tp: CONTEXT's address in each of its threads,
 * from their thread pointers), into l. 0, or -errno (l->note says why).
 */
int tokio_tasks__read(const struct tokio_dwarf *td, uint64_t bias, const uint64_t *context_at,
		      size_t nr_threads, const struct task_mem *m, struct task_list *l);

#endif
