// SPDX-License-Identifier: MIT
/* What sample mode cannot see: see unseen.h. */
#include <string.h>

#include "pipeline/unseen.h"

/* In the order the report says them; each item after the one it comes from. */
const struct unseen unseen_by_samples[] = {
	{ "spawns", "spawns", NULL, NULL },
	{ "completions", "completions", NULL, NULL },
	{ "wakes", "wakes", NULL, NULL },
	{ "wake_delays", "wake-to-poll delays", "wakes", NULL },
	{ "wake_arrows", "wake arrows", "wakes", NULL },
	{ "lost_wakers", "lost wakers", "wakes", NULL },
	{ "waker_thrash", "waker thrash", "wakes", NULL },
	{ "steals", "steals", NULL, NULL },
	{ "parks", "parks", NULL, NULL },
	{ "injection_queue", "the injection queue", NULL, NULL },
	{ "queue_depths", "run-queue depths", NULL, "tokio" },
	{ "starvation", "starvation", "queue_depths", "tokio" },
	{ "poll_bounds", "where a task's poll ends and its next begins", NULL, "tokio" },
};
const size_t nr_unseen_by_samples = sizeof(unseen_by_samples) / sizeof(unseen_by_samples[0]);

static const struct unseen *find(const char *name)
{
	for (size_t i = 0; i < nr_unseen_by_samples; i++)
		if (!strcmp(unseen_by_samples[i].name, name))
			return &unseen_by_samples[i];
	return NULL;
}

bool unseen__known(const char *name)
{
	return find(name) != NULL;
}

bool unseen__applies(const struct unseen *u, const char *runtime)
{
	return !u->runtime || (runtime && !strcmp(u->runtime, runtime));
}

bool unseen__for(const char *name, const char *runtime)
{
	const struct unseen *u = find(name);

	return u && unseen__applies(u, runtime);
}

const char *unseen__words(const char *name)
{
	const struct unseen *u = find(name);

	return u ? u->words : name;
}

const char *unseen__alert(enum alert_kind k)
{
	switch (k) {
	case ALERT_SCHED_DELAY:
		return "wake_delays";
	case ALERT_THRASH:
		return "waker_thrash";
	case ALERT_LOST_WAKER:
		return "lost_wakers";
	case ALERT_STARVATION:
		return "starvation";
	case ALERT_LONG_POLL:
		return "poll_bounds";
	case ALERT_KIND_MAX:
		break;
	}
	return NULL;
}
