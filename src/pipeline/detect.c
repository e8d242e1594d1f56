// SPDX-License-Identifier: MIT
#include "pipeline/detect.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline/model.h"
#include "stacks/unwind.h"

#define ALERT_LOG_MAX 4096
/* Task samples come every second; a thrash watch not refreshed is stale. */
#define TASK_WATCH_STALE_NS (3 * 1000 * 1000 * 1000ull)
#define THRASH_SELF_SHARE 0.9	/* of polls answering the task's own wake */
#define THRASH_STORM_FACTOR 10	/* wakes per poll */
#define STARVE_IDLE_SHARE 0.5	/* another worker idle at least this much */
#define THRASH_MIN_SPAN_NS (500 * 1000 * 1000ull)
/* Worker samples kept per worker (100 ms apart): the span a late poll's wait is judged over. */
#define WORKER_HISTORY 16
/* Late polls waiting for the worker samples that cover their wait; past this, judged at once. */
#define PENDING_DELAYS_MAX 4096

/* An open episode: the BEGIN alert, kept up to date until the END. */
struct episode {
	struct alert a;
	uint64_t last_ts;	/* latest occurrence */
	uint64_t polls;		/* an unwakeable task: its polls when first sampled (0: not yet) */
};

/* What a task's previous sample said, to turn counters into rates. */
struct task_watch {
	uint64_t ts, polls, wakes, self_wakes;
	struct episode *ep;	/* open thrash episode */
};

/* A worker's sample: when, and its idle time by then (see sample_idle_ns()). */
struct worker_mark {
	uint64_t ts, idle_ns;
};

struct worker_watch {
	/* the previous sample and the interval it closed */
	uint64_t ts, idle_ns, area;
	struct worker_mark hist[WORKER_HISTORY];	/* the latest samples, a ring */
	uint32_t nr_hist, hist_next;
	double depth_avg, idle_share;
	bool sampled;
	uint64_t starved_since;	/* 0: not starved */
	struct episode *ep;
	/* the latest long poll on this worker, and its task if it is an alert's */
	uint64_t hold_begin, hold_end, hold_task;
};

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
static struct episode *begin(struct detector *d, struct alert *a)
{
	struct episode *ep = calloc(1, sizeof(*ep));

	a->state = ALERT_BEGIN;
	a->episode = ++d->next_episode;
	if (!a->count)
		a->count = 1;
	if (!a->worst_ns)
		a->worst_ns = a->value_ns;
	d->begun[a->kind]++;
	publish(d, a);
	if (!ep)
		return NULL;
	ep->a = *a;
	ep->last_ts = a->ts;
	return ep;
}

/* Closes an episode: raises its END and frees it. */
static void end(struct detector *d, struct episode *ep, uint64_t ts, bool ongoing)
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

static void recur(struct episode *ep, uint64_t ts, uint64_t value_ns)
{
	ep->a.count++;
	ep->last_ts = ts;
	if (value_ns > ep->a.worst_ns)
		ep->a.worst_ns = value_ns;
}

static void alert_init(struct alert *a, enum alert_kind kind, uint64_t ts)
{
	memset(a, 0, sizeof(*a));
	a->kind = kind;
	a->ts = ts;
	a->begin_ts = ts;
	a->worker = -1;
	a->idle_worker = -1;
	a->queued_on = AT_QUEUE_NONE;
}

static struct worker_watch *watch_worker(struct detector *d, uint32_t worker)
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

/*
 * What the task itself spent of a poll: computing, or asleep in a call it
 * made. Time runnable without a CPU is the host's doing (other processes,
 * a CPU quota), not the task's: it makes no long poll of an innocent task,
 * however long it held the worker; nor does time on the CPU that the
 * kernel did not charge the thread for (poll_cpu_ns()).
 */
static uint64_t poll_own_ns(const struct at_poll *p)
{
	return poll_cpu_ns(p) + p->blocked_ns;
}

/*
 * How long poll p must be to be a long poll: the threshold, or less for a
 * poll its runtime preempted for running too long (Go's sysmon, at 10 ms):
 * the runtime judged it a hog, and its preemption cut it short of any
 * threshold above that.
 */
static uint64_t long_poll_limit(const struct detector *d, const struct at_poll *p)
{
	uint64_t limit = d->config.long_poll_ns;

	if (limit && (p->flags & AT_POLL_PREEMPTED) && AT_PREEMPTED_LONG_NS < limit)
		limit = AT_PREEMPTED_LONG_NS;
	return limit;
}

/* The worker was held that long, whatever the cause: it explains a wait in its queue. */
static void note_hold(struct detector *d, const struct at_poll *p)
{
	struct worker_watch *w = watch_worker(d, p->worker);

	if (w) {
		w->hold_begin = p->hdr.ts;
		w->hold_end = p->hdr.ts + p->duration_ns;
		w->hold_task = poll_own_ns(p) >= long_poll_limit(d, p) ? p->task : 0;
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
			if (waited > a->victims[i].waited_ns)
				a->victims[i].waited_ns = waited;
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

static void long_poll(struct detector *d, struct model *m, const struct at_poll *p)
{
	uint64_t end_ts = p->hdr.ts + p->duration_ns;
	struct episode *ep = u64map__get(&d->long_polls, p->task);
	struct alert a;

	if (ep && p->hdr.ts <= ep->last_ts + d->config.episode_gap_ns) {
		recur(ep, end_ts, p->duration_ns);
		return;
	}
	if (ep) /* went quiet before the tick noticed */
		end(d, u64map__del(&d->long_polls, p->task), ep->last_ts, false);
	alert_init(&a, ALERT_LONG_POLL, end_ts);
	model__task_name(m, p->task, p->name_addr, a.task_name, sizeof(a.task_name));
	if (d->runtime_tasks && !strncmp(a.task_name, d->runtime_tasks, strlen(d->runtime_tasks)))
		return; /* the runtime's own (a GC worker holds its P by design) */
	a.begin_ts = p->hdr.ts;
	a.value_ns = p->duration_ns;
	a.task = p->task;
	a.worker = (int32_t)p->worker;
	a.tid = p->hdr.tid;
	a.cause = poll_cause(p, long_poll_limit(d, p));
	a.lifo_slot = d->lifo_slot;
	a.oncpu_ns = p->oncpu_ns;
	a.blocked_ns = p->blocked_ns;
	a.runnable_ns = p->runnable_ns;
	a.runtime_preempted = p->flags & AT_POLL_PREEMPTED;
	a.stack = model__poll_stack(m, p, a.cause == CAUSE_BLOCKED, &a.stack_blocked);
	ep = begin(d, &a);
	if (ep && u64map__set(&d->long_polls, p->task, ep))
		free(ep);
}

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
	if (p->queued_on < 0 || (uint32_t)p->queued_on >= d->nr_workers)
		return false;
	w = &d->workers[p->queued_on];
	if (w->ep) /* that worker is starving */
		return true;
	/* its latest long poll overlapped the wait */
	return w->hold_end > p->wake_ts && w->hold_begin < p->hdr.ts;
}

/* The share of [a, b] a worker spent idle. */
static double idle_between(const struct worker_mark *a, const struct worker_mark *b)
{
	double share;

	if (b->ts <= a->ts || b->idle_ns <= a->idle_ns)
		return 0;
	share = (double)(b->idle_ns - a->idle_ns) / (double)(b->ts - a->ts);
	return share > 1 ? 1 : share;
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
	*share = idle_between(a, b);
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
		recur(d->sched, p->hdr.ts, delay);
		return;
	}
	if (d->sched) {
		end(d, d->sched, d->sched->last_ts, false);
		d->sched = NULL;
	}
	alert_init(&a, ALERT_SCHED_DELAY, p->hdr.ts);
	a.begin_ts = p->wake_ts;
	a.value_ns = delay;
	a.task = p->task;
	model__task_name(m, p->task, p->name_addr, a.task_name, sizeof(a.task_name));
	a.worker = (int32_t)p->worker;
	a.tid = p->hdr.tid;
	a.queued_on = p->queued_on;
	a.queued_depth = p->queued_depth;
	d->sched = begin(d, &a);
}

/*
 * Late polls whose wait no worker sample covers yet, judged in order as the
 * samples come (every 100 ms); final: the stream ended, judge with what is
 * known. Only polls that do not say how long a worker slept during their
 * wait (at_poll.spare: records from before it was measured) wait here.
 */
static void judge_pending(struct detector *d, struct model *m, bool final)
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
			judge_pending(d, m, true);
			if (spare_worker(d, p->wake_ts, p->hdr.ts, true))
				sched_delay(d, m, p);
			return;
		}
		d->pending = more;
		d->cap_pending = cap;
	}
	d->pending[d->nr_pending++] = *p;
	judge_pending(d, m, false);
}

/*
 * A poll that returned Pending with nothing holding the task's waker: it is
 * lost now, not after --lost-waker of silence. A later poll of the task
 * (the runtime cancelled it) ends the episode.
 */
static void unwakeable(struct detector *d, struct model *m, const struct at_poll *p)
{
	struct episode *ep = u64map__get(&d->lost, p->task);
	uint64_t at = p->hdr.ts + p->duration_ns;
	struct alert a;

	if (ep) {
		/* the poll that left it lost, or an older one, late */
		if (ep->a.begin_ts == at || p->hdr.ts < ep->a.begin_ts)
			return;
		/* polled again: something woke it after all */
		end(d, u64map__del(&d->lost, p->task), p->hdr.ts, false);
	}
	if (p->ready || !(p->flags & AT_POLL_UNWAKEABLE))
		return;
	alert_init(&a, ALERT_LOST_WAKER, at);
	a.begin_ts = at;
	a.task = p->task;
	a.unwakeable = true;
	a.worker = (int32_t)p->worker;
	a.tid = p->hdr.tid;
	model__task_name(m, p->task, p->name_addr, a.task_name, sizeof(a.task_name));
	ep = begin(d, &a);
	if (ep && u64map__set(&d->lost, p->task, ep))
		free(ep);
}

static void on_poll(struct detector *d, struct model *m, const struct at_poll *p)
{
	if (d->config.lost_waker_ns && ((p->flags & AT_POLL_UNWAKEABLE) || d->lost.len))
		unwakeable(d, m, p);
	if (d->config.long_poll_ns)
		note_victim(d, m, p);
	if (d->config.long_poll_ns && p->duration_ns >= long_poll_limit(d, p)) {
		note_hold(d, p);
		if (poll_own_ns(p) >= long_poll_limit(d, p))
			long_poll(d, m, p);
	}
	if (d->config.sched_delay_ns && p->wake_ts && p->hdr.ts > p->wake_ts &&
	    p->hdr.ts - p->wake_ts >= d->config.sched_delay_ns && !delay_explained(d, p))
		judge_late(d, m, p);
}

/* The worker with the most idle time in its latest interval, other than self. */
static int32_t idlest_other(const struct detector *d, uint32_t self)
{
	int32_t best = -1;

	for (uint32_t i = 0; i < d->nr_workers; i++) {
		const struct worker_watch *w = &d->workers[i];

		if (i == self || !w->sampled)
			continue;
		if (best < 0 || w->idle_share > d->workers[best].idle_share)
			best = (int32_t)i;
	}
	return best;
}

/*
 * Starvation: a worker's queue stays deep (its average depth over each
 * sampling interval) while another worker is idle, for longer than
 * starve_ns. Stealing should have evened them out.
 */
static void remember(struct worker_watch *w, uint64_t ts, uint64_t idle_ns)
{
	w->hist[w->hist_next] = (struct worker_mark){ .ts = ts, .idle_ns = idle_ns };
	w->hist_next = (w->hist_next + 1) % WORKER_HISTORY;
	if (w->nr_hist < WORKER_HISTORY)
		w->nr_hist++;
}

/*
 * A worker's idle time up to its sample: asleep between polls. A record from
 * before that was sampled (asleep_ns appended since) only knows its time
 * polling: the rest counts as idle, as it then did.
 */
static uint64_t sample_idle_ns(const struct at_worker_sample *s)
{
	if (s->hdr.size >= offsetof(struct at_worker_sample, asleep_ns) + sizeof(s->asleep_ns))
		return s->asleep_ns;
	return s->hdr.ts > s->busy_ns ? s->hdr.ts - s->busy_ns : 0;
}

static void on_worker_sample(struct detector *d, struct model *m,
			     const struct at_worker_sample *s)
{
	struct worker_watch *w = watch_worker(d, s->worker);
	uint64_t idle_ns = sample_idle_ns(s), dt;
	struct worker_mark last;
	int32_t idle;
	bool starved;
	struct alert a;

	if (!w)
		return;
	remember(w, s->hdr.ts, idle_ns);
	judge_pending(d, m, false);
	if (!w->ts || s->hdr.ts <= w->ts) {
		w->ts = s->hdr.ts;
		w->idle_ns = idle_ns;
		w->area = s->depth_area;
		return;
	}
	dt = s->hdr.ts - w->ts;
	/*
	 * The BPF side updates a queue's area and timestamp without a lock: a
	 * sample can land between the two and see less than the last one did.
	 */
	w->depth_avg = s->depth_area > w->area ? (double)(s->depth_area - w->area) / (double)dt : 0;
	last = (struct worker_mark){ .ts = w->ts, .idle_ns = w->idle_ns };
	w->idle_share = idle_between(&last, &(struct worker_mark){ s->hdr.ts, idle_ns });
	w->sampled = true;
	w->ts = s->hdr.ts;
	if (idle_ns > w->idle_ns)
		w->idle_ns = idle_ns;
	if (s->depth_area > w->area)
		w->area = s->depth_area;
	if (!d->config.starve_depth)
		return;

	idle = idlest_other(d, s->worker);
	starved = w->depth_avg >= d->config.starve_depth && idle >= 0 &&
		  d->workers[idle].idle_share >= STARVE_IDLE_SHARE;
	if (!starved) {
		w->starved_since = 0;
		end(d, w->ep, s->hdr.ts, false);
		w->ep = NULL;
		return;
	}
	if (!w->starved_since)
		w->starved_since = s->hdr.ts - dt;
	if (w->ep) {
		recur(w->ep, s->hdr.ts, s->hdr.ts - w->starved_since);
		if (w->depth_avg > w->ep->a.depth_avg)
			w->ep->a.depth_avg = w->depth_avg;
		return;
	}
	if (s->hdr.ts - w->starved_since < d->config.starve_ns)
		return;
	alert_init(&a, ALERT_STARVATION, s->hdr.ts);
	a.begin_ts = w->starved_since;
	a.value_ns = s->hdr.ts - w->starved_since;
	a.worker = (int32_t)s->worker;
	a.tid = s->hdr.tid;
	a.depth_avg = w->depth_avg;
	a.idle_worker = idle;
	a.idle_pct = 100.0 * d->workers[idle].idle_share;
	w->ep = begin(d, &a);
}

/* Waker thrash, from the change in a task's counters since its last sample. */
static void thrash(struct detector *d, struct model *m, const struct at_task_sample *s)
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
			end(d, tw->ep, s->hdr.ts, false);
			tw->ep = NULL;
		} else if (reason && tw->ep) {
			recur(tw->ep, s->hdr.ts, 0);
		} else if (reason) {
			alert_init(&a, ALERT_THRASH, s->hdr.ts);
			a.begin_ts = tw->ts;
			a.task = s->task;
			model__task_name(m, s->task, s->name_addr, a.task_name,
					 sizeof(a.task_name));
			a.reason = reason;
			a.polls_per_s = polls;
			a.wakes_per_s = wakes;
			a.self_wakes_per_s = self;
			tw->ep = begin(d, &a);
		}
	}
	tw->ts = s->hdr.ts;
	tw->polls = s->polls;
	tw->wakes = s->wakes;
	tw->self_wakes = s->self_wakes;
	if (s->done) {
		end(d, tw->ep, s->hdr.ts, false);
		free(u64map__del(&d->thrash, s->task));
	}
}

/* Lost waker: returned Pending, and nothing woke it for lost_waker_ns. */
static void lost_waker(struct detector *d, struct model *m, const struct at_task_sample *s)
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
			end(d, u64map__del(&d->lost, s->task), s->hdr.ts, false);
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
	if (ep && (!lost || ep->a.begin_ts != s->idle_since)) {
		/* woken (or done) at last */
		end(d, u64map__del(&d->lost, s->task), s->hdr.ts, false);
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
	alert_init(&a, ALERT_LOST_WAKER, s->hdr.ts);
	a.begin_ts = s->idle_since;
	a.value_ns = s->hdr.ts - s->idle_since;
	a.task = s->task;
	model__task_name(m, s->task, s->name_addr, a.task_name, sizeof(a.task_name));
	ep = begin(d, &a);
	if (ep && u64map__set(&d->lost, s->task, ep))
		free(ep);
}

void detector__event(struct detector *d, struct model *m, const struct at_hdr *ev)
{
	switch (ev->kind) {
	case AT_EV_POLL:
		on_poll(d, m, (const struct at_poll *)ev);
		break;
	case AT_EV_WORKER_SAMPLE:
		on_worker_sample(d, m, (const struct at_worker_sample *)ev);
		break;
	case AT_EV_TASK_SAMPLE:
		if (d->config.thrash_rate)
			thrash(d, m, (const struct at_task_sample *)ev);
		if (d->config.lost_waker_ns)
			lost_waker(d, m, (const struct at_task_sample *)ev);
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

	end(d, ep, ep->last_ts, false);
}

static uint64_t watch_last(const void *v)
{
	return ((const struct task_watch *)v)->ts;
}

static void watch_over(struct detector *d, void *v)
{
	struct task_watch *tw = v;

	end(d, tw->ep, tw->ts, false);
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
		end(d, d->sched, d->sched->last_ts, false);
		d->sched = NULL;
	}
	/* Tasks that stopped changing are not sampled any more: let them go. */
	sweep(d, &d->thrash, stale, watch_last, watch_over);
}

void detector__finish(struct detector *d, struct model *m, uint64_t now)
{
	uint64_t key;
	void *val;

	judge_pending(d, m, true);
	for (size_t i = 0; u64map__next(&d->long_polls, &i, &key, &val);) {
		struct episode *ep = val;

		end(d, ep, ep->last_ts, true);
	}
	u64map__clear(&d->long_polls);
	for (size_t i = 0; u64map__next(&d->lost, &i, &key, &val);)
		end(d, val, now, true);
	u64map__clear(&d->lost);
	for (size_t i = 0; u64map__next(&d->thrash, &i, &key, &val);) {
		struct task_watch *tw = val;

		end(d, tw->ep, tw->ts, true);
		free(tw);
	}
	u64map__clear(&d->thrash);
	if (d->sched)
		end(d, d->sched, d->sched->last_ts, true);
	d->sched = NULL;
	for (uint32_t i = 0; i < d->nr_workers; i++) {
		end(d, d->workers[i].ep, now, true);
		d->workers[i].ep = NULL;
	}
}
