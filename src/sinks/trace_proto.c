// SPDX-License-Identifier: MIT
#include "sinks/trace_proto.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/pb.h"
#include "lib/u64map.h"
#include "sinks/alerts.h"
#include "sinks/pftrace_file.h"

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
#define MAX_QUEUES 4096

/* Debug annotation names: interned once, in the first packet. */
#define ANNOTATIONS(X)                                                                             \
	X(TASK, "task")                                                                            \
	X(WORKER, "worker")                                                                        \
	X(ON_CPU, "on_cpu_ns")                                                                     \
	X(CPU_CHARGED, "cpu_charged_ns")                                                           \
	X(BLOCKED, "blocked_ns")                                                                   \
	X(RUNNABLE, "runnable_ns")                                                                 \
	X(WAKE_DELAY, "wake_delay_ns")                                                             \
	X(QUEUE_DEPTH, "queue_depth")                                                              \
	X(RESULT, "result")                                                                        \
	X(PARENT, "parent")                                                                        \
	X(WAKER_TASK, "waker_task")                                                                \
	X(QUEUE, "queue")                                                                          \
	X(DEPTH, "depth")                                                                          \
	X(COUNT, "count")                                                                          \
	X(THIEF, "thief")                                                                          \
	X(VICTIM, "victim")                                                                        \
	X(INFERRED, "inferred")                                                                    \
	X(EPISODE, "episode")                                                                      \
	X(STATE, "state")                                                                          \
	X(CAUSE, "cause")                                                                          \
	X(MESSAGE, "message")                                                                      \
	X(STACK, "stack")                                                                          \
	X(STACK_WHEN, "stack_when")

#define ANN_ENUM(id, str) ANN_##id,
enum annotation { ANN_NONE, ANNOTATIONS(ANN_ENUM) ANN_NR };
#define ANN_STR(id, str) [ANN_##id] = str,
static const char *const annotation_names[ANN_NR] = { ANNOTATIONS(ANN_STR) };

/* A task's track: one per task, a new one if its id comes back. */
struct task_track {
	uint64_t id;
	uint64_t uuid;
	/* a wake the task made of itself, its flow started on the poll that made it */
	uint64_t self_flow;
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
	struct sink sink;
	struct pftrace_file *file;
	uint32_t seq_id;	/* its packets' trusted_packet_sequence_id */
	uint64_t clock;		/* the incremental clock: the last timestamp on it */
	uint64_t clock_before;	/* ... before the packet being built */
	uint64_t process_uuid, runtime_uuid, alerts_uuid, runnable_uuid, inject_uuid;
	uint64_t task_rank;	/* spawn order of task tracks */
	struct u64map threads;	/* tid -> uuid */
	struct u64map tasks;	/* task id -> struct task_track * */
	struct u64map done;	/* finished task id -> its struct task_track (the last DONE_TASKS) */
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
	/* queue depth counters: last value written (-1 none) and track */
	int64_t *depth;
	uint64_t *depth_uuid;
	uint32_t nr_depth;
	int64_t inject_depth;
	int64_t runnable;	/* sum of every queue's depth, last written */
	uint64_t steal_seq;
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

static inline struct trace_proto *tp_of(struct sink *s)
{
	return (struct trace_proto *)s;
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

static uint64_t hash_name(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */

	for (; *s; s++)
		h = (h ^ (uint8_t)*s) * 0x100000001b3ull;
	return h ? h : 1;
}

/* The iid of a string, interning it in this packet if new; 0: write it in full. */
static uint64_t intern(struct trace_proto *tp, enum intern_kind kind, const char *name)
{
	struct intern_table *t = &tp->interned[kind];
	uint64_t h = hash_name(name);
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

static void ann_u64(struct trace_proto *tp, enum annotation a, uint64_t v)
{
	pb_begin(&tp->pb, EVENT_DEBUG_ANNOTATIONS);
	pb_varint(&tp->pb, ANNOTATION_NAME_IID, a);
	pb_varint(&tp->pb, ANNOTATION_UINT, v);
	pb_end(&tp->pb);
}

static void ann_bool(struct trace_proto *tp, enum annotation a, bool v)
{
	pb_begin(&tp->pb, EVENT_DEBUG_ANNOTATIONS);
	pb_varint(&tp->pb, ANNOTATION_NAME_IID, a);
	pb_varint(&tp->pb, ANNOTATION_BOOL, v);
	pb_end(&tp->pb);
}

static void ann_str(struct trace_proto *tp, enum annotation a, const char *v)
{
	pb_begin(&tp->pb, EVENT_DEBUG_ANNOTATIONS);
	pb_varint(&tp->pb, ANNOTATION_NAME_IID, a);
	pb_string(&tp->pb, ANNOTATION_STRING, v);
	pb_end(&tp->pb);
}

/* A string value of the few that recur (results, queues, states): interned. */
static void ann_istr(struct trace_proto *tp, enum annotation a, const char *v)
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

static void ann_queue(struct trace_proto *tp, int32_t queue)
{
	char buf[32];

	if (queue >= 0)
		snprintf(buf, sizeof(buf), "worker %d", queue);
	else
		snprintf(buf, sizeof(buf), "%s", queue == AT_QUEUE_INJECT ? "inject" : "none");
	ann_istr(tp, ANN_QUEUE, buf);
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
	for (int a = 1; a < ANN_NR; a++) {
		pb_begin(pb, INTERNED_ANNOTATION_NAMES);
		pb_varint(pb, INTERNED_IID, (uint64_t)a);
		pb_string(pb, INTERNED_NAME, annotation_names[a]);
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
	pb_string(pb, PROCESS_NAME, m->comm[0] ? m->comm : "target");
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
	const struct thread *th;
	char name[64];

	if (uuid || !tid)
		return uuid;
	th = model__thread(m, tid);
	uuid = new_uuid(tp);
	if (th && th->worker >= 0)
		snprintf(name, sizeof(name), "worker %d (%s)", th->worker, th->comm);
	else
		snprintf(name, sizeof(name), "%s", th ? th->comm : "thread");
	track_begin(tp, uuid, tp->process_uuid);
	pb_begin(&tp->pb, TRACK_THREAD);
	pb_varint(&tp->pb, THREAD_PID, m->pid);
	pb_varint(&tp->pb, THREAD_TID, tid);
	pb_string(&tp->pb, THREAD_NAME, name);
	pb_end(&tp->pb);
	/* Workers first, in worker order; other threads after them. */
	rank(&tp->pb, th && th->worker >= 0 ? th->worker : 100000 + (int64_t)(tid % 1000000));
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

static int64_t *depth_slot(struct trace_proto *tp, const struct model *m, int32_t queue,
			   uint64_t **uuid)
{
	char name[48];

	if (queue == AT_QUEUE_INJECT) {
		if (!tp->inject_uuid)
			tp->inject_uuid = counter_track(tp, "queue depth: inject", 100000000);
		*uuid = &tp->inject_uuid;
		return &tp->inject_depth;
	}
	if (queue < 0 || queue >= MAX_QUEUES)
		return NULL;
	if ((uint32_t)queue >= tp->nr_depth) {
		uint32_t n = (uint32_t)queue + 1;
		int64_t *d = realloc(tp->depth, n * sizeof(*d));
		uint64_t *u;

		if (!d)
			return NULL;
		tp->depth = d;
		u = realloc(tp->depth_uuid, n * sizeof(*u));
		if (!u)
			return NULL;
		tp->depth_uuid = u;
		for (uint32_t i = tp->nr_depth; i < n; i++) {
			d[i] = -1;
			u[i] = 0;
		}
		tp->nr_depth = n;
	}
	if (!tp->depth_uuid[queue]) {
		snprintf(name, sizeof(name), "queue depth: worker %d", queue);
		tp->depth_uuid[queue] = counter_track(tp, name, 100000000 + queue + 1);
	}
	(void)m;
	*uuid = &tp->depth_uuid[queue];
	return &tp->depth[queue];
}

/* A queue's depth, and the runnable total, when they changed since last written. */
static void queue_depth(struct trace_proto *tp, const struct model *m, uint64_t ts,
			int32_t queue, uint32_t depth)
{
	uint64_t *uuid;
	int64_t *last = depth_slot(tp, m, queue, &uuid);

	if (!last || *last == depth)
		return;
	tp->runnable += depth - (*last < 0 ? 0 : *last);
	*last = depth;
	counter_at(tp, m, ts, *uuid, depth);
	counter_at(tp, m, ts, tp->runnable_uuid, tp->runnable);
}

/* --- events ------------------------------------------------------------- */

/*
 * A wake (or spawn) as an instant: inside the waker's poll on its task track
 * when a task woke it, else on the waking thread. With a flow when linked: its
 * poll came, and terminates it.
 */
static void write_wake(struct trace_proto *tp, struct model *m, const struct at_wake *w,
		       bool linked)
{
	const struct task *t = model__task(m, w->task);
	const struct task_track *waker = w->waker_task ? u64map__get(&tp->tasks, w->waker_task)
						       : NULL;
	bool spawn = w->hdr.kind == AT_EV_SPAWN;
	uint64_t track = waker && !waker->done ? waker->uuid : thread_track(tp, m, w->hdr.tid);
	char name[AT_TASK_NAME_LEN + 16];

	if (!track)
		track = tp->runtime_uuid;
	snprintf(name, sizeof(name), "%s %s", spawn ? "spawn" : "wake", t ? t->name : "task");
	event_begin(tp, m, w->hdr.ts, INSTANT, track, name);
	ann_u64(tp, ANN_TASK, w->task);
	if (w->waker_task)
		ann_u64(tp, spawn ? ANN_PARENT : ANN_WAKER_TASK, w->waker_task);
	ann_queue(tp, w->queue);
	if (linked)
		pb_fixed64(&tp->pb, EVENT_FLOW_IDS, w->wake_id);
	event_end(tp);
}

/* A poll whose stack was taken (--stacks): it, a frame a line. */
static void ann_stack(struct trace_proto *tp, struct model *m, const struct at_poll *p)
{
	bool asleep;
	uint32_t id = model__slice_stack(m, p, &asleep);
	char text[CALLSTACK_FRAMES * 320];

	if (!id)
		return;
	callstacks__text(&m->stacks, id, text, sizeof(text));
	ann_str(tp, ANN_STACK, text);
	ann_istr(tp, ANN_STACK_WHEN, asleep ? "asleep" : "on-cpu");
}

static void on_poll(struct trace_proto *tp, struct model *m, const struct at_poll *p)
{
	struct task *t = model__task(m, p->task);
	bool linked = p->wake_id && t && t->pending.wake_id == p->wake_id;
	uint64_t end = p->hdr.ts + p->duration_ns, begin = p->hdr.ts;
	uint64_t thread = thread_track(tp, m, p->hdr.tid);
	uint64_t task = task_track(tp, m, p->task, 0);
	const char *name = t ? t->name : "task";

	struct task_track *tt = u64map__get(&tp->tasks, p->task);
	const struct at_wake *self = NULL;

	/*
	 * A wake the task made of itself during this poll (a yield) rides in its
	 * record: its flow starts on this poll's slice and ends on the next
	 * poll's, with no instant of its own (half of what a yield loop writes).
	 */
	if (p->hdr.size >= sizeof(struct at_poll_self_wake) && tt && !tt->done) {
		self = &((const struct at_poll_self_wake *)p)->wake;
		if (self->task != p->task || !self->wake_id)
			self = NULL;
	}
	if (linked && !(tt && tt->self_flow == p->wake_id))
		write_wake(tp, m, &t->pending, true);
	queue_depth(tp, m, p->hdr.ts, (int32_t)p->worker, p->depth);

	/*
	 * The task view, where the details are. A poll_end may come a little
	 * after the task's next poll began on another worker (docs/usdt-abi.md):
	 * begin no earlier than the previous poll's end, so slices never overlap.
	 */
	if (t && t->last_end > begin)
		begin = t->last_end < end ? t->last_end : end;

	/* The CPU view: the poll on its worker thread (with the queue's depth). */
	if (thread) {
		event_begin(tp, m, p->hdr.ts, SLICE_BEGIN, thread, name);
		ann_u64(tp, ANN_TASK, p->task);
		event_end(tp);
	}
	/*
	 * On the task's track the task is known (its name, its id); what is
	 * zero is left out (blocked_ns, runnable_ns); the queue's depth is the
	 * worker's counter at that time.
	 */
	event_begin(tp, m, begin, SLICE_BEGIN, task, name);
	ann_u64(tp, ANN_WORKER, p->worker);
	ann_u64(tp, ANN_ON_CPU, p->oncpu_ns);
	if (at_poll_cpu_known(p))
		ann_u64(tp, ANN_CPU_CHARGED, p->cpu_ns);
	if (p->blocked_ns)
		ann_u64(tp, ANN_BLOCKED, p->blocked_ns);
	if (p->runnable_ns)
		ann_u64(tp, ANN_RUNNABLE, p->runnable_ns);
	if (p->wake_ts && p->wake_ts <= p->hdr.ts)
		ann_u64(tp, ANN_WAKE_DELAY, p->hdr.ts - p->wake_ts);
	ann_istr(tp, ANN_RESULT, p->ready ? "ready" : "pending");
	ann_stack(tp, m, p);
	if (linked)
		pb_fixed64(&tp->pb, EVENT_TERMINATING_FLOW_IDS, p->wake_id);
	if (self) {
		pb_fixed64(&tp->pb, EVENT_FLOW_IDS, self->wake_id);
		tt->self_flow = self->wake_id;
	}
	event_end(tp);

	/* Ends in time order after both beginnings: the clock's deltas stay small. */
	if (p->requeue >= 0)
		queue_depth(tp, m, end, p->requeue, p->requeue_depth);
	if (thread) {
		event_begin(tp, m, end, SLICE_END, thread, NULL);
		event_end(tp);
	}
	event_begin(tp, m, end, SLICE_END, task, NULL);
	event_end(tp);
	if (p->ready)
		task_done(tp, p->task);
}

static void on_wake(struct trace_proto *tp, struct model *m, const struct at_wake *w)
{
	struct task *t = model__task(m, w->task);

	if (w->queue != AT_QUEUE_NONE)
		queue_depth(tp, m, w->hdr.ts, w->queue, w->depth);
	if (!w->wake_id) {
		write_wake(tp, m, w, false);
		return;
	}
	/* Linked wakes wait for their poll; one still pending lost its poll. */
	if (t && t->pending.wake_id)
		write_wake(tp, m, &t->pending, false);
}

static void on_spawn(struct trace_proto *tp, struct model *m, const struct at_spawn *s)
{
	struct task *t = model__task(m, s->task);
	struct task_track *tt = u64map__get(&tp->tasks, s->task);

	/* An id that comes back is a new task: it gets a new track. */
	if (tt)
		tt->done = true;
	queue_depth(tp, m, s->hdr.ts, s->queue, s->depth);
	if (t && t->pending.wake_id)
		write_wake(tp, m, &t->pending, false);
	if (!s->wake_id) {
		struct at_wake w;

		model__spawn_as_wake(s, &w);
		write_wake(tp, m, &w, false);
	}
}

static void on_steal(struct trace_proto *tp, struct model *m, const struct at_steal *s)
{
	bool inferred = s->flags & AT_STEAL_INFERRED;
	bool known = s->victim != AT_WORKER_UNKNOWN;
	const struct worker *victim = known ? model__worker(m, s->victim) : NULL;
	uint64_t flow = at_steal_flow(m->pid, ++tp->steal_seq);
	uint64_t from = victim && victim->tid ? thread_track(tp, m, victim->tid) : 0;
	uint64_t to = thread_track(tp, m, s->hdr.tid);
	char name[64];

	if (!to)
		return;
	/* An inferred steal knows no depths: the counters keep theirs. */
	if (!inferred && known)
		queue_depth(tp, m, s->hdr.ts, (int32_t)s->victim, s->victim_depth);
	if (!inferred)
		queue_depth(tp, m, s->hdr.ts, (int32_t)s->thief, s->thief_depth);
	if (from) {
		snprintf(name, sizeof(name), "%s by worker %u",
			 inferred ? "taken (inferred)" : "stolen", s->thief);
		event_begin(tp, m, s->hdr.ts, INSTANT, from, name);
		ann_u64(tp, ANN_COUNT, s->count);
		if (!inferred)
			ann_u64(tp, ANN_DEPTH, s->victim_depth);
		pb_fixed64(&tp->pb, EVENT_FLOW_IDS, flow);
		event_end(tp);
	}
	if (known)
		snprintf(name, sizeof(name), "steal%s from worker %u", inferred ? " (inferred)" : "",
			 s->victim);
	else
		snprintf(name, sizeof(name), "steal%s from another worker",
			 inferred ? " (inferred)" : "");
	/* One nanosecond later, so the flow always starts before it ends. */
	event_begin(tp, m, s->hdr.ts + 1, INSTANT, to, name);
	ann_u64(tp, ANN_COUNT, s->count);
	ann_u64(tp, ANN_THIEF, s->thief);
	if (known)
		ann_u64(tp, ANN_VICTIM, s->victim);
	ann_bool(tp, ANN_INFERRED, inferred);
	if (!inferred)
		ann_u64(tp, ANN_DEPTH, s->thief_depth);
	if (from)
		pb_fixed64(&tp->pb, EVENT_TERMINATING_FLOW_IDS, flow);
	event_end(tp);
}

static void on_park(struct trace_proto *tp, struct model *m, const struct at_park *p)
{
	uint64_t thread = thread_track(tp, m, p->hdr.tid);

	if (!thread)
		return;
	event_begin(tp, m, p->hdr.ts, SLICE_BEGIN, thread, "parked");
	ann_u64(tp, ANN_WORKER, p->worker);
	event_end(tp);
	event_begin(tp, m, p->hdr.ts + p->duration_ns, SLICE_END, thread, NULL);
	event_end(tp);
}

/* The iid of the mapping of an image (its path interned with the same iid), new or not. */
static uint64_t mapping_of(struct trace_proto *tp, const char *module, bool *fresh)
{
	uint64_t h = hash_name(module);
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
static void on_stack(struct trace_proto *tp, struct model *m, const struct at_stack *st)
{
	const struct callstack *cs = callstacks__get(&m->stacks, m->cur_stack);
	bool new_stack = cs && !u64map__get(&tp->sent_stacks, cs->id);
	struct pb *pb = &tp->pb;

	if (!cs || !(st->flags & AT_STACK_ONCPU))
		return;
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

static void tp_event(struct sink *s, struct model *m, const struct at_hdr *ev)
{
	struct trace_proto *tp = tp_of(s);

	if (!tp->process_uuid)
		start(tp, m);
	switch (ev->kind) {
	case AT_EV_POLL:
		on_poll(tp, m, (const struct at_poll *)ev);
		break;
	case AT_EV_WAKE:
		on_wake(tp, m, (const struct at_wake *)ev);
		break;
	case AT_EV_SPAWN:
		on_spawn(tp, m, (const struct at_spawn *)ev);
		break;
	case AT_EV_STEAL:
		on_steal(tp, m, (const struct at_steal *)ev);
		break;
	case AT_EV_PARK:
		on_park(tp, m, (const struct at_park *)ev);
		break;
	case AT_EV_STACK:
		on_stack(tp, m, (const struct at_stack *)ev);
		break;
	}
	if (tp->nr_extra)
		flush_counters(tp, m);
}

static void tp_alert(struct sink *s, struct model *m, const struct alert *a)
{
	struct trace_proto *tp = tp_of(s);
	char msg[1024], name[AT_TASK_NAME_LEN + 64];
	bool is_end = a->state == ALERT_END;

	if (!tp->process_uuid)
		start(tp, m);
	alert__format(msg, sizeof(msg), m, a);
	alert__title(name, sizeof(name), a);
	/* A beginning is marked where the problem began, an end where it ended. */
	event_begin(tp, m, is_end ? a->ts : a->begin_ts, INSTANT, tp->alerts_uuid, NULL);
	pb_string(&tp->pb, EVENT_NAME, name);
	ann_u64(tp, ANN_EPISODE, a->episode);
	ann_istr(tp, ANN_STATE, is_end ? "end" : "begin");
	if (a->task)
		ann_u64(tp, ANN_TASK, a->task);
	if (a->worker >= 0)
		ann_u64(tp, ANN_WORKER, (uint64_t)a->worker);
	if (a->kind == ALERT_LONG_POLL)
		ann_istr(tp, ANN_CAUSE, poll_cause_str(a->cause));
	if (a->stack) {
		char stack[CALLSTACK_FRAMES * 320];

		callstacks__text(&m->stacks, a->stack, stack, sizeof(stack));
		ann_str(tp, ANN_STACK, stack);
	}
	ann_str(tp, ANN_MESSAGE, msg);
	event_end(tp);
}

static void tp_tick(struct sink *s, struct model *m)
{
	(void)m;
	/* Streamed: what is written survives the tracer being killed. */
	pftrace_file__flush(tp_of(s)->file);
}

static int tp_finish(struct sink *s, struct model *m)
{
	struct trace_proto *tp = tp_of(s);
	uint64_t key;
	void *val;

	if (!tp->process_uuid)
		start(tp, m);
	/* Wakes whose poll never came still belong in the trace. */
	for (size_t i = 0; u64map__next(&m->tasks, &i, &key, &val);) {
		struct task *t = val;

		if (t->pending.wake_id)
			write_wake(tp, m, &t->pending, false);
	}
	return pftrace_file__flush(tp->file);
}

static void tp_free(struct sink *s)
{
	struct trace_proto *tp = tp_of(s);

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
	free(tp->depth);
	free(tp->depth_uuid);
	free(tp);
}

static const struct sink_ops trace_proto_ops = {
	.name = "perfetto",
	.event = tp_event,
	.alert = tp_alert,
	.tick = tp_tick,
	.finish = tp_finish,
	.free = tp_free,
};

int trace_proto__new(struct sink **s, struct pftrace_file *file, uint32_t seq)
{
	struct trace_proto *tp = calloc(1, sizeof(*tp));

	if (!tp)
		return -ENOMEM;
	tp->file = pftrace_file__get(file);
	tp->sink.ops = &trace_proto_ops;
	tp->seq_id = seq;
	tp->inject_depth = -1;
	u64map__init(&tp->threads);
	u64map__init(&tp->tasks);
	u64map__init(&tp->done);
	u64map__init(&tp->sent_stacks);
	u64map__init(&tp->sent_frames);
	u64map__init(&tp->mappings);
	for (int k = 0; k < INTERN_KINDS; k++)
		u64map__init(&tp->interned[k].map);
	*s = &tp->sink;
	return 0;
}
