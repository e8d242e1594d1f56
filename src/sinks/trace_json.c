// SPDX-License-Identifier: MIT
#include "sinks/trace_json.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/outbuf.h"
#include "lib/u64map.h"
#include "sinks/alerts.h"

enum thread_announced {
	ANNOUNCED_THREAD = 1,
	ANNOUNCED_WORKER,
};

struct trace_json {
	struct sink sink;
	struct outbuf *ob;
	struct u64map announced; /* tid -> enum thread_announced */
	int64_t *depth;		 /* last queue depth written, per worker; -1 none */
	uint32_t nr_depth;
	int64_t inject_depth;
	uint64_t steal_seq;
	bool process_named;
};

static inline struct trace_json *tj_of(struct sink *s)
{
	return (struct trace_json *)s;
}

/*
 * Events are separated by a comma written before each but the file's first:
 * several writers (one per process traced) share one array, and the file
 * stays strict JSON whichever of them writes last.
 */
static void start_event(struct outbuf *ob)
{
	if (outbuf__bytes(ob) > sizeof(TRACE_JSON_HEAD) - 1)
		ob_puts(ob, ",\n");
	ob_putc(ob, '{');
}

static void end_event(struct outbuf *ob)
{
	ob_putc(ob, '}');
}

static void begin_event(struct outbuf *ob, const struct model *m, char ph, const char *cat,
			uint64_t ts)
{
	start_event(ob);
	ob_puts(ob, "\"ph\":\"");
	ob_putc(ob, ph);
	ob_puts(ob, "\",\"cat\":\"");
	ob_puts(ob, cat);
	ob_puts(ob, "\",\"pid\":");
	ob_u64(ob, m->pid);
	ob_puts(ob, ",\"ts\":");
	/* relative: the integer part stays small, no double rounding */
	ob_us(ob, model__rel(m, ts));
}

static void put_tid(struct outbuf *ob, uint32_t tid)
{
	ob_puts(ob, ",\"tid\":");
	ob_u64(ob, tid);
}

static void put_dur(struct outbuf *ob, uint64_t ns)
{
	ob_puts(ob, ",\"dur\":");
	ob_us(ob, ns);
}

/* "name":"<prefix><task name> #<id>": ids keep same-named tasks apart. */
static void put_task_name(struct outbuf *ob, const char *prefix, const struct task *t,
			  uint64_t id)
{
	ob_puts(ob, ",\"name\":\"");
	ob_json_chars(ob, prefix);
	ob_json_chars(ob, t ? t->name : "task");
	ob_puts(ob, " #");
	ob_u64(ob, id);
	ob_putc(ob, '"');
}

static void put_arg_us(struct outbuf *ob, const char *key, uint64_t ns)
{
	ob_puts(ob, key);
	ob_us(ob, ns);
}

static void put_queue(struct outbuf *ob, int32_t queue)
{
	ob_puts(ob, ",\"queue\":");
	if (queue >= 0) {
		ob_puts(ob, "\"worker ");
		ob_u64(ob, (uint64_t)queue);
		ob_putc(ob, '"');
	} else {
		ob_puts(ob, queue == AT_QUEUE_INJECT ? "\"inject\"" : "\"none\"");
	}
}

static void put_flow(struct outbuf *ob, uint64_t id, bool out)
{
	ob_puts(ob, ",\"bind_id\":");
	ob_u64(ob, id);
	ob_puts(ob, out ? ",\"flow_out\":true" : ",\"flow_in\":true");
}

static void metadata(struct outbuf *ob, const struct model *m, uint32_t tid, const char *what,
		     const char *name)
{
	start_event(ob);
	ob_puts(ob, "\"ph\":\"M\",\"pid\":");
	ob_u64(ob, m->pid);
	put_tid(ob, tid);
	ob_puts(ob, ",\"name\":\"");
	ob_puts(ob, what);
	ob_puts(ob, "\",\"args\":{\"name\":");
	ob_json_str(ob, name);
	ob_putc(ob, '}');
}

static void sort_index(struct outbuf *ob, const struct model *m, uint32_t tid, const char *what,
		       uint64_t index)
{
	start_event(ob);
	ob_puts(ob, "\"ph\":\"M\",\"pid\":");
	ob_u64(ob, m->pid);
	put_tid(ob, tid);
	ob_puts(ob, ",\"name\":\"");
	ob_puts(ob, what);
	ob_puts(ob, "\",\"args\":{\"sort_index\":");
	ob_u64(ob, index);
	ob_putc(ob, '}');
}

static void name_process(struct trace_json *tj, struct model *m)
{
	char name[64];

	snprintf(name, sizeof(name), "%s", m->comm[0] ? m->comm : "target");
	metadata(tj->ob, m, m->pid, "process_name", name);
	end_event(tj->ob);
	tj->process_named = true;
}

/* Names a thread the first time it appears, and again once known as a worker. */
static void announce(struct trace_json *tj, struct model *m, uint32_t tid)
{
	uintptr_t have = (uintptr_t)u64map__get(&tj->announced, tid);
	struct thread *th = model__thread(m, tid);
	char name[64];
	uintptr_t want;

	if (!th || !tid)
		return;
	want = th->worker >= 0 ? ANNOUNCED_WORKER : ANNOUNCED_THREAD;
	if (have >= want)
		return;
	if (!tj->process_named)
		name_process(tj, m);
	if (th->worker >= 0)
		snprintf(name, sizeof(name), "worker %d (%s)", th->worker, th->comm);
	else
		snprintf(name, sizeof(name), "%s", th->comm);
	metadata(tj->ob, m, tid, "thread_name", name);
	end_event(tj->ob);
	/* Workers first, in worker order; other threads after them. */
	sort_index(tj->ob, m, tid, "thread_sort_index",
		   th->worker >= 0 ? (uint64_t)th->worker : 100000 + tid);
	end_event(tj->ob);
	u64map__set(&tj->announced, tid, (void *)want);
}

static void counter(struct trace_json *tj, const struct model *m, uint64_t ts, const char *key,
		    uint64_t v)
{
	begin_event(tj->ob, m, 'C', "queue", ts);
	ob_puts(tj->ob, ",\"name\":\"queue depth\",\"args\":{");
	ob_json_str(tj->ob, key);
	ob_putc(tj->ob, ':');
	ob_u64(tj->ob, v);
	ob_putc(tj->ob, '}');
	end_event(tj->ob);
}

/* Writes a queue's depth as a counter when it changed since last written. */
static void queue_depth(struct trace_json *tj, const struct model *m, uint64_t ts, int32_t queue,
			uint32_t depth)
{
	char key[32];

	if (queue == AT_QUEUE_INJECT) {
		if (tj->inject_depth == depth)
			return;
		tj->inject_depth = depth;
		counter(tj, m, ts, "inject", depth);
		return;
	}
	if (queue < 0 || (uint32_t)queue >= 4096)
		return;
	if ((uint32_t)queue >= tj->nr_depth) {
		uint32_t n = (uint32_t)queue + 1;
		int64_t *d = realloc(tj->depth, n * sizeof(*d));

		if (!d)
			return;
		for (uint32_t i = tj->nr_depth; i < n; i++)
			d[i] = -1;
		tj->depth = d;
		tj->nr_depth = n;
	}
	if (tj->depth[queue] == depth)
		return;
	tj->depth[queue] = depth;
	snprintf(key, sizeof(key), "worker %d", queue);
	counter(tj, m, ts, key, depth);
}

/* The wake (or spawn) slice on the waking thread, the flow's source if linked. */
static void write_wake(struct trace_json *tj, struct model *m, const struct at_wake *w,
		       bool linked)
{
	struct outbuf *ob = tj->ob;
	const struct task *t = model__task(m, w->task);
	bool spawn = w->hdr.kind == AT_EV_SPAWN;

	announce(tj, m, w->hdr.tid);
	begin_event(ob, m, 'X', spawn ? "spawn" : "wake", w->hdr.ts);
	put_tid(ob, w->hdr.tid);
	put_dur(ob, 0);
	put_task_name(ob, spawn ? "spawn " : "wake ", t, w->task);
	ob_puts(ob, ",\"args\":{");
	ob_key_u64(ob, "\"task\":", w->task);
	if (w->waker_task)
		ob_key_u64(ob, spawn ? ",\"parent\":" : ",\"waker_task\":", w->waker_task);
	put_queue(ob, w->queue);
	ob_key_u64(ob, ",\"depth\":", w->depth);
	ob_putc(ob, '}');
	if (linked)
		put_flow(ob, w->wake_id, true);
	end_event(ob);
}

/* A poll that ran long enough to have its stack taken (--stacks): it, a frame a line. */
static void put_stack(struct outbuf *ob, struct model *m, const struct at_poll *p)
{
	bool asleep;
	uint32_t id = model__slice_stack(m, p, &asleep);
	char text[CALLSTACK_FRAMES * 320];

	if (!id)
		return;
	callstacks__text(&m->stacks, id, text, sizeof(text));
	ob_key_str(ob, ",\"stack\":", text);
	ob_puts(ob, asleep ? ",\"stack_when\":\"asleep\"" : ",\"stack_when\":\"on-cpu\"");
}

static void on_poll(struct trace_json *tj, struct model *m, const struct at_poll *p)
{
	struct outbuf *ob = tj->ob;
	struct task *t = model__task(m, p->task);
	bool linked = p->wake_id && t && t->pending.wake_id == p->wake_id;
	uint64_t end = p->hdr.ts + p->duration_ns;

	announce(tj, m, p->hdr.tid);
	if (linked)
		write_wake(tj, m, &t->pending, true);
	queue_depth(tj, m, p->hdr.ts, (int32_t)p->worker, p->depth);

	/* The CPU view: the poll on its worker thread. */
	begin_event(ob, m, 'X', "poll", p->hdr.ts);
	put_tid(ob, p->hdr.tid);
	put_dur(ob, p->duration_ns);
	ob_puts(ob, ",\"name\":");
	ob_json_str(ob, t ? t->name : "task");
	ob_puts(ob, ",\"args\":{");
	ob_key_u64(ob, "\"task\":", p->task);
	ob_key_u64(ob, ",\"worker\":", p->worker);
	put_arg_us(ob, ",\"on_cpu_us\":", p->oncpu_ns);
	if (at_poll_cpu_known(p))
		put_arg_us(ob, ",\"cpu_charged_us\":", p->cpu_ns);
	put_arg_us(ob, ",\"blocked_us\":", p->blocked_ns);
	put_arg_us(ob, ",\"runnable_us\":", p->runnable_ns);
	if (p->wake_ts && p->wake_ts <= p->hdr.ts)
		put_arg_us(ob, ",\"wake_delay_us\":", p->hdr.ts - p->wake_ts);
	ob_key_u64(ob, ",\"queue_depth\":", p->depth);
	ob_puts(ob, p->ready ? ",\"result\":\"ready\"" : ",\"result\":\"pending\"");
	put_stack(ob, m, p);
	ob_putc(ob, '}');
	if (linked)
		put_flow(ob, p->wake_id, false);
	end_event(ob);

	/*
	 * The task view: the same poll on the task's own async track. A poll_end
	 * may come a little after the task's next poll began on another worker
	 * (docs/usdt-abi.md): start no later than the previous poll's end, so
	 * slices on the track never overlap.
	 */
	begin_event(ob, m, 'b', "task",
		    t && t->last_end > p->hdr.ts ? (t->last_end < end ? t->last_end : end)
						 : p->hdr.ts);
	put_task_name(ob, "", t, p->task);
	ob_puts(ob, ",\"id2\":{\"local\":\"");
	ob_hex(ob, p->task);
	ob_puts(ob, "\"}");
	end_event(ob);
	begin_event(ob, m, 'e', "task", end);
	put_task_name(ob, "", t, p->task);
	ob_puts(ob, ",\"id2\":{\"local\":\"");
	ob_hex(ob, p->task);
	ob_puts(ob, "\"}");
	end_event(ob);

	if (p->requeue >= 0)
		queue_depth(tj, m, end, p->requeue, p->requeue_depth);
}

static void on_wake(struct trace_json *tj, struct model *m, const struct at_wake *w)
{
	struct task *t = model__task(m, w->task);

	if (w->queue != AT_QUEUE_NONE)
		queue_depth(tj, m, w->hdr.ts, w->queue, w->depth);
	if (!w->wake_id) {
		write_wake(tj, m, w, false);
		return;
	}
	/* Linked wakes wait for their poll; one still pending lost its poll. */
	if (t && t->pending.wake_id)
		write_wake(tj, m, &t->pending, false);
}

static void on_spawn(struct trace_json *tj, struct model *m, const struct at_spawn *s)
{
	struct task *t = model__task(m, s->task);

	queue_depth(tj, m, s->hdr.ts, s->queue, s->depth);
	if (t && t->pending.wake_id)
		write_wake(tj, m, &t->pending, false);
	if (!s->wake_id) {
		struct at_wake w;

		model__spawn_as_wake(s, &w);
		write_wake(tj, m, &w, false);
	}
}

static void on_steal(struct trace_json *tj, struct model *m, const struct at_steal *s)
{
	struct outbuf *ob = tj->ob;
	bool inferred = s->flags & AT_STEAL_INFERRED;
	bool known = s->victim != AT_WORKER_UNKNOWN;
	const struct worker *victim = known ? model__worker(m, s->victim) : NULL;
	uint64_t flow = at_steal_flow(m->pid, ++tj->steal_seq);
	bool linked = victim && victim->tid;

	announce(tj, m, s->hdr.tid);
	if (linked) {
		announce(tj, m, victim->tid);
		begin_event(ob, m, 'X', "steal", s->hdr.ts);
		put_tid(ob, victim->tid);
		put_dur(ob, 0);
		ob_puts(ob, inferred ? ",\"name\":\"taken (inferred) by worker "
				     : ",\"name\":\"stolen by worker ");
		ob_u64(ob, s->thief);
		ob_puts(ob, "\",\"args\":{");
		ob_key_u64(ob, "\"count\":", s->count);
		if (!inferred)
			ob_key_u64(ob, ",\"depth\":", s->victim_depth);
		ob_putc(ob, '}');
		put_flow(ob, flow, true);
		end_event(ob);
	}
	/* One nanosecond later, so the importer always sees the flow start first. */
	begin_event(ob, m, 'X', "steal", s->hdr.ts + 1);
	put_tid(ob, s->hdr.tid);
	put_dur(ob, 0);
	ob_puts(ob, inferred ? ",\"name\":\"steal (inferred) from " : ",\"name\":\"steal from ");
	if (known) {
		ob_puts(ob, "worker ");
		ob_u64(ob, s->victim);
	} else {
		ob_puts(ob, "another worker");
	}
	ob_puts(ob, "\",\"args\":{");
	ob_key_u64(ob, "\"count\":", s->count);
	ob_key_u64(ob, ",\"thief\":", s->thief);
	if (known)
		ob_key_u64(ob, ",\"victim\":", s->victim);
	ob_puts(ob, inferred ? ",\"inferred\":true" : ",\"inferred\":false");
	if (!inferred)
		ob_key_u64(ob, ",\"depth\":", s->thief_depth);
	ob_putc(ob, '}');
	if (linked)
		put_flow(ob, flow, false);
	end_event(ob);
	/* An inferred steal knows no depths: the counters keep theirs. */
	if (!inferred && known)
		queue_depth(tj, m, s->hdr.ts, (int32_t)s->victim, s->victim_depth);
	if (!inferred)
		queue_depth(tj, m, s->hdr.ts, (int32_t)s->thief, s->thief_depth);
}

static void on_park(struct trace_json *tj, struct model *m, const struct at_park *p)
{
	struct outbuf *ob = tj->ob;

	announce(tj, m, p->hdr.tid);
	begin_event(ob, m, 'X', "park", p->hdr.ts);
	put_tid(ob, p->hdr.tid);
	put_dur(ob, p->duration_ns);
	ob_puts(ob, ",\"name\":\"parked\",\"args\":{");
	ob_key_u64(ob, "\"worker\":", p->worker);
	ob_putc(ob, '}');
	end_event(ob);
}

static void tj_event(struct sink *s, struct model *m, const struct at_hdr *ev)
{
	struct trace_json *tj = tj_of(s);

	switch (ev->kind) {
	case AT_EV_POLL:
		on_poll(tj, m, (const struct at_poll *)ev);
		break;
	case AT_EV_WAKE:
		on_wake(tj, m, (const struct at_wake *)ev);
		break;
	case AT_EV_SPAWN:
		on_spawn(tj, m, (const struct at_spawn *)ev);
		break;
	case AT_EV_STEAL:
		on_steal(tj, m, (const struct at_steal *)ev);
		break;
	case AT_EV_PARK:
		on_park(tj, m, (const struct at_park *)ev);
		break;
	}
}

static void tj_alert(struct sink *s, struct model *m, const struct alert *a)
{
	struct trace_json *tj = tj_of(s);
	struct outbuf *ob = tj->ob;
	char msg[1024], name[AT_TASK_NAME_LEN + 64];
	bool is_end = a->state == ALERT_END;

	if (!tj->process_named)
		name_process(tj, m);
	alert__format(msg, sizeof(msg), m, a);
	alert__title(name, sizeof(name), a);
	/* Process-scoped: alerts get a track of their own above the threads.
	 * A beginning is marked where the problem began, an end where it ended. */
	begin_event(ob, m, 'i', "alert", is_end ? a->ts : a->begin_ts);
	ob_puts(ob, ",\"s\":\"p\",\"name\":");
	ob_json_str(ob, name);
	ob_puts(ob, ",\"args\":{");
	ob_key_u64(ob, "\"episode\":", a->episode);
	ob_puts(ob, is_end ? ",\"state\":\"end\"" : ",\"state\":\"begin\"");
	if (a->task)
		ob_key_u64(ob, ",\"task\":", a->task);
	if (a->worker >= 0)
		ob_key_u64(ob, ",\"worker\":", (uint64_t)a->worker);
	if (a->kind == ALERT_LONG_POLL) {
		ob_puts(ob, ",\"cause\":\"");
		ob_puts(ob, poll_cause_str(a->cause));
		ob_putc(ob, '"');
	}
	if (a->stack) {
		char stack[CALLSTACK_FRAMES * 320];

		callstacks__text(&m->stacks, a->stack, stack, sizeof(stack));
		ob_key_str(ob, ",\"stack\":", stack);
	}
	ob_puts(ob, ",\"message\":");
	ob_json_str(ob, msg);
	ob_putc(ob, '}');
	end_event(ob);
}

static void tj_tick(struct sink *s, struct model *m)
{
	/* Streamed: what is written survives the tracer being killed. */
	outbuf__flush(tj_of(s)->ob);
}

static int tj_finish(struct sink *s, struct model *m)
{
	struct trace_json *tj = tj_of(s);
	uint64_t key;
	void *val;

	/* Wakes whose poll never came still belong in the trace. */
	for (size_t i = 0; u64map__next(&m->tasks, &i, &key, &val);) {
		struct task *t = val;

		if (t->pending.wake_id)
			write_wake(tj, m, &t->pending, false);
	}
	/* the name again: a process first seen unnamed has one after all */
	metadata(tj->ob, m, m->pid, "process_name", m->comm[0] ? m->comm : "target");
	end_event(tj->ob);
	return outbuf__flush(tj->ob);
}

static void tj_free(struct sink *s)
{
	struct trace_json *tj = tj_of(s);

	outbuf__free(tj->ob);
	u64map__clear(&tj->announced);
	free(tj->depth);
	free(tj);
}

static const struct sink_ops trace_json_ops = {
	.name = "json",
	.event = tj_event,
	.alert = tj_alert,
	.tick = tj_tick,
	.finish = tj_finish,
	.free = tj_free,
};

int trace_json__begin(struct outbuf *ob)
{
	ob_puts(ob, TRACE_JSON_HEAD);
	return outbuf__flush(ob);
}

int trace_json__end(struct outbuf *ob)
{
	ob_puts(ob, "\n]\n");
	return outbuf__flush(ob);
}

int trace_json__new(struct sink **s, struct outbuf *ob)
{
	struct trace_json *tj = calloc(1, sizeof(*tj));

	if (!tj)
		return -ENOMEM;
	tj->ob = outbuf__get(ob);
	tj->sink.ops = &trace_json_ops;
	tj->inject_depth = -1;
	u64map__init(&tj->announced);
	*s = &tj->sink;
	return 0;
}
