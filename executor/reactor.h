/* SPDX-License-Identifier: MIT */
/*
 * The reactor: one thread that turns timer expiries and fd readiness into
 * task wakes. It is not a worker, so its wakes land on the injection queue.
 */
#ifndef SE_REACTOR_H
#define SE_REACTOR_H

#include <stdint.h>

struct task;
struct io_source;

/* Called by the runtime (rt_start, rt_stop, rt_destroy). */
void reactor_start(void);
void reactor_stop(void);
/* Drop the references held by pending timers and free everything. */
void reactor_destroy(void);

/* Wake @t once CLOCK_MONOTONIC reaches @deadline_ns (see util.h). */
void sleep_until(struct task *t, uint64_t deadline_ns);
/* The same, for the current task, @ns from now. */
void sleep_for(uint64_t ns);

/*
 * An fd the reactor can watch for readability. Interest is one-shot: after a
 * wake, the owner reads until EAGAIN and arms it again, which avoids
 * missed edges (it is level-triggered) and wakes nobody twice.
 */
struct io_source *io_source_new(int fd);
/* Wake @t when the fd is readable (at once if it already is). */
void io_wait_readable(struct io_source *s, struct task *t);
/* Stop watching the fd; does not close it. */
void io_source_free(struct io_source *s);

#endif /* SE_REACTOR_H */
