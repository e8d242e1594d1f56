/* SPDX-License-Identifier: MIT */
/*
 * The stacks seen in a session, each kept once: a frame is a function, its
 * image, its source line; a callstack is a list of frames. Sinks and the
 * report refer to them by id, so a stack sampled a thousand times costs its
 * strings once, and outlives the process it came from (the report, written
 * at the end, names the stacks of a process that exited).
 */
#ifndef CALLSTACKS_H
#define CALLSTACKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/u64map.h"

struct stack_frame;

/* Frames kept of one stack, innermost first; deeper ones are cut. */
#define CALLSTACK_FRAMES 64
/* Distinct stacks kept in a session; past this, new ones are counted, not kept. */
#define CALLSTACKS_MAX 65536

/*
 * A frame: a function in an image (its file, line and address are those of
 * the first sample that had it).
 */
struct cs_frame {
	uint32_t id;
	uint64_t hash;
	const char *function;	/* "" unknown */
	const char *module;	/* the image's file name; "[kernel]", "[ext4]" in the kernel */
	const char *file;	/* "" unknown */
	uint32_t line;
	uint64_t rel_pc;	/* from its image's start; 0 in the kernel */
	bool inlined;		/* inlined into the frame after it */
	bool kernel;
};

struct callstack {
	uint32_t id;
	uint32_t nr;
	uint64_t hash;
	uint32_t frames[];	/* frame ids, innermost first */
};

struct callstacks {
	struct u64map frame_by_hash;	/* content hash -> struct cs_frame */
	struct u64map stack_by_hash;	/* content hash -> struct callstack */
	struct cs_frame **frames;	/* by id - 1 */
	struct callstack **stacks;	/* by id - 1 */
	uint32_t nr_frames, nr_stacks;
	uint32_t cap_frames, cap_stacks;
	uint64_t dropped;		/* stacks not kept: the table was full, or no memory */
	/*
	 * A table of places (where tasks wait): a frame is its function at
	 * its line, not the function wherever it was sampled. Set before the
	 * first intern.
	 */
	bool by_line;
};

void callstacks__init(struct callstacks *c);
void callstacks__free(struct callstacks *c);
/* The id of the stack of n frames (innermost first); 0 if not kept (counted in dropped). */
uint32_t callstacks__intern(struct callstacks *c, const struct stack_frame *f, int n);
const struct callstack *callstacks__get(const struct callstacks *c, uint32_t id);
const struct cs_frame *callstacks__frame(const struct callstacks *c, uint32_t id);
/*
 * Whether a frame is the program's own code, not its runtime's or its
 * libraries': what an alert names.
 */
bool callstacks__own_frame(const struct cs_frame *f);
/* ... by its function's name alone (Rust's std, core, tokio; Go's standard library). */
bool callstacks__own_function(const char *fn);
/*
 * Whether a function is the scheduler's own machinery, which says nothing of
 * where a task waits (Go's runtime and internal packages, tokio's runtime,
 * Rust's std and core): a wait all in libraries is placed at the innermost
 * library call outside it (net.(*conn).Read, not runtime.gopark).
 */
bool callstacks__runtime_function(const char *fn);
/*
 * " in f <- caller": where in its own code the program was; asleep, the call
 * it slept in and the program's function that made it, or, when none is
 * named as the program's (all std's, or a release build's generic async
 * poll), the library function it called (std::thread::sleep); "" when the
 * stack does not say.
 */
void callstacks__where(const struct callstacks *c, uint32_t id, bool asleep, char *buf,
		       size_t size);
/*
 * "; parked at f (file:line)": the innermost frame of the program's own code
 * (not its runtime's, nor its standard library's) that has a line, else
 * without one, else the innermost outside the runtime (a wait all in the
 * standard library), else the innermost; "" for none.
 */
void callstacks__parked(const struct callstacks *c, uint32_t id, char *buf, size_t size);
/* The same frame as "<what> f (file:line)", "<what> f" without a line; "" for none. */
void callstacks__waiting(const struct callstacks *c, uint32_t id, const char *what, char *buf,
			 size_t size);
/* The stack as text, a frame a line: "[inlined] f (module file:line)". */
void callstacks__text(const struct callstacks *c, uint32_t id, char *buf, size_t size);

#endif
