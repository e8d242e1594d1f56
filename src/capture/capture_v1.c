// SPDX-License-Identifier: MIT
#include "capture/capture_v1.h"

#include <string.h>

/*
 * Version 1's counter numbers, as every version 1 writer gave them: the
 * drops of event kinds 1-7, then the counters that followed AT_EV_KIND_MAX
 * (8). -1: no counter.
 */
static const int v1_counter[] = {
	-1,
	AT_STAT_DROP_BASE + AT_EV_SPAWN,
	AT_STAT_DROP_BASE + AT_EV_POLL,
	AT_STAT_DROP_BASE + AT_EV_WAKE,
	AT_STAT_DROP_BASE + AT_EV_STEAL,
	AT_STAT_DROP_BASE + AT_EV_PARK,
	AT_STAT_DROP_BASE + AT_EV_WORKER_SAMPLE,
	AT_STAT_DROP_BASE + AT_EV_TASK_SAMPLE,
	AT_STAT_ORPHAN_POLL_END,
	AT_STAT_THREADS_FULL,
	AT_STAT_THREAD_SELF_WRONG,
	AT_STAT_MISSED_SWITCH_IN,
};

#define V1_COUNTERS (sizeof(v1_counter) / sizeof(v1_counter[0]))

static const void *runtime_stats(const struct cap_runtime_stats *v1, size_t *size, void *out)
{
	struct cap_runtime_stats *v2 = out;
	size_t n = v1->nr_counters < V1_COUNTERS ? v1->nr_counters : V1_COUNTERS;

	*size = sizeof(*v2) + AT_STAT_NR * sizeof(uint64_t);
	memset(out, 0, *size);
	memcpy(v2, v1, sizeof(*v2));
	v2->hdr.size = (uint16_t)*size;
	v2->nr_counters = AT_STAT_NR;
	for (size_t i = 0; i < n; i++)
		if (v1_counter[i] >= 0)
			v2->counters[v1_counter[i]] = v1->counters[i];
	return out;
}

const void *capture_v1__translate(const void *rec, size_t *size, void *out)
{
	const struct at_hdr *h = rec;

	if (h->kind == AT_CAP_RUNTIME_STATS)
		return runtime_stats(rec, size, out);
	return rec;
}
