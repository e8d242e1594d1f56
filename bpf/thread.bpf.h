/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * The state of the thread a probe hit belongs to: found without asking the
 * kernel on every hit, released when the thread exits.
 */
#ifndef THREAD_BPF_H
#define THREAD_BPF_H

#include "worker.bpf.h"

/*
 * A thread's state: in the slot its tid indexes, or, when another thread
 * holds that slot, in the threads hash. The slot is an array element (an
 * inlined index, no hashing): most threads never need the hash.
 */
static __always_inline struct thread_state *thread_slot(__u32 tid)
{
	__u32 i = tid & (AT_MAX_THREADS - 1);

	return bpf_map_lookup_elem(&thread_slots, &i);
}

static __always_inline struct thread_state *thread_find(__u32 tid)
{
	struct thread_state *t = thread_slot(tid);

	if (t && t->tid == tid)
		return t;
	return bpf_map_lookup_elem(&threads, &tid);
}

/* A thread state to insert from: too large for the BPF stack. */
static const struct thread_state zero_thread_state;

/* A thread's state, made the first time (for a followed process only). */
static __always_inline struct thread_state *thread_get(__u32 tid, __u32 tgid)
{
	struct thread_state *t = thread_slot(tid);

	if (t && t->tid == tid)
		return t;
	if (!tgid_traced(tgid))
		return NULL;
	if (t && !t->tid && __sync_val_compare_and_swap(&t->tid, 0, tid) == 0) {
		/* a slot an exited thread gave back: state this thread had in the hash goes */
		bpf_map_delete_elem(&threads, &tid);
		t->tgid = tgid;
		t->pslot = worker_slot_of(tgid, AT_WORKER_PROCESS);
		t->flags = flags_of_tgid(tgid);
		return t;
	}
	t = bpf_map_lookup_elem(&threads, &tid);
	if (t)
		return t;
	/* only this thread makes its own state: filled in place, with no task in it yet */
	bpf_map_update_elem(&threads, &tid, &zero_thread_state, BPF_NOEXIST);
	t = bpf_map_lookup_elem(&threads, &tid);
	if (!t) {
		stat_inc(AT_STAT_THREADS_FULL);
		return NULL;
	}
	t->tid = tid;
	t->tgid = tgid;
	t->pslot = worker_slot_of(tgid, AT_WORKER_PROCESS);
	t->flags = flags_of_tgid(tgid);
	return t;
}

/*
 * The thread a probe hit belongs to, without asking the kernel (a helper
 * call) on every hit. A probe's registers (the program's context) are saved
 * at the top of its thread's kernel stack: while the thread lives, no other
 * thread's probes see that address. Each CPU remembers the last thread it
 * asked about and that address; the thread's own state remembers it too,
 * until sched_switch sees the thread exit (thread_release(): its stack may
 * then go to a new thread). Both must agree with the context to be
 * believed. One answer in 64 is checked against the kernel's; a wrong one
 * turns this off for the session (a kernel that passed probes a shared
 * copy of the registers would).
 */
struct cpu_thread {
	__u64 regs;
	__u32 tid;
	__u32 hits;
};

AT_SHARED struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct cpu_thread);
} cpu_thread SEC(".maps");

AT_SHARED __u32 thread_self_off CACHE_LINE; /* .bss: set when a check found a wrong answer */

static __always_inline struct thread_state *thread_self(void *ctx, bool create, __u32 *tidp)
{
	__u32 zero = 0, tid;
	__u64 id;
	struct cpu_thread *c = bpf_map_lookup_elem(&cpu_thread, &zero);
	struct thread_state *t;

	if (c && c->regs == (__u64)ctx && !thread_self_off) {
		tid = c->tid;
		t = thread_slot(tid);
		if (t && t->tid == tid && t->regs == (__u64)ctx) {
			if (++c->hits % 64 || (__u32)bpf_get_current_pid_tgid() == tid) {
				*tidp = tid;
				return t;
			}
			thread_self_off = 1;
			stat_inc(AT_STAT_THREAD_SELF_WRONG);
		}
	}
	id = bpf_get_current_pid_tgid();
	tid = (__u32)id;
	*tidp = tid;
	t = create ? thread_get(tid, id >> 32) : thread_find(tid);
	if (t && c) {
		t->regs = (__u64)ctx;
		c->regs = (__u64)ctx;
		c->tid = tid;
	}
	return t;
}

/*
 * A thread of the target is exiting: its state goes, and its slot with it,
 * cleared before it is freed (a new thread's tid may index it: a thread
 * table that kept exited threads would fill up in a runtime whose threads
 * come and go). thread_self() forgets it too: its kernel stack may go to a
 * new thread.
 */
static __always_inline void thread_release(__u32 tid)
{
	struct thread_state *t = thread_slot(tid);

	if (t && t->tid == tid) {
		__builtin_memset((char *)t + sizeof(t->tid), 0, sizeof(*t) - sizeof(t->tid));
		barrier();
		t->tid = 0;
	} else {
		bpf_map_delete_elem(&threads, &tid);
	}
}

/*
 * The own slot of the process of the thread whose state is t (NULL: ask
 * the kernel): its counters' index; WORKER_NO_SLOT (the session's entry)
 * when none was left.
 */
static __always_inline __u32 process_slot(const struct thread_state *t)
{
	if (t)
		return t->pslot;
	return worker_slot_of(tgid_of(NULL), AT_WORKER_PROCESS);
}

/*
 * Whether the thread a probe fired on, whose state is t (NULL: none), is of
 * a followed process: a probe on an image fires for every process that maps
 * it. A thread state is only ever made for a followed process.
 */
static __always_inline bool self_traced(const struct thread_state *t)
{
	return t || tgid_traced(tgid_of(NULL));
}

/* Its process's enum at_target_flag, for the thread whose state is t (NULL: looked up). */
static __always_inline __u32 flags_of(const struct thread_state *t, __u32 tgid)
{
	return t ? t->flags : flags_of_tgid(tgid);
}

#endif
