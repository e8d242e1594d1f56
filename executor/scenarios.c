/* SPDX-License-Identifier: MIT */
#include <string.h>

#include "reactor.h"
#include "runtime.h"
#include "scenario.h"
#include "util.h"

#define REQUEST_RATE_HELP "background requests per second"
#define DEFAULT_REQUEST_RATE 2000
#define MAX_REQUEST_RATE 100000
/*
 * delay: how long a parked worker naps when pushes unpark nobody. Long
 * enough to stand out from 1-5 ms timer sleeps, short enough that two
 * workers keep up with the default rate.
 */
#define LAZY_UNPARK (30 * NSEC_PER_MSEC)

const struct scenario scenarios[] = {
	{
		.name = "healthy",
		.summary = "short requests with timer sleeps and pipe I/O, plus a ticker",
		.rate_help = REQUEST_RATE_HELP,
		.default_rate = DEFAULT_REQUEST_RATE,
		.max_rate = MAX_REQUEST_RATE,
		.steal = true,
		.unpark_on_local_push = true,
		.start = background_start,
		.cleanup = background_cleanup,
	},
	{
		.name = "noisy",
		.summary = "healthy + a task that burns 20 ms of CPU in one poll every 250 ms",
		.rate_help = REQUEST_RATE_HELP,
		.default_rate = DEFAULT_REQUEST_RATE,
		.max_rate = MAX_REQUEST_RATE,
		.steal = true,
		.unpark_on_local_push = true,
		.start = noisy_start,
		.cleanup = background_cleanup,
	},
	{
		.name = "blocking",
		.summary = "healthy + a task that blocks 20 ms in a syscall every 250 ms",
		.rate_help = REQUEST_RATE_HELP,
		.default_rate = DEFAULT_REQUEST_RATE,
		.max_rate = MAX_REQUEST_RATE,
		.steal = true,
		.unpark_on_local_push = true,
		.start = blocking_start,
		.stop = blocking_stop,
		.cleanup = blocking_cleanup,
	},
	{
		.name = "starve",
		.summary = "one worker's queue kept deep, no stealing, the others idle",
		.rate_help = "starved tasks the producer keeps queued",
		.default_rate = 150,
		/* The producer requeues itself too: stay clear of 256. */
		.max_rate = 200,
		.steal = false,
		.unpark_on_local_push = false,
		.start = starve_start,
	},
	{
		.name = "thrash",
		.summary = "healthy + 8 tasks that yield 1000 times per unit of progress",
		.rate_help = REQUEST_RATE_HELP,
		.default_rate = DEFAULT_REQUEST_RATE,
		.max_rate = MAX_REQUEST_RATE,
		.steal = true,
		.unpark_on_local_push = true,
		.start = thrash_start,
		.cleanup = background_cleanup,
	},
	{
		.name = "fanout",
		.summary = "healthy + a parent awaiting serial, concurrent and 32 parallel steps",
		.rate_help = REQUEST_RATE_HELP,
		.default_rate = DEFAULT_REQUEST_RATE,
		.max_rate = MAX_REQUEST_RATE,
		.steal = true,
		.unpark_on_local_push = true,
		.start = fanout_start,
		.cleanup = background_cleanup,
	},
	{
		.name = "lost",
		.summary = "healthy + a task whose second poll returns Pending with no wake arranged",
		.rate_help = REQUEST_RATE_HELP,
		.default_rate = DEFAULT_REQUEST_RATE,
		.max_rate = MAX_REQUEST_RATE,
		.steal = true,
		.unpark_on_local_push = true,
		.start = lost_start,
		.cleanup = background_cleanup,
	},
	{
		.name = "delay",
		.summary = "healthy, but pushes unpark nobody: idle workers nap 30 ms",
		.rate_help = REQUEST_RATE_HELP,
		.default_rate = DEFAULT_REQUEST_RATE,
		.max_rate = MAX_REQUEST_RATE,
		.steal = true,
		/* Moot: lazy_unpark_ns keeps every push from unparking. */
		.unpark_on_local_push = false,
		.lazy_unpark_ns = LAZY_UNPARK,
		.start = background_start,
		.cleanup = background_cleanup,
	},
	{
		.name = "spin",
		.summary = "the benchmark: 16 tasks that each do 2 us of work per poll, then\n"
			   "            wake themselves",
		.rate_help = "polls per second, or max",
		.default_rate = 100000,
		.max_rate = RATE_MAX,
		.steal = true,
		.unpark_on_local_push = true,
		.start = spin_start,
	},
};

const unsigned nscenarios = ARRAY_SIZE(scenarios);

const struct scenario *scenario_find(const char *name)
{
	for (unsigned i = 0; i < nscenarios; i++)
		if (strcmp(scenarios[i].name, name) == 0)
			return &scenarios[i];
	return NULL;
}

bool period_due(struct period *p, uint64_t interval_ns)
{
	uint64_t now = now_ns();

	if (p->next == 0) {
		p->next = now + interval_ns;
		sleep_until(task_current(), p->next);
		return false;
	}
	if (now < p->next)
		return false;
	/* Keep a fixed cadence, but do not try to catch up missed periods. */
	p->next += interval_ns;
	if (p->next <= now)
		p->next = now + interval_ns;
	sleep_until(task_current(), p->next);
	return true;
}
