// SPDX-License-Identifier: MIT
/*
 * Long poll: a poll that ran (on the CPU or asleep) past --long-poll; the
 * tasks that waited behind it in its worker's queue are its victims.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline/detect_priv.h"
#include "pipeline/model.h"

/*
 * What the task itself spent of a poll: computing, or asleep in a call it
 * made. Time runnable without a CPU is the host's doing (other processes,
 * a CPU quota), not the task's: it makes no long poll of an innocent task,
 * however long it held the worker; nor does time on the CPU that the
 * kernel did not charge the thread for (poll_cpu_ns()).
 */
uint64_t detect__poll_own_ns(const struct at_poll *p)
{
	/*
	 * A sampled run of one or more polls (AT_POLL_RUNS): a sleep lies in
	 * one poll, as a thread asleep ends none; its time on the CPU may be
	 * several polls'. What is proven of one poll is its longest sleep, at
	 * least the average of the run's.
	 */
	if (p->flags & AT_POLL_RUNS)
		return p->nr_blocked ? p->blocked_ns / p->nr_blocked : 0;
	return poll_cpu_ns(p) + p->blocked_ns;
}

/*
 * How long poll p must be to be a long poll: the threshold, or less for a
 * poll its runtime preempted for running too long (Go's sysmon, at 10 ms):
 * the runtime judged it a hog, and its preemption cut it short of any
 * threshold above that. A sampled one was seen up to a sample period short
 * of its length (which the BPF side allowed when it flagged it preempted).
 */
uint64_t detect__long_poll_limit(const struct detector *d, const struct at_poll *p)
{
	uint64_t limit = d->config.long_poll_ns, preempted = AT_PREEMPTED_LONG_NS;

	/* sampled, seen a period short of it at most (and the runtime's judgment said it ran it) */
	if ((p->flags & AT_POLL_SAMPLED) && d->sample_period_ns < preempted)
		preempted -= d->sample_period_ns;
	if (limit && (p->flags & AT_POLL_PREEMPTED) && preempted < limit)
		limit = preempted;
	return limit;
}

/* The worker was held that long, whatever the cause: it explains a wait in its queue. */
static void note_hold(struct detector *d, const struct at_poll *p)
{
	struct worker_watch *w = detect__watch_worker(d, p->worker);

	if (w) {
		w->hold_begin = p->hdr.ts;
		w->hold_end = p->hdr.ts + p->duration_ns;
		w->hold_task = detect__poll_own_ns(p) >= detect__long_poll_limit(d, p) ? p->task : 0;
	}
}

/* One more task waited behind a long poll of episode ep: kept if among the longest. */
static void add_victim(const struct detector *d, struct episode *ep, struct model *m,
		       const struct at_poll *p, uint64_t waited, bool woken_by_holder)
{
	struct alert *a = &ep->a;
	uint32_t i, n = a->nr_victims;

	a->waits_behind++;
	for (i = 0; i < n; i++) /* the same task again: its longest wait */
		if (a->victims[i].task == p->task) {
			if (waited > a->victims[i].waited_ns) {
				a->victims[i].waited_ns = waited;
				a->victims[i].waited_at =
					model__idle_place(m, model__task(m, p->task), p->hdr.ts);
			}
			goto sort;
		}
	if (n < ALERT_VICTIMS) {
		i = a->nr_victims++;
	} else {
		i = n - 1;
		if (waited <= a->victims[i].waited_ns)
			return;
	}
	a->victims[i].task = p->task;
	a->victims[i].waited_ns = waited;
	a->victims[i].woken_by_holder = woken_by_holder;
	/*
	 * Measured in BPF for a poll that waited past --sched-delay
	 * (at_poll.spare), over the workers met; the held one was busy, so it is
	 * the others': none met (only the held worker has polled), unknown.
	 */
	a->victims[i].idle_pct = (p->spare & AT_SPARE_KNOWN) && d->nr_workers > 1
					 ? (int8_t)(p->spare & ~AT_SPARE_KNOWN)
					 : -1;
	model__task_name(m, p->task, p->name_addr, a->victims[i].name,
			 sizeof(a->victims[i].name));
	/* the idle span this poll ends: where the task waited, when a read placed it */
	a->victims[i].waited_at = model__idle_place(m, model__task(m, p->task), p->hdr.ts);
sort:
	for (; i > 0 && a->victims[i].waited_ns > a->victims[i - 1].waited_ns; i--) {
		struct alert_victim t = a->victims[i];

		a->victims[i] = a->victims[i - 1];
		a->victims[i - 1] = t;
	}
}

/*
 * A poll that waited in the queue of a worker a long poll of an alert held:
 * a victim of it (the part of its wait the hold covered).
 */
static void note_victim(struct detector *d, struct model *m, const struct at_poll *p)
{
	const struct worker_watch *w;
	struct episode *ep;
	uint64_t from, to;

	if (p->queued_on < 0 || !p->wake_ts || (uint32_t)p->queued_on >= d->nr_workers)
		return;
	w = &d->workers[p->queued_on];
	if (!w->hold_task || w->hold_task == p->task || w->hold_end <= p->wake_ts ||
	    w->hold_begin >= p->hdr.ts)
		return;
	ep = u64map__get(&d->long_polls, w->hold_task);
	if (!ep)
		return;
	from = p->wake_ts > w->hold_begin ? p->wake_ts : w->hold_begin;
	to = p->hdr.ts < w->hold_end ? p->hdr.ts : w->hold_end;
	/*
	 * Woken while the worker was in the long poll, onto that worker's own
	 * queue: only its thread pushes there, so the long poll woke it.
	 */
	if (to > from)
		add_victim(d, ep, m, p, to - from,
			   p->wake_ts >= w->hold_begin && p->wake_ts < w->hold_end);
}

/* A task of the runtime's own (Go's GC workers hold their Ps by design): never alerted on. */
static bool runtime_task(const struct detector *d, const char *name)
{
	return d->runtime_tasks && !strncmp(name, d->runtime_tasks, strlen(d->runtime_tasks));
}

static void long_poll(struct detector *d, struct model *m, const struct at_poll *p)
{
	uint64_t end_ts = p->hdr.ts + p->duration_ns;
	struct episode *ep = u64map__get(&d->long_polls, p->task);
	struct alert a;

	if (ep && p->hdr.ts <= ep->last_ts + d->config.episode_gap_ns) {
		detect__recur(ep, end_ts, p->duration_ns);
		return;
	}
	if (ep) /* went quiet before the tick noticed */
		detect__end(d, u64map__del(&d->long_polls, p->task), ep->last_ts, false);
	detect__alert_init(&a, ALERT_LONG_POLL, end_ts);
	model__task_name(m, p->task, p->name_addr, a.task_name, sizeof(a.task_name));
	if (runtime_task(d, a.task_name))
		return;
	a.begin_ts = p->hdr.ts;
	/* of a run of several polls, the one proven (its longest sleep, at least) */
	a.value_ns = p->flags & AT_POLL_RUNS ? detect__poll_own_ns(p) : p->duration_ns;
	a.task = p->task;
	a.worker = (int32_t)p->worker;
	a.tid = p->hdr.tid;
	a.cause = poll_cause(p, detect__long_poll_limit(d, p));
	a.lifo_slot = d->lifo_slot;
	a.oncpu_ns = p->oncpu_ns;
	a.blocked_ns = p->blocked_ns;
	a.runnable_ns = p->runnable_ns;
	a.runtime_preempted = p->flags & AT_POLL_PREEMPTED;
	a.by_probes = !(p->flags & AT_POLL_SAMPLED);
	a.stack = model__poll_stack(m, p, a.cause == CAUSE_BLOCKED, &a.stack_blocked);
	ep = detect__begin(d, &a);
	if (ep && u64map__set(&d->long_polls, p->task, ep))
		free(ep);
}

/*
 * A run of several polls (AT_POLL_RUNS) that held its worker on the CPU
 * past the threshold: a long poll, or a loop of short ones (yield_now, a
 * task woken again at once), which samples cannot tell apart. Never an
 * alert; the session may look closer (d->suspect).
 */
static void suspect(struct detector *d, struct model *m, const struct at_poll *p, uint64_t limit)
{
	char name[AT_TASK_NAME_LEN];

	if (!d->suspect || poll_cpu_ns(p) + p->blocked_ns < limit)
		return;
	model__task_name(m, p->task, p->name_addr, name, sizeof(name));
	if (runtime_task(d, name))
		return;
	d->suspect(d->suspect_ctx, p, name);
}

void long_poll__on_poll(struct detector *d, struct model *m, const struct at_poll *p)
{
	uint64_t limit = detect__long_poll_limit(d, p);

	note_victim(d, m, p);
	/*
	 * Its worker was taken from it before it ended (a Go P retaken in a
	 * system call, and others ran on it): it held no worker throughout, and
	 * kept no one waiting behind it
	 */
	if (p->flags & AT_POLL_WORKER_LOST)
		return;
	if (p->duration_ns >= limit) {
		note_hold(d, p);
		if (detect__poll_own_ns(p) >= limit)
			long_poll(d, m, p);
		else if (p->flags & AT_POLL_RUNS)
			suspect(d, m, p, limit);
	}
}
