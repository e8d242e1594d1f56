/* SPDX-License-Identifier: MIT */
/*
 * The one definition of each probe semaphore. The kernel increments a
 * semaphore for every uprobe attached to its probe, so a non-zero value
 * means "someone is listening", and two tracers on the same probe make it 2.
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
	 * The smallest count: a tracer attaches its probes one at a time,
	 * and has only attached once its last one is in.
	 */
	for (unsigned i = 1; i < ARRAY_SIZE(sems); i++)
		if (*sems[i] < min)
			min = *sems[i];
	return min;
}
