// SPDX-License-Identifier: MIT
#include "pipeline/model.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stacks/unwind.h"

/* Worker ids index an array: refuse absurd ones from a confused executor. */
#define MODEL_MAX_WORKERS 4096
/* Distinct task-name addresses remembered. */
#define MODEL_MAX_NAMES 4096

static const uint16_t record_size[AT_EV_KIND_MAX] = {
	[AT_EV_SPAWN] = sizeof(struct at_spawn),
	[AT_EV_POLL] = AT_POLL_MIN_SIZE,
	[AT_EV_WAKE] = sizeof(struct at_wake),
	[AT_EV_STEAL] = sizeof(struct at_steal),
	[AT_EV_PARK] = sizeof(struct at_park),
	[AT_EV_WORKER_SAMPLE] = AT_WORKER_SAMPLE_MIN_SIZE,
	[AT_EV_TASK_SAMPLE] = sizeof(struct at_task_sample),
	[AT_EV_STACK] = sizeof(struct at_stack),
};

int model__init(struct model *m, uint32_t pid, const char *comm, uint64_t t0)
{
	memset(m, 0, sizeof(*m));
	m->pid = pid;
	snprintf(m->comm, sizeof(m->comm), "%s", comm ? comm : "");
	m->t0 = t0;
	m->last_ts = t0;
	u64map__init(&m->tasks);
	u64map__init(&m->threads);
	u64map__init(&m->names);
	callstacks__init(&m->stacks);
	callstacks__init(&m->places);
	m->places.by_line = true;
	u64map__init(&m->thread_stacks);
	u64map__init(&m->task_stacks);
	u64map__init(&m->task_waits);
	return 0;
}

void model__free(struct model *m)
{
	u64map__clear_free(&m->names);
	u64map__clear_free(&m->tasks);
	u64map__clear_free(&m->threads);
	u64map__clear_free(&m->thread_stacks);
	u64map__clear_free(&m->task_stacks);
	u64map__clear_free(&m->task_waits);
	callstacks__free(&m->stacks);
	callstacks__free(&m->places);
	free(m->workers);
	m->workers = NULL;
	m->nr_workers = 0;
}

int model__validate(const void *rec, size_t size)
{
	struct at_hdr h;

	if (size < sizeof(h))
		return -EINVAL;
	memcpy(&h, rec, sizeof(h));
	if (h.size != size || h.kind == 0)
		return -EINVAL;
	if (h.kind >= AT_EV_KIND_MAX)
		return 0; /* a newer kind: skip it */
	/*
	 * Newer versions may append fields; older records may not be shorter
	 * than the kind's first version (readers of an appended field check
	 * the size).
	 */
	if (size < record_size[h.kind])
		return -EINVAL;
	return h.kind;
}

void model__unknown(struct model *m, uint16_t kind)
{
	m->n.unknown++;
	for (int i = 0; i < MODEL_UNKNOWN_KINDS; i++) {
		if (m->n.unknown_kinds[i] == kind)
			return;
		if (!m->n.unknown_kinds[i]) {
			m->n.unknown_kinds[i] = kind;
			return;
		}
	}
	m->n.more_unknown_kinds = true;
}

struct task *model__task(const struct model *m, uint64_t id)
{
	return u64map__get(&m->tasks, id);
}

/*
 * Names are mostly static strings shared by many tasks: remember them by
 * address, so tasks that are gone (or a target that exited) keep their names.
 */
static void remember_name(struct model *m, uint64_t addr, const char *name)
{
	char *copy;

	if (!addr || m->names.len >= MODEL_MAX_NAMES || u64map__get(&m->names, addr))
		return;
	copy = strdup(name);
	if (copy && u64map__set(&m->names, addr, copy))
		free(copy);
}

void model__name(struct model *m, uint64_t addr, const char *name)
{
	remember_name(m, addr, name);
}

void model__task_name(struct model *m, uint64_t id, uint64_t name_addr, char *buf, size_t len)
{
	const struct task *t = model__task(m, id);
	const char *known = u64map__get(&m->names, name_addr);

	if (t && t->named) {
		snprintf(buf, len, "%s", t->name);
	} else if (known) {
		snprintf(buf, len, "%s", known);
	} else if (name_addr && m->code_name && (known = m->code_name(m->code_ctx, name_addr))) {
		snprintf(buf, len, "%s", known);
		remember_name(m, name_addr, buf);
	} else if (name_addr && m->read_str &&
		   m->read_str(m->target_ctx, name_addr, buf, len) == 0 && buf[0]) {
		remember_name(m, name_addr, buf);
	} else if (!t || buf != t->name) {
		/* (the model names its own task with buf its name: it stays) */
		snprintf(buf, len, "%s", t ? t->name : "task");
	}
}

static struct task *task_get(struct model *m, uint64_t id)
{
	struct task *t = u64map__get(&m->tasks, id);

	if (t || !id)
		return t;
	t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	t->id = id;
	snprintf(t->name, sizeof(t->name), "task");
	if (u64map__set(&m->tasks, id, t)) {
		free(t);
		return NULL;
	}
	return t;
}

struct thread *model__thread(struct model *m, uint32_t tid)
{
	struct thread *th = u64map__get(&m->threads, tid);

	if (th || !tid)
		return th;
	th = calloc(1, sizeof(*th));
	if (!th)
		return NULL;
	th->tid = tid;
	th->worker = -1;
	if (!m->thread_comm || m->thread_comm(m->target_ctx, tid, th->comm, sizeof(th->comm)))
		snprintf(th->comm, sizeof(th->comm), "tid %u", tid);
	if (u64map__set(&m->threads, tid, th)) {
		free(th);
		return NULL;
	}
	return th;
}

struct worker *model__worker(const struct model *m, uint32_t id)
{
	return id < m->nr_workers ? &m->workers[id] : NULL;
}

static struct worker *worker_get(struct model *m, uint32_t id)
{
	if (id >= MODEL_MAX_WORKERS)
		return NULL;
	if (id >= m->nr_workers) {
		struct worker *w = realloc(m->workers, (id + 1) * sizeof(*w));

		if (!w)
			return NULL;
		memset(w + m->nr_workers, 0, (id + 1 - m->nr_workers) * sizeof(*w));
		for (uint32_t i = m->nr_workers; i <= id; i++)
			w[i].id = i;
		m->workers = w;
		m->nr_workers = id + 1;
	}
	return &m->workers[id];
}

/* The thread a worker runs on, learnt from the events it emits. */
static struct worker *worker_on(struct model *m, uint32_t id, uint32_t tid)
{
	struct worker *w = worker_get(m, id);
	struct thread *th;

	if (!w)
		return NULL;
	if (w->tid != tid && tid) {
		w->tid = tid;
		th = model__thread(m, tid);
		if (th)
			th->worker = (int32_t)id;
	}
	return w;
}

static void apply_spawn(struct model *m, const struct at_spawn *e)
{
	struct task *t = task_get(m, e->task);

	m->n.tasks_spawned++;
	if (!t)
		return;
	t->parent = e->parent;
	t->spawn_ts = e->hdr.ts;
	if (e->name[0]) {
		memcpy(t->name, e->name, sizeof(t->name));
		t->name[sizeof(t->name) - 1] = '\0';
		t->named = true;
	} else if (e->name_addr) {
		model__task_name(m, e->task, e->name_addr, t->name, sizeof(t->name));
		t->named = strcmp(t->name, "task") != 0;
	}
}

static void apply_poll(struct model *m, const struct at_poll *e)
{
	struct task *t = task_get(m, e->task);
	struct worker *w = worker_on(m, e->worker, e->hdr.tid);

	m->n.polls++;
	if (e->ready)
		m->n.tasks_done++;
	if (w) {
		w->polls++;
		w->busy_ns += e->duration_ns;
		w->depth = e->requeue == (int32_t)e->worker ? e->requeue_depth : e->depth;
	}
	if (!t)
		return;
	if (!t->named && e->name_addr) {
		model__task_name(m, e->task, e->name_addr, t->name, sizeof(t->name));
		t->named = strcmp(t->name, "task") != 0;
	} else if (t->named) {
		remember_name(m, e->name_addr, t->name);
	}
	t->polls++;
	t->poll_ns += e->duration_ns;
	t->oncpu_ns += e->oncpu_ns;
	t->done = e->ready;
}

static void apply_wake(struct model *m, const struct at_wake *e)
{
	struct task *t = task_get(m, e->task);

	m->n.wakes++;
	if (t)
		t->wakes++;
	if (e->waker_worker >= 0)
		worker_on(m, (uint32_t)e->waker_worker, e->hdr.tid);
	if (e->queue >= 0) {
		struct worker *w = worker_get(m, (uint32_t)e->queue);

		if (w)
			w->depth = e->depth;
	}
}

static void apply_steal(struct model *m, const struct at_steal *e)
{
	struct worker *thief, *victim = NULL;

	/* Both may grow the workers array: the second lookup must not move the first. */
	if (e->victim != AT_WORKER_UNKNOWN)
		worker_get(m, e->victim);
	thief = worker_on(m, e->thief, e->hdr.tid);
	if (e->victim != AT_WORKER_UNKNOWN)
		victim = model__worker(m, e->victim);

	m->n.steals++;
	m->n.stolen += e->count;
	if (thief) {
		thief->steals++;
		thief->stolen += e->count;
		if (!(e->flags & AT_STEAL_INFERRED))
			thief->depth = e->thief_depth;
	}
	if (victim && !(e->flags & AT_STEAL_INFERRED))
		victim->depth = e->victim_depth;
}

static void apply_park(struct model *m, const struct at_park *e)
{
	struct worker *w = worker_on(m, e->worker, e->hdr.tid);

	m->n.parks++;
	if (w) {
		w->parks++;
		w->park_ns += e->duration_ns;
	}
}

static void apply_worker_sample(struct model *m, const struct at_worker_sample *s)
{
	if (s->hdr.tid)
		worker_on(m, s->worker, s->hdr.tid);
}

/* Where a thread's latest stack of one kind is kept: on the CPU, or asleep. */
static uint64_t thread_stack_key(uint32_t tid, bool asleep)
{
	return ((uint64_t)tid + 1) | (asleep ? 1ull << 63 : 0);
}

bool model__tally(struct u64map *map, uint64_t task, uint32_t id, bool asleep, uint64_t ns)
{
	struct task_stacks *ts = u64map__get(map, task);
	uint32_t i;

	if (!ts) {
		if (map->len >= MODEL_STACK_TASKS || !(ts = calloc(1, sizeof(*ts))))
			return false;
		if (u64map__set(map, task, ts)) {
			free(ts);
			return false;
		}
	}
	for (i = 0; i < ts->nr; i++)
		if (ts->s[i].id == id && ts->s[i].asleep == asleep)
			break;
	if (i == ts->nr) {
		if (ts->nr == TASK_STACKS) {
			ts->untracked_ns += ns;
			return true;
		}
		ts->s[ts->nr++] = (struct task_stack){ .id = id, .asleep = asleep };
	}
	ts->s[i].samples++;
	ts->s[i].ns += ns;
	return true;
}

/* Time task spent in stack id (--stacks); a stack not kept counts as lost. */
static void count_stack(struct model *m, uint64_t task, uint32_t id, bool asleep, uint64_t ns)
{
	if (!model__tally(&m->task_stacks, task, id, asleep, ns))
		m->stacks_lost++;
}

/* A task no name was given yet (sampled tokio): the one a stack of its poll says. */
static void name_by_stack(struct model *m, uint64_t task, uint64_t name_addr)
{
	struct task *t = name_addr ? task_get(m, task) : NULL;

	if (!t || t->named)
		return;
	model__task_name(m, task, name_addr, t->name, sizeof(t->name));
	t->named = strcmp(t->name, "task") != 0;
}

/*
 * A stack record (--stacks, live): unwound now, while the process and its
 * maps are still there, and kept once in the session's stacks.
 */
static void apply_stack(struct model *m, const struct at_stack *st)
{
	struct stack_frame frames[CALLSTACK_FRAMES];
	bool asleep = st->flags & AT_STACK_BLOCKED;
	uint64_t key = thread_stack_key(st->hdr.tid, asleep);
	struct thread_stack *kept;
	bool by_fp = false;
	int n;

	if (!m->unwind)
		return;
	n = m->unwind(m->unwind_ctx, st, frames, CALLSTACK_FRAMES, &by_fp);
	m->cur_stack = n > 0 ? callstacks__intern(&m->stacks, frames, n) : 0;
	if (!m->cur_stack) {
		m->stacks_lost++;
		return;
	}
	m->stacks_unwound++;
	m->stacks_by_fp += by_fp;
	if (m->stack_name && st->task)
		name_by_stack(m, st->task, m->stack_name(m->unwind_ctx, frames, n));
	count_stack(m, st->task, m->cur_stack, asleep,
		    asleep ? (st->woke > st->hdr.ts ? st->woke - st->hdr.ts : 0)
			   : m->stack_period_ns);
	kept = u64map__get(&m->thread_stacks, key);
	if (!kept) {
		kept = malloc(sizeof(*kept));
		if (!kept || u64map__set(&m->thread_stacks, key, kept)) {
			free(kept);
			return;
		}
	}
	*kept = (struct thread_stack){ .id = m->cur_stack, .task = st->task,
				       .poll_begin = st->poll_begin };
}

uint32_t model__where(struct model *m, uint64_t task)
{
	struct stack_frame frames[CALLSTACK_FRAMES];
	int n = m->where ? m->where(m->where_ctx, task, 0, frames, CALLSTACK_FRAMES, NULL) : 0;

	return n > 0 ? callstacks__intern(&m->places, frames, n) : 0;
}

uint32_t model__poll_stack(const struct model *m, const struct at_poll *p, bool prefer_asleep,
			  bool *asleep)
{
	const struct thread_stack *ran, *slept;

	ran = u64map__get(&m->thread_stacks, thread_stack_key(p->hdr.tid, false));
	slept = u64map__get(&m->thread_stacks, thread_stack_key(p->hdr.tid, true));
	if (ran && (ran->poll_begin != p->hdr.ts || ran->task != p->task))
		ran = NULL;
	if (slept && (slept->poll_begin != p->hdr.ts || slept->task != p->task))
		slept = NULL;
	*asleep = slept && (prefer_asleep || !ran);
	return *asleep ? slept->id : ran ? ran->id : 0;
}

const struct task_stack *model__hottest_stack(const struct model *m, uint64_t task)
{
	const struct task_stacks *ts = u64map__get(&m->task_stacks, task);
	const struct task_stack *best = NULL;

	for (uint32_t i = 0; ts && i < ts->nr; i++)
		if (!best || ts->s[i].ns > best->ns)
			best = &ts->s[i];
	return best;
}

void model__apply(struct model *m, const struct at_hdr *ev)
{
	m->n.by_kind[ev->kind]++;
	if (ev->kind == AT_EV_WORKER_SAMPLE || ev->kind == AT_EV_TASK_SAMPLE)
		m->n.samples++;
	else
		m->n.events++;
	if (ev->ts > m->last_ts)
		m->last_ts = ev->ts;
	switch (ev->kind) {
	case AT_EV_SPAWN:
		apply_spawn(m, (const struct at_spawn *)ev);
		break;
	case AT_EV_POLL:
		apply_poll(m, (const struct at_poll *)ev);
		break;
	case AT_EV_WAKE:
		apply_wake(m, (const struct at_wake *)ev);
		break;
	case AT_EV_STEAL:
		apply_steal(m, (const struct at_steal *)ev);
		break;
	case AT_EV_PARK:
		apply_park(m, (const struct at_park *)ev);
		break;
	case AT_EV_WORKER_SAMPLE:
		apply_worker_sample(m, (const struct at_worker_sample *)ev);
		break;
	case AT_EV_STACK:
		apply_stack(m, (const struct at_stack *)ev);
		break;
	}
}

void model__spawn_as_wake(const struct at_spawn *s, struct at_wake *w)
{
	memset(w, 0, sizeof(*w));
	w->hdr = s->hdr;
	w->task = s->task;
	w->waker_task = s->parent;
	w->wake_id = s->wake_id;
	w->waker_worker = -1;
	w->queue = s->queue;
	w->depth = s->depth;
}

/*
 * State changes that sinks must see from the "before" side: while a sink
 * handles a wake, task->pending is still the wake it replaces; while it
 * handles a poll, task->pending is the wake that poll answers.
 */
void model__retire(struct model *m, const struct at_hdr *ev)
{
	const struct at_spawn *s = (const struct at_spawn *)ev;
	const struct at_wake *w = (const struct at_wake *)ev;
	const struct at_poll *p = (const struct at_poll *)ev;
	struct task *t;
	uint32_t at;

	switch (ev->kind) {
	case AT_EV_STACK:
		m->cur_stack = 0;
		break;
	case AT_EV_SPAWN:
		t = model__task(m, s->task);
		if (t && s->wake_id)
			model__spawn_as_wake(s, &t->pending);
		break;
	case AT_EV_WAKE:
		t = model__task(m, w->task);
		if (t && w->wake_id)
			t->pending = *w;
		break;
	case AT_EV_POLL:
		t = model__task(m, p->task);
		if (!t)
			break;
		/* the idle span this poll ends, when a read placed it */
		at = model__idle_place(m, t, p->hdr.ts);
		if (at && p->hdr.ts > t->last_end &&
		    !model__tally(&m->task_waits, p->task, at, false, p->hdr.ts - t->last_end))
			m->waits_untallied++;
		t->wait_at = 0;
		if (p->hdr.ts + p->duration_ns > t->last_end)
			t->last_end = p->hdr.ts + p->duration_ns;
		if (t->pending.wake_id == p->wake_id)
			memset(&t->pending, 0, sizeof(t->pending));
		if (p->ready && !t->pending.wake_id)
			free(u64map__del(&m->tasks, p->task));
		break;
	}
}
