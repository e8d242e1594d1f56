/* SPDX-License-Identifier: MIT */
/*
 * fanout: one long-lived parent that cycles through the three ways async
 * code waits on more than one thing:
 *
 *   serial      three steps awaited one after another inside the parent
 *               (each ~1 ms of CPU, then a 5-20 ms timer);
 *   concurrent  two sub-state-machines driven by the same task, like a
 *               join of two futures: either one's timer wakes the parent,
 *               which polls both;
 *   parallel    32 "child" tasks (two rounds each of ~0.5 ms CPU and a
 *               10 ms sleep), joined: the last child to finish wakes it;
 *
 * then it rests 50 ms and starts over. Every phase re-checks its own
 * deadlines because the parent does get early wakes: a finished branch's
 * timer can still fire later, and children finishing while it is still
 * spawning others wake it before the join is really complete.
 */
#include <stdlib.h>

#include "reactor.h"
#include "runtime.h"
#include "scenario.h"
#include "util.h"

#define SERIAL_STEPS 3
#define SERIAL_WORK NSEC_PER_MSEC
#define BRANCH_STEPS 2
#define BRANCH_WORK (200 * NSEC_PER_USEC)
#define CHILDREN 32
#define CHILD_ROUNDS 2
#define CHILD_WORK (500 * NSEC_PER_USEC)
#define CHILD_SLEEP (10 * NSEC_PER_MSEC)
#define PAUSE (50 * NSEC_PER_MSEC)

/* Deadline not yet reached: we were woken for something else. */
static bool too_early(uint64_t wake_at)
{
	return wake_at && now_ns() < wake_at;
}

/* Start a random 5-20 ms timer for the current task; returns its deadline. */
static uint64_t nap(struct prng *rng)
{
	uint64_t at = now_ns() + prng_range(rng, 5, 20) * NSEC_PER_MSEC;

	sleep_until(task_current(), at);
	return at;
}

/* ---- child ------------------------------------------------------------ */

struct child {
	unsigned round;
	uint64_t wake_at;
};

static enum poll child_poll(struct task *self, void *data)
{
	struct child *c = data;

	if (too_early(c->wake_at))
		return POLL_PENDING;
	if (c->round == CHILD_ROUNDS)
		return POLL_READY;
	burn_cpu_ns(CHILD_WORK);
	c->wake_at = now_ns() + CHILD_SLEEP;
	sleep_until(self, c->wake_at);
	c->round++;
	return POLL_PENDING;
}

/* ---- parent ----------------------------------------------------------- */

enum fanout_phase {
	FAN_SERIAL,
	FAN_CONCURRENT,
	FAN_PARALLEL,
	FAN_PAUSE,
};

/* One of the two state machines of the concurrent phase. */
struct branch {
	unsigned step;
	uint64_t wake_at;
};

struct fanout {
	enum fanout_phase phase;
	unsigned step;           /* serial phase */
	uint64_t wake_at;        /* serial and pause phases */
	struct branch branch[2];
	struct join *join;       /* parallel phase */
	struct prng rng;
};

/* True once all serial steps are done. */
static bool serial_poll(struct fanout *fo)
{
	while (!too_early(fo->wake_at)) {
		if (fo->step == SERIAL_STEPS)
			return true;
		burn_cpu_ns(SERIAL_WORK);
		fo->wake_at = nap(&fo->rng);
		fo->step++;
	}
	return false;
}

/* True once the branch is done; polled on every wake of the parent. */
static bool branch_poll(struct branch *b, struct prng *rng)
{
	if (too_early(b->wake_at))
		return false;
	if (b->step == BRANCH_STEPS)
		return true;
	burn_cpu_ns(BRANCH_WORK);
	b->wake_at = nap(rng);
	b->step++;
	return false;
}

static void spawn_children(struct fanout *fo)
{
	fo->join = join_new();
	for (int i = 0; i < CHILDREN; i++)
		task_spawn("child", child_poll,
			   xcalloc(1, sizeof(struct child)), free, fo->join);
}

static enum poll fanout_poll(struct task *self, void *data)
{
	struct fanout *fo = data;
	bool a, b;

	for (;;) {
		switch (fo->phase) {
		case FAN_SERIAL:
			if (!serial_poll(fo))
				return POLL_PENDING;
			fo->branch[0] = (struct branch){ 0 };
			fo->branch[1] = (struct branch){ 0 };
			fo->phase = FAN_CONCURRENT;
			break;

		case FAN_CONCURRENT:
			/* Poll both every time, whichever timer fired. */
			a = branch_poll(&fo->branch[0], &fo->rng);
			b = branch_poll(&fo->branch[1], &fo->rng);
			if (!a || !b)
				return POLL_PENDING;
			fo->phase = FAN_PARALLEL;
			break;

		case FAN_PARALLEL:
			if (!fo->join)
				spawn_children(fo);
			if (join_pending(fo->join))
				return POLL_PENDING;
			join_put(fo->join);
			fo->join = NULL;
			fo->wake_at = now_ns() + PAUSE;
			sleep_until(self, fo->wake_at);
			fo->phase = FAN_PAUSE;
			break;

		case FAN_PAUSE:
			if (too_early(fo->wake_at))
				return POLL_PENDING;
			fo->step = 0;
			fo->wake_at = 0;
			fo->phase = FAN_SERIAL;
			break;
		}
	}
}

static void fanout_drop(void *data)
{
	struct fanout *fo = data;

	if (fo->join)
		join_put(fo->join);
	free(fo);
}

void fanout_start(unsigned rate)
{
	struct fanout *fo = xcalloc(1, sizeof(*fo));

	background_start(rate);
	prng_seed(&fo->rng, 0xfa40u);
	task_spawn("fanout", fanout_poll, fo, fanout_drop, NULL);
}
