/* SPDX-License-Identifier: MIT */
/*
 * A snapshot of a process's tasks (`asynctraced tasks`): every live task or
 * goroutine, its state, and for one that waits, where: the frames of its
 * parked stack (Go) or the chain of futures it awaits (tokio), innermost
 * first. Read from the process's memory without stopping it, in the
 * analyser (analyser/task_reading.c); the list crosses its socket as bytes
 * (tasks__encode) that the privileged side checks as it decodes them.
 *
 * Strings are kept once each (a function's name, a file, a wait reason are
 * shared by thousands of frames) and named by their index; 0 is none.
 */
#ifndef TASKS_H
#define TASKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/u64map.h"

enum task_state {
	TASK_WAITING,		/* parked: something must wake it */
	TASK_RUNNABLE,		/* woken, in a run queue */
	TASK_RUNNING,		/* on a worker thread now */
	TASK_SYSCALL,		/* in a system call (Go) */
	TASK_OTHER,
	TASK_STATE_MAX,
};

extern const char *const task_state_names[TASK_STATE_MAX];

/* A frame of where a task is, innermost first. */
struct task_frame {
	uint64_t pc;		/* a Go frame's pc (0 for a future) */
	uint32_t function;	/* string indices; 0: unknown */
	uint32_t file;
	int32_t line;		/* 0: unknown */
	uint8_t inlined;	/* inlined into the next frame (Go) */
	uint8_t depth;		/* a future's depth in the tree it awaits (tokio) */
	uint16_t pad;
};

#define TASK_TORN 1		/* it changed while it was read: its frames are left out */
#define TASK_SYSTEM 2		/* the runtime's own (Go's GC workers, ...) */
/*
 * waited_ns is the runtime's own estimate: Go's g.waitsince, which a garbage
 * collection that finds the goroutine waiting sets to when the collection
 * before it ended (0 until then): it may be off by the time between two
 * collections, either way.
 */
#define TASK_WAIT_ESTIMATE 4

struct task_info {
	uint64_t id;
	uint64_t parent;	/* the task that made it; 0: unknown */
	uint32_t name;		/* string index */
	uint32_t wait;		/* why it waits (Go's wait reason); 0: not said */
	uint8_t state;		/* enum task_state */
	uint8_t flags;		/* TASK_* */
	uint16_t pad;
	uint32_t thread;	/* running: its thread id; 0: unknown */
	int64_t waited_ns;	/* how long it has waited; -1: unknown */
	struct task_frame created; /* where it was made (Go's go statement); function 0: unknown */
	uint32_t first_frame;	/* its frames: list.frames[first_frame ..+ nr_frames] */
	uint32_t nr_frames;
};

/* A tokio process's notes while its list is not found: worth asking again, with its threads. */
#define TASKS_NOTE_NO_RUNTIME_YET \
	"no thread's CONTEXT holds a tokio scheduler (no runtime running yet)"
#define TASKS_NOTE_NO_THREADS \
	"its threads' pointers were not read (a BPF task iterator): the tasks cannot be reached"
/* The note's beginning when a task asked for alone was looked for as long as allowed. */
#define TASKS_NOTE_GAVE_UP "not found in the time given"

struct task_list {
	char runtime[16];	/* "go", "tokio" */
	char version[32];
	char note[256];		/* what could not be read, and how to get it; "" none */
	struct task_info *tasks;
	size_t nr_tasks, cap_tasks;
	struct task_frame *frames;
	size_t nr_frames, cap_frames;
	char **strs;		/* strs[0] NULL */
	size_t nr_strs, cap_strs;
	struct u64map interned; /* where a string was (its pointer) -> index + 1 */
	uint32_t nr_torn;	/* tasks read as they changed */
	uint32_t nr_hidden;	/* system tasks left out */
};

void task_list__init(struct task_list *l);
void task_list__free(struct task_list *l);
/*
 * The index of string s (its first len bytes at most), kept once for the
 * pointer it is at: the same pointer gives the same index. 0 for NULL, or
 * when memory ran out (then l->note says so).
 */
uint32_t task_list__str(struct task_list *l, const char *s, size_t len);
/* The string at index i; NULL for 0 or past the end. */
const char *task_list__at(const struct task_list *l, uint32_t i);
/* A task added, NULL when memory ran out; its frames are added after it. */
struct task_info *task_list__add(struct task_list *l);
/* A frame of the last task added; -ENOMEM. */
int task_list__frame(struct task_list *l, const struct task_frame *f);

/* The list as bytes (malloc'd into *out, *len); 0 or -ENOMEM. */
int tasks__encode(const struct task_list *l, uint8_t **out, size_t *len);
/*
 * Bytes from the analyser into l (initialised here): every count, index and
 * string checked. 0, or -EBADMSG (l freed).
 */
int tasks__decode(const uint8_t *b, size_t len, struct task_list *l);

#endif
