/* SPDX-License-Identifier: MIT */
/*
 * Every goroutine of a running Go program, read from its memory without
 * stopping it: runtime.allgptr[0 .. allglen), each g's status, wait reason
 * and saved registers, and a parked goroutine's stack unwound as the
 * runtime unwinds it (by each frame's size in pcsp), each frame named by
 * .gopclntab, inlined calls included. Works on stripped binaries: nothing
 * here needs a symbol table or DWARF.
 */
#ifndef GOROUTINES_H
#define GOROUTINES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/u64map.h"

#include "targets/go/golang.h"
#include "tasks/tasks.h"

/* The target's memory: len bytes at addr into buf; 0, or -errno (-EIO: not mapped). */
struct task_mem {
	int (*read)(void *ctx, uint64_t addr, void *buf, size_t len);
	void *ctx;
};

/* Frames of a goroutine at most (the runtime prints 100). */
#define GO_STACK_MAX 100
/* Goroutines read at most: far above what a server runs. */
#define GO_GOROUTINES_MAX (1u << 24)

struct goroutines_opts {
	bool system;		/* the runtime's own goroutines too (GOTRACEBACK=system) */
	uint64_t now_ns;	/* CLOCK_MONOTONIC, Go's nanotime(): how long a GC-seen wait is */
	uint64_t only;		/* only the goroutine of this id (an alert's); 0: every one */
	/*
	 * may be NULL: goroutine id -> its g's address, kept from one read of
	 * only to the next: an only is looked for there first (a g is never
	 * freed: its id says whether it is still that goroutine's), and ids met
	 * looking for one are kept (GO_FOUND_MAX at most: then it starts again)
	 */
	struct u64map *found;
	/*
	 * only: looking for it is given up at this CLOCK_MONOTONIC time (0:
	 * never), and begins at *resume in allgs (may be NULL: at 0), where the
	 * last one given up stopped, so that each goes on from there
	 */
	uint64_t deadline_ns;
	uint64_t *resume;
};
#define GO_FOUND_MAX (1u << 20)

/*
 * Goroutines of the process whose executable gb was read from (file: its
 * bytes, for .gopclntab; bias: where it is loaded minus its link-time
 * addresses) into l. 0, or -errno: -ENOTSUP when the binary lacks what is
 * read (l->note says what), -EIO when the list could not be read.
 */
int goroutines__read(const struct go_binary *gb, const uint8_t *file, size_t file_size,
		     uint64_t bias, const struct task_mem *m, const struct goroutines_opts *o,
		     struct task_list *l);

#endif
