/* SPDX-License-Identifier: MIT */
/*
 * The BPF side seen from userspace: load the programs once for every process
 * traced, attach them to sched_switch and, for each process followed
 * (tracer__follow), to its runtime's probes; drain the per-CPU ring buffers
 * (rings.h) into a callback, read the drop counters, detach.
 *
 * Lifecycle: tracer__new (open, configure, load) -> tracer__attach_sched ->
 * (tracer__follow, tracer__attach_* ... tracer__detach_owner, tracer__forget
 * per process) -> tracer__consume ... -> tracer__detach -> tracer__consume
 * (what is left) -> tracer__free.
 */
#ifndef TRACER_H
#define TRACER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "asynctraced.h"
#include "pipeline/config.h"
#include "source/stats.h"

enum sched_hook {
	SCHED_HOOK_AUTO = 0,	/* tp_btf, else raw_tp */
	SCHED_HOOK_TP_BTF,
	SCHED_HOOK_RAW_TP,
};

#define DEFAULT_RINGBUF_BYTES (16u << 20)

/* Following the host: process pid exec'd, or a traced process forked it. */
typedef void (*tracer_birth_fn)(void *ctx, pid_t pid);

struct tracer_opts {
	const char *btf_path;	/* NULL: the running kernel's BTF */
	uint64_t ringbuf_bytes;	/* power of two, >= page size */
	uint32_t task_slots;	/* power of two, 1 to 2^20 */
	enum sched_hook sched_hook;
	/* false: maps only; the ring carries just the polls alerts need */
	bool trace_events;
	/* the thresholds the programs filter by (long polls, late polls, deep queues) */
	struct detect_config detect;
	/* USDT: each probe's arguments where all its sites agree (NULL: none) */
	const struct at_usdt_spec *usdt_specs;	/* [AT_USDT_NR_PROBES] */
	/* the floor: empty programs at the same attach points, nothing recorded */
	bool empty_programs;
	/* --stacks: sample a poll's user stack once it has run this long (0: off) */
	uint64_t stack_after_ns;
	/*
	 * --mode sample: the CPU-clock samples' period; no uprobe program is
	 * loaded, runs are read from the runtime's state (0: probe mode)
	 */
	uint64_t sample_period_ns;
	/* sample mode: the uprobe programs loaded too, for tracer__escalate() */
	bool escalate;
	/* -v: say how many instructions the verifier went through for each program */
	bool verbose;
	/* following the host: told each exec, and each fork of a traced process */
	tracer_birth_fn births;
	void *births_ctx;
};

/* The uprobe programs, for runtimes probed at their own functions. */
enum tracer_uprobe {
	UPROBE_TOKIO_POLL,
	UPROBE_TOKIO_POLL_RET,
	UPROBE_TOKIO_WAKE,
	UPROBE_TOKIO_SCHEDULE,
	UPROBE_TOKIO_BIND_RET,
	UPROBE_TOKIO_BIND_INNER,
	UPROBE_TOKIO_REMOVE,
	UPROBE_TOKIO_STEAL_RET,
	UPROBE_GO_CASGSTATUS,
	UPROBE_GO_NEWPROC1_RET,	/* an entry probe, at each of newproc1's ret instructions */
	UPROBE_GO_RUNQSTEAL,
	UPROBE_GO_RUNQSTEAL_TOOK, /* inside runqsteal, where a steal took something */
	UPROBE_GO_HANDOFFP,
	UPROBE_GO_STOP_THE_WORLD,
	UPROBE_GO_PREEMPT_PARK,
	UPROBE_MAX,
};

/* Receives each ring-buffer record; returns 0 to go on. */
typedef int (*tracer_record_fn)(void *ctx, const void *data, size_t size);

struct tracer;

int tracer__new(struct tracer **t, const struct tracer_opts *opts, tracer_record_fn fn,
		void *ctx);
/* Attaches sched_switch (and, following the host, the exec and fork hooks). */
int tracer__attach_sched(struct tracer *t);
/*
 * Before tracer__follow: each thread of a process followed gets a CPU-clock
 * sample hz times a second of its time on a CPU, which (sample mode) reads
 * what it runs, and (--stacks) records the user stack of a thread in a poll
 * that has run long; in sample mode, the runtime's preemption signals are
 * watched too. 0 (also when neither is on), or -errno.
 */
int tracer__attach_samples(struct tracer *t, uint32_t hz);
/* Following the host: an fd that polls readable when births wait; -1 otherwise. */
int tracer__births_fd(const struct tracer *t);
/* Hands the births waiting to the births callback. */
void tracer__births_consume(struct tracer *t);
/*
 * Follows process pid: sched_switch accounts its threads, its probes
 * know what its runtime offers (flags: enum at_target_flag), and its threads
 * are sampled (tracer__attach_samples); probes are attached for a process
 * separately. 0, or -errno (no room for another process, or its threads
 * cannot be sampled).
 */
int tracer__follow(struct tracer *t, pid_t pid, uint32_t flags);
/*
 * Where process pid's tokio binary is: the address of its file offset 0.
 * Its tasks are then named by file offsets, the probes' cookies (bpf side);
 * and where its deferred wakes return to (file offsets: tokio__defer_sites).
 */
int tracer__tokio_base(struct tracer *t, pid_t pid, uint64_t base, const uint64_t *defer_ret,
		       size_t nr_defer);
/*
 * Sample mode: where process pid's threads keep tokio's CONTEXT (from the
 * thread pointer) and, in it, the current task's id and the coop budget.
 * After tracer__tokio_base.
 */
int tracer__tokio_current(struct tracer *t, pid_t pid, int64_t tpoff, uint32_t task_id,
			  uint32_t budget);
/* Where process pid's Go runtime keeps what the Go probes read (before attaching them). */
struct at_go_layout;
int tracer__go_layout(struct tracer *t, pid_t pid, const struct at_go_layout *l);
/* Sample mode: where process pid keeps asynctrace_current_tpoff (docs/usdt-abi.md). */
int tracer__usdt_current(struct tracer *t, pid_t pid, uint64_t addr);
/*
 * Sample mode with opts.escalate: process pid's probes are about to be
 * attached (on) and samples let it be, or were detached (off) and samples
 * read it again.
 */
void tracer__escalate(struct tracer *t, pid_t pid, bool on);
/* No longer follows process pid. */
void tracer__unfollow(struct tracer *t, pid_t pid);
/*
 * Probes are attached for process pid, or (pid -1) for every process that
 * maps the file, the programs keeping to the processes followed; they
 * belong to owner (a pid, or a number the caller gives a file whose probes
 * several processes share; never 0), which tracer__detach_owner() detaches.
 *
 * Attaches the program for one asynctrace probe (enum at_usdt_probe) at n
 * sites of binary: each at its file offset, with its semaphore's file
 * offset (0: none; the kernel raises it while the probe is attached) and
 * its arguments' spec, which the program finds by the attach cookie. As
 * tracer__attach_uprobes: one uprobe_multi link, all or none. -ENOENT if
 * we have no program for id; -ENOSPC when AT_USDT_MAX_SPECS distinct specs
 * are attached already.
 */
struct at_usdt_spec;
int tracer__attach_usdt(struct tracer *t, pid_t pid, long owner, const char *binary, int id,
			const uint64_t *offsets, const uint64_t *ref_ctrs,
			const struct at_usdt_spec *specs, size_t n);
/*
 * Attaches a uprobe program (entry or return, as the program wants) at n
 * file offsets of binary, each with its cookie: one uprobe_multi link where
 * the kernel has them, else one link each. All or none: when one offset
 * fails (the kernel refuses a probe there: -ENOTSUPP), none is attached.
 */
int tracer__attach_uprobes(struct tracer *t, pid_t pid, long owner, enum tracer_uprobe which,
			   const char *binary, const uint64_t *offsets, const uint64_t *cookies,
			   size_t n);
/* Detaches owner's probes (its process exited, or its file is no longer traced). */
void tracer__detach_owner(struct tracer *t, long owner);
/*
 * Frees what the maps hold for process pid, once it is gone and its probes
 * detached: its worker slots, its tasks, its steal pairs. A process of the
 * same pid later starts from nothing. 0, or -errno.
 */
int tracer__forget(struct tracer *t, pid_t pid);
/* An fd that polls readable when a ring buffer woke its reader (an epoll fd). */
int tracer__fd(const struct tracer *t);
/*
 * Hands waiting records to the callback in time order, at most max of them
 * (0: no limit) so that a flood cannot keep the caller from its signals; the
 * number consumed, or -errno. Live, records younger than a margin wait for
 * the CPUs that may still write older ones; all: everything written, once
 * the programs are detached.
 */
int tracer__consume(struct tracer *t, size_t max, bool all);
void tracer__detach(struct tracer *t);
/*
 * Reads process pid's aggregates into s (freeing what it held): workers and runtime
 * always (cheap: mmap'd); with tasks, also the per-task statistics, the live
 * tasks that returned Pending and were not woken since (idle at least
 * idle_min_ns), and the steal matrix. at: the time the snapshot stands for (0:
 * now); after tracing stopped, its stop, so that nothing counts as idle for
 * the time detaching took.
 */
int tracer__snapshot(const struct tracer *t, pid_t pid, struct stats *s, bool tasks,
		     uint64_t idle_min_ns, uint64_t at);
/* Sums the per-CPU counters of enum at_stat. */
int tracer__stats(const struct tracer *t, uint64_t stats[AT_STAT_NR]);
const char *tracer__sched_hook(const struct tracer *t);
void tracer__free(struct tracer *t);

/* Does the kernel (or path) offer BTF? 0, or -errno with a reason. */
int tracer__check_btf(const char *path);

#endif
