// SPDX-License-Identifier: MIT
/*
 * Scheduling delay: a poll late by --sched-delay after its wake, with
 * nothing else to explain it (a backlog, a long poll, a starving worker)
 * while some worker had room to spare.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline/detect_priv.h"
#include "pipeline/model.h"

/* Late polls waiting for the worker samples that cover their wait; past this, judged at once. */
#define PENDING_DELAYS_MAX 4096

/*
 * A late poll is a scheduling delay only if nothing we already alert on
 * explains it: a backlog ahead of it in its queue (starvation, overload), a
 * long poll holding the worker whose queue it waited in, a starving worker.
 * Then it still waits for the worker samples that cover its wait (see
 * spare_worker()).
 */
static bool delay_explained(struct detector *d, const struct at_poll *p)
{
	const struct worker_watch *w;

	if (d->config.starve_depth && p->queued_depth >= d->config.starve_depth)
		return true;
	if (d->config.long_poll_ns && p->holder_begin && p->hdr.ts > p->holder_begin &&
	    p->hdr.ts - p->holder_begin >= d->config.long_poll_ns)
		return true;
	/*
	 * Queued on the injection queue, any worker could take it; the one that
	 * did may be the one its wake notified, held meanwhile by a long poll
	 * while the others slept (nothing woke them): that hold explains the
	 * wait (seen once in 48 runs of make stress: 28.85 ms behind the noisy
	 * task's 20 ms poll on a stalled VM).
	 */
	if (p->queued_on == AT_QUEUE_INJECT && p->worker < d->nr_workers) {
		w = &d->workers[p->worker];
		return w->hold_end > p->wake_ts && w->hold_begin < p->hdr.ts;
	}
	if (p->queued_on < 0 || (uint32_t)p->queued_on >= d->nr_workers)
		return false;
	w = &d->workers[p->queued_on];
	if (w->ep) /* that worker is starving */
		return true;
	/* its latest long poll overlapped the wait */
	return w->hold_end > p->wake_ts && w->hold_begin < p->hdr.ts;
}

/* A worker's idle share over the samples around [from, to]; -1: not sampled past it yet. */
static int worker_idle_share(const struct worker_watch *w, uint64_t from, uint64_t to,
			     double *share)
{
	const struct worker_mark *a = NULL, *b = NULL;

	for (uint32_t k = 0; k < w->nr_hist; k++) {
		const struct worker_mark *m = &w->hist[k];

		if (m->ts <= from && (!a || m->ts > a->ts))
			a = m;
		if (m->ts >= to && (!b || m->ts < b->ts))
			b = m;
	}
	if (!b)
		return -1;
	if (!a) /* the wait began before the oldest sample kept: from there */
		for (uint32_t k = 0; k < w->nr_hist; k++)
			if (!a || w->hist[k].ts < a->ts)
				a = &w->hist[k];
	*share = detect__idle_between(a, b);
	return 0;
}

/*
 * Whether some worker had room to spare while the task waited: idle (asleep
 * between polls) at least half of the sampled span around the wait. A task
 * that waits while every worker is busy, running the runtime, or waiting
 * for a CPU the host does not give it, waits for lack of workers (or of
 * CPU), not for a scheduling fault. 1: yes (or unknown: nothing sampled),
 * 0: no, -1: the samples covering the wait have not come yet.
 */
static int spare_worker(const struct detector *d, uint64_t from, uint64_t to, bool final)
{
	bool sampled = false;
	double share;

	for (uint32_t i = 0; i < d->nr_workers; i++) {
		const struct worker_watch *w = &d->workers[i];

		if (!w->nr_hist)
			continue;
		sampled = true;
		if (worker_idle_share(w, from, to, &share) < 0) {
			if (!final)
				return -1;
			share = w->idle_share; /* no later sample will come */
		}
		if (share >= STARVE_IDLE_SHARE)
			return 1;
	}
	return !sampled;
}

static void sched_delay(struct detector *d, struct model *m, const struct at_poll *p)
{
	uint64_t delay = p->hdr.ts - p->wake_ts;
	struct alert a;

	if (d->sched && p->hdr.ts <= d->sched->last_ts + d->config.episode_gap_ns) {
		detect__recur(d->sched, p->hdr.ts, delay);
		return;
	}
	if (d->sched) {
		detect__end(d, d->sched, d->sched->last_ts, false);
		d->sched = NULL;
	}
	detect__alert_init(&a, ALERT_SCHED_DELAY, p->hdr.ts);
	a.begin_ts = p->wake_ts;
	a.value_ns = delay;
	a.task = p->task;
	model__task_name(m, p->task, p->name_addr, a.task_name, sizeof(a.task_name));
	a.worker = (int32_t)p->worker;
	a.tid = p->hdr.tid;
	a.queued_on = p->queued_on;
	a.queued_depth = p->queued_depth;
	a.by_probes = true; /* samples see no wake */
	d->sched = detect__begin(d, &a);
}

/*
 * Late polls whose wait no worker sample covers yet, judged in order as the
 * samples come (every 100 ms); final: the stream ended, judge with what is
 * known. Only polls that do not say how long a worker slept during their
 * wait (at_poll.spare: records from before it was measured) wait here.
 */
void sched_delay__judge_pending(struct detector *d, struct model *m, bool final)
{
	size_t i = 0;
	int spare;

	for (; i < d->nr_pending; i++) {
		const struct at_poll *p = &d->pending[i];

		spare = spare_worker(d, p->wake_ts, p->hdr.ts, final);
		if (spare < 0)
			break;
		if (spare)
			sched_delay(d, m, p);
	}
	if (!i)
		return; /* nothing judged; pending may be NULL, and NULL + 0 is undefined */
	memmove(d->pending, d->pending + i, (d->nr_pending - i) * sizeof(*d->pending));
	d->nr_pending -= i;
}

static void judge_late(struct detector *d, struct model *m, const struct at_poll *p)
{
	struct at_poll *more;

	/* what the workers did during this very wait, measured by the BPF side */
	if (p->spare & AT_SPARE_KNOWN) {
		if ((p->spare & ~AT_SPARE_KNOWN) >= 100 * STARVE_IDLE_SHARE)
			sched_delay(d, m, p);
		return;
	}
	if (d->nr_pending == d->cap_pending) {
		size_t cap = d->cap_pending ? 2 * d->cap_pending : 64;

		more = cap <= PENDING_DELAYS_MAX ? realloc(d->pending, cap * sizeof(*more)) : NULL;
		if (!more) {
			/* no room to wait: judged on what the samples say so far */
			sched_delay__judge_pending(d, m, true);
			if (spare_worker(d, p->wake_ts, p->hdr.ts, true))
				sched_delay(d, m, p);
			return;
		}
		d->pending = more;
		d->cap_pending = cap;
	}
	d->pending[d->nr_pending++] = *p;
	sched_delay__judge_pending(d, m, false);
}

void sched_delay__on_poll(struct detector *d, struct model *m, const struct at_poll *p)
{
	if (p->wake_ts && p->hdr.ts > p->wake_ts &&
	    p->hdr.ts - p->wake_ts >= d->config.sched_delay_ns && !delay_explained(d, p))
		judge_late(d, m, p);
}
