/* SPDX-License-Identifier: MIT */
/*
 * Scenarios with one kind of misbehaviour each, for the tracer to find:
 * a CPU hog (noisy), a task blocking its worker in syscalls (blocking),
 * busy yielding without progress (thrash), a starved queue (starve) and a
 * task that lost its waker (lost). The runtime-level fault, lazy unparking
 * (delay), is a runtime_config flag set in scenarios.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "reactor.h"
#include "runtime.h"
#include "scenario.h"
#include "util.h"

#define MISBEHAVE_PERIOD (250 * NSEC_PER_MSEC)
#define MISBEHAVE_TIME (20 * NSEC_PER_MSEC)

/* ---- noisy: 20 ms of CPU inside one poll ------------------------------ */

static enum poll noisy_poll(struct task *self, void *data)
{
	(void)self;
	if (period_due(data, MISBEHAVE_PERIOD))
		burn_cpu_ns(MISBEHAVE_TIME);
	return POLL_PENDING;
}

void noisy_start(unsigned rate)
{
	background_start(rate);
	task_spawn("noisy", noisy_poll, xcalloc(1, sizeof(struct period)),
		   free, NULL);
}

/* ---- blocking: 20 ms off-CPU inside one poll -------------------------- */

/*
 * The feeder thread answers each byte on feeder_req with a byte on
 * feeder_data 20 ms later, so the blocking task's read() really waits in
 * the kernel for another thread, not just for a timeout. Both pipes are
 * blocking on purpose.
 */
static int feeder_req[2] = { -1, -1 };
static int feeder_data[2] = { -1, -1 };
static pthread_t feeder;
static bool feeder_running;

static void *feeder_main(void *arg)
{
	char c;

	(void)arg;
	/* Ends when blocking_stop() closes the write end of feeder_req. */
	while (read(feeder_req[0], &c, 1) == 1) {
		sleep_ns(MISBEHAVE_TIME);
		if (write(feeder_data[1], &c, 1) != 1)
			fatal("feeder write: %m");
	}
	return NULL;
}

struct blocking {
	struct period period;
	bool use_pipe; /* alternate between nanosleep and read */
};

static void read_from_feeder(void)
{
	char c = 'x';
	ssize_t n;

	if (write(feeder_req[1], &c, 1) != 1)
		fatal("blocking write: %m");
	do
		n = read(feeder_data[0], &c, 1);
	while (n < 0 && errno == EINTR);
	if (n != 1)
		fatal("blocking read: %m");
}

static enum poll blocking_poll(struct task *self, void *data)
{
	struct blocking *b = data;

	(void)self;
	if (period_due(&b->period, MISBEHAVE_PERIOD)) {
		if (b->use_pipe)
			read_from_feeder();
		else
			sleep_ns(MISBEHAVE_TIME);
		b->use_pipe = !b->use_pipe;
	}
	return POLL_PENDING;
}

void blocking_start(unsigned rate)
{
	int err;

	if (pipe2(feeder_req, O_CLOEXEC) != 0 ||
	    pipe2(feeder_data, O_CLOEXEC) != 0)
		fatal("pipe2: %m");
	err = pthread_create(&feeder, NULL, feeder_main, NULL);
	if (err)
		fatal("pthread_create: %s", strerror(err));
	pthread_setname_np(feeder, "feeder");
	feeder_running = true;

	background_start(rate);
	task_spawn("blocking", blocking_poll,
		   xcalloc(1, sizeof(struct blocking)), free, NULL);
}

void blocking_stop(void)
{
	/* Workers are gone, so nobody waits on the feeder any more. */
	if (feeder_req[1] >= 0) {
		close(feeder_req[1]);
		feeder_req[1] = -1;
	}
	if (feeder_running) {
		pthread_join(feeder, NULL);
		feeder_running = false;
	}
}

void blocking_cleanup(void)
{
	int *fds[] = { &feeder_req[0], &feeder_req[1], &feeder_data[0],
		       &feeder_data[1] };

	for (unsigned i = 0; i < ARRAY_SIZE(fds); i++) {
		if (*fds[i] >= 0)
			close(*fds[i]);
		*fds[i] = -1;
	}
	background_cleanup();
}

/* ---- thrash: yield loops that rarely make progress -------------------- */

#define THRASH_TASKS 8
#define THRASH_YIELDS 1000
#define THRASH_REST_MIN NSEC_PER_MSEC
/*
 * A yield costs well under a microsecond untraced (a few traced), so 1000
 * yields and a flat 1 ms rest would keep eight tasks busy enough to fill
 * both cores. Resting 49 times as long as the burst took caps each task at
 * 2% of its wall time, and all eight at about a sixth of one core, however
 * slow the yields are (a tracer attached, a sanitizer).
 *
 * But a burst's wall time also counts the waits behind the seven others:
 * a rest that follows it unbounded can reach a second, and a task that long
 * unwoken reads as a lost waker. A thrasher is busy, not lost: cap it.
 */
#define THRASH_REST_FACTOR 49
#define THRASH_REST_MAX (200 * NSEC_PER_MSEC)

struct thrash {
	uint64_t polls;
	uint64_t progress;
	uint64_t burst_start;
};

static enum poll thrash_poll(struct task *self, void *data)
{
	struct thrash *th = data;
	uint64_t now, rest;

	if (th->polls++ % THRASH_YIELDS == 0)
		th->burst_start = now_ns();
	if (th->polls % THRASH_YIELDS) {
		task_wake(self);
		return POLL_PENDING;
	}

	/* Every 1000th poll makes progress, then rests on a timer. */
	th->progress++;
	now = now_ns();
	rest = (now - th->burst_start) * THRASH_REST_FACTOR;
	if (rest < THRASH_REST_MIN)
		rest = THRASH_REST_MIN;
	if (rest > THRASH_REST_MAX)
		rest = THRASH_REST_MAX;
	sleep_until(self, now + rest);
	return POLL_PENDING;
}

void thrash_start(unsigned rate)
{
	background_start(rate);
	for (int i = 0; i < THRASH_TASKS; i++)
		task_spawn("thrash", thrash_poll,
			   xcalloc(1, sizeof(struct thrash)), free, NULL);
}

/* ---- starve: one deep local queue, nobody allowed to help ------------- */

#define STARVED_WORK (200 * NSEC_PER_USEC)

static enum poll starved_poll(struct task *self, void *data)
{
	(void)self;
	(void)data;
	burn_cpu_ns(STARVED_WORK);
	return POLL_READY;
}

struct producer {
	unsigned depth;
};

/*
 * Refill our worker's local queue to the target depth, then yield: the
 * yield requeues the producer behind its own children, so every child
 * waits for about a whole queue's worth of work before it runs.
 */
static enum poll producer_poll(struct task *self, void *data)
{
	struct producer *p = data;

	while (rt_local_queue_len() < p->depth)
		task_spawn("starved", starved_poll, NULL, NULL, NULL);
	task_wake(self);
	return POLL_PENDING;
}

void starve_start(unsigned rate)
{
	struct producer *p = xcalloc(1, sizeof(*p));

	/*
	 * The ticker's wakes arrive on the injection queue, which still
	 * unparks idle workers: they wake every 10 ms, run it, and park
	 * again, right next to a worker with ~150 tasks waiting.
	 */
	spawn_ticker();
	p->depth = rate;
	task_spawn("producer", producer_poll, p, free, NULL);
}

/* ---- lost: Pending with nobody left to wake the task ------------------ */

#define LOST_SLEEP (100 * NSEC_PER_MSEC)

struct lost {
	bool slept;
};

/*
 * First poll: sleep on a timer, as any task may. Second poll (the timer's
 * wake; nothing else knows the task): return Pending without arranging a
 * wake, the bug of a future that dropped its waker or registered it where
 * nobody will look. With no timer, fd or join holding it, the task is never
 * polled again, and shutdown drops it unfinished.
 */
static enum poll lost_poll(struct task *self, void *data)
{
	struct lost *l = data;

	if (!l->slept) {
		l->slept = true;
		sleep_until(self, now_ns() + LOST_SLEEP);
	}
	return POLL_PENDING;
}

void lost_start(unsigned rate)
{
	background_start(rate);
	task_spawn("lost", lost_poll, xcalloc(1, sizeof(struct lost)), free,
		   NULL);
}
