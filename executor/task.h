/* SPDX-License-Identifier: MIT */
/*
 * Runtime-internal view of a task. Scenarios only see struct task as an
 * opaque handle (runtime.h).
 */
#ifndef SE_TASK_H
#define SE_TASK_H

#include <stdatomic.h>
#include <stdint.h>

#include "runtime.h"

/*
 * The scheduling state machine. Only the worker that popped a task moves it
 * out of SCHEDULED, RUNNING_NOTIFIED and RUNNING (except RUNNING ->
 * RUNNING_NOTIFIED); wakers only do IDLE -> SCHEDULED and RUNNING ->
 * RUNNING_NOTIFIED. That split is what guarantees a task sits in at most one
 * queue and is polled by one worker at a time.
 */
enum task_state {
	TASK_IDLE,             /* waiting for a wake */
	TASK_SCHEDULED,        /* in exactly one run queue */
	TASK_RUNNING,          /* being polled */
	TASK_RUNNING_NOTIFIED, /* being polled, and woken meanwhile */
	TASK_COMPLETE,         /* returned POLL_READY; never polled again */
};

struct task {
	uint64_t id;
	uint64_t parent;
	const char *name;
	task_poll_fn poll;
	void *data;
	task_drop_fn drop;
	struct join *join;       /* NULL unless spawned as a join child */

	_Atomic int state;       /* enum task_state */
	_Atomic unsigned refs;
	bool polled;             /* set at its first poll, by the polling worker */

	struct task *next;       /* injection queue link */
	struct task *all_prev;   /* registry of live tasks, for teardown */
	struct task *all_next;
};

/* task.c: allocation, references, joins and teardown. */
struct task *task_alloc(const char *name, task_poll_fn poll, void *data,
			task_drop_fn drop, struct join *join, uint64_t parent);
/* After POLL_READY: release the data, notify the join, drop the run ref. */
void task_finish(struct task *t);
/*
 * Teardown, once no runtime thread is left: pin every task, release the
 * data of unfinished ones, then (after the reactor let go of its references)
 * free them all regardless of their count.
 */
void tasks_pin_all(void);
void tasks_drop_unfinished(void);
void tasks_free_all(void);

#endif /* SE_TASK_H */
