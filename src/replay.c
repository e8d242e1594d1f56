// SPDX-License-Identifier: MIT
#include "replay.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "options.h"

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

int replay__init(struct replay *rp, const struct capture_reader *r, struct pipeline *p,
		 struct detect_opts *opts, uint32_t given)
{
	const struct cap_process *proc = capture_reader__process(r);
	int err;

	memset(rp, 0, sizeof(*rp));
	u64map__init(&rp->threads);
	if (!(given & GIVEN_LONG_POLL))
		opts->long_poll_ns = proc->long_poll_ns;
	if (!(given & GIVEN_SCHED_DELAY))
		opts->sched_delay_ns = proc->sched_delay_ns;
	if (!(given & GIVEN_STARVE_DEPTH))
		opts->starve_depth = proc->starve_depth;
	if (!(given & GIVEN_STARVE_TIME))
		opts->starve_ns = proc->starve_ns;
	if (!(given & GIVEN_THRASH_RATE))
		opts->thrash_rate = proc->thrash_rate;
	if (!(given & GIVEN_LOST_WAKER))
		opts->lost_waker_ns = proc->lost_waker_ns;
	if (!(given & GIVEN_EPISODE_GAP))
		opts->episode_gap_ns = proc->episode_gap_ns;
	err = pipeline__init(p, proc->pid, proc->comm, proc->hdr.ts, opts);
	if (err)
		return err;
	p->model.realtime_offset = proc->realtime_offset;
	p->model.thread_comm = thread_comm;
	p->model.target_ctx = rp;
	rp->stop = proc->hdr.ts;
	return 0;
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

static void stats_record(struct replay *rp, const struct at_hdr *h)
{
	struct stats *st = &rp->stats;

	rp->have_stats = true;
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

static void apply(struct replay *rp, struct pipeline *p, const struct at_hdr *h, size_t size)
{
	switch (h->kind) {
	case AT_CAP_NAME:
		model__name(&p->model, ((const struct cap_name *)h)->addr,
			    ((const struct cap_name *)h)->name);
		break;
	case AT_CAP_THREAD: {
		const struct cap_thread *t = (const void *)h;
		char *comm;

		if (!t->hdr.tid || u64map__get(&rp->threads, t->hdr.tid))
			break;
		comm = strndup(t->comm, sizeof(t->comm));
		if (comm && u64map__set(&rp->threads, t->hdr.tid, comm))
			free(comm);
		break;
	}
	case AT_CAP_TICK:
		pipeline__tick(p, h->ts);
		break;
	case AT_CAP_RUNTIME_STATS:
	case AT_CAP_WORKER_STATS:
	case AT_CAP_TASK_STATS:
	case AT_CAP_IDLE_TASK:
	case AT_CAP_STEAL_STATS:
		stats_record(rp, h);
		break;
	case AT_CAP_END:
		rp->ended = true;
		rp->stop = h->ts;
		memcpy(rp->reason, ((const struct cap_end *)h)->reason, sizeof(rp->reason));
		rp->reason[sizeof(rp->reason) - 1] = '\0';
		break;
	default:
		/* events and samples; newer capture kinds are counted and skipped */
		if (h->kind < AT_CAP_BASE) {
			pipeline__push(p, h, size);
			if (h->ts > rp->stop)
				rp->stop = h->ts;
		} else {
			model__unknown(&p->model, h->kind);
		}
		break;
	}
}

int replay__run(struct replay *rp, struct capture_reader *r, struct pipeline *p)
{
	const struct at_hdr *h;
	size_t size;
	int ret;

	while ((ret = capture_reader__next(r, &h, &size)) == 1) {
		rp->records++;
		apply(rp, p, h, size);
	}
	return ret;
}

void replay__free(struct replay *rp)
{
	uint64_t key;
	void *val;

	for (size_t i = 0; u64map__next(&rp->threads, &i, &key, &val);)
		free(val);
	u64map__clear(&rp->threads);
	stats__free(&rp->stats);
}
