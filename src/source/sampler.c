// SPDX-License-Identifier: MIT
#include "source/sampler.h"

#include <string.h>

void sampler__init(struct sampler *s, sampler_emit_fn emit, void *ctx)
{
	u64map__init(&s->seen);
	s->emit = emit;
	s->ctx = ctx;
}

void sampler__free(struct sampler *s)
{
	u64map__clear(&s->seen);
}

void sampler__workers(struct sampler *s, const struct stats *st)
{
	for (uint32_t i = 0; i < st->nr_workers; i++) {
		const struct at_worker_stats *w = &st->workers[i];
		const struct at_queue_stats *q = &w->queue;
		struct at_worker_sample e;

		memset(&e, 0, sizeof(e));
		e.hdr.kind = AT_EV_WORKER_SAMPLE;
		e.hdr.size = sizeof(e);
		e.hdr.tid = w->tid;
		e.hdr.pid = st->pid;
		e.hdr.ts = st->ts;
		e.worker = i;
		e.depth = q->depth;
		e.polls = w->polls;
		e.busy_ns = w->busy_ns;
		/* Bring the running totals up to the sampling time. */
		e.depth_area = q->area + (q->ts && st->ts > q->ts ? q->depth * (st->ts - q->ts) : 0);
		e.park_ns = w->park_ns + (w->park_since && st->ts > w->park_since
						  ? st->ts - w->park_since
						  : 0);
		e.parked = w->park_since != 0;
		if (st->between) {
			e.asleep_ns = st->between[i].asleep_ns;
			e.cpu_wait_ns = st->between[i].cpu_wait_ns;
		}
		e.steals = w->steals;
		e.wakes = w->wakes;
		e.self_wakes = w->self_wakes;
		s->emit(s->ctx, &e, sizeof(e));
	}
}

static void push_task(struct sampler *s, const struct stats *st, uint64_t id,
		      const struct at_task_stats *ts, const struct idle_entry *idle)
{
	struct at_task_sample e;

	memset(&e, 0, sizeof(e));
	e.hdr.kind = AT_EV_TASK_SAMPLE;
	e.hdr.size = sizeof(e);
	e.hdr.pid = st->pid;
	e.hdr.ts = st->ts;
	e.task = id;
	if (ts) {
		e.polls = ts->polls;
		e.wakes = ts->wakes;
		e.self_wakes = ts->self_wakes;
		e.poll_ns = ts->poll_ns;
		e.name_addr = ts->name_addr;
		e.first_ts = ts->first_ts;
		e.done = ts->done;
	}
	if (idle) {
		e.idle_since = idle->idle_since;
		if (!e.name_addr)
			e.name_addr = idle->name_addr;
	}
	s->emit(s->ctx, &e, sizeof(e));
}

void sampler__tasks(struct sampler *s, const struct stats *st)
{
	struct u64map idle, seen;

	u64map__init(&idle);
	u64map__init(&seen);
	for (size_t i = 0; i < st->nr_idle; i++)
		u64map__set(&idle, st->idle[i].id, (void *)&st->idle[i]);
	for (size_t i = 0; i < st->nr_tasks; i++) {
		const struct task_entry *t = &st->tasks[i];
		uintptr_t sum = (uintptr_t)(t->s.polls + t->s.wakes + 1);
		const struct idle_entry *ie = u64map__del(&idle, t->id);

		if (ie || (uintptr_t)u64map__get(&s->seen, t->id) != sum)
			push_task(s, st, t->id, &t->s, ie);
		if (!t->s.done)
			u64map__set(&seen, t->id, (void *)sum);
	}
	/* idle tasks whose statistics the LRU already let go */
	for (size_t i = 0; i < st->nr_idle; i++)
		if (u64map__get(&idle, st->idle[i].id))
			push_task(s, st, st->idle[i].id, NULL, &st->idle[i]);
	u64map__clear(&idle);
	u64map__clear(&s->seen);
	s->seen = seen;
}
