/* SPDX-License-Identifier: MIT */
/*
 * The one definition of each probe semaphore. The kernel raises a semaphore
 * while a uprobe is installed on its probe, so non-zero means "someone is
 * listening". (It counts breakpoints, not tracers: a second tracer on the
 * same probe leaves it at 1.)
 */
#include "probes.h"
#include "semaphores.h"
#include "util.h"

ASYNCTRACE_DEFINE_SEMAPHORE(task_spawn);
ASYNCTRACE_DEFINE_SEMAPHORE(poll_begin);
ASYNCTRACE_DEFINE_SEMAPHORE(poll_end);
ASYNCTRACE_DEFINE_SEMAPHORE(wake);
ASYNCTRACE_DEFINE_SEMAPHORE(steal);
ASYNCTRACE_DEFINE_SEMAPHORE(worker_park);
ASYNCTRACE_DEFINE_SEMAPHORE(worker_unpark);

__thread struct asynctrace_current asynctrace_current;
long asynctrace_current_tpoff;

unsigned probes_attached(void)
{
	const volatile unsigned short *sems[] = {
		&asynctrace_task_spawn_semaphore,
		&asynctrace_poll_begin_semaphore,
		&asynctrace_poll_end_semaphore,
		&asynctrace_wake_semaphore,
		&asynctrace_steal_semaphore,
		&asynctrace_worker_park_semaphore,
		&asynctrace_worker_unpark_semaphore,
	};
	unsigned min = *sems[0];

	/*
	 * The smallest: a tracer attaches its probes one at a time, and has
	 * only attached once its last one is in.
	 */
	for (unsigned i = 1; i < ARRAY_SIZE(sems); i++)
		if (*sems[i] < min)
			min = *sems[i];
	return min;
}
