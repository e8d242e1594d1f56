// SPDX-License-Identifier: MIT
/*
 * The detectors' common ground: episodes (an alert's BEGIN, kept up to date
 * until its END), the alert log, the workers watched, and each event handed
 * to the detectors that judge it (one file each: detect_long_poll.c,
 * detect_sched_delay.c, detect_starvation.c, detect_thrash.c,
 * detect_lost_waker.c).
 */
#include "pipeline/detect.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline/detect_priv.h"
#include "pipeline/model.h"

#define ALERT_LOG_MAX 4096
/* Task samples come every second; a thrash watch not refreshed is stale. */
#define TASK_WATCH_STALE_NS (3 * 1000 * 1000 * 1000ull)

void detector__init(struct detector *d, const struct detect_config *config, alert_fn emit,
		    void *ctx)
{
	memset(d, 0, sizeof(*d));
	d->config = *config;
	d->emit = emit;
	d->ctx = ctx;
	u64map__init(&d->long_polls);
	u64map__init(&d->thrash);
	u64map__init(&d->lost);
}

/* The thrash watches, and the episode each may hold. */
static void free_watches(struct u64map *m)
{
	uint64_t key;
	void *val;

	for (size_t i = 0; u64map__next(m, &i, &key, &val);)
		free(((struct task_watch *)val)->ep);
	u64map__clear_free(m);
}

void detector__free(struct detector *d)
{
	u64map__clear_free(&d->long_polls);
	free_watches(&d->thrash);
	u64map__clear_free(&d->lost);
	for (uint32_t i = 0; i < d->nr_workers; i++)
		free(d->workers[i].ep);
	free(d->workers);
	free(d->sched);
	free(d->pending);
	free(d->log);
	memset(d, 0, sizeof(*d));
}

const char *poll_cause_str(enum poll_cause c)
{
	switch (c) {
	case CAUSE_CPU:
		return "cpu-bound";
	case CAUSE_BLOCKED:
		return "blocked";
	case CAUSE_PREEMPTED:
		return "preempted";
	}
	return "unknown";
}

const char *alert_kind_str(enum alert_kind k)
{
	switch (k) {
	case ALERT_LONG_POLL:
		return "long-poll";
	case ALERT_SCHED_DELAY:
		return "scheduling-delay";
	case ALERT_STARVATION:
		return "starvation";
	case ALERT_THRASH:
		return "waker-thrash";
	case ALERT_LOST_WAKER:
		return "lost-waker";
	case ALERT_KIND_MAX:
		break;
	}
	return "unknown";
}

const char *thrash_reason_str(enum thrash_reason r)
{
	return r == THRASH_WAKE_STORM ? "wake storm" : "self-wake loop";
}

uint64_t poll_cpu_ns(const struct at_poll *p)
{
	return at_poll_cpu_known(p) ? p->cpu_ns : p->oncpu_ns;
}

enum poll_cause poll_cause(const struct at_poll *p, uint64_t long_ns)
{
	uint64_t cpu = poll_cpu_ns(p);

	/*
	 * What the task did comes first: a poll that computed (or slept) for
	 * long_ns on its own was long by its own doing, however much it was
	 * also preempted on a busy machine.
	 */
	if (long_ns && (cpu >= long_ns || p->blocked_ns >= long_ns))
		return cpu >= p->blocked_ns ? CAUSE_CPU : CAUSE_BLOCKED;
	if (cpu >= p->blocked_ns && cpu >= p->runnable_ns)
		return CAUSE_CPU;
	return p->blocked_ns >= p->runnable_ns ? CAUSE_BLOCKED : CAUSE_PREEMPTED;
}

static void publish(struct detector *d, const struct alert *a)
{
	if (d->nr_log < ALERT_LOG_MAX) {
		if (!d->log)
			d->log = calloc(ALERT_LOG_MAX, sizeof(*d->log));
		if (d->log)
			d->log[d->nr_log++] = *a;
	} else {
		d->dropped_log++;
	}
	if (d->emit)
		d->emit(d->ctx, a);
}

/* Opens an episode from a filled-in BEGIN alert, and raises it. */
struct episode *detect__begin(struct detector *d, struct alert *a)
{
	struct episode *ep = calloc(1, sizeof(*ep));

	a->state = ALERT_BEGIN;
	a->episode = ++d->next_episode;
	if (!a->count)
		a->count = 1;
	if (!a->worst_ns)
		a->worst_ns = a->value_ns;
	/* in sample mode, every alert is the samples' but those of its escalations' probes */
	a->sampled_ns = a->by_probes ? 0 : d->sample_period_ns;
	d->begun[a->kind]++;
	publish(d, a);
	if (!ep)
		return NULL;
	ep->a = *a;
	ep->last_ts = a->ts;
	return ep;
}

/* Closes an episode: raises its END and frees it. */
void detect__end(struct detector *d, struct episode *ep, uint64_t ts, bool ongoing)
{
	if (!ep)
		return;
	ep->a.state = ALERT_END;
	ep->a.ts = ts;
	ep->a.ongoing = ongoing;
	d->ended[ep->a.kind]++;
	publish(d, &ep->a);
	free(ep);
}

void detect__recur(struct episode *ep, uint64_t ts, uint64_t value_ns)
{
	ep->a.count++;
	ep->last_ts = ts;
	if (value_ns > ep->a.worst_ns)
		ep->a.worst_ns = value_ns;
}

void detect__alert_init(struct alert *a, enum alert_kind kind, uint64_t ts)
{
	memset(a, 0, sizeof(*a));
	a->kind = kind;
	a->ts = ts;
	a->begin_ts = ts;
	a->worker = -1;
	a->idle_worker = -1;
	a->queued_on = AT_QUEUE_NONE;
}

struct worker_watch *detect__watch_worker(struct detector *d, uint32_t worker)
{
	if (worker >= AT_MAX_WORKERS)
		return NULL;
	if (worker >= d->nr_workers) {
		struct worker_watch *w = realloc(d->workers, (worker + 1) * sizeof(*w));

		if (!w)
			return NULL;
		memset(w + d->nr_workers, 0, (worker + 1 - d->nr_workers) * sizeof(*w));
		d->workers = w;
		d->nr_workers = worker + 1;
	}
	return &d->workers[worker];
}

/* The share of [a, b] a worker spent idle. */
double detect__idle_between(const struct worker_mark *a, const struct worker_mark *b)
{
	double share;

	if (b->ts <= a->ts || b->idle_ns <= a->idle_ns)
		return 0;
	share = (double)(b->idle_ns - a->idle_ns) / (double)(b->ts - a->ts);
	return share > 1 ? 1 : share;
}

/* A poll, to each detector that judges polls: lost wakers first, a late poll last. */
static void on_poll(struct detector *d, struct model *m, const struct at_poll *p)
{
	if (d->config.lost_waker_ns && ((p->flags & AT_POLL_UNWAKEABLE) || d->lost.len))
		lost_waker__on_poll(d, m, p);
	if (d->config.long_poll_ns)
		long_poll__on_poll(d, m, p);
	if (d->config.sched_delay_ns)
		sched_delay__on_poll(d, m, p);
}

void detector__event(struct detector *d, struct model *m, const struct at_hdr *ev)
{
	switch (ev->kind) {
	case AT_EV_POLL:
		on_poll(d, m, (const struct at_poll *)ev);
		break;
	case AT_EV_WORKER_SAMPLE:
		starvation__on_sample(d, m, (const struct at_worker_sample *)ev);
		break;
	case AT_EV_TASK_SAMPLE:
		if (d->config.thrash_rate)
			thrash__on_sample(d, m, (const struct at_task_sample *)ev);
		if (d->config.lost_waker_ns)
			lost_waker__on_sample(d, m, (const struct at_task_sample *)ev);
		break;
	}
}

static uint64_t episode_last(const void *v)
{
	return ((const struct episode *)v)->last_ts;
}

static void episode_over(struct detector *d, void *v)
{
	struct episode *ep = v;

	detect__end(d, ep, ep->last_ts, false);
}

static uint64_t watch_last(const void *v)
{
	return ((const struct task_watch *)v)->ts;
}

static void watch_over(struct detector *d, void *v)
{
	struct task_watch *tw = v;

	detect__end(d, tw->ep, tw->ts, false);
	free(tw);
}

/* Takes out of map, and lets over() end, every entry last seen before cutoff. */
static void sweep(struct detector *d, struct u64map *map, uint64_t cutoff,
		  uint64_t (*last)(const void *), void (*over)(struct detector *, void *))
{
	uint64_t key, keys[64];
	size_t n;
	void *val;

	do { /* deleting while iterating is not allowed: collect, then delete */
		n = 0;
		for (size_t i = 0; n < 64 && u64map__next(map, &i, &key, &val);)
			if (last(val) < cutoff)
				keys[n++] = key;
		for (size_t i = 0; i < n; i++)
			over(d, u64map__del(map, keys[i]));
	} while (n == 64);
}

void detector__tick(struct detector *d, struct model *m, uint64_t now)
{
	uint64_t cutoff = now > d->config.episode_gap_ns ? now - d->config.episode_gap_ns : 0;
	uint64_t stale = now > TASK_WATCH_STALE_NS ? now - TASK_WATCH_STALE_NS : 0;

	(void)m;
	sweep(d, &d->long_polls, cutoff, episode_last, episode_over);
	if (d->sched && d->sched->last_ts < cutoff) {
		detect__end(d, d->sched, d->sched->last_ts, false);
		d->sched = NULL;
	}
	/* Tasks that stopped changing are not sampled any more: let them go. */
	sweep(d, &d->thrash, stale, watch_last, watch_over);
}

void detector__finish(struct detector *d, struct model *m, uint64_t now)
{
	uint64_t key;
	void *val;

	sched_delay__judge_pending(d, m, true);
	for (size_t i = 0; u64map__next(&d->long_polls, &i, &key, &val);) {
		struct episode *ep = val;

		detect__end(d, ep, ep->last_ts, true);
	}
	u64map__clear(&d->long_polls);
	for (size_t i = 0; u64map__next(&d->lost, &i, &key, &val);)
		detect__end(d, val, now, true);
	u64map__clear(&d->lost);
	for (size_t i = 0; u64map__next(&d->thrash, &i, &key, &val);) {
		struct task_watch *tw = val;

		detect__end(d, tw->ep, tw->ts, true);
		free(tw);
	}
	u64map__clear(&d->thrash);
	if (d->sched)
		detect__end(d, d->sched, d->sched->last_ts, true);
	d->sched = NULL;
	for (uint32_t i = 0; i < d->nr_workers; i++) {
		detect__end(d, d->workers[i].ep, now, true);
		d->workers[i].ep = NULL;
	}
}
