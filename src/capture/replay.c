// SPDX-License-Identifier: MIT
#include "capture/replay.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


/* Entries of the rebuilt snapshot: bounds memory whatever the capture claims. */
#define REPLAY_MAX_ENTRIES (1u << 20)

static int thread_comm(void *ctx, uint32_t tid, char *comm, size_t len)
{
	const struct replay *rp = ctx;
	const char *name = u64map__get(&rp->threads, tid);

	if (!name)
		return -ENOENT;
	snprintf(comm, len, "%s", name);
	return 0;
}

/* Process proc of the capture begins: its pipeline, as the capture's first process says. */
static int proc_begin(struct replay *rp, const struct cap_process *proc)
{
	struct replay_proc *pr, **procs;
	int err;

	for (size_t i = 0; i < rp->nr; i++)
		if (rp->procs[i]->pid == proc->pid)
			return -EEXIST; /* twice: damage; its records go to the first */
	pr = calloc(1, sizeof(*pr));
	procs = realloc(rp->procs, (rp->nr + 1) * sizeof(*procs));
	if (procs)
		rp->procs = procs;
	if (!pr || !procs) {
		free(pr);
		return -ENOMEM;
	}
	err = pipeline__init(&pr->pipe, proc->pid, proc->comm, proc->hdr.ts, &rp->opts);
	if (err) {
		pipeline__free(&pr->pipe);
		free(pr);
		return err;
	}
	pr->pid = proc->pid;
	pr->pipe.detector.lifo_slot = proc->runtime == CAPTURE_RUNTIME_TOKIO;
	pr->pipe.detector.sample_period_ns = proc->sample_hz ? 1000000000ull / proc->sample_hz : 0;
	/*
	 * as live (session/traced.c): Go's own goroutines are not alerted on, nor its
	 * long parks unless a --lost-waker was asked for, now or when recording
	 * (a threshold other than the default)
	 */
	if (proc->runtime == CAPTURE_RUNTIME_GO) {
		struct detect_config dflt;

		detect_config__defaults(&dflt);
		pr->pipe.detector.runtime_tasks = "runtime.";
		pr->pipe.detector.lost_waker_exact_only =
			!rp->lost_waker_given && proc->lost_waker_ns == dflt.lost_waker_ns;
	}
	pr->pipe.model.realtime_offset = proc->realtime_offset;
	pr->pipe.model.thread_comm = thread_comm;
	pr->pipe.model.target_ctx = rp;
	pr->stop = proc->hdr.ts;
	pr->maps_only = proc->maps_only;
	pr->sample_hz = proc->sample_hz;
	pr->pipe.runtime = proc->runtime == CAPTURE_RUNTIME_TOKIO ? "tokio"
			   : proc->runtime == CAPTURE_RUNTIME_GO  ? "go"
			   : proc->runtime == CAPTURE_RUNTIME_USDT ? "usdt"
								   : NULL;
	rp->procs[rp->nr++] = pr;
	return rp->ops.begin ? rp->ops.begin(rp->ops.ctx, pr) : 0;
}

int replay__init(struct replay *rp, const struct capture_reader *r, struct detect_config *config,
		 const struct replay_ops *ops)
{
	const struct cap_process *proc = capture_reader__process(r);
	struct detect_config recorded;

	memset(rp, 0, sizeof(*rp));
	u64map__init(&rp->threads);
	cap_process__config(proc, &recorded);
	detect_config__merge(config, &recorded);
	rp->lost_waker_given = config->given & DETECT_GIVEN(lost_waker_ns);
	rp->opts = *config;
	if (ops)
		rp->ops = *ops;
	rp->stop = proc->hdr.ts;
	return proc_begin(rp, proc);
}

/* Appends one entry to a growing array of the snapshot. */
static void *grow(void **array, size_t *nr, size_t size)
{
	size_t n = *nr;
	char *a = *array;

	if (n >= REPLAY_MAX_ENTRIES)
		return NULL;
	if ((n & (n - 1)) == 0) { /* 0, 1, 2, 4...: double */
		a = realloc(a, (n ? 2 * n : 1) * size);
		if (!a)
			return NULL;
		*array = a;
	}
	(*nr)++;
	return a + n * size;
}

static void stats_record(struct replay_proc *rp, const struct at_hdr *h)
{
	struct stats *st = &rp->stats;

	rp->have_stats = true;
	st->pid = h->pid;
	st->ts = h->ts;
	switch (h->kind) {
	case AT_CAP_RUNTIME_STATS: {
		const struct cap_runtime_stats *r = (const void *)h;
		uint32_t n = r->nr_counters < AT_STAT_NR ? r->nr_counters : AT_STAT_NR;

		cap_runtime_stats__get(r, &st->rt);
		st->dropped = r->dropped;
		memset(rp->counters, 0, sizeof(rp->counters));
		memcpy(rp->counters, r->counters, n * sizeof(uint64_t));
		break;
	}
	case AT_CAP_WORKER_STATS: {
		const struct cap_worker_stats *w = (const void *)h;
		struct at_worker_stats *ws;

		if (w->worker >= AT_MAX_WORKERS)
			break;
		if (w->worker >= st->nr_workers) {
			ws = realloc(st->workers, (w->worker + 1) * sizeof(*ws));
			if (!ws)
				break;
			memset(ws + st->nr_workers, 0, (w->worker + 1 - st->nr_workers) * sizeof(*ws));
			st->workers = ws;
			st->nr_workers = w->worker + 1;
		}
		cap_worker_stats__get(w, &st->workers[w->worker]);
		break;
	}
	case AT_CAP_TASK_STATS: {
		struct task_entry *e = grow((void **)&st->tasks, &st->nr_tasks, sizeof(*e));

		if (e)
			cap_task_stats__get((const struct cap_task_stats *)h, e);
		break;
	}
	case AT_CAP_IDLE_TASK: {
		struct idle_entry *e = grow((void **)&st->idle, &st->nr_idle, sizeof(*e));

		if (e)
			cap_idle_task__get((const struct cap_idle_task *)h, e);
		break;
	}
	case AT_CAP_STEAL_STATS: {
		struct steal_entry *e = grow((void **)&st->steals, &st->nr_steals, sizeof(*e));

		if (e)
			cap_steal_stats__get((const struct cap_steal_stats *)h, e);
		break;
	}
	}
}

/* --- counts from the records, for a capture without its snapshot ------------ */

/* Grows an array indexed by worker id to hold id; NULL beyond AT_MAX_WORKERS. */
static void *worker_slot(void **array, uint32_t *nr, uint32_t id, size_t size)
{
	char *a;

	if (id >= AT_MAX_WORKERS)
		return NULL;
	if (id >= *nr) {
		a = realloc(*array, (id + 1) * size);
		if (!a)
			return NULL;
		memset(a + *nr * size, 0, (id + 1 - *nr) * size);
		*array = a;
		*nr = id + 1;
	}
	return (char *)*array + id * size;
}

static struct at_worker_stats *counted_worker(struct replay_proc *rp, uint32_t id)
{
	return worker_slot((void **)&rp->counted.workers, &rp->counted.nr_workers, id,
			   sizeof(struct at_worker_stats));
}

static void count_wake(struct replay_proc *rp, const struct at_wake *e)
{
	struct at_runtime_stats *rt = &rp->counted.rt;
	struct at_worker_stats *w = NULL;
	bool self = e->waker_task && e->waker_task == e->task;

	rt->wakes++;
	rt->self_wakes += self;
	if (e->waker_worker >= 0)
		w = counted_worker(rp, (uint32_t)e->waker_worker);
	if (w) {
		w->wakes++;
		w->self_wakes += self;
	} else {
		rt->outside_wakes++;
	}
}

static void count_steal(struct replay_proc *rp, const struct at_steal *e)
{
	struct at_worker_stats *w = counted_worker(rp, e->thief);
	struct stats *c = &rp->counted;
	struct steal_entry *pair = NULL;

	if (w) {
		w->steals++;
		w->stolen += e->count;
	}
	for (size_t i = 0; i < c->nr_steals && !pair; i++)
		if (c->steals[i].key.thief == e->thief && c->steals[i].key.victim == e->victim)
			pair = &c->steals[i];
	if (!pair && c->nr_steals < AT_MAX_STEAL_PAIRS) {
		pair = grow((void **)&c->steals, &c->nr_steals, sizeof(*pair));
		if (pair) {
			memset(pair, 0, sizeof(*pair));
			pair->key.thief = e->thief;
			pair->key.victim = e->victim;
		}
	}
	if (pair) {
		pair->s.ops++;
		pair->s.tasks += e->count;
	}
}

static void count_poll(struct replay_proc *rp, const struct at_poll *e, size_t size)
{
	struct at_worker_stats *w = counted_worker(rp, e->worker);

	rp->counted.rt.completed += e->ready;
	if (w) {
		w->polls++;
		w->busy_ns += e->duration_ns;
		w->oncpu_ns += e->oncpu_ns;
		if (e->duration_ns > w->max_poll_ns)
			w->max_poll_ns = e->duration_ns;
		if (w->queue.peak < e->depth)
			w->queue.peak = e->depth;
		hist_add(&w->poll, e->duration_ns);
		hist_add(&w->oncpu, e->oncpu_ns);
		if (e->wake_ts && e->hdr.ts >= e->wake_ts)
			hist_add(&w->delay, e->hdr.ts - e->wake_ts);
	}
	if (size >= sizeof(struct at_poll_self_wake))
		count_wake(rp, &((const struct at_poll_self_wake *)e)->wake);
}

static void count_sample(struct replay_proc *rp, const struct at_worker_sample *e, size_t size)
{
	struct at_worker_sample *s = worker_slot((void **)&rp->samples, &rp->nr_samples, e->worker,
						 sizeof(*s));

	counted_worker(rp, e->worker);
	if (!s)
		return;
	/* a record from before fields were appended is shorter: they read as 0 */
	memset(s, 0, sizeof(*s));
	memcpy(s, e, size < sizeof(*s) ? size : sizeof(*s));
}

/* An event or sample the pipeline took (whole, of a known kind), counted. */
static void count_record(struct replay_proc *rp, const struct at_hdr *h, size_t size)
{
	struct at_worker_stats *w;

	switch (model__validate(h, size)) {
	case AT_EV_SPAWN:
		rp->counted.rt.spawns++;
		break;
	case AT_EV_POLL:
		count_poll(rp, (const struct at_poll *)h, size);
		break;
	case AT_EV_WAKE:
		count_wake(rp, (const struct at_wake *)h);
		break;
	case AT_EV_STEAL:
		count_steal(rp, (const struct at_steal *)h);
		break;
	case AT_EV_PARK:
		w = counted_worker(rp, ((const struct at_park *)h)->worker);
		if (w) {
			w->parks++;
			w->park_ns += ((const struct at_park *)h)->duration_ns;
		}
		break;
	case AT_EV_WORKER_SAMPLE:
		count_sample(rp, (const struct at_worker_sample *)h, size);
		break;
	}
}

#define MAX_OF(a, b) ((a) > (b) ? (a) : (b))

/*
 * A maps-only capture holds only the long and late polls: a worker's last
 * sample, which counts everything up to it, is nearer. (A full trace's
 * events are exact, and agree with its histograms and its trace.)
 */
static void merge_samples(struct replay_proc *rp)
{
	struct at_runtime_stats *rt = &rp->counted.rt;
	uint64_t wakes = 0, self_wakes = 0;

	for (uint32_t i = 0; i < rp->nr_samples && i < rp->counted.nr_workers; i++) {
		const struct at_worker_sample *s = &rp->samples[i];
		struct at_worker_stats *w = &rp->counted.workers[i];

		w->polls = MAX_OF(w->polls, s->polls);
		w->busy_ns = MAX_OF(w->busy_ns, s->busy_ns);
		w->park_ns = MAX_OF(w->park_ns, s->park_ns);
		w->steals = MAX_OF(w->steals, s->steals);
		w->wakes = MAX_OF(w->wakes, s->wakes);
		w->self_wakes = MAX_OF(w->self_wakes, s->self_wakes);
		w->queue.peak = MAX_OF(w->queue.peak, s->depth);
		if (!w->tid)
			w->tid = s->hdr.tid;
		wakes += s->wakes;
		self_wakes += s->self_wakes;
	}
	rt->wakes = MAX_OF(rt->wakes, wakes + rt->outside_wakes);
	rt->self_wakes = MAX_OF(rt->self_wakes, self_wakes);
}

bool replay__has_snapshot(const struct replay_proc *rp)
{
	return rp->have_stats && rp->ended;
}

const struct stats *replay__stats(struct replay_proc *rp)
{
	if (replay__has_snapshot(rp))
		return &rp->stats;
	if (rp->maps_only)
		merge_samples(rp);
	rp->counted.ts = rp->stop;
	return &rp->counted;
}

/*
 * The process a record is of: the capture's one process (as in every capture
 * before version 4), else by its pid; none for a pid no process record began.
 */
static struct replay_proc *proc_of(struct replay *rp, uint32_t pid)
{
	if (rp->nr == 1)
		return rp->procs[0];
	/* records come in runs of one process's: the last one answers most */
	if (rp->last && rp->last->pid == pid)
		return rp->last;
	for (size_t i = 0; i < rp->nr; i++)
		if (rp->procs[i]->pid == pid)
			return rp->last = rp->procs[i];
	return NULL;
}

static void proc_end(struct replay *rp, struct replay_proc *pr, uint64_t ts, const char *reason)
{
	if (pr->ended)
		return;
	pr->ended = true;
	if (ts)
		pr->stop = ts;
	snprintf(pr->reason, sizeof(pr->reason), "%s", reason);
	if (rp->ops.end)
		rp->ops.end(rp->ops.ctx, pr);
}

static void apply(struct replay *rp, const struct at_hdr *h, size_t size)
{
	struct replay_proc *pr = h->kind == AT_CAP_TICK || h->kind == AT_CAP_END ||
						 h->kind == AT_CAP_PROCESS
					 ? NULL
					 : proc_of(rp, h->pid);

	if (h->ts > rp->stop && h->kind < AT_CAP_BASE)
		rp->stop = h->ts;
	switch (h->kind) {
	case AT_CAP_PROCESS:
		if (proc_begin(rp, (const struct cap_process *)h) == -ENOMEM)
			rp->strays++;
		return;
	case AT_CAP_THREAD: {
		const struct cap_thread *t = (const void *)h;
		char *comm;

		if (!t->hdr.tid || u64map__get(&rp->threads, t->hdr.tid))
			return;
		comm = strndup(t->comm, sizeof(t->comm));
		if (comm && u64map__set(&rp->threads, t->hdr.tid, comm))
			free(comm);
		return;
	}
	case AT_CAP_TICK:
		for (size_t i = 0; i < rp->nr; i++)
			if (!rp->procs[i]->ended)
				pipeline__tick(&rp->procs[i]->pipe, h->ts);
		return;
	case AT_CAP_END:
		rp->ended = true;
		rp->stop = h->ts;
		memcpy(rp->reason, ((const struct cap_end *)h)->reason, sizeof(rp->reason));
		rp->reason[sizeof(rp->reason) - 1] = '\0';
		for (size_t i = 0; i < rp->nr; i++)
			proc_end(rp, rp->procs[i], h->ts, rp->reason);
		return;
	}
	if (!pr || pr->ended) {
		rp->strays++;
		return;
	}
	switch (h->kind) {
	case AT_CAP_NAME:
		model__name(&pr->pipe.model, ((const struct cap_name *)h)->addr,
			    ((const struct cap_name *)h)->name);
		break;
	case AT_CAP_RUNTIME_STATS:
	case AT_CAP_WORKER_STATS:
	case AT_CAP_TASK_STATS:
	case AT_CAP_IDLE_TASK:
	case AT_CAP_STEAL_STATS:
		stats_record(pr, h);
		break;
	case AT_CAP_PROCESS_END: {
		char reason[CAP_REASON_LEN];

		memcpy(reason, ((const struct cap_end *)h)->reason, sizeof(reason));
		reason[sizeof(reason) - 1] = '\0';
		proc_end(rp, pr, h->ts, reason);
		break;
	}
	default:
		/* events and samples; newer capture kinds are counted and skipped */
		if (h->kind < AT_CAP_BASE) {
			count_record(pr, h, size);
			pipeline__push(&pr->pipe, h, size);
			if (h->ts > pr->stop)
				pr->stop = h->ts;
		} else {
			model__unknown(&pr->pipe.model, h->kind);
		}
		break;
	}
}

int replay__run(struct replay *rp, struct capture_reader *r)
{
	const struct at_hdr *h;
	size_t size;
	int ret;

	while ((ret = capture_reader__next(r, &h, &size)) == 1) {
		rp->records++;
		apply(rp, h, size);
	}
	return ret;
}

void replay__end(struct replay *rp)
{
	for (size_t i = 0; i < rp->nr; i++)
		proc_end(rp, rp->procs[i], rp->procs[i]->stop > rp->stop ? rp->procs[i]->stop
									  : rp->stop,
			 rp->ended ? rp->reason : "capture cut short");
}

void replay__free(struct replay *rp)
{
	u64map__clear_free(&rp->threads);
	for (size_t i = 0; i < rp->nr; i++) {
		pipeline__free(&rp->procs[i]->pipe);
		stats__free(&rp->procs[i]->stats);
		stats__free(&rp->procs[i]->counted);
		free(rp->procs[i]->samples);
		free(rp->procs[i]);
	}
	free(rp->procs);
	memset(rp, 0, sizeof(*rp));
}
