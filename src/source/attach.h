/* SPDX-License-Identifier: MIT */
/* Attaching the probes of a discovered runtime (attach.c). */
#ifndef ATTACH_H
#define ATTACH_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "source/tracer.h"
#include "targets/discover.h"

#define SHARE_ALONE 2

/* Linux's ENOTSUPP (524), which strerror does not know: no uprobe on that instruction. */
#define ENOTSUPP_KERNEL 524

struct attach_opts {
	pid_t pid;		/* the process whose probes they are */
	/*
	 * Following the host: a file's probes (asynctrace's, tokio's, Go's)
	 * are attached once, for every process that maps it, and shared.
	 * share(ctx, path, &owner) says whether to attach them now (1: as
	 * owner), that they are attached already (0: this process takes its
	 * share), or that this file's are for pid alone (SHARE_ALONE: a file
	 * someone but root may write, whose bytes could move under another
	 * process's probes); -errno to fail. NULL: for pid alone.
	 */
	int (*share)(void *ctx, const char *path, long *owner);
	void *share_ctx;
	bool probe_at_entry;	/* --probe-at entry: tokio probes on the function entries */
	bool verbose;		/* say each probe attached, and where */
	/* its /proc/PID/mem, where each probe's breakpoint is looked for; -1: not checked */
	int memfd;
};

/*
 * Where the function probes went (placement.h), and those the kernel
 * refused (each said as a warning, with what it costs): a refused place is
 * tried again at the function's entry; a probe refused there too is lost,
 * and the process traced without it.
 */
struct attach_counts {
	size_t moved;		/* past a single-stepped entry, to an emulated instruction */
	size_t stepped;		/* left on a single-stepped instruction (-v says why) */
	size_t lost[TOKIO_KIND_MAX];	/* tokio: refused, by kind */
	size_t lost_go;		/* Go: refused */
	bool go_steals_taken;	/* Go: runqsteal probed where a steal took something */
	bool go_handoffs;	/* Go: handoffp and stopTheWorldWithSema probed (a lost P is told) */
};

/*
 * Attaches every probe of d's runtime to the tracer, counting where they
 * went. Each failure is said on stderr; returns its error: only when
 * nothing useful could be traced (no poll probe, or Go's casgstatus) if it
 * was the kernel's refusal.
 */
int attach__probes(struct tracer *t, const struct discovery *d, const struct attach_opts *o,
		   struct attach_counts *counts);

#endif
