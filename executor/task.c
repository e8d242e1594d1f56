/* SPDX-License-Identifier: MIT */
/*
 * Task lifetime: ids, reference counts, joins, and the registry of live
 * tasks that lets shutdown free tasks nobody will ever wake again.
 *
 * Reference rules: a task starts with one "run" reference, owned by the
 * scheduler and dropped when the task completes. Anything else that keeps a
 * task pointer to wake it later (a timer, an fd registration, a join) takes
 * its own reference. Memory is freed when the count reaches zero, so a late
 * wake of a completed task is a harmless no-op, never a use after free.
 */
#include <pthread.h>
#include <stdlib.h>

#include "task.h"
#include "util.h"

struct join {
	_Atomic unsigned pending; /* children not yet complete */
	_Atomic unsigned refs;    /* the waiter's, plus one per child */
	struct task *waiter;      /* holds a reference */
};

/* Ids start at 1 because 0 means "no task" in the probes. */
static _Atomic uint64_t next_id = 1;

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static struct task *registry;

static void registry_add(struct task *t)
{
	pthread_mutex_lock(&registry_lock);
	t->all_prev = NULL;
	t->all_next = registry;
	if (registry)
		registry->all_prev = t;
	registry = t;
	pthread_mutex_unlock(&registry_lock);
}

static void registry_del(struct task *t)
{
	pthread_mutex_lock(&registry_lock);
	if (t->all_prev)
		t->all_prev->all_next = t->all_next;
	else
		registry = t->all_next;
	if (t->all_next)
		t->all_next->all_prev = t->all_prev;
	pthread_mutex_unlock(&registry_lock);
}

static void join_get(struct join *j)
{
	atomic_fetch_add_explicit(&j->refs, 1, memory_order_relaxed);
}

struct task *task_alloc(const char *name, task_poll_fn poll, void *data,
			task_drop_fn drop, struct join *join, uint64_t parent)
{
	struct task *t = xcalloc(1, sizeof(*t));

	t->id = atomic_fetch_add_explicit(&next_id, 1, memory_order_relaxed);
	t->parent = parent;
	t->name = name;
	t->poll = poll;
	t->data = data;
	t->drop = drop;
	t->join = join;
	if (join) {
		join_get(join);
		atomic_fetch_add(&join->pending, 1);
	}
	atomic_init(&t->state, TASK_IDLE);
	atomic_init(&t->refs, 1);
	registry_add(t);
	return t;
}

uint64_t task_id(const struct task *t)
{
	return t->id;
}

void task_ref(struct task *t)
{
	atomic_fetch_add_explicit(&t->refs, 1, memory_order_relaxed);
}

void task_unref(struct task *t)
{
	/* acq_rel: every use of the task happens before whoever frees it. */
	if (atomic_fetch_sub_explicit(&t->refs, 1, memory_order_acq_rel) != 1)
		return;
	registry_del(t);
	free(t);
}

static void drop_data(struct task *t)
{
	if (t->drop)
		t->drop(t->data);
	t->data = NULL;
}

void task_finish(struct task *t)
{
	struct join *j = t->join;

	drop_data(t);
	if (j) {
		t->join = NULL;
		/* The last child out wakes the parent. */
		if (atomic_fetch_sub(&j->pending, 1) == 1)
			task_wake(j->waiter);
		join_put(j);
	}
	task_unref(t);
}

struct join *join_new(void)
{
	struct join *j = xcalloc(1, sizeof(*j));
	struct task *waiter = task_current();

	if (!waiter)
		fatal("join_new() called outside a task");
	task_ref(waiter);
	j->waiter = waiter;
	atomic_init(&j->pending, 0);
	atomic_init(&j->refs, 1);
	return j;
}

unsigned join_pending(const struct join *j)
{
	return atomic_load(&j->pending);
}

void join_put(struct join *j)
{
	if (atomic_fetch_sub_explicit(&j->refs, 1, memory_order_acq_rel) != 1)
		return;
	task_unref(j->waiter);
	free(j);
}

/*
 * The teardown steps below run single-threaded, after every runtime thread
 * has been joined, so they walk the registry without the lock. The pin is an
 * extra reference on each task: while it is held, the unrefs done by drop
 * functions and by the reactor only decrement, so no task is freed (and the
 * registry does not change) under our feet.
 */
void tasks_pin_all(void)
{
	for (struct task *t = registry; t; t = t->all_next)
		task_ref(t);
}

void tasks_drop_unfinished(void)
{
	for (struct task *t = registry; t; t = t->all_next) {
		if (atomic_load(&t->state) == TASK_COMPLETE)
			continue;
		drop_data(t);
		if (t->join) {
			/* The parent is being dropped too: no wake. */
			join_put(t->join);
			t->join = NULL;
		}
	}
}

void tasks_free_all(void)
{
	struct task *t = registry;

	registry = NULL;
	while (t) {
		struct task *next = t->all_next;

		free(t);
		t = next;
	}
}
