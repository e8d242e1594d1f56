/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * The state every program of the BPF side shares: the loader's settings
 * (.rodata), the per-thread and per-task maps, the rings, and the globals
 * userspace reads through its mapping of .bss (workers, counters, the
 * processes traced). Every unit includes it, and the units are linked into
 * one object (bpftool gen object): state.bpf.c holds the one definition of
 * each (AT_STATE_HERE), the others declare it extern (AT_SHARED) and the
 * linker resolves them to it. Helpers stay static __always_inline in the
 * headers: a call across units would cost every hit a BPF-to-BPF call.
 */
#ifndef MAPS_BPF_H
#define MAPS_BPF_H

#include "asynctraced.h"
#include "stats.bpf.h"

#ifdef AT_STATE_HERE
#define AT_SHARED
#define AT_INIT(value) = value
#else
#define AT_SHARED extern
#define AT_INIT(value)
#endif

/*
 * A place where another program may run in the middle of this one (a
 * preempted uprobe program, another CPU): the unit test of these programs
 * (tests/unit/test_bpf_logic.c) runs other events there. Nothing in BPF.
 */
#ifndef AT_RACE_POINT
#define AT_RACE_POINT(where)
#endif

/* Wake the consumer once a CPU has written this much: batches epoll wake-ups. */
AT_SHARED const volatile __u64 wakeup_bytes AT_INIT(256 * 1024);
/*
 * Full trace: every record. Otherwise only the polls the detectors need: at
 * least long_poll_ns long, or late by sched_delay_ns with fewer than
 * starve_depth tasks queued ahead (a backlog explains itself).
 */
AT_SHARED const volatile bool trace_events AT_INIT(true);
/* task_slots holds 2^task_slot_bits slots (the loader sizes both). */
AT_SHARED const volatile __u32 task_slot_bits AT_INIT(14);
AT_SHARED const volatile __u64 long_poll_ns AT_INIT(0);
AT_SHARED const volatile __u64 sched_delay_ns AT_INIT(0);
AT_SHARED const volatile __u32 starve_depth AT_INIT(0);

/* switch-ins a thread remembers, to tell a late poll's wait for a CPU (host_wait()) */
#define AT_CPU_MARKS 4

struct thread_state {
	__u32 tid;		/* whose state this is (in thread_slots: the slot's holder) */
	__u32 tgid;		/* its process */
	__u64 regs;		/* where its probes' registers are (see thread_self()); 0 unknown */
	__u64 task;		/* task being polled, 0 if none */
	__u64 begin;		/* poll begin */
	__u64 since;		/* last switch in or out inside the poll */
	__u64 oncpu;
	__u64 blocked;
	__u64 runnable;
	__u64 wake_ts;
	__u64 wake_id;
	__u64 name_addr;
	__u64 holder_begin;
	__u32 worker;		/* of the poll in progress */
	__u32 wslot_of;		/* 1 + the worker whose slot wslot is (0: none cached) */
	__u32 wslot;		/* that worker's slot (worker_slot()) */
	__u32 pslot;		/* its process's own slot (process_slot()) */
	__u32 flags;		/* its process's enum at_target_flag */
	__u32 depth;
	__s32 queued_on;
	__u32 queued_depth;
	__u16 nr_blocked;
	__u16 nr_preempted;
	__u8 off_cpu;		/* switched out inside the poll */
	__u8 off_blocked;	/* ... asleep rather than preempted */
	__u8 completed;		/* the task finished inside this poll */
	__u8 spare;		/* a late poll: at_poll.spare */
	/* Runtimes without worker ids in their probes: ours, by first poll. */
	__u8 has_worker;
	__u32 own_worker;
	/* the task's wakes since its previous poll began, for its statistics */
	__u32 wakes;		/* by others */
	__u32 self_wakes;
	__u64 born;		/* the task was first seen */
	__u64 charged;		/* the thread's CPU time as the kernel charged it, at poll begin */
	/* tokio: the last task Header this thread resolved (see tokio_task()) */
	__u64 hdr;
	__u64 hdr_id;
	__u64 hdr_id_off;
	__u64 hdr_poll_fn;
	/* tokio: the Header of the task in its poll (tokio_unwakeable()) */
	__u64 poll_hdr;
	/* full trace: the polled task's wake of itself, for its poll's record */
	struct at_wake sw;
	__u32 sw_pending;
	/* tokio: the task the wake in progress on this thread resolved, and when (tokio_schedule) */
	__u64 woken_hdr;
	__u64 woken_id;
	__u64 woken_ts;
	/*
	 * Between polls (see between_polls()): the kernel's count of its time
	 * on a run queue (sched_info.run_delay) when last seen, whether it was
	 * inside a poll when it last took a CPU (that wait was then the poll's
	 * runnable time), and since when it sleeps (0: it does not).
	 */
	__u64 run_delay_seen;
	__u64 asleep_since;
	/* it took a CPU then (ktime), after a sleep: calibrates rq_clock_offset */
	__u64 arrived_at;
	__u8 arrived_in_poll;
	/* its latest switch-ins: when, and its run_delay then (host_wait()) */
	__u8 in_next;
	__u64 in_ts[AT_CPU_MARKS];
	__u64 in_run_delay[AT_CPU_MARKS];
} __attribute__((aligned(64))); /* whole cache lines: threads run on different CPUs */

/*
 * Records go to the ring buffer of the CPU they are made on: no lock shared
 * between CPUs, no cache line bouncing between writers. Userspace merges the
 * rings in time order (src/source/rings.c). The loader makes the rings, one per
 * possible CPU, all the size of this template.
 */
struct ring {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096); /* resized by the loader */
};

AT_SHARED struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, 1); /* resized by the loader */
	__type(key, __u32);
	__array(values, struct ring);
} rings SEC(".maps");

/*
 * Thread state: a slot per tid modulo AT_MAX_THREADS, the hash for collisions.
 * Mappable only to start on a page: with the struct's alignment, no two
 * threads (whose tids, and so slots, are often neighbours) share a cache line.
 */
AT_SHARED struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, AT_MAX_THREADS);
	__type(key, __u32);
	__type(value, struct thread_state);
} thread_slots SEC(".maps");

AT_SHARED struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, AT_MAX_THREADS);
	__type(key, __u32);
	__type(value, struct thread_state);
} threads SEC(".maps");

/*
 * Live tasks: in the slot their id hashes to (an inlined array index, no
 * hashing, no helper call), else, when another task holds that slot, in the
 * tasks and task_stats hashes. See task_find().
 */
AT_SHARED struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, AT_TASK_SLOTS); /* resized by the loader */
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct at_task_slot);
} task_slots SEC(".maps");

AT_SHARED struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, AT_MAX_TASKS);
	__type(key, struct at_task_key);
	__type(value, struct at_task_state);
} tasks SEC(".maps");

AT_SHARED struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, AT_MAX_TASK_STATS);
	__type(key, struct at_task_key);
	__type(value, struct at_task_stats);
} task_stats SEC(".maps");

AT_SHARED struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, AT_MAX_STEAL_PAIRS);
	__type(key, struct at_steal_key);
	__type(value, struct at_steal_stats);
} steals SEC(".maps");

AT_SHARED struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, AT_STAT_NR);
	__type(key, __u32);
	__type(value, __u64);
} stats SEC(".maps");

/*
 * Globals live in the mmap-able .bss: userspace reads them without syscalls.
 * CACHE_LINE keeps what one worker writes apart from what another worker
 * writes or every program reads (a shared line would move between CPUs).
 */
#define CACHE_LINE __attribute__((aligned(64)))

/*
 * The processes traced: one bit per tgid, set and cleared by userspace
 * through its mapping of this section. sched_switch, which every context
 * switch of the host runs, tests two bits: the same cost for one target as
 * for any number of them.
 */
AT_SHARED __u64 traced_tgids[AT_TGID_WORDS] CACHE_LINE;

static __always_inline bool tgid_traced(__u32 tgid)
{
	__u32 word = tgid / 64;

	if (word >= AT_TGID_WORDS)
		return false;
	/* as in worker_at(): a bound the verifier sees (AT_TGID_WORDS is 2^n) */
	barrier_var(word);
	return (traced_tgids[word & (AT_TGID_WORDS - 1)] >> (tgid % 64)) & 1;
}

AT_SHARED struct at_worker_stats worker_stats[AT_MAX_WORKERS] CACHE_LINE;
AT_SHARED struct at_runtime_stats runtime_stats CACHE_LINE;
AT_SHARED struct at_worker_idle worker_idle[AT_MAX_WORKERS] CACHE_LINE;

/* tgid -> enum at_target_flag (asynctraced.h) */
AT_SHARED struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, AT_MAX_TARGETS);
	__type(key, __u32);
	__type(value, __u32);
} target_flags SEC(".maps");

static __always_inline __u32 flags_of_tgid(__u32 tgid)
{
	__u32 *f = bpf_map_lookup_elem(&target_flags, &tgid);

	return f ? *f : 0;
}

/* (tgid, worker) -> its slot in worker_stats and worker_idle (asynctraced.h). */
AT_SHARED struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, AT_MAX_WORKERS);
	__type(key, struct at_worker_key);
	__type(value, __u32);
} worker_slots SEC(".maps");

/* 1 + the highest slot ever claimed: spare_share() looks no further. */
AT_SHARED __u32 worker_slots_hi;

#define WORKER_NO_SLOT AT_MAX_WORKERS

/*
 * Counters every worker bumps, kept per CPU: one shared counter would bounce
 * its cache line between the workers at every wake. An entry per process,
 * by its own slot; entry AT_MAX_WORKERS is the session's (asynctraced.h).
 * Userspace sums them into struct at_runtime_stats.
 */
AT_SHARED struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, AT_MAX_WORKERS + 1);
	__type(key, __u32);
	__type(value, struct at_runtime_counts);
} runtime_counts SEC(".maps");

static __always_inline struct at_runtime_counts *counts_at(__u32 i)
{
	return bpf_map_lookup_elem(&runtime_counts, &i);
}

/* The session's counters: flow ids, ring wake-ups, cache checks. */
static __always_inline struct at_runtime_counts *session_counts(void)
{
	return counts_at(AT_MAX_WORKERS);
}

/* Atomic even per CPU: a preempted program may share its CPU with another. */
#define COUNT_AT(slot, field, n)                                                                   \
	do {                                                                                       \
		struct at_runtime_counts *c_ = counts_at(slot);                                    \
		if (c_)                                                                            \
			__sync_fetch_and_add(&c_->field, n);                                       \
	} while (0)

/* A fresh wake flow id (at_wake_flow_id() in asynctraced.h: the layout). */
static __always_inline __u64 next_wake_id(void)
{
	struct at_runtime_counts *c = session_counts();
	__u64 n = c ? __sync_fetch_and_add(&c->wake_seq, 1) + 1 : 0;

	return at_wake_flow_id(bpf_get_smp_processor_id(), n);
}

/*
 * The kernel charges CPU time to threads a tick at a time (CONFIG_HZ; 0
 * when its configuration cannot be read: then nothing is said of it).
 */
extern unsigned int CONFIG_HZ __kconfig __weak;

/* The CPU time the kernel has charged the current thread so far (utime + stime). */
static __always_inline __u64 charged_cpu(void)
{
	struct task_struct *p = bpf_get_current_task_btf();

	return p->utime + p->stime;
}

/* Zeroed values to insert from: too large for the BPF stack. */
static const struct at_task_stats zero_task_stats;
static const struct at_steal_stats zero_steal_stats;

static __always_inline __u32 current_tid(void)
{
	return (__u32)bpf_get_current_pid_tgid();
}

/* The process of the thread whose state is t (NULL: ask the kernel). */
static __always_inline __u32 tgid_of(const struct thread_state *t)
{
	return t ? t->tgid : (__u32)(bpf_get_current_pid_tgid() >> 32);
}

static __always_inline void stat_inc(__u32 idx)
{
	__u64 *v = bpf_map_lookup_elem(&stats, &idx);

	if (v)
		*v += 1;
}

#endif
