/* SPDX-License-Identifier: MIT */
/*
 * User stacks of programs built without frame pointers (release Rust, C at
 * -O2): the registers at a sample and a copy of the top of the stack,
 * unwound by the DWARF call-frame information of the images (.eh_frame,
 * .debug_frame) through elfutils' libdwfl, the way `perf --call-graph dwarf`
 * does; then each frame symbolised: function (demangled), image, and source
 * file and line where DWARF has them, inlined frames included. What each
 * process maps is read once and kept until the process is forgotten.
 */
#ifndef UNWIND_H
#define UNWIND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A sample: a thread's registers and the stack bytes from sp up. */
struct stack_sample {
	uint32_t pid;
	uint32_t tid;
	uint64_t ip;
	uint64_t sp;
	uint64_t bp;
	const uint8_t *stack;	/* the bytes at sp, sp + 1, ... */
	size_t len;
	/* return addresses a uretprobe replaced: read at slot, ret is the real one */
	const struct stack_return {
		uint64_t slot;
		uint64_t ret;
	} *returns;
	size_t nr_returns;
	/* the kernel's frame-pointer walk from ip, innermost first; nr_fp 0: none */
	const uint64_t *fp;
	size_t nr_fp;
};

struct stack_frame {
	uint64_t pc;		/* the sampled ip, or a return address */
	uint64_t rel_pc;	/* pc from the start of its image's mapping */
	const char *function;	/* demangled; NULL: no symbol covers pc */
	const char *module;	/* the image's file name (no directory) */
	const char *file;	/* the source file, NULL when DWARF does not say */
	int line;
	bool inlined;		/* inlined into the frame after it */
	bool kernel;		/* a kernel frame: module is "kernel" or a module's name */
};

struct unwinder;

int unwinder__new(struct unwinder **u);
/*
 * Unwinds s into frames, innermost first: how many (at most max), 0 when not
 * even the first frame is known. The strings live as long as the process
 * is remembered (unwinder__forget). The frame-pointer walk is taken as it
 * is when every link of it is sound (*by_fp set), else the call-frame
 * information is followed from the registers and the stack's copy.
 */
int unwinder__unwind(struct unwinder *u, const struct stack_sample *s, struct stack_frame *frames,
		     int max, bool *by_fp);
/*
 * Reads what process pid maps, and each image, now: while the tracer may
 * still read the process's maps (it gives up that right once attached:
 * docs/security.md). 0, or -errno.
 */
int unwinder__prime(struct unwinder *u, uint32_t pid);
/*
 * Given what it maps instead of reading it (the analyser, which may open
 * nothing: analyser/unwinding.c): process pid's images as maps (the text of
 * its /proc/PID/maps) names them, each read from the file of that name in
 * files, open; nothing is opened by name. files (names and descriptors) is
 * the unwinder's from then on, whatever the outcome. What pid was before
 * goes. 0, or -errno.
 */
struct unwind_file {
	char *name;
	int fd;
};
int unwinder__prime_from(struct unwinder *u, uint32_t pid, const char *maps, size_t len,
			 struct unwind_file *files, size_t nr);
/*
 * The separate debug files pid's images (primed from files) may have, as
 * paths in its root (a build id's under /usr/lib/debug, a debug link's
 * beside the image), fn called with each; none for an image with DWARF.
 */
int unwinder__wanted(struct unwinder *u, uint32_t pid, void (*fn)(void *ctx, const char *path),
		     void *ctx);
/*
 * Those of them that were found, open, each named by its path (files the
 * unwinder's, as above); pid's images and DWARF are read then. A debug
 * file of another build than its image's is not taken. 0, or -errno.
 */
int unwinder__give_debug(struct unwinder *u, uint32_t pid, struct unwind_file *files, size_t nr);
/* Whether an image pid is known to map covers pc (primed from files: none is looked for). */
bool unwinder__covers(struct unwinder *u, uint32_t pid, uint64_t pc);
/* A process that exited or exec'd: what was read of it goes. */
void unwinder__forget(struct unwinder *u, uint32_t pid);
void unwinder__free(struct unwinder *u);

#endif
