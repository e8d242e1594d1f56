/* SPDX-License-Identifier: MIT */
/*
 * The trace, whatever its format: what the pipeline's events become in it.
 * slices.c decides it once: which slices, instants, counters and flows
 * there are, at what time, on which thread, with which names and
 * arguments; when a wake gets an arrow; the queue-depth counters; steals,
 * parks, alerts and the wakes still pending at the end. It is the sink;
 * a format is an encoder (struct slices_ops) that only writes what it is
 * handed: trace_json.c (Chrome JSON) and trace_proto.c (Perfetto protobuf,
 * its tracks and interning). docs/trace-format.md describes both.
 */
#ifndef SLICES_H
#define SLICES_H

#include "pipeline/sink.h"

/* The arguments a slice can carry, each of one type; protobuf interns the names in this order. */
#define SLICES_ARGS(X)                                                                             \
	X(TASK, "task", U64)                                                                       \
	X(WORKER, "worker", U64)                                                                   \
	X(ON_CPU, "on_cpu", NS)                                                                    \
	X(CPU_CHARGED, "cpu_charged", NS)                                                          \
	X(BLOCKED, "blocked", NS)                                                                  \
	X(RUNNABLE, "runnable", NS)                                                                \
	X(WAKE_DELAY, "wake_delay", NS)                                                            \
	X(QUEUE_DEPTH, "queue_depth", U64)                                                         \
	X(RESULT, "result", LABEL)                                                                 \
	X(PARENT, "parent", U64)                                                                   \
	X(WAKER_TASK, "waker_task", U64)                                                           \
	X(QUEUE, "queue", LABEL)                                                                   \
	X(DEPTH, "depth", U64)                                                                     \
	X(COUNT, "count", U64)                                                                     \
	X(THIEF, "thief", U64)                                                                     \
	X(VICTIM, "victim", U64)                                                                   \
	X(INFERRED, "inferred", BOOL)                                                              \
	X(EPISODE, "episode", U64)                                                                 \
	X(STATE, "state", LABEL)                                                                   \
	X(CAUSE, "cause", LABEL)                                                                   \
	X(MESSAGE, "message", TEXT)                                                                \
	X(STACK, "stack", TEXT)                                                                    \
	X(STACK_WHEN, "stack_when", LABEL)                                                         \
	X(MEASURED_BY, "measured_by", LABEL)                                                       \
	X(WAITED_AT, "waited_at", TEXT)

#define SLICES_ARG_ENUM(id, name, type) ARG_##id,
enum slice_arg { ARG_NONE, SLICES_ARGS(SLICES_ARG_ENUM) ARG_NR };
#undef SLICES_ARG_ENUM

enum slice_arg_type {
	SLICE_U64,	/* a count, an id */
	SLICE_NS,	/* a duration: a format writes it in its unit, the unit in its name */
	SLICE_BOOL,
	SLICE_LABEL,	/* one of a few strings that recur (a result, a queue): worth interning */
	SLICE_TEXT,	/* anything else (a message, a stack): written in full */
};

struct slice_arg_info {
	const char *name;
	enum slice_arg_type type;
};

extern const struct slice_arg_info slices__args[ARG_NR];

/* A poll has the most: 11 (a sampled run's may have measured_by, but never wake_delay). */
#define SLICE_MAX_ARGS 12

/* A slice's arguments, in the order they are written. */
struct slice_args {
	int nr;
	struct slice_value {
		enum slice_arg name;
		union {
			uint64_t u;	/* U64, NS, BOOL */
			const char *s;	/* LABEL, TEXT */
		};
	} v[SLICE_MAX_ARGS];
};

/* A slice or an instant on a thread, an alert, or a poll's CPU view. */
struct slice {
	const char *kind;	/* what it is: poll, wake, spawn, steal, park, alert, wait */
	const char *name;
	uint64_t ts;		/* the model's clock: model__rel() makes it the trace's */
	uint64_t dur;		/* 0 for an instant */
	uint32_t tid;		/* the thread it is on (alerts: none) */
	uint64_t task;		/* the task it is of: a poll's, a wake's woken one; 0 none */
	uint64_t flow_in;	/* the arrow it ends, 0 none */
	uint64_t flow_out;	/* the arrow it starts, 0 none */
	struct slice_args args;
};

/*
 * A poll, in its two views: the CPU view (cpu: on the worker's thread, from
 * cpu.ts for cpu.dur, with every argument and the poll's arrows: the wake it
 * answers in, its task's wake of itself out) and the task view (on the
 * task's own track, from task_ts to the same end).
 */
struct slice_poll {
	struct slice cpu;
	uint64_t task_ts;	/* no earlier than the task's previous poll's end: no overlaps */
	bool ready;		/* the task completed */
};

/* A wake or a spawn: an instant on the thread that made it, inside waker_task's poll if any. */
struct slice_wake {
	struct slice s;		/* name: "wake <task name>" or "spawn ..."; task: the woken */
	uint64_t waker_task;	/* 0: made outside any task */
};

/* A run queue's depth where it changed, with the runnable total (every queue's depth). */
struct slice_depth {
	uint64_t ts;
	int32_t queue;		/* a worker, or AT_QUEUE_INJECT */
	uint32_t depth;
	int64_t runnable;
};

struct slices;

/*
 * A format: how it writes what slices.c decides, as it is called (the order
 * of calls is the order of its bytes). Where a format draws something, and
 * what it leaves out that it shows otherwise, is its own. Those marked
 * optional may be NULL.
 */
struct slices_ops {
	/*
	 * A task that wakes itself in a poll (a yield) is drawn as an arrow
	 * from that poll to its next, with no instant: for a format whose poll
	 * slices can start an arrow as well as end one.
	 */
	bool flows_between_polls;
	/* optional: the process's first record (or alert) is about to be written */
	void (*start)(struct slices *sl, struct model *m);
	/*
	 * A thread is about to have something written on it: declared the
	 * first time. false: the format has nowhere to write on it (tid 0).
	 */
	bool (*thread)(struct slices *sl, struct model *m, uint32_t tid);
	/* optional: a task is about to be polled */
	void (*task)(struct slices *sl, struct model *m, uint64_t id);
	/* optional: a task spawned; an id that comes back is another task */
	void (*spawn)(struct slices *sl, uint64_t id);
	void (*depth)(struct slices *sl, struct model *m, const struct slice_depth *d);
	/*
	 * A poll; then, once the counters at its end are written, poll_end
	 * (optional): its ends, for a format that writes them apart.
	 */
	void (*poll)(struct slices *sl, struct model *m, const struct slice_poll *p);
	void (*poll_end)(struct slices *sl, struct model *m, const struct slice_poll *p);
	void (*wake)(struct slices *sl, struct model *m, const struct slice_wake *w);
	/* an instant on a thread (a steal's two ends), and a slice on one (a park) */
	void (*instant)(struct slices *sl, struct model *m, const struct slice *s);
	void (*slice)(struct slices *sl, struct model *m, const struct slice *s);
	/*
	 * optional: where a task waited between two polls (or from its last to
	 * the trace's end), when a read of the live target placed it: a slice
	 * on the task's track (s->task), written before the poll that ends it
	 */
	void (*wait)(struct slices *sl, struct model *m, const struct slice *s);
	/* an alert: an instant of the process */
	void (*alert)(struct slices *sl, struct model *m, const struct slice *s);
	/* optional: a CPU sample of a poll's stack (--stacks), the model's callstack cs */
	void (*sample)(struct slices *sl, struct model *m, const struct at_stack *st,
		       const struct callstack *cs);
	/* optional: a record is written; nothing may wait past it */
	void (*record_done)(struct slices *sl, struct model *m);
	/* about ten times a second: what is written survives the tracer being killed */
	void (*flush)(struct slices *sl);
	/* the end of the stream, once the wakes still pending are written: 0 or -errno */
	int (*finish)(struct slices *sl, struct model *m);
	/* frees the format's writer (struct slices is its first member) */
	void (*free)(struct slices *sl);
};

/* The first member of a format's writer: the sink, and what slices.c keeps of the trace. */
struct slices {
	struct sink sink;
	const struct slices_ops *ops;
	bool started;
	int64_t *depth;		/* each worker queue's depth last written; -1 none */
	uint32_t nr_depth;
	int64_t inject_depth;
	int64_t runnable;	/* the sum of every queue's depth last written */
	uint64_t steal_seq;
	struct u64map self_flows; /* task -> the arrow a poll started, until its next poll */
};

/* sl (zeroed, the first member of a format's writer) made the sink that writes with ops. */
struct sink *slices__init(struct slices *sl, const struct slices_ops *ops);

/*
 * A thread as the trace names and sorts it: "worker N (comm)" first, in
 * worker order, then the other threads by tid.
 */
#define SLICES_OTHER_THREADS 100000

struct slices_thread {
	char name[64];
	bool worker;
	uint64_t order;
};

void slices__thread(const struct thread *th, uint32_t tid, struct slices_thread *out);
/* A queue's name: "worker N", "inject" or "none". */
void slices__queue_name(int32_t queue, char *buf, size_t size);
/* The process's name: its comm, "target" while unknown. */
const char *slices__process_name(const struct model *m);

#endif
