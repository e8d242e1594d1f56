// SPDX-License-Identifier: MIT
/*
 * Waker thrash: a task that wakes itself at nearly every poll, or is woken
 * many times a poll, past --thrash-rate wakes a second.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline/detect_priv.h"
#include "pipeline/model.h"

#define THRASH_SELF_SHARE 0.9	/* of polls answering the task's own wake */
#define THRASH_STORM_FACTOR 10	/* wakes per poll */
#define THRASH_MIN_SPAN_NS (500 * 1000 * 1000ull)

/* Waker thrash, from the change in a task's counters since its last sample. */
void thrash__on_sample(struct detector *d, struct model *m, const struct at_task_sample *s)
{
	struct task_watch *tw = u64map__get(&d->thrash, s->task);
	double dt, polls, wakes, self;
	enum thrash_reason reason = 0;
	struct alert a;

	if (!tw) {
		if (s->done || !(tw = calloc(1, sizeof(*tw))))
			return;
		if (u64map__set(&d->thrash, s->task, tw)) {
			free(tw);
			return;
		}
		/* Its counters began at zero when first seen: rates from there. */
		tw->ts = s->first_ts;
	}
	/* Rates over less than half a second are noise: make it the baseline. */
	if (tw->ts && s->hdr.ts >= tw->ts + THRASH_MIN_SPAN_NS) {
		dt = (double)(s->hdr.ts - tw->ts) / 1e9;
		polls = (double)(s->polls - tw->polls) / dt;
		wakes = (double)(s->wakes - tw->wakes) / dt;
		self = (double)(s->self_wakes - tw->self_wakes) / dt;
		if (self >= d->config.thrash_rate && self >= THRASH_SELF_SHARE * polls)
			reason = THRASH_SELF_WAKE;
		else if (wakes >= d->config.thrash_rate && wakes >= THRASH_STORM_FACTOR * polls)
			reason = THRASH_WAKE_STORM;
		if (!reason && tw->ep) {
			detect__end(d, tw->ep, s->hdr.ts, false);
			tw->ep = NULL;
		} else if (reason && tw->ep) {
			detect__recur(tw->ep, s->hdr.ts, 0);
		} else if (reason) {
			detect__alert_init(&a, ALERT_THRASH, s->hdr.ts);
			a.begin_ts = tw->ts;
			a.task = s->task;
			model__task_name(m, s->task, s->name_addr, a.task_name,
					 sizeof(a.task_name));
			a.reason = reason;
			a.polls_per_s = polls;
			a.wakes_per_s = wakes;
			a.self_wakes_per_s = self;
			a.by_probes = true; /* samples see no wake */
			tw->ep = detect__begin(d, &a);
		}
	}
	tw->ts = s->hdr.ts;
	tw->polls = s->polls;
	tw->wakes = s->wakes;
	tw->self_wakes = s->self_wakes;
	if (s->done) {
		detect__end(d, tw->ep, s->hdr.ts, false);
		free(u64map__del(&d->thrash, s->task));
	}
}
