// SPDX-License-Identifier: MIT
#include "sinks/trace_json.h"

#include <errno.h>
#include <stdlib.h>

#include "lib/outbuf.h"
#include "lib/u64map.h"
#include "sinks/slices.h"

enum thread_announced {
	ANNOUNCED_THREAD = 1,
	ANNOUNCED_WORKER,
};

struct trace_json {
	struct slices slices;	/* first: the sink, and what the trace holds */
	struct outbuf *ob;
	struct u64map announced; /* tid -> enum thread_announced */
	bool process_named;
};

static inline struct trace_json *tj_of(struct slices *sl)
{
	return (struct trace_json *)sl;
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

static void put_name(struct outbuf *ob, const char *name)
{
	ob_puts(ob, ",\"name\":");
	ob_json_str(ob, name);
}

/* "name":"<name> #<id>": where no track is named after the task, ids keep same-named ones apart. */
static void put_task_name(struct outbuf *ob, const char *name, uint64_t id)
{
	ob_puts(ob, ",\"name\":\"");
	ob_json_chars(ob, name);
	ob_puts(ob, " #");
	ob_u64(ob, id);
	ob_putc(ob, '"');
}

/* Durations in microseconds, as the format's timestamps: NAME_us. */
static void put_args(struct outbuf *ob, const struct slice_args *a)
{
	ob_puts(ob, ",\"args\":{");
	for (int i = 0; i < a->nr; i++) {
		const struct slice_value *v = &a->v[i];
		const struct slice_arg_info *info = &slices__args[v->name];

		ob_puts(ob, i ? ",\"" : "\"");
		ob_puts(ob, info->name);
		ob_puts(ob, info->type == SLICE_NS ? "_us\":" : "\":");
		switch (info->type) {
		case SLICE_U64:
			ob_u64(ob, v->u);
			break;
		case SLICE_NS:
			ob_us(ob, v->u);
			break;
		case SLICE_BOOL:
			ob_puts(ob, v->u ? "true" : "false");
			break;
		case SLICE_LABEL:
		case SLICE_TEXT:
			ob_json_str(ob, v->s);
			break;
		}
	}
	ob_putc(ob, '}');
}

static void put_flow(struct outbuf *ob, uint64_t id, bool out)
{
	ob_puts(ob, ",\"bind_id\":");
	ob_u64(ob, id);
	ob_puts(ob, out ? ",\"flow_out\":true" : ",\"flow_in\":true");
}

/* A metadata event (what: process_name, ...) up to its one argument's value; closed with "}}". */
static void metadata(struct outbuf *ob, const struct model *m, uint32_t tid, const char *what,
		     const char *arg)
{
	start_event(ob);
	ob_puts(ob, "\"ph\":\"M\",\"pid\":");
	ob_u64(ob, m->pid);
	put_tid(ob, tid);
	ob_puts(ob, ",\"name\":\"");
	ob_puts(ob, what);
	ob_puts(ob, "\",\"args\":{\"");
	ob_puts(ob, arg);
	ob_puts(ob, "\":");
}

static void meta_name(struct outbuf *ob, const struct model *m, uint32_t tid, const char *what,
		      const char *name)
{
	metadata(ob, m, tid, what, "name");
	ob_json_str(ob, name);
	ob_puts(ob, "}}");
}

static void meta_sort_index(struct outbuf *ob, const struct model *m, uint32_t tid, uint64_t index)
{
	metadata(ob, m, tid, "thread_sort_index", "sort_index");
	ob_u64(ob, index);
	ob_puts(ob, "}}");
}

static void name_process(struct trace_json *tj, struct model *m)
{
	meta_name(tj->ob, m, m->pid, "process_name", slices__process_name(m));
	tj->process_named = true;
}

/*
 * Names a thread the first time it appears, and again once known as a
 * worker. Events name their thread by tid: any can be written on, even one
 * not named (tid 0).
 */
static bool tj_thread(struct slices *sl, struct model *m, uint32_t tid)
{
	struct trace_json *tj = tj_of(sl);
	uintptr_t have = (uintptr_t)u64map__get(&tj->announced, tid);
	struct thread *th = model__thread(m, tid);
	struct slices_thread info;
	uintptr_t want;

	if (!th || !tid)
		return true;
	want = th->worker >= 0 ? ANNOUNCED_WORKER : ANNOUNCED_THREAD;
	if (have >= want)
		return true;
	if (!tj->process_named)
		name_process(tj, m);
	slices__thread(th, tid, &info);
	meta_name(tj->ob, m, tid, "thread_name", info.name);
	meta_sort_index(tj->ob, m, tid, info.order);
	u64map__set(&tj->announced, tid, (void *)want);
	return true;
}

/* The counter of all queues ("queue depth"), one series a queue. */
static void tj_depth(struct slices *sl, struct model *m, const struct slice_depth *d)
{
	struct outbuf *ob = tj_of(sl)->ob;
	char key[32];

	slices__queue_name(d->queue, key, sizeof(key));
	begin_event(ob, m, 'C', "queue", d->ts);
	ob_puts(ob, ",\"name\":\"queue depth\",\"args\":{");
	ob_json_str(ob, key);
	ob_putc(ob, ':');
	ob_u64(ob, d->depth);
	ob_putc(ob, '}');
	end_event(ob);
}

/*
 * A slice on a thread (X), an instant as one 0 long: flows bind to slices.
 * An event binds one flow: a poll's slice ends its arrow and starts none.
 */
static void put_slice(struct trace_json *tj, const struct model *m, const struct slice *s,
		      bool with_id)
{
	struct outbuf *ob = tj->ob;

	begin_event(ob, m, 'X', s->kind, s->ts);
	put_tid(ob, s->tid);
	put_dur(ob, s->dur);
	if (with_id)
		put_task_name(ob, s->name, s->task);
	else
		put_name(ob, s->name);
	put_args(ob, &s->args);
	if (s->flow_out)
		put_flow(ob, s->flow_out, true);
	if (s->flow_in)
		put_flow(ob, s->flow_in, false);
	end_event(ob);
}

static void tj_slice(struct slices *sl, struct model *m, const struct slice *s)
{
	put_slice(tj_of(sl), m, s, false);
}

/*
 * The task view: an async track per task (its id the track's), "<task>
 * #<id>"; with s's arguments when args.
 */
static void task_event(struct outbuf *ob, const struct model *m, char ph, uint64_t ts,
		       const struct slice *s, bool args)
{
	begin_event(ob, m, ph, "task", ts);
	put_task_name(ob, s->name, s->task);
	ob_puts(ob, ",\"id2\":{\"local\":\"");
	ob_hex(ob, s->task);
	ob_puts(ob, "\"}");
	if (args)
		put_args(ob, &s->args);
	end_event(ob);
}

/* A poll: its CPU view, with every argument and the arrow; the task view bare. */
static void tj_poll(struct slices *sl, struct model *m, const struct slice_poll *p)
{
	struct trace_json *tj = tj_of(sl);

	put_slice(tj, m, &p->cpu, false);
	task_event(tj->ob, m, 'b', p->task_ts, &p->cpu, false);
	task_event(tj->ob, m, 'e', p->cpu.ts + p->cpu.dur, &p->cpu, false);
}

/* Where a task waited between polls: on its track, with where in full. */
static void tj_wait(struct slices *sl, struct model *m, const struct slice *s)
{
	struct outbuf *ob = tj_of(sl)->ob;

	task_event(ob, m, 'b', s->ts, s, true);
	task_event(ob, m, 'e', s->ts + s->dur, s, false);
}

/* A wake: on the waking thread (inside the waker's poll, when a task woke it). */
static void tj_wake(struct slices *sl, struct model *m, const struct slice_wake *w)
{
	tj_thread(sl, m, w->s.tid);
	put_slice(tj_of(sl), m, &w->s, true);
}

/* Process-scoped: alerts get a track of their own above the threads. */
static void tj_alert(struct slices *sl, struct model *m, const struct slice *a)
{
	struct trace_json *tj = tj_of(sl);
	struct outbuf *ob = tj->ob;

	if (!tj->process_named)
		name_process(tj, m);
	begin_event(ob, m, 'i', a->kind, a->ts);
	ob_puts(ob, ",\"s\":\"p\"");
	put_name(ob, a->name);
	put_args(ob, &a->args);
	end_event(ob);
}

static void tj_flush(struct slices *sl)
{
	outbuf__flush(tj_of(sl)->ob);
}

static void tj_free(struct slices *sl)
{
	struct trace_json *tj = tj_of(sl);

	outbuf__free(tj->ob);
	u64map__clear(&tj->announced);
	free(tj);
}

static int tj_finish(struct slices *sl, struct model *m)
{
	struct trace_json *tj = tj_of(sl);

	/* the name again: a process first seen unnamed has one after all */
	meta_name(tj->ob, m, m->pid, "process_name", slices__process_name(m));
	return outbuf__flush(tj->ob);
}

/* JSON binds one flow an event: a poll cannot end one arrow and start another. */
static const struct slices_ops trace_json_ops = {
	.flows_between_polls = false,
	.thread = tj_thread,
	.depth = tj_depth,
	.poll = tj_poll,
	.wait = tj_wait,
	.wake = tj_wake,
	.instant = tj_slice,
	.slice = tj_slice,
	.alert = tj_alert,
	.flush = tj_flush,
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
	u64map__init(&tj->announced);
	*s = slices__init(&tj->slices, &trace_json_ops);
	return 0;
}
