// SPDX-License-Identifier: MIT
#include "sinks/slices.h"

#include <stdio.h>
#include <stdlib.h>

#include "sinks/alerts.h"

/* Worker queues whose depth is written (and the inject queue). */
#define MAX_QUEUES 4096

#define ARG_INFO(id, str, type) [ARG_##id] = { str, SLICE_##type },
const struct slice_arg_info slices__args[ARG_NR] = { SLICES_ARGS(ARG_INFO) };
#undef ARG_INFO

static inline struct slices *sl_of(struct sink *s)
{
	return (struct slices *)s;
}

static void arg(struct slice_args *a, enum slice_arg name, uint64_t v)
{
	if (a->nr < SLICE_MAX_ARGS)
		a->v[a->nr++] = (struct slice_value){ .name = name, .u = v };
}

static void arg_str(struct slice_args *a, enum slice_arg name, const char *s)
{
	if (a->nr < SLICE_MAX_ARGS)
		a->v[a->nr++] = (struct slice_value){ .name = name, .s = s };
}

void slices__thread(const struct thread *th, uint32_t tid, struct slices_thread *out)
{
	out->worker = th && th->worker >= 0;
	if (out->worker)
		snprintf(out->name, sizeof(out->name), "worker %d (%s)", th->worker, th->comm);
	else
		snprintf(out->name, sizeof(out->name), "%s", th ? th->comm : "thread");
	out->order = out->worker ? (uint64_t)th->worker : SLICES_OTHER_THREADS + (uint64_t)tid;
}

void slices__queue_name(int32_t queue, char *buf, size_t size)
{
	if (queue >= 0)
		snprintf(buf, size, "worker %d", queue);
	else
		snprintf(buf, size, "%s", queue == AT_QUEUE_INJECT ? "inject" : "none");
}

const char *slices__process_name(const struct model *m)
{
	return m->comm[0] ? m->comm : "target";
}

static void start(struct slices *sl, struct model *m)
{
	if (sl->started)
		return;
	sl->started = true;
	if (sl->ops->start)
		sl->ops->start(sl, m);
}

/* --- counters ----------------------------------------------------------- */

static int64_t *depth_slot(struct slices *sl, int32_t queue)
{
	if (queue == AT_QUEUE_INJECT)
		return &sl->inject_depth;
	if (queue < 0 || queue >= MAX_QUEUES)
		return NULL;
	if ((uint32_t)queue >= sl->nr_depth) {
		uint32_t n = (uint32_t)queue + 1;
		int64_t *d = realloc(sl->depth, n * sizeof(*d));

		if (!d)
			return NULL;
		for (uint32_t i = sl->nr_depth; i < n; i++)
			d[i] = -1;
		sl->depth = d;
		sl->nr_depth = n;
	}
	return &sl->depth[queue];
}

/* A queue's depth, and the runnable total, when it changed since last written. */
static void queue_depth(struct slices *sl, struct model *m, uint64_t ts, int32_t queue,
			uint32_t depth)
{
	int64_t *last = depth_slot(sl, queue);
	struct slice_depth d = { .ts = ts, .queue = queue, .depth = depth };

	if (!last || *last == depth)
		return;
	sl->runnable += depth - (*last < 0 ? 0 : *last);
	*last = depth;
	d.runnable = sl->runnable;
	sl->ops->depth(sl, m, &d);
}

/* --- events ------------------------------------------------------------- */

/* A wake (or spawn), with its arrow when linked: the poll it queued came. */
static void wake(struct slices *sl, struct model *m, const struct at_wake *w, bool linked)
{
	const struct task *t = model__task(m, w->task);
	bool spawn = w->hdr.kind == AT_EV_SPAWN;
	char name[AT_TASK_NAME_LEN + 16], queue[32];
	struct slice_wake sw = {
		.s = { .kind = spawn ? "spawn" : "wake",
		       .name = name,
		       .ts = w->hdr.ts,
		       .tid = w->hdr.tid,
		       .task = w->task,
		       .flow_out = linked ? w->wake_id : 0 },
		.waker_task = w->waker_task,
	};

	snprintf(name, sizeof(name), "%s %s", sw.s.kind, t ? t->name : "task");
	slices__queue_name(w->queue, queue, sizeof(queue));
	arg(&sw.s.args, ARG_TASK, w->task);
	if (w->waker_task)
		arg(&sw.s.args, spawn ? ARG_PARENT : ARG_WAKER_TASK, w->waker_task);
	arg_str(&sw.s.args, ARG_QUEUE, queue);
	arg(&sw.s.args, ARG_DEPTH, w->depth);
	sl->ops->wake(sl, m, &sw);
}

/*
 * The wake a task made of itself during poll p (a yield), riding in its
 * record, when the format draws it as an arrow to the next poll. Kept by
 * task id (a model's task, never 0) until that poll.
 */
static const struct at_wake *self_wake(const struct slices *sl, const struct at_poll *p)
{
	const struct at_wake *w;

	if (!sl->ops->flows_between_polls || p->hdr.size < sizeof(struct at_poll_self_wake) ||
	    !p->task)
		return NULL;
	w = &((const struct at_poll_self_wake *)p)->wake;
	return w->task == p->task && w->wake_id ? w : NULL;
}

/*
 * Every argument of a poll, on its CPU view; a format leaves out what it
 * shows otherwise. stack: room for the poll's stack (--stacks).
 */
static void poll_args(struct slice_args *a, struct model *m, const struct at_poll *p, char *stack,
		      size_t size)
{
	bool asleep;
	uint32_t id = model__slice_stack(m, p, &asleep);

	arg(a, ARG_TASK, p->task);
	arg(a, ARG_WORKER, p->worker);
	arg(a, ARG_ON_CPU, p->oncpu_ns);
	if (at_poll_cpu_known(p))
		arg(a, ARG_CPU_CHARGED, p->cpu_ns);
	arg(a, ARG_BLOCKED, p->blocked_ns);
	arg(a, ARG_RUNNABLE, p->runnable_ns);
	if (p->wake_ts && p->wake_ts <= p->hdr.ts)
		arg(a, ARG_WAKE_DELAY, p->hdr.ts - p->wake_ts);
	arg(a, ARG_QUEUE_DEPTH, p->depth);
	arg_str(a, ARG_RESULT, p->ready ? "ready" : "pending");
	/* a run the samples saw (sample mode, and an escalation's dump before its probes) */
	if (p->flags & AT_POLL_SAMPLED)
		arg_str(a, ARG_MEASURED_BY, "samples");
	if (!id)
		return;
	/* it ran, or slept, long enough to have its stack taken: it, a frame a line */
	callstacks__text(&m->stacks, id, stack, size);
	arg_str(a, ARG_STACK, stack);
	arg_str(a, ARG_STACK_WHEN, asleep ? "asleep" : "on-cpu");
}

/*
 * Where task t waited from its last poll's end to until, when a read of the
 * live target placed that span: a slice on its track, a nanosecond inside
 * each end (the polls around it end and begin at the very times).
 */
static void wait_span(struct slices *sl, struct model *m, const struct task *t, uint64_t until)
{
	uint32_t at = model__idle_place(m, t, until);
	char name[512], stack[CALLSTACK_FRAMES * 320];
	struct slice s = { .kind = "wait", .name = name, .task = t ? t->id : 0 };

	if (!at || !sl->ops->wait || until < t->last_end + 3)
		return;
	callstacks__waiting(&m->places, at, "waiting at", name, sizeof(name));
	callstacks__text(&m->places, at, stack, sizeof(stack));
	s.ts = t->last_end + 1;
	s.dur = until - 1 - s.ts;
	arg_str(&s.args, ARG_WAITED_AT, stack);
	sl->ops->wait(sl, m, &s);
}

static void poll(struct slices *sl, struct model *m, const struct at_poll *p)
{
	const struct slices_ops *ops = sl->ops;
	struct task *t = model__task(m, p->task);
	bool linked = p->wake_id && t && t->pending.wake_id == p->wake_id;
	const struct at_wake *self = self_wake(sl, p);
	uint64_t end = p->hdr.ts + p->duration_ns;
	/* its previous poll drew this wake already, as an arrow from itself */
	bool drawn = linked && (uintptr_t)u64map__get(&sl->self_flows, p->task) == p->wake_id;
	char stack[CALLSTACK_FRAMES * 320];
	struct slice_poll sp = {
		.cpu = { .kind = "poll",
			 .name = t ? t->name : "task",
			 .ts = p->hdr.ts,
			 .dur = p->duration_ns,
			 .tid = p->hdr.tid,
			 .task = p->task,
			 .flow_in = linked ? p->wake_id : 0,
			 .flow_out = self ? self->wake_id : 0 },
		.task_ts = p->hdr.ts,
		.ready = p->ready,
	};

	ops->thread(sl, m, p->hdr.tid);
	if (ops->task)
		ops->task(sl, m, p->task);
	wait_span(sl, m, t, p->hdr.ts);
	if (linked && !drawn)
		wake(sl, m, &t->pending, true);
	queue_depth(sl, m, p->hdr.ts, (int32_t)p->worker, p->depth);
	/*
	 * A poll_end may come a little after the task's next poll began on
	 * another worker (docs/usdt-abi.md): the task view begins no earlier
	 * than the previous poll's end, so its slices never overlap.
	 */
	if (t && t->last_end > p->hdr.ts)
		sp.task_ts = t->last_end < end ? t->last_end : end;
	poll_args(&sp.cpu.args, m, p, stack, sizeof(stack));
	ops->poll(sl, m, &sp);
	/* until the poll that answers it, however many come first; none after the last */
	if (p->ready)
		u64map__del(&sl->self_flows, p->task);
	else if (self)
		u64map__set(&sl->self_flows, p->task, (void *)(uintptr_t)self->wake_id);

	/* Ends in time order after the beginnings: the counters at the end ride on them. */
	if (p->requeue >= 0)
		queue_depth(sl, m, end, p->requeue, p->requeue_depth);
	if (ops->poll_end)
		ops->poll_end(sl, m, &sp);
}

static void on_wake(struct slices *sl, struct model *m, const struct at_wake *w)
{
	struct task *t = model__task(m, w->task);

	if (w->queue != AT_QUEUE_NONE)
		queue_depth(sl, m, w->hdr.ts, w->queue, w->depth);
	if (!w->wake_id) {
		wake(sl, m, w, false);
		return;
	}
	/* Linked wakes wait for their poll; one still pending lost its poll. */
	if (t && t->pending.wake_id)
		wake(sl, m, &t->pending, false);
}

static void spawn(struct slices *sl, struct model *m, const struct at_spawn *s)
{
	struct task *t = model__task(m, s->task);

	if (sl->ops->spawn)
		sl->ops->spawn(sl, s->task);
	queue_depth(sl, m, s->hdr.ts, s->queue, s->depth);
	if (t && t->pending.wake_id)
		wake(sl, m, &t->pending, false);
	/* like a wake: with an arrow, it waits for the poll it queued */
	if (!s->wake_id) {
		struct at_wake w;

		model__spawn_as_wake(s, &w);
		wake(sl, m, &w, false);
	}
}

/*
 * A steal: "steal from worker V" on the thief's thread and, when the
 * victim's thread is known, "stolen by worker T" on it, an arrow between.
 */
static void steal(struct slices *sl, struct model *m, const struct at_steal *s)
{
	const struct slices_ops *ops = sl->ops;
	bool inferred = s->flags & AT_STEAL_INFERRED;
	bool known = s->victim != AT_WORKER_UNKNOWN;
	const struct worker *victim = known ? model__worker(m, s->victim) : NULL;
	uint64_t flow = at_steal_flow(m->pid, ++sl->steal_seq);
	bool linked = victim && victim->tid;
	char from[64], to[64];
	struct slice stolen = { .kind = "steal",
				.name = from,
				.ts = s->hdr.ts,
				.tid = linked ? victim->tid : 0,
				.flow_out = flow };
	/* One nanosecond later, so that the arrow always starts before it ends. */
	struct slice thief = { .kind = "steal",
			       .name = to,
			       .ts = s->hdr.ts + 1,
			       .tid = s->hdr.tid,
			       .flow_in = linked ? flow : 0 };

	if (linked)
		ops->thread(sl, m, victim->tid);
	if (!ops->thread(sl, m, s->hdr.tid))
		return;
	/* An inferred steal knows no depths: the counters keep theirs. */
	if (!inferred && known)
		queue_depth(sl, m, s->hdr.ts, (int32_t)s->victim, s->victim_depth);
	if (!inferred)
		queue_depth(sl, m, s->hdr.ts, (int32_t)s->thief, s->thief_depth);
	if (linked) {
		snprintf(from, sizeof(from), "%s by worker %u",
			 inferred ? "taken (inferred)" : "stolen", s->thief);
		arg(&stolen.args, ARG_COUNT, s->count);
		if (!inferred)
			arg(&stolen.args, ARG_DEPTH, s->victim_depth);
		ops->instant(sl, m, &stolen);
	}
	if (known)
		snprintf(to, sizeof(to), "steal%s from worker %u", inferred ? " (inferred)" : "",
			 s->victim);
	else
		snprintf(to, sizeof(to), "steal%s from another worker",
			 inferred ? " (inferred)" : "");
	arg(&thief.args, ARG_COUNT, s->count);
	arg(&thief.args, ARG_THIEF, s->thief);
	if (known)
		arg(&thief.args, ARG_VICTIM, s->victim);
	arg(&thief.args, ARG_INFERRED, inferred);
	if (!inferred)
		arg(&thief.args, ARG_DEPTH, s->thief_depth);
	ops->instant(sl, m, &thief);
}

/* A worker asleep for want of work. */
static void park(struct slices *sl, struct model *m, const struct at_park *p)
{
	struct slice s = { .kind = "park",
			   .name = "parked",
			   .ts = p->hdr.ts,
			   .dur = p->duration_ns,
			   .tid = p->hdr.tid };

	if (!sl->ops->thread(sl, m, p->hdr.tid))
		return;
	arg(&s.args, ARG_WORKER, p->worker);
	sl->ops->slice(sl, m, &s);
}

/* A CPU sample of a poll's stack (--stacks); where a poll slept is on its slice instead. */
static void sample(struct slices *sl, struct model *m, const struct at_stack *st)
{
	const struct callstack *cs = callstacks__get(&m->stacks, m->cur_stack);

	if (sl->ops->sample && cs && (st->flags & AT_STACK_ONCPU))
		sl->ops->sample(sl, m, st, cs);
}

/* --- the sink ----------------------------------------------------------- */

static void slices_event(struct sink *s, struct model *m, const struct at_hdr *ev)
{
	struct slices *sl = sl_of(s);

	start(sl, m);
	switch (ev->kind) {
	case AT_EV_POLL:
		poll(sl, m, (const struct at_poll *)ev);
		break;
	case AT_EV_WAKE:
		on_wake(sl, m, (const struct at_wake *)ev);
		break;
	case AT_EV_SPAWN:
		spawn(sl, m, (const struct at_spawn *)ev);
		break;
	case AT_EV_STEAL:
		steal(sl, m, (const struct at_steal *)ev);
		break;
	case AT_EV_PARK:
		park(sl, m, (const struct at_park *)ev);
		break;
	case AT_EV_STACK:
		sample(sl, m, (const struct at_stack *)ev);
		break;
	}
	if (sl->ops->record_done)
		sl->ops->record_done(sl, m);
}

static void slices_alert(struct sink *s, struct model *m, const struct alert *a)
{
	struct slices *sl = sl_of(s);
	char msg[1024], name[AT_TASK_NAME_LEN + 64], stack[CALLSTACK_FRAMES * 320];
	bool is_end = a->state == ALERT_END;
	/* A beginning is marked where the problem began, an end where it ended. */
	struct slice al = { .kind = "alert", .name = name, .ts = is_end ? a->ts : a->begin_ts };

	start(sl, m);
	alert__format(msg, sizeof(msg), m, a);
	alert__title(name, sizeof(name), a);
	arg(&al.args, ARG_EPISODE, a->episode);
	arg_str(&al.args, ARG_STATE, is_end ? "end" : "begin");
	if (a->task)
		arg(&al.args, ARG_TASK, a->task);
	if (a->worker >= 0)
		arg(&al.args, ARG_WORKER, (uint64_t)a->worker);
	if (a->kind == ALERT_LONG_POLL)
		arg_str(&al.args, ARG_CAUSE, poll_cause_str(a->cause));
	if (a->stack) {
		callstacks__text(&m->stacks, a->stack, stack, sizeof(stack));
		arg_str(&al.args, ARG_STACK, stack);
	}
	arg_str(&al.args, ARG_MESSAGE, msg);
	sl->ops->alert(sl, m, &al);
}

static void slices_tick(struct sink *s, struct model *m)
{
	/* Streamed: what is written survives the tracer being killed. */
	sl_of(s)->ops->flush(sl_of(s));
}

static int slices_finish(struct sink *s, struct model *m)
{
	struct slices *sl = sl_of(s);
	uint64_t key;
	void *val;

	start(sl, m);
	/* Wakes whose poll never came still belong in the trace; so do waits still going. */
	for (size_t i = 0; u64map__next(&m->tasks, &i, &key, &val);) {
		struct task *t = val;

		if (t->pending.wake_id)
			wake(sl, m, &t->pending, false);
		if (!t->done)
			wait_span(sl, m, t, model__open_wait_end(m, t, m->end_ts));
	}
	return sl->ops->finish(sl, m);
}

static void slices_free(struct sink *s)
{
	struct slices *sl = sl_of(s);

	free(sl->depth);
	u64map__clear(&sl->self_flows);
	sl->ops->free(sl);
}

static const struct sink_ops slices_sink_ops = {
	.name = "trace",
	.event = slices_event,
	.alert = slices_alert,
	.tick = slices_tick,
	.finish = slices_finish,
	.free = slices_free,
};

struct sink *slices__init(struct slices *sl, const struct slices_ops *ops)
{
	sl->sink.ops = &slices_sink_ops;
	sl->ops = ops;
	sl->inject_depth = -1;
	u64map__init(&sl->self_flows);
	return &sl->sink;
}
