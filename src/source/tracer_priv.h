/* SPDX-License-Identifier: MIT */
/*
 * What a tracer holds, for its two halves: tracer.c (load, attach, consume,
 * detach) and snapshot.c (the maps read into struct stats). Nothing else
 * looks inside.
 */
#ifndef TRACER_PRIV_H
#define TRACER_PRIV_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "source/tracer.h"
/* after the contract header, whose types it uses */
#include "asynctraced.skel.h"

struct tracer {
	struct asynctraced_bpf *skel;
	bool empty;		/* the floor: empty programs at the same points */
	struct rings *rings;	/* one ring buffer per CPU, read in time order */
	int *ring_fds;
	int nr_rings;
	size_t ring_size;
	const struct at_task_slot *slots; /* task_slots, mapped read-only */
	size_t slots_size;
	__u32 nr_slots;
	struct bpf_link **links;
	/* whose probe each link is (0: the session's hooks; THREAD_SAMPLES_OWNER + pid) */
	long *link_owners;
	size_t nr_links;
	int *multi_fds;		/* uprobe_multi links, made without libbpf */
	long *multi_owners;
	struct reap_job *reaping;	/* links of owners let go, being destroyed */
	size_t nr_multi;
	bool multi;		/* the uprobe programs were loaded for uprobe_multi */
	enum sched_hook hook;
	struct ring_buffer *births;	/* following the host: its reader */
	tracer_birth_fn birth_fn;
	void *birth_ctx;
	tracer_record_fn fn;
	void *ctx;
	struct dump *dumps;	/* DUMP_NR: a snapshot's copies of the hash maps */
	struct at_usdt_spec *usdt_specs; /* what usdt_specs holds, by id (the attach cookie) */
	__u32 nr_usdt_specs;
	__u32 sample_hz;	/* each followed thread's CPU-clock samples (0: none) */
};

/* The owner of process pid's sample events: above every pid and file owner. */
#define THREAD_SAMPLES_OWNER (1l << 32)

/* Adds a link (NULL: -errno) that owner's tracer__detach_owner() detaches. */
int tracer__add_link(struct tracer *t, long owner, struct bpf_link *link);

/*
 * thread_samples.c: process pid's threads, each sampled sample_hz times a
 * second of its CPU time, with the threads they start (nothing when
 * sample_hz is 0, or pid has them already). 0, or -errno.
 */
int thread_samples__follow(struct tracer *t, pid_t pid);
void thread_samples__unfollow(struct tracer *t, pid_t pid);

/*
 * Where a snapshot copies a hash map, kept from one snapshot to the next:
 * the task maps take several MB, every second, and buffers that size given
 * back and taken again grew the heap glibc keeps for minutes after attaching
 * (make soak, docs/performance.md).
 */
struct dump {
	void *keys, *vals;
};

enum { DUMP_TASK_STATS, DUMP_TASKS, DUMP_STEALS, DUMP_NR };

#endif
