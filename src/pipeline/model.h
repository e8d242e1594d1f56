/* SPDX-License-Identifier: MIT */
/*
 * The model of the traced runtime: its process, workers, threads and tasks,
 * and the counters of what happened. Every event passes through the model
 * before any sink sees it, so sinks look names and state up here instead of
 * keeping their own copies.
 */
#ifndef MODEL_H
#define MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "asynctraced.h"
#include "lib/u64map.h"
#include "stacks/callstacks.h"

#define MODEL_COMM_LEN 16
/* Distinct unknown record kinds remembered, to name them in the report. */
#define MODEL_UNKNOWN_KINDS 4

struct task {
	uint64_t id;
	uint64_t parent;	/* 0: none or unknown */
	uint64_t spawn_ts;	/* 0: spawned before we attached */
	uint64_t polls;
	uint64_t poll_ns;
	uint64_t oncpu_ns;
	uint64_t wakes;
	uint64_t last_end;	/* end of its latest poll seen */
	/* The wake that the task's next poll answers (wake_id != 0). */
	struct at_wake pending;
	bool named;		/* name came from the target, not made up */
	bool done;		/* returned Ready */
	char name[AT_TASK_NAME_LEN];
	/*
	 * Where it waits since last_end, when read from the live target
	 * (model__read_waits): valid for the idle span that began at
	 * wait_span if its next poll began after the read ended (wait_read).
	 */
	uint32_t wait_at;	/* in m->places; 0: none (not read, or read running) */
	uint64_t wait_span;	/* the last_end it was read after; 0: never read */
	uint64_t wait_read;	/* when that read ended, the model's clock */
	/* the last read that saw it there (UINT64_MAX: there to the end), the last read */
	uint64_t wait_seen, wait_checked;
	bool wait_moved;	/* a read since found it elsewhere: its span ends by wait_seen */
};

struct worker {
	uint32_t id;
	uint32_t tid;		/* 0 until seen polling */
	uint32_t depth;		/* local run queue, last seen */
	uint64_t polls;
	uint64_t busy_ns;
	uint64_t parks;
	uint64_t park_ns;
	uint64_t steals;	/* operations as thief */
	uint64_t stolen;	/* tasks taken as thief */
};

struct thread {
	uint32_t tid;
	int32_t worker;		/* -1: not a worker */
	char comm[MODEL_COMM_LEN];
};

struct model_counts {
	uint64_t events;	/* records from the BPF side */
	uint64_t samples;	/* samples of its maps */
	uint64_t by_kind[AT_EV_KIND_MAX];
	uint64_t malformed;	/* records that failed validation */
	uint64_t unknown;	/* records of kinds this version does not know: skipped */
	uint16_t unknown_kinds[MODEL_UNKNOWN_KINDS]; /* the first distinct ones; 0: none */
	bool more_unknown_kinds; /* and others besides */
	uint64_t tasks_spawned;
	uint64_t tasks_done;
	uint64_t polls;
	uint64_t wakes;
	uint64_t steals;
	uint64_t stolen;
	uint64_t parks;
};

/* Reads a NUL-terminated string at addr in the target; 0 or -errno. */
typedef int (*model_read_str_fn)(void *ctx, uint64_t addr, char *buf, size_t len);
/* The function whose code holds addr in the target (a task named by its code), or NULL. */
typedef const char *(*model_code_name_fn)(void *ctx, uint64_t addr);
/* Fills comm with the name of thread tid; 0 or -errno. */
typedef int (*model_thread_comm_fn)(void *ctx, uint32_t tid, char *comm, size_t len);
struct at_stack;
struct stack_frame;
/*
 * Unwinds a sampled stack of the live target into frames, innermost first:
 * how many; *by_fp: its frame pointers were followed, not its call-frame
 * information.
 */
typedef int (*model_unwind_fn)(void *ctx, const struct at_stack *s, struct stack_frame *frames,
			       int max, bool *by_fp);
/*
 * What names a task from a stack of its poll (the name address its probes
 * would give it: tokio sampled, the raw::poll instance on the stack); 0 none.
 */
typedef uint64_t (*model_stack_name_fn)(void *ctx, const struct stack_frame *frames, int n);
/*
 * Where task waits now, read from the live target (an alert's place): its
 * frames, innermost first; 0 when not known (not found, running, torn);
 * -ETIMEDOUT: bound_ms passed before it was found (a task not met before
 * is looked for this long at most; 0: as long as an alert may). waits (may
 * be NULL): found where it waited, not running or stopped elsewhere.
 */
typedef int (*model_where_fn)(void *ctx, uint64_t task, unsigned int bound_ms,
			      struct stack_frame *frames, int max, bool *waits);

struct model {
	uint32_t pid;
	char comm[MODEL_COMM_LEN];
	uint64_t t0;		/* trace origin, CLOCK_MONOTONIC ns */
	uint64_t realtime_offset; /* CLOCK_REALTIME - CLOCK_MONOTONIC, ns */
	uint64_t last_ts;	/* newest timestamp seen */
	uint64_t end_ts;	/* when the stream ended (pipeline__finish); 0 until then */
	struct model_counts n;

	struct u64map tasks;	/* id -> struct task */
	struct u64map names;	/* name address in the target -> char * (bounded) */
	struct u64map threads;	/* tid -> struct thread */
	struct worker *workers;	/* indexed by worker id */
	uint32_t nr_workers;	/* 1 + highest worker id seen */

	model_read_str_fn read_str;
	model_thread_comm_fn thread_comm;
	void *target_ctx;
	model_code_name_fn code_name;	/* Go: a goroutine's start function */
	void *code_ctx;
	model_unwind_fn unwind;	/* NULL: stacks are not unwound (no --stacks, or a capture) */
	void *unwind_ctx;
	model_stack_name_fn stack_name; /* NULL: tasks are not named by their stacks (unwind_ctx) */
	model_where_fn where;	/* NULL: where a task waits is not read (a capture; no type info) */
	void *where_ctx;

	/* --stacks: every stack unwound, once each, and where each was taken */
	struct callstacks stacks;
	uint64_t stack_period_ns; /* the time a CPU sample stands for */
	uint32_t cur_stack;	/* the stack record being applied: its callstack, 0 none */
	struct u64map thread_stacks; /* a thread's latest of each kind: struct thread_stack */
	struct u64map task_stacks; /* task -> struct task_stacks: time seen in each stack */
	uint64_t stacks_unwound, stacks_lost; /* lost: not unwound, or not kept */
	uint64_t stacks_by_fp;	/* of those unwound, by their frame pointers */
	/* where tasks were found waiting (model__where): each frame at its line */
	struct callstacks places;
	/* idle spans placed (model__read_waits): task -> struct task_stacks of places */
	struct u64map task_waits;
	size_t wait_cursor;	/* where in tasks the next round of reads begins */
	size_t refresh_cursor;	/* ... of reads again of spans placed */
	uint64_t waits_read, waits_placed; /* reads made; of them, those that found a place */
	uint64_t waits_untallied; /* spans placed not counted for the report: MODEL_STACK_TASKS */
	uint64_t waits_given_up; /* reads that did not find their task in the time given */
	uint64_t waits_ns, waits_max_ns; /* the time the reads took; the longest one */
	uint64_t (*clock)(void); /* the model's clock now, for the reads (NULL: now_ns) */
	/*
	 * may be NULL: called after each read of model__read_waits() and
	 * model__confirm_waits(), which may apply records to this model (the
	 * rings drained between reads)
	 */
	void (*after_read)(void *ctx);
	void *after_read_ctx;
};

/* A thread's latest stack of one kind (on the CPU, or asleep): in which poll. */
struct thread_stack {
	uint32_t id;		/* callstack */
	uint64_t task, poll_begin;
};

/* The stacks a task was seen in (CPU samples, sleeps), the most time first once sorted. */
#define TASK_STACKS 16
struct task_stacks {
	uint32_t nr;
	uint64_t untracked_ns;	/* in stacks past the TASK_STACKS kept */
	struct task_stack {
		uint32_t id;
		bool asleep;	/* where it slept, not a CPU sample */
		uint32_t samples;
		uint64_t ns;	/* CPU: samples times the period; asleep: the sleeps */
	} s[TASK_STACKS];
};
/* Tasks whose stacks are counted; past this, their stacks count as lost. */
#define MODEL_STACK_TASKS 4096

int model__init(struct model *m, uint32_t pid, const char *comm, uint64_t t0);
void model__free(struct model *m);

/*
 * Checks that a record is whole and of a known kind. Returns its kind, or 0
 * for a record to skip (unknown newer kind); -EINVAL if malformed.
 */
int model__validate(const void *rec, size_t size);

/*
 * Counts a record skipped for its kind, unknown to this version (written by
 * a newer one): the report says how many, and of which kinds.
 */
void model__unknown(struct model *m, uint16_t kind);

/* Applies an event; call model__retire() after the sinks have seen it. */
void model__apply(struct model *m, const struct at_hdr *ev);
void model__retire(struct model *m, const struct at_hdr *ev);

struct task *model__task(const struct model *m, uint64_t id);
/* A spawn seen as the wake that queued the task's first poll (for trace writers). */
void model__spawn_as_wake(const struct at_spawn *s, struct at_wake *w);
/* A timestamp as ns since the trace origin (never negative). */
static inline uint64_t model__rel(const struct model *m, uint64_t ts)
{
	return ts > m->t0 ? ts - m->t0 : 0;
}
/* Names every task whose name_addr is addr (a runtime that names tasks by symbols). */
void model__name(struct model *m, uint64_t addr, const char *name);
/*
 * A task's name without keeping it in the model: known, else read from the
 * target at name_addr, else "task".
 */
void model__task_name(struct model *m, uint64_t id, uint64_t name_addr, char *buf,
		      size_t len);
struct thread *model__thread(struct model *m, uint32_t tid);
/*
 * The stack taken in poll p (--stacks, live), 0 if none: where it slept
 * when asleep is preferred and it did, else where it ran, else either;
 * *asleep says which it is.
 */
uint32_t model__poll_stack(const struct model *m, const struct at_poll *p, bool prefer_asleep,
			  bool *asleep);
/*
 * Where task waits now, as the live target says (model.where): its stack,
 * kept in m->places; 0 when not known.
 */
uint32_t model__where(struct model *m, uint64_t task);
/*
 * Where task t waited in the idle span from its last poll's end to until
 * (the next poll's beginning, or the trace's end): in m->places, 0 when it
 * was not read inside that span.
 */
uint32_t model__idle_place(const struct model *m, const struct task *t, uint64_t until);
/*
 * Reads where idle tasks wait (model.where): each idle span idle
 * min_idle_ns once, starting where the last round stopped, then, with the
 * budget left, spans placed seen again (each at most once a second), until
 * budget_ns of reading is spent. now: the model's clock. The time spent.
 */
uint64_t model__read_waits(struct model *m, uint64_t now, uint64_t min_idle_ns,
			   uint64_t budget_ns);
/*
 * Where task t's open span (from its last poll to end, when placed) is known
 * to have waited until: end when a read saw it there at the end (or its
 * process ended waiting), else the last read that saw it there; 0 not
 * placed.
 */
uint64_t model__open_wait_end(const struct model *m, const struct task *t, uint64_t end);
/*
 * At the end: each open span placed read again (within budget_ns) and, seen
 * still there, known to last to the end; gone: the process has ended, every
 * one lasted to the end. The time spent.
 */
uint64_t model__confirm_waits(struct model *m, bool gone, uint64_t budget_ns);
/*
 * The place task spent the most idle time at, of its spans read
 * (model__read_waits), the one still open counted up to until: in
 * m->places, 0 none. *ns: the time there; *total: all the time placed.
 */
uint32_t model__commonest_wait(const struct model *m, uint64_t task, uint64_t until,
			       uint64_t *ns, uint64_t *total);
/*
 * Time in callstack id added to task's entry of map (of struct
 * task_stacks), or a new one while the map has room; false: not kept.
 */
bool model__tally(struct u64map *map, uint64_t task, uint32_t id, bool asleep, uint64_t ns);
/* The stack a trace shows on poll p's slice: where it slept if it mostly slept. */
static inline uint32_t model__slice_stack(const struct model *m, const struct at_poll *p,
					  bool *asleep)
{
	return model__poll_stack(m, p, p->blocked_ns > p->oncpu_ns, asleep);
}
/* The stack task spent the most time in (--stacks), NULL when none was seen. */
const struct task_stack *model__hottest_stack(const struct model *m, uint64_t task);
struct worker *model__worker(const struct model *m, uint32_t id);

#endif
