/* SPDX-License-Identifier: MIT */
/*
 * spin: the benchmark workload. SPIN_TASKS tasks named "spin" each do a
 * small, fixed piece of work per poll (SPIN_WORK of CPU, a short request
 * handler) and wake themselves for the next: a poll is poll_begin, wake,
 * poll_end and nothing else, so what a tracer adds per poll shows plainly.
 *
 * --rate R holds the whole runtime at R polls per second (a task that runs
 * ahead of its share sleeps on a timer until it is due); --rate max lets it
 * poll as fast as the workers can. The exit line's polls_per_s says what it
 * reached.
 */
#include <stdlib.h>

#include "reactor.h"
#include "runtime.h"
#include "scenario.h"
#include "util.h"

#define SPIN_TASKS 16
#define SPIN_WORK (2 * NSEC_PER_USEC)
/* Paced tasks sleep in slices of at least this long (timers are coarse). */
#define SPIN_SLEEP_MIN (100 * NSEC_PER_USEC)

struct spin {
	uint64_t per_task_rate;	/* polls per second; 0: as fast as possible */
	uint64_t start;
	uint64_t polls;
};

static enum poll spin_poll(struct task *self, void *data)
{
	struct spin *sp = data;
	uint64_t now, due;

	burn_cpu_ns(SPIN_WORK);
	sp->polls++;
	if (sp->per_task_rate) {
		now = now_ns();
		if (!sp->start)
			sp->start = now;
		/* when this task's next poll is due, at its share of the rate */
		due = sp->start + sp->polls * NSEC_PER_SEC / sp->per_task_rate;
		if (due > now + SPIN_SLEEP_MIN) {
			sleep_until(self, due);
			return POLL_PENDING;
		}
	}
	task_wake(self);
	return POLL_PENDING;
}

void spin_start(unsigned rate)
{
	for (int i = 0; i < SPIN_TASKS; i++) {
		struct spin *sp = xcalloc(1, sizeof(*sp));

		sp->per_task_rate = rate == RATE_MAX ? 0 : (rate + SPIN_TASKS - 1) / SPIN_TASKS;
		task_spawn("spin", spin_poll, sp, free, NULL);
	}
}
