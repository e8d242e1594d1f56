// SPDX-License-Identifier: MIT
/*
 * Lost waker: a task that returned Pending and was not woken for
 * --lost-waker; or, at once, one whose runtime said nothing holds its waker.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline/detect_priv.h"
#include "pipeline/model.h"

/*
 * A poll that returned Pending with nothing holding the task's waker: it is
 * lost now, not after --lost-waker of silence. A later poll of the task
 * (the runtime cancelled it) ends the episode.
 */
void lost_waker__on_poll(struct detector *d, struct model *m, const struct at_poll *p)
{
	struct episode *ep = u64map__get(&d->lost, p->task);
	uint64_t at = p->hdr.ts + p->duration_ns;
	struct alert a;

	if (ep) {
		/* the poll that left it lost, or an older one, late */
		if (ep->a.begin_ts == at || p->hdr.ts < ep->a.begin_ts)
			return;
		/* polled again: something woke it after all */
		detect__end(d, u64map__del(&d->lost, p->task), p->hdr.ts, false);
	}
	if (p->ready || !(p->flags & AT_POLL_UNWAKEABLE))
		return;
	detect__alert_init(&a, ALERT_LOST_WAKER, at);
	a.begin_ts = at;
	a.task = p->task;
	a.unwakeable = true;
	a.by_probes = true; /* samples see no waker */
	a.worker = (int32_t)p->worker;
	a.tid = p->hdr.tid;
	model__task_name(m, p->task, p->name_addr, a.task_name, sizeof(a.task_name));
	a.parked_at = model__where(m, p->task);
	ep = detect__begin(d, &a);
	if (ep && u64map__set(&d->lost, p->task, ep))
		free(ep);
}

/* Lost waker: returned Pending, and nothing woke it for lost_waker_ns. */
void lost_waker__on_sample(struct detector *d, struct model *m, const struct at_task_sample *s)
{
	struct episode *ep = u64map__get(&d->lost, s->task);
	bool lost = s->idle_since && !s->done && s->hdr.ts > s->idle_since &&
		    s->hdr.ts - s->idle_since >= d->config.lost_waker_ns;
	struct alert a;

	if (ep && ep->a.unwakeable) {
		/* it lasts until the task is polled again (cancelled) or done */
		if (s->hdr.ts < ep->a.begin_ts)
			return;
		if (s->done || (ep->polls && s->polls > ep->polls)) {
			detect__end(d, u64map__del(&d->lost, s->task), s->hdr.ts, false);
			return;
		}
		if (!ep->polls)
			ep->polls = s->polls;
		ep->a.value_ns = s->hdr.ts - ep->a.begin_ts;
		ep->a.worst_ns = ep->a.value_ns;
		ep->last_ts = s->hdr.ts;
		return;
	}
	if (d->lost_waker_exact_only)
		return;
	if (d->wakes_unseen)
		lost = false; /* its waits since are not known: the probes that saw it wait are gone */
	if (ep && (!lost || ep->a.begin_ts != s->idle_since)) {
		/* woken (or done) at last */
		detect__end(d, u64map__del(&d->lost, s->task), s->hdr.ts, false);
		ep = NULL;
	}
	if (!lost)
		return;
	if (ep) {
		ep->a.value_ns = s->hdr.ts - s->idle_since;
		ep->a.worst_ns = ep->a.value_ns;
		ep->last_ts = s->hdr.ts;
		return;
	}
	detect__alert_init(&a, ALERT_LOST_WAKER, s->hdr.ts);
	a.begin_ts = s->idle_since;
	a.value_ns = s->hdr.ts - s->idle_since;
	a.task = s->task;
	model__task_name(m, s->task, s->name_addr, a.task_name, sizeof(a.task_name));
	a.parked_at = model__where(m, s->task);
	ep = detect__begin(d, &a);
	if (ep && u64map__set(&d->lost, s->task, ep))
		free(ep);
}
