/* SPDX-License-Identifier: MIT */
/*
 * The work-stealing runtime: the API that scenarios program against.
 *
 * There is one runtime per process (a sample program does not need more), so
 * the functions below take no runtime argument. A task is a poll function
 * plus a pointer to its own state; the runtime calls poll until it returns
 * POLL_READY. A task that returns POLL_PENDING must have arranged to be woken
 * (a timer, an fd, a join, or task_wake() on itself), otherwise it sleeps
 * until shutdown.
 */
#ifndef SE_RUNTIME_H
#define SE_RUNTIME_H

#include <stdbool.h>
#include <stdio.h>
#include <stdint.h>

enum poll {
	POLL_PENDING,
	POLL_READY,
};

struct task;
struct join;

typedef enum poll (*task_poll_fn)(struct task *self, void *data);
/* Releases a task's data: once, when the task completes or is dropped. */
typedef void (*task_drop_fn)(void *data);

struct runtime_config {
	unsigned workers;
	/* Idle workers take half of a busy worker's local queue. */
	bool steal;
	/* A push to a local queue unparks an idle worker (so it can steal). */
	bool unpark_on_local_push;
	/*
	 * 0: normal parking. Otherwise a "lazy unpark" regression: no push
	 * (to any queue) unparks an idle worker, and a parked worker sleeps
	 * at most this long before it looks for work again. A notify (at
	 * shutdown) still wakes it at once.
	 */
	uint64_t lazy_unpark_ns;
	/*
	 * 0: each worker keeps its thread. Otherwise a busy worker hands its
	 * work to a new thread this often and its old thread exits.
	 */
	uint64_t thread_churn_ns;
	/*
	 * 0: polls are not timed. Otherwise each poll is timed on the wall
	 * clock and those this long or longer are kept by task name: what a
	 * tracer's long-poll detector should find, as the program saw it (on a
	 * shared machine, an innocent poll can be stretched by the host).
	 */
	uint64_t time_polls_ns;
};

/* Totals of probe site executions; each matches one probe exactly. */
struct runtime_stats {
	uint64_t tasks;   /* task_spawn */
	uint64_t polls;   /* poll_begin */
	uint64_t wakes;   /* wake */
	uint64_t steals;  /* steal */
	uint64_t stolen;  /* sum of steal's count */
	uint64_t parks;   /* worker_park */
	uint64_t unpolled; /* spawned but never polled: still queued at exit */
};

/*
 * Start the worker threads and the reactor thread. Workers wait at a start
 * gate and touch no queue (and fire no probe) until rt_go(), so a tracer that
 * attaches in between sees the whole workload.
 */
void rt_start(const struct runtime_config *cfg);
void rt_go(void);
/* Stop and join every runtime thread; polls in progress finish first. */
void rt_stop(void);
/* Free every task, finished or not (unfinished ones are never polled again). */
void rt_destroy(void);
void rt_get_stats(struct runtime_stats *out);
/* After rt_stop(): a line per worker thread that ran: tid, worker, polls. */
void rt_print_threads(FILE *out);
/* After rt_stop(), with time_polls_ns: a line per task name whose polls took that long. */
void rt_print_long_polls(FILE *out);

/*
 * Spawn a task. From inside a task it goes on the current worker's local
 * queue and its parent is the current task; from any other thread it goes on
 * the injection queue with parent 0. @name must be a static string. @join may
 * be NULL; otherwise the task counts as one of the join's children.
 */
void task_spawn(const char *name, task_poll_fn poll, void *data,
		task_drop_fn drop, struct join *join);

/*
 * Make @t runnable. The caller must hold a reference on @t (or be @t). Waking
 * a task that is running makes it run again right after its current poll.
 */
void task_wake(struct task *t);

/* The task being polled on this thread, or NULL. */
struct task *task_current(void);
uint64_t task_id(const struct task *t);
void task_ref(struct task *t);
void task_unref(struct task *t);

/* Length of the calling worker's local queue (0 off a worker thread). */
unsigned rt_local_queue_len(void);

/*
 * Join: a counter of live children plus the task waiting for them. The
 * waiter is the task that calls join_new(); the last child to complete wakes
 * it. The waiter owns one reference and drops it with join_put().
 */
struct join *join_new(void);
unsigned join_pending(const struct join *j);
void join_put(struct join *j);

#endif /* SE_RUNTIME_H */
