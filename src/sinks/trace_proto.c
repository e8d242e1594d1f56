// SPDX-License-Identifier: MIT
#include "sinks/trace_proto.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/pb.h"
#include "lib/u64map.h"
#include "lib/util.h"
#include "sinks/pftrace_file.h"
#include "sinks/slices.h"

/* Field numbers: docs/trace-format.md, tests/proto/perfetto_trace.proto. */
enum {
	TRACE_PACKET = 1,

	PACKET_CLOCK_SNAPSHOT = 6,
	PACKET_TIMESTAMP = 8,
	PACKET_SEQUENCE_ID = 10,
	PACKET_TRACK_EVENT = 11,
	PACKET_INTERNED_DATA = 12,
	PACKET_SEQUENCE_FLAGS = 13,
	PACKET_TIMESTAMP_CLOCK_ID = 58,
	PACKET_DEFAULTS = 59,
	PACKET_TRACK_DESCRIPTOR = 60,
	PACKET_PERF_SAMPLE = 66,

	PERF_PID = 2,
	PERF_TID = 3,
	PERF_CALLSTACK_IID = 4,
	PERF_CPU_MODE = 5,

	DEFAULTS_TIMESTAMP_CLOCK_ID = 58,

	SNAPSHOT_CLOCKS = 1,
	CLOCK_ID = 1,
	CLOCK_TIMESTAMP = 2,
	CLOCK_INCREMENTAL = 3,

	TRACK_UUID = 1,
	TRACK_NAME = 2,
	TRACK_PROCESS = 3,
	TRACK_THREAD = 4,
	TRACK_PARENT_UUID = 5,
	TRACK_COUNTER = 8,
	TRACK_CHILD_ORDERING = 11,
	TRACK_SIBLING_ORDER_RANK = 12,
	TRACK_SIBLING_MERGE_BEHAVIOR = 15,

	PROCESS_PID = 1,
	PROCESS_NAME = 6,
	THREAD_PID = 1,
	THREAD_TID = 2,
	THREAD_NAME = 5,
	COUNTER_UNIT = 3,

	EVENT_DEBUG_ANNOTATIONS = 4,
	EVENT_TYPE = 9,
	EVENT_NAME_IID = 10,
	EVENT_TRACK_UUID = 11,
	EVENT_EXTRA_COUNTER_VALUES = 12,
	EVENT_NAME = 23,
	EVENT_COUNTER_VALUE = 30,
	EVENT_EXTRA_COUNTER_TRACK_UUIDS = 31,
	EVENT_FLOW_IDS = 47,
	EVENT_TERMINATING_FLOW_IDS = 48,

	ANNOTATION_NAME_IID = 1,
	ANNOTATION_BOOL = 2,
	ANNOTATION_UINT = 3,
	ANNOTATION_STRING = 6,
	ANNOTATION_STRING_IID = 17,

	INTERNED_EVENT_NAMES = 2,
	INTERNED_ANNOTATION_NAMES = 3,
	INTERNED_ANNOTATION_STRINGS = 29,
	INTERNED_FUNCTION_NAMES = 5,
	INTERNED_FRAMES = 6,
	INTERNED_CALLSTACKS = 7,
	INTERNED_MAPPING_PATHS = 17,
	INTERNED_MAPPINGS = 19,
	FRAME_IID = 1,
	FRAME_FUNCTION_NAME_ID = 2,
	FRAME_MAPPING_ID = 3,
	FRAME_REL_PC = 4,
	CALLSTACK_IID = 1,
	CALLSTACK_FRAME_IDS = 2,
	MAPPING_IID = 1,
	MAPPING_PATH_STRING_IDS = 7,
	INTERNED_IID = 1,
	INTERNED_NAME = 2,	/* EventName.name, DebugAnnotationName.name, InternedString.str */
};

/*
 * Timestamps: the sequence's default clock is an incremental one of its own
 * (each packet's timestamp the nanoseconds since the previous packet's on
 * that clock: a byte or two), which a clock snapshot in the first packet
 * ties to BOOTTIME at the trace's origin. A packet earlier than the one
 * before it (a poll's beginning, known at its end) says BOOTTIME itself.
 */
enum { CLOCK_BOOTTIME = 6, CLOCK_INCREMENTAL_ID = 64 };

enum { SLICE_BEGIN = 1, SLICE_END = 2, INSTANT = 3, COUNTER = 4 };
enum { SEQ_CLEARED = 1, SEQ_NEEDS_STATE = 2 };
enum { ORDER_EXPLICIT = 3, MERGE_NEVER = 2, UNIT_COUNT = 2 };
enum { CPU_MODE_USER = 2 };

/* Finished tasks whose tracks new children may still nest under. */
#define DONE_TASKS 4096
/* Distinct event names interned; any beyond are written in full. */
#define MAX_INTERNED 65536

/* A task's track: one per task, a new one if its id comes back. */
struct task_track {
	uint64_t id;
	uint64_t uuid;
	uint32_t generation;	/* of its id: 1, or more for an id that came back */
	bool done;
};

struct interned {
	uint64_t iid;
	char name[];
};

/* The tables of InternedData this writer fills, each with its own iids. */
enum intern_kind { INTERN_EVENT_NAME, INTERN_STRING, INTERN_KINDS };

static const uint32_t intern_field[INTERN_KINDS] = {
	[INTERN_EVENT_NAME] = INTERNED_EVENT_NAMES,
	[INTERN_STRING] = INTERNED_ANNOTATION_STRINGS,
};

struct intern_table {
	struct u64map map;	/* hash of a string -> struct interned * */
	uint64_t next_iid;
};

/* Counter values waiting for the next event at their time (extra counter values). */
#define MAX_EXTRA 4

struct trace_proto {
	struct slices slices;	/* first: the sink, and what the trace holds */
	struct pftrace_file *file;
	uint32_t seq_id;	/* its packets' trusted_packet_sequence_id */
	uint64_t clock;		/* the incremental clock: the last timestamp on it */
	uint64_t clock_before;	/* ... before the packet being built */
	uint64_t process_uuid, runtime_uuid, alerts_uuid, runnable_uuid, inject_uuid;
	uint64_t task_rank;	/* spawn order of task tracks */
	struct u64map threads;	/* tid -> uuid */
	struct u64map tasks;	/* task id -> struct task_track * */
	struct u64map done;	/* finished task id -> its task_track (the last DONE_TASKS) */
	struct task_track *done_ring[DONE_TASKS];
	size_t done_next;
	struct intern_table interned[INTERN_KINDS];
	/* strings first used by the packet being built */
	struct {
		enum intern_kind kind;
		const struct interned *in;
	} fresh[8];
	int nr_fresh;
	struct {
		uint64_t uuid;
		int64_t value;
	} extra[MAX_EXTRA];
	int nr_extra;
	uint64_t extra_ts;
	uint64_t *queue_uuid;	/* each worker queue's depth counter, 0 none yet */
	uint32_t nr_queues;
	uint64_t poll_thread, poll_task; /* the tracks of the poll being written */
	/*
	 * --stacks: what this sequence has interned of the model's stacks (their
	 * ids are the iids: callstacks, frames and each frame's function name),
	 * and the images as mappings, each with its path
	 */
	struct u64map sent_stacks, sent_frames;
	struct u64map mappings;		/* hash of an image's name -> struct interned */
	uint64_t next_mapping;
	struct pb pb;
};

static inline struct trace_proto *tp_of(struct slices *sl)
{
	return (struct trace_proto *)sl;
}

static uint64_t new_uuid(struct trace_proto *tp)
{
	return pftrace_file__uuid(tp->file);
}

/* --- packets ------------------------------------------------------------ */

static void packet_begin(struct trace_proto *tp, uint32_t flags)
{
	pb_reset(&tp->pb);
	pb_begin(&tp->pb, TRACE_PACKET);
	pb_varint(&tp->pb, PACKET_SEQUENCE_ID, tp->seq_id);
	if (flags)
		pb_varint(&tp->pb, PACKET_SEQUENCE_FLAGS, flags);
	tp->nr_fresh = 0;
	tp->clock_before = tp->clock;
}

static void packet_end(struct trace_proto *tp)
{
	struct pb *pb = &tp->pb;

	if (tp->nr_fresh) {
		pb_begin(pb, PACKET_INTERNED_DATA);
		for (int i = 0; i < tp->nr_fresh; i++) {
			pb_begin(pb, intern_field[tp->fresh[i].kind]);
			pb_varint(pb, INTERNED_IID, tp->fresh[i].in->iid);
			pb_string(pb, INTERNED_NAME, tp->fresh[i].in->name);
			pb_end(pb);
		}
		pb_end(pb);
	}
	pb_end(pb);
	if (!pb->overflow)
		pftrace_file__packet(tp->file, pb->buf, pb->len);
	else
		tp->clock = tp->clock_before; /* not written: the next delta counts from before */
}

/* The packet's timestamp (ns since the trace's origin), on the incremental clock when it can. */
static void put_timestamp(struct trace_proto *tp, uint64_t rel)
{
	if (rel >= tp->clock) {
		pb_varint(&tp->pb, PACKET_TIMESTAMP, rel - tp->clock);
		tp->clock = rel;
	} else {
		pb_varint(&tp->pb, PACKET_TIMESTAMP_CLOCK_ID, CLOCK_BOOTTIME);
		pb_varint(&tp->pb, PACKET_TIMESTAMP, rel);
	}
}

/* The iid of a string, interning it in this packet if new; 0: write it in full. */
static uint64_t intern(struct trace_proto *tp, enum intern_kind kind, const char *name)
{
	struct intern_table *t = &tp->interned[kind];
	uint64_t h = hash_str(name);
	struct interned *in = u64map__get(&t->map, h);
	size_t n;

	if (in)
		return strcmp(in->name, name) ? 0 : in->iid;
	if (t->map.len >= MAX_INTERNED ||
	    tp->nr_fresh == (int)(sizeof(tp->fresh) / sizeof(tp->fresh[0])))
		return 0;
	n = strlen(name) + 1;
	in = malloc(sizeof(*in) + n);
	if (!in)
		return 0;
	in->iid = ++t->next_iid;
	memcpy(in->name, name, n);
	if (u64map__set(&t->map, h, in)) {
		free(in);
		return 0;
	}
	tp->fresh[tp->nr_fresh].kind = kind;
	tp->fresh[tp->nr_fresh++].in = in;
	return in->iid;
}

static void event_begin(struct trace_proto *tp, const struct model *m, uint64_t ts, int type,
			uint64_t track, const char *name);
static void event_end(struct trace_proto *tp);

/* Counter values still waiting, each as a counter event of its own. */
static void flush_counters(struct trace_proto *tp, const struct model *m)
{
	int n = tp->nr_extra;

	tp->nr_extra = 0;
	for (int i = 0; i < n; i++) {
		event_begin(tp, m, tp->extra_ts, COUNTER, tp->extra[i].uuid, NULL);
		pb_varint(&tp->pb, EVENT_COUNTER_VALUE, (uint64_t)tp->extra[i].value);
		event_end(tp);
	}
}

/*
 * A counter's value at ts: it rides on the next event written at ts (as an
 * extra counter value: a few bytes, where an event of its own takes twenty),
 * or goes out alone before anything at another time is written.
 */
static void counter_at(struct trace_proto *tp, const struct model *m, uint64_t ts,
		       uint64_t track, int64_t v)
{
	if (tp->nr_extra && tp->extra_ts != ts)
		flush_counters(tp, m);
	for (int i = 0; i < tp->nr_extra; i++) {
		if (tp->extra[i].uuid == track) {
			tp->extra[i].value = v;
			return;
		}
	}
	if (tp->nr_extra == MAX_EXTRA)
		flush_counters(tp, m);
	tp->extra[tp->nr_extra].uuid = track;
	tp->extra[tp->nr_extra++].value = v;
	tp->extra_ts = ts;
}

/*
 * Starts a packet holding one TrackEvent; close with event_end(). Counter
 * values waiting for this time ride on it.
 */
static void event_begin(struct trace_proto *tp, const struct model *m, uint64_t ts, int type,
			uint64_t track, const char *name)
{
	struct pb *pb = &tp->pb;
	uint64_t iid;

	if (tp->nr_extra && (tp->extra_ts != ts || type == COUNTER))
		flush_counters(tp, m);
	packet_begin(tp, SEQ_NEEDS_STATE);
	put_timestamp(tp, model__rel(m, ts));
	pb_begin(pb, PACKET_TRACK_EVENT);
	pb_varint(pb, EVENT_TYPE, (uint64_t)type);
	pb_varint(pb, EVENT_TRACK_UUID, track);
	if (tp->nr_extra) {
		for (int i = 0; i < tp->nr_extra; i++)
			pb_varint(pb, EVENT_EXTRA_COUNTER_TRACK_UUIDS, tp->extra[i].uuid);
		for (int i = 0; i < tp->nr_extra; i++)
			pb_varint(pb, EVENT_EXTRA_COUNTER_VALUES, (uint64_t)tp->extra[i].value);
		tp->nr_extra = 0;
	}
	if (!name)
		return;
	iid = intern(tp, INTERN_EVENT_NAME, name);
	if (iid)
		pb_varint(pb, EVENT_NAME_IID, iid);
	else
		pb_string(pb, EVENT_NAME, name);
}

static void event_end(struct trace_proto *tp)
{
	pb_end(&tp->pb);
	packet_end(tp);
}

static void ann_u64(struct trace_proto *tp, enum slice_arg a, uint64_t v)
{
	pb_begin(&tp->pb, EVENT_DEBUG_ANNOTATIONS);
	pb_varint(&tp->pb, ANNOTATION_NAME_IID, a);
	pb_varint(&tp->pb, ANNOTATION_UINT, v);
	pb_end(&tp->pb);
}

static void ann_bool(struct trace_proto *tp, enum slice_arg a, bool v)
{
	pb_begin(&tp->pb, EVENT_DEBUG_ANNOTATIONS);
	pb_varint(&tp->pb, ANNOTATION_NAME_IID, a);
	pb_varint(&tp->pb, ANNOTATION_BOOL, v);
	pb_end(&tp->pb);
}

static void ann_str(struct trace_proto *tp, enum slice_arg a, const char *v)
{
	pb_begin(&tp->pb, EVENT_DEBUG_ANNOTATIONS);
	pb_varint(&tp->pb, ANNOTATION_NAME_IID, a);
	pb_string(&tp->pb, ANNOTATION_STRING, v);
	pb_end(&tp->pb);
}

/* A string value of the few that recur (results, queues, states): interned. */
static void ann_istr(struct trace_proto *tp, enum slice_arg a, const char *v)
{
	uint64_t iid = intern(tp, INTERN_STRING, v);

	if (!iid) {
		ann_str(tp, a, v);
		return;
	}
	pb_begin(&tp->pb, EVENT_DEBUG_ANNOTATIONS);
	pb_varint(&tp->pb, ANNOTATION_NAME_IID, a);
	pb_varint(&tp->pb, ANNOTATION_STRING_IID, iid);
	pb_end(&tp->pb);
}

/* The bit of each argument in a set of them. */
#define ARG(id) (1u << ARG_##id)
_Static_assert(ARG_NR <= 32, "a set of arguments is a uint32_t");

/* A slice's arguments (debug annotations) but those in leave_out, and those in if_set at 0. */
static void put_args(struct trace_proto *tp, const struct slice_args *a, uint32_t leave_out,
		     uint32_t if_set)
{
	for (int i = 0; i < a->nr; i++) {
		const struct slice_value *v = &a->v[i];
		uint32_t bit = 1u << v->name;

		if ((leave_out & bit) || ((if_set & bit) && !v->u))
			continue;
		switch (slices__args[v->name].type) {
		case SLICE_U64:
		case SLICE_NS:
			ann_u64(tp, v->name, v->u);
			break;
		case SLICE_BOOL:
			ann_bool(tp, v->name, v->u);
			break;
		case SLICE_LABEL:
			ann_istr(tp, v->name, v->s);
			break;
		case SLICE_TEXT:
			ann_str(tp, v->name, v->s);
			break;
		}
	}
}

/* --- tracks ------------------------------------------------------------- */

static void track_begin(struct trace_proto *tp, uint64_t uuid, uint64_t parent)
{
	packet_begin(tp, SEQ_NEEDS_STATE);
	pb_begin(&tp->pb, PACKET_TRACK_DESCRIPTOR);
	pb_varint(&tp->pb, TRACK_UUID, uuid);
	if (parent)
		pb_varint(&tp->pb, TRACK_PARENT_UUID, parent);
}

static void track_end(struct trace_proto *tp)
{
	pb_end(&tp->pb);
	packet_end(tp);
}

static void rank(struct pb *pb, int64_t r)
{
	/* int32: negative ranks are sign-extended to 64 bits on the wire */
	pb_varint(pb, TRACK_SIBLING_ORDER_RANK, (uint64_t)(int64_t)(int32_t)r);
}

static uint64_t custom_track(struct trace_proto *tp, const char *name, uint64_t parent,
			     int64_t order)
{
	uint64_t uuid = new_uuid(tp);

	track_begin(tp, uuid, parent);
	pb_string(&tp->pb, TRACK_NAME, name);
	pb_varint(&tp->pb, TRACK_CHILD_ORDERING, ORDER_EXPLICIT);
	rank(&tp->pb, order);
	track_end(tp);
	return uuid;
}

static uint64_t counter_track(struct trace_proto *tp, const char *name, int64_t order)
{
	uint64_t uuid = new_uuid(tp);

	track_begin(tp, uuid, tp->process_uuid);
	pb_string(&tp->pb, TRACK_NAME, name);
	rank(&tp->pb, order);
	pb_begin(&tp->pb, TRACK_COUNTER);
	pb_varint(&tp->pb, COUNTER_UNIT, UNIT_COUNT);
	pb_end(&tp->pb);
	track_end(tp);
	return uuid;
}

/*
 * The first packets: the sequence's state cleared, the annotation names
 * interned, the incremental clock made the default and tied to BOOTTIME at
 * the trace's origin; then the process, its alerts track, its runtime (the
 * parent of every task track) and the runnable-tasks counter.
 */
static void start(struct trace_proto *tp, const struct model *m)
{
	struct pb *pb = &tp->pb;

	packet_begin(tp, SEQ_CLEARED);
	pb_begin(pb, PACKET_INTERNED_DATA);
	for (int a = 1; a < ARG_NR; a++) {
		char name[32];

		/* durations in the format's unit, nanoseconds: NAME_ns */
		snprintf(name, sizeof(name), "%s%s", slices__args[a].name,
			 slices__args[a].type == SLICE_NS ? "_ns" : "");
		pb_begin(pb, INTERNED_ANNOTATION_NAMES);
		pb_varint(pb, INTERNED_IID, (uint64_t)a);
		pb_string(pb, INTERNED_NAME, name);
		pb_end(pb);
	}
	pb_end(pb);
	pb_begin(pb, PACKET_DEFAULTS);
	pb_varint(pb, DEFAULTS_TIMESTAMP_CLOCK_ID, CLOCK_INCREMENTAL_ID);
	pb_end(pb);
	pb_begin(pb, PACKET_CLOCK_SNAPSHOT);
	pb_begin(pb, SNAPSHOT_CLOCKS);
	pb_varint(pb, CLOCK_ID, CLOCK_BOOTTIME);
	pb_varint(pb, CLOCK_TIMESTAMP, 0);
	pb_end(pb);
	pb_begin(pb, SNAPSHOT_CLOCKS);
	pb_varint(pb, CLOCK_ID, CLOCK_INCREMENTAL_ID);
	pb_varint(pb, CLOCK_TIMESTAMP, 0);
	pb_varint(pb, CLOCK_INCREMENTAL, 1);
	pb_end(pb);
	pb_end(pb);
	tp->clock = 0;
	packet_end(tp);

	tp->process_uuid = new_uuid(tp);
	track_begin(tp, tp->process_uuid, 0);
	pb_begin(pb, TRACK_PROCESS);
	pb_varint(pb, PROCESS_PID, m->pid);
	pb_string(pb, PROCESS_NAME, slices__process_name(m));
	pb_end(pb);
	pb_varint(pb, TRACK_CHILD_ORDERING, ORDER_EXPLICIT);
	track_end(tp);

	tp->alerts_uuid = custom_track(tp, "alerts", tp->process_uuid, -3);
	tp->runtime_uuid = custom_track(tp, "tasks", tp->process_uuid, -2);
	tp->runnable_uuid = counter_track(tp, "runnable tasks", -1);
}

/* A thread's track, declared the first time the thread shows up. */
static uint64_t thread_track(struct trace_proto *tp, struct model *m, uint32_t tid)
{
	uint64_t uuid = (uintptr_t)u64map__get(&tp->threads, tid);
	struct slices_thread th;

	if (uuid || !tid)
		return uuid;
	slices__thread(model__thread(m, tid), tid, &th);
	uuid = new_uuid(tp);
	track_begin(tp, uuid, tp->process_uuid);
	pb_begin(&tp->pb, TRACK_THREAD);
	pb_varint(&tp->pb, THREAD_PID, m->pid);
	pb_varint(&tp->pb, THREAD_TID, tid);
	pb_string(&tp->pb, THREAD_NAME, th.name);
	pb_end(&tp->pb);
	/* the rank is an int32, a tid any u32 (in a capture): other threads' folded below 10^6 */
	rank(&tp->pb,
	     th.worker ? (int64_t)th.order : SLICES_OTHER_THREADS + (int64_t)(tid % 1000000));
	track_end(tp);
	u64map__set(&tp->threads, tid, (void *)(uintptr_t)uuid);
	return uuid;
}

static uint64_t task_track(struct trace_proto *tp, struct model *m, uint64_t id, int nesting);

/* The track a new task nests under: its parent's when known, else the runtime's. */
static uint64_t parent_track(struct trace_proto *tp, struct model *m, uint64_t parent,
			     int nesting)
{
	struct task_track *pt, *done;

	if (!parent)
		return tp->runtime_uuid;
	pt = u64map__get(&tp->tasks, parent);
	if (pt && !pt->done)
		return pt->uuid;
	done = u64map__get(&tp->done, parent);
	if (done)
		return done->uuid;
	/* A parent met for the first time: declared first, if the model knows it. */
	if (!pt && nesting < 16 && model__task(m, parent))
		return task_track(tp, m, parent, nesting + 1);
	return tp->runtime_uuid;
}

/* A task's track, declared at its first poll (when its name is best known). */
static uint64_t task_track(struct trace_proto *tp, struct model *m, uint64_t id, int nesting)
{
	struct task_track *tt = u64map__get(&tp->tasks, id), *before;
	const struct task *t = model__task(m, id);
	uint64_t parent;
	char name[AT_TASK_NAME_LEN + 48];

	if (tt && !tt->done)
		return tt->uuid;
	if (!tt) {
		tt = calloc(1, sizeof(*tt));
		if (!tt || u64map__set(&tp->tasks, id, tt)) {
			free(tt);
			return tp->runtime_uuid;
		}
		tt->id = id;
		/* an id that came back after its task finished: the next generation */
		before = u64map__get(&tp->done, id);
		tt->generation = before ? before->generation : 0;
	}
	tt->generation++;
	tt->done = false;
	parent = parent_track(tp, m, t ? t->parent : 0, nesting);
	tt->uuid = new_uuid(tp);
	/* Unique names: ids keep same-named tasks apart, generations reused ids. */
	if (tt->generation == 1)
		snprintf(name, sizeof(name), "%s #%llu", t ? t->name : "task",
			 (unsigned long long)id);
	else
		snprintf(name, sizeof(name), "%s #%llu/%u", t ? t->name : "task",
			 (unsigned long long)id, tt->generation);
	track_begin(tp, tt->uuid, parent);
	pb_string(&tp->pb, TRACK_NAME, name);
	pb_varint(&tp->pb, TRACK_CHILD_ORDERING, ORDER_EXPLICIT);
	rank(&tp->pb, (int64_t)(++tp->task_rank % 0x7fffffff));
	pb_varint(&tp->pb, TRACK_SIBLING_MERGE_BEHAVIOR, MERGE_NEVER);
	track_end(tp);
	return tt->uuid;
}

/*
 * A task returned Ready: its track is closed; children may still nest under
 * it, and its id, should it come back, gets the next generation.
 */
static void task_done(struct trace_proto *tp, uint64_t id)
{
	struct task_track *tt = u64map__del(&tp->tasks, id);
	struct task_track *old;

	if (!tt)
		return;
	tt->done = true;
	old = tp->done_ring[tp->done_next];
	if (old) {
		/* the id may be in the ring twice: forget it only if this was the latest */
		if (u64map__get(&tp->done, old->id) == old)
			u64map__del(&tp->done, old->id);
		free(old);
	}
	tp->done_ring[tp->done_next] = tt;
	tp->done_next = (tp->done_next + 1) % DONE_TASKS;
	u64map__set(&tp->done, id, tt);
}

/* --- counters ----------------------------------------------------------- */

/* A queue's counter track, declared the first time its depth is written; 0 none. */
static uint64_t queue_track(struct trace_proto *tp, int32_t queue)
{
	char label[32], name[48];
	uint64_t *uuid = &tp->inject_uuid;

	if (queue != AT_QUEUE_INJECT) {
		if ((uint32_t)queue >= tp->nr_queues) {
			uint32_t n = (uint32_t)queue + 1;
			uint64_t *u = realloc(tp->queue_uuid, n * sizeof(*u));

			if (!u)
				return 0;
			for (uint32_t i = tp->nr_queues; i < n; i++)
				u[i] = 0;
			tp->queue_uuid = u;
			tp->nr_queues = n;
		}
		uuid = &tp->queue_uuid[queue];
	}
	if (!*uuid) {
		slices__queue_name(queue, label, sizeof(label));
		snprintf(name, sizeof(name), "queue depth: %s", label);
		*uuid = counter_track(tp, name,
				      queue == AT_QUEUE_INJECT ? 100000000 : 100000000 + queue + 1);
	}
	return *uuid;
}

/* A queue's depth, and the runnable total: on the next event at their time. */
static void tp_depth(struct slices *sl, struct model *m, const struct slice_depth *d)
{
	struct trace_proto *tp = tp_of(sl);
	uint64_t track = queue_track(tp, d->queue);

	if (!track)
		return;
	counter_at(tp, m, d->ts, track, d->depth);
	counter_at(tp, m, d->ts, tp->runnable_uuid, d->runnable);
}

/* --- events ------------------------------------------------------------- */

/*
 * A wake (or spawn) as an instant: inside the waker's poll on its task track
 * when a task woke it, else on the waking thread. Its depth is left out:
 * the queue's counter says it, on this very event.
 */
static void tp_wake(struct slices *sl, struct model *m, const struct slice_wake *w)
{
	struct trace_proto *tp = tp_of(sl);
	const struct task_track *waker = w->waker_task ? u64map__get(&tp->tasks, w->waker_task)
						       : NULL;
	uint64_t track = waker && !waker->done ? waker->uuid : thread_track(tp, m, w->s.tid);

	if (!track)
		track = tp->runtime_uuid;
	event_begin(tp, m, w->s.ts, INSTANT, track, w->s.name);
	put_args(tp, &w->s.args, ARG(DEPTH), 0);
	if (w->s.flow_out)
		pb_fixed64(&tp->pb, EVENT_FLOW_IDS, w->s.flow_out);
	event_end(tp);
}

/*
 * A poll's beginnings: on its worker's thread, the CPU view, with its task
 * (the thread may have none: tid 0); on its task's track, the task view,
 * where the details and the arrows are. There the task is the track's, the
 * queue's depth the worker's counter (riding on the thread's slice), and
 * blocked and runnable time are written when there was some.
 */
static void tp_poll(struct slices *sl, struct model *m, const struct slice_poll *p)
{
	struct trace_proto *tp = tp_of(sl);
	uint64_t thread = thread_track(tp, m, p->cpu.tid);

	tp->poll_thread = thread;
	tp->poll_task = task_track(tp, m, p->cpu.task, 0);
	if (thread) {
		event_begin(tp, m, p->cpu.ts, SLICE_BEGIN, thread, p->cpu.name);
		put_args(tp, &p->cpu.args, ~ARG(TASK), 0);
		event_end(tp);
	}
	event_begin(tp, m, p->task_ts, SLICE_BEGIN, tp->poll_task, p->cpu.name);
	put_args(tp, &p->cpu.args, ARG(TASK) | ARG(QUEUE_DEPTH), ARG(BLOCKED) | ARG(RUNNABLE));
	if (p->cpu.flow_in)
		pb_fixed64(&tp->pb, EVENT_TERMINATING_FLOW_IDS, p->cpu.flow_in);
	if (p->cpu.flow_out)
		pb_fixed64(&tp->pb, EVENT_FLOW_IDS, p->cpu.flow_out);
	event_end(tp);
}

/* ... and its ends, after both beginnings: the clock's deltas stay small. */
static void tp_poll_end(struct slices *sl, struct model *m, const struct slice_poll *p)
{
	struct trace_proto *tp = tp_of(sl);
	uint64_t end = p->cpu.ts + p->cpu.dur;

	if (tp->poll_thread) {
		event_begin(tp, m, end, SLICE_END, tp->poll_thread, NULL);
		event_end(tp);
	}
	event_begin(tp, m, end, SLICE_END, tp->poll_task, NULL);
	event_end(tp);
	if (p->ready)
		task_done(tp, p->cpu.task);
}

/* Where a task waited between polls: a slice on its track, where in full. */
static void tp_wait(struct slices *sl, struct model *m, const struct slice *s)
{
	struct trace_proto *tp = tp_of(sl);
	uint64_t track = task_track(tp, m, s->task, 0);

	event_begin(tp, m, s->ts, SLICE_BEGIN, track, s->name);
	put_args(tp, &s->args, 0, 0);
	event_end(tp);
	event_begin(tp, m, s->ts + s->dur, SLICE_END, track, NULL);
	event_end(tp);
}

/* An id that comes back is a new task: it gets a new track. */
static void tp_spawn(struct slices *sl, uint64_t id)
{
	struct task_track *tt = u64map__get(&tp_of(sl)->tasks, id);

	if (tt)
		tt->done = true;
}

static bool tp_thread(struct slices *sl, struct model *m, uint32_t tid)
{
	return thread_track(tp_of(sl), m, tid) != 0;
}

static void tp_task(struct slices *sl, struct model *m, uint64_t id)
{
	task_track(tp_of(sl), m, id, 0);
}

/* An instant on a thread (a steal's ends). */
static void tp_instant(struct slices *sl, struct model *m, const struct slice *s)
{
	struct trace_proto *tp = tp_of(sl);
	uint64_t thread = thread_track(tp, m, s->tid);

	if (!thread)
		return;
	event_begin(tp, m, s->ts, INSTANT, thread, s->name);
	put_args(tp, &s->args, 0, 0);
	if (s->flow_out)
		pb_fixed64(&tp->pb, EVENT_FLOW_IDS, s->flow_out);
	if (s->flow_in)
		pb_fixed64(&tp->pb, EVENT_TERMINATING_FLOW_IDS, s->flow_in);
	event_end(tp);
}

/* A slice on a thread (parked). */
static void tp_slice(struct slices *sl, struct model *m, const struct slice *s)
{
	struct trace_proto *tp = tp_of(sl);
	uint64_t thread = thread_track(tp, m, s->tid);

	if (!thread)
		return;
	event_begin(tp, m, s->ts, SLICE_BEGIN, thread, s->name);
	put_args(tp, &s->args, 0, 0);
	event_end(tp);
	event_begin(tp, m, s->ts + s->dur, SLICE_END, thread, NULL);
	event_end(tp);
}

/* Alerts on their own track; their names, which are few, in full. */
static void tp_alert(struct slices *sl, struct model *m, const struct slice *a)
{
	struct trace_proto *tp = tp_of(sl);

	event_begin(tp, m, a->ts, INSTANT, tp->alerts_uuid, NULL);
	pb_string(&tp->pb, EVENT_NAME, a->name);
	put_args(tp, &a->args, 0, 0);
	event_end(tp);
}

/* The iid of the mapping of an image (its path interned with the same iid), new or not. */
static uint64_t mapping_of(struct trace_proto *tp, const char *module, bool *fresh)
{
	uint64_t h = hash_str(module);
	struct interned *in = u64map__get(&tp->mappings, h);
	size_t n = strlen(module) + 1;

	*fresh = false;
	if (in)
		return strcmp(in->name, module) ? 0 : in->iid;
	in = malloc(sizeof(*in) + n);
	if (!in)
		return 0;
	in->iid = ++tp->next_mapping;
	memcpy(in->name, module, n);
	if (u64map__set(&tp->mappings, h, in)) {
		free(in);
		return 0;
	}
	*fresh = true;
	return in->iid;
}

/* A frame for InternedData: its function's name, its image (a mapping), itself. */
static void intern_frame(struct trace_proto *tp, const struct cs_frame *f)
{
	struct pb *pb = &tp->pb;
	bool fresh;
	uint64_t mapping = mapping_of(tp, f->module[0] ? f->module : "?", &fresh);

	if (fresh) {
		pb_begin(pb, INTERNED_MAPPING_PATHS);
		pb_varint(pb, INTERNED_IID, mapping);
		pb_string(pb, INTERNED_NAME, f->module[0] ? f->module : "?");
		pb_end(pb);
		pb_begin(pb, INTERNED_MAPPINGS);
		pb_varint(pb, MAPPING_IID, mapping);
		pb_varint(pb, MAPPING_PATH_STRING_IDS, mapping);
		pb_end(pb);
	}
	if (f->function[0]) {
		pb_begin(pb, INTERNED_FUNCTION_NAMES);
		pb_varint(pb, INTERNED_IID, f->id);
		pb_string(pb, INTERNED_NAME, f->function);
		pb_end(pb);
	}
	pb_begin(pb, INTERNED_FRAMES);
	pb_varint(pb, FRAME_IID, f->id);
	if (f->function[0])
		pb_varint(pb, FRAME_FUNCTION_NAME_ID, f->id);
	if (mapping) {
		pb_varint(pb, FRAME_MAPPING_ID, mapping);
		pb_varint(pb, FRAME_REL_PC, f->rel_pc);
	}
	pb_end(pb);
}

/*
 * A CPU sample of a poll's stack (--stacks): a PerfSample on its thread,
 * its callstack interned with it the first time, so that Perfetto's UI
 * draws the samples of a selected range as a flame graph. (Where a poll
 * slept is not a CPU sample: it goes on the poll's slice.)
 */
static void tp_sample(struct slices *sl, struct model *m, const struct at_stack *st,
		      const struct callstack *cs)
{
	struct trace_proto *tp = tp_of(sl);
	bool new_stack = !u64map__get(&tp->sent_stacks, cs->id);
	struct pb *pb = &tp->pb;

	packet_begin(tp, SEQ_NEEDS_STATE);
	put_timestamp(tp, model__rel(m, st->hdr.ts));
	if (new_stack) {
		pb_begin(pb, PACKET_INTERNED_DATA);
		for (uint32_t i = 0; i < cs->nr; i++)
			if (!u64map__get(&tp->sent_frames, cs->frames[i]))
				intern_frame(tp, callstacks__frame(&m->stacks, cs->frames[i]));
		pb_begin(pb, INTERNED_CALLSTACKS);
		pb_varint(pb, CALLSTACK_IID, cs->id);
		for (uint32_t i = cs->nr; i-- > 0;) /* the outermost frame first */
			pb_varint(pb, CALLSTACK_FRAME_IDS, cs->frames[i]);
		pb_end(pb);
		pb_end(pb);
	}
	pb_begin(pb, PACKET_PERF_SAMPLE);
	pb_varint(pb, PERF_PID, st->hdr.pid);
	pb_varint(pb, PERF_TID, st->hdr.tid);
	pb_varint(pb, PERF_CALLSTACK_IID, cs->id);
	pb_varint(pb, PERF_CPU_MODE, CPU_MODE_USER);
	pb_end(pb);
	if (new_stack && !pb->overflow) {
		u64map__set(&tp->sent_stacks, cs->id, (void *)1);
		for (uint32_t i = 0; i < cs->nr; i++)
			u64map__set(&tp->sent_frames, cs->frames[i], (void *)1);
	}
	packet_end(tp);
}

static void tp_start(struct slices *sl, struct model *m)
{
	start(tp_of(sl), m);
}

/* Counter values wait for an event at their time, but not past the record. */
static void tp_record_done(struct slices *sl, struct model *m)
{
	struct trace_proto *tp = tp_of(sl);

	if (tp->nr_extra)
		flush_counters(tp, m);
}

static void tp_flush(struct slices *sl)
{
	pftrace_file__flush(tp_of(sl)->file);
}

static int tp_finish(struct slices *sl, struct model *m)
{
	return pftrace_file__flush(tp_of(sl)->file);
}

static void tp_free(struct slices *sl)
{
	struct trace_proto *tp = tp_of(sl);

	pftrace_file__free(tp->file);
	u64map__clear_free(&tp->tasks);
	u64map__clear(&tp->sent_stacks);
	u64map__clear(&tp->sent_frames);
	u64map__clear_free(&tp->mappings);
	for (int k = 0; k < INTERN_KINDS; k++)
		u64map__clear_free(&tp->interned[k].map);
	for (size_t i = 0; i < DONE_TASKS; i++)
		free(tp->done_ring[i]);
	u64map__clear(&tp->done);
	u64map__clear(&tp->threads);
	free(tp->queue_uuid);
	free(tp);
}

/* Poll slices take both kinds of flow ids: a self-wake's arrow goes from one poll to the next. */
static const struct slices_ops trace_proto_ops = {
	.flows_between_polls = true,
	.start = tp_start,
	.thread = tp_thread,
	.task = tp_task,
	.spawn = tp_spawn,
	.depth = tp_depth,
	.poll = tp_poll,
	.poll_end = tp_poll_end,
	.wait = tp_wait,
	.wake = tp_wake,
	.instant = tp_instant,
	.slice = tp_slice,
	.alert = tp_alert,
	.sample = tp_sample,
	.record_done = tp_record_done,
	.flush = tp_flush,
	.finish = tp_finish,
	.free = tp_free,
};

int trace_proto__new(struct sink **s, struct pftrace_file *file, uint32_t seq)
{
	struct trace_proto *tp = calloc(1, sizeof(*tp));

	if (!tp)
		return -ENOMEM;
	tp->file = pftrace_file__get(file);
	tp->seq_id = seq;
	u64map__init(&tp->threads);
	u64map__init(&tp->tasks);
	u64map__init(&tp->done);
	u64map__init(&tp->sent_stacks);
	u64map__init(&tp->sent_frames);
	u64map__init(&tp->mappings);
	for (int k = 0; k < INTERN_KINDS; k++)
		u64map__init(&tp->interned[k].map);
	*s = slices__init(&tp->slices, &trace_proto_ops);
	return 0;
}
