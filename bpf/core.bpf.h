/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * The runtime-independent core of the BPF side: maps, per-thread and
 * per-task state, and one function per executor event (spawn, poll begin,
 * poll end, wake, steal, park). The front-ends in asynctraced.bpf.c turn a
 * runtime's probes (the asynctrace USDT ABI, tokio's functions) into calls
 * of these, so every runtime feeds the same aggregates and records.
 */
#ifndef CORE_BPF_H
#define CORE_BPF_H

#include "asynctraced.h"
#include "stats.bpf.h"

/*
 * A place where another program may run in the middle of this one (a
 * preempted uprobe program, another CPU): the unit test of these programs
 * (tests/unit/test_bpf_logic.c) runs other events there. Nothing in BPF.
 */
#ifndef AT_RACE_POINT
#define AT_RACE_POINT(where)
#endif

/* Wake the consumer once a CPU has written this much: batches epoll wake-ups. */
const volatile __u64 wakeup_bytes = 256 * 1024;
/*
 * Full trace: every record. Otherwise only the polls the detectors need: at
 * least long_poll_ns long, or late by sched_delay_ns with fewer than
 * starve_depth tasks queued ahead (a backlog explains itself).
 */
const volatile bool trace_events = true;
/* task_slots holds 2^task_slot_bits slots (the loader sizes both). */
const volatile __u32 task_slot_bits = 14;
const volatile __u64 long_poll_ns = 0;
const volatile __u64 sched_delay_ns = 0;
const volatile __u32 starve_depth = 0;
/* --mode sample: the sampling period (0: probe mode, no sampling of runs) */
const volatile __u64 sample_period_ns = 0;

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
	/*
	 * Sample mode (sample_observe()): the run in progress (task: its id) as
	 * the runtime's state names it (Go: its g, g.trackingSeq | p.schedtick
	 * << 8); whether the runtime asked it to yield; when it was last seen,
	 * and its times as they were then (the run ends there, for all we know).
	 */
	__u64 s_g;
	__u64 s_last;
	__u64 s_oncpu, s_blocked, s_runnable, s_charged;
	__u32 s_ident;
	__u16 s_nr_blocked, s_nr_preempted;
	__u8 s_preempt;
	__u8 s_runs;		/* the run may be several polls (AT_POLL_RUNS: tokio) */
	/*
	 * Go, probed: the g and goid of the run its probes began last, and the
	 * goid of a run ended where the thread slept in a system call, to resume
	 * when it is back (0: none; asynctraced.bpf.c, go_switch_out()).
	 */
	__u64 go_g;
	__u64 go_run;
	__u64 go_resume;
	/*
	 * the handoffs of its P when that run began (at_worker_stats.handoffs),
	 * and its process's stops of the world (the same counter in the
	 * process's own slot), if it began on a P (go_has_p): a run during which
	 * its P was handed off, or the world stopped, lost it (go_p_lost())
	 */
	__u32 go_handoffs;
	__u32 go_stops;
	__u32 go_has_p;
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

struct {
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
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, AT_MAX_THREADS);
	__type(key, __u32);
	__type(value, struct thread_state);
} thread_slots SEC(".maps");

struct {
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
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, AT_TASK_SLOTS); /* resized by the loader */
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct at_task_slot);
} task_slots SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, AT_MAX_TASKS);
	__type(key, struct at_task_key);
	__type(value, struct at_task_state);
} tasks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, AT_MAX_TASK_STATS);
	__type(key, struct at_task_key);
	__type(value, struct at_task_stats);
} task_stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, AT_MAX_STEAL_PAIRS);
	__type(key, struct at_steal_key);
	__type(value, struct at_steal_stats);
} steals SEC(".maps");

struct {
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
__u64 traced_tgids[AT_TGID_WORDS] CACHE_LINE;

/*
 * Sample mode with --escalate: the processes whose probes are attached for
 * a while, set and cleared as traced_tgids. Samples let them be: their
 * probes see every poll (sample_observe()).
 */
__u64 probed_tgids[AT_TGID_WORDS] CACHE_LINE;

static __always_inline bool tgid_in(const __u64 *set, __u32 tgid)
{
	__u32 word = tgid / 64;

	if (word >= AT_TGID_WORDS)
		return false;
	/* as in worker_at(): a bound the verifier sees (AT_TGID_WORDS is 2^n) */
	barrier_var(word);
	return (set[word & (AT_TGID_WORDS - 1)] >> (tgid % 64)) & 1;
}

static __always_inline bool tgid_traced(__u32 tgid)
{
	return tgid_in(traced_tgids, tgid);
}

struct at_worker_stats worker_stats[AT_MAX_WORKERS] CACHE_LINE;
struct at_runtime_stats runtime_stats CACHE_LINE;
struct at_worker_idle worker_idle[AT_MAX_WORKERS] CACHE_LINE;

/* tgid -> enum at_target_flag (asynctraced.h) */
struct {
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
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, AT_MAX_WORKERS);
	__type(key, struct at_worker_key);
	__type(value, __u32);
} worker_slots SEC(".maps");

/* 1 + the highest slot ever claimed: spare_share() looks no further. */
__u32 worker_slots_hi;

#define WORKER_NO_SLOT AT_MAX_WORKERS

/*
 * Counters every worker bumps, kept per CPU: one shared counter would bounce
 * its cache line between the workers at every wake. An entry per process,
 * by its own slot; entry AT_MAX_WORKERS is the session's (asynctraced.h).
 * Userspace sums them into struct at_runtime_stats.
 */
struct {
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

struct slot_claim {
	struct at_worker_key key;
	__u64 owner;
	__u32 slot;	/* WORKER_NO_SLOT until one is ours */
	__u32 raced;	/* another CPU claimed one for this worker meanwhile */
};

/* bpf_loop's step: slot i, if free, for c->key; 1 stops the walk. */
static long slot_claim_step(__u32 i, struct slot_claim *c)
{
	__u64 *owner;
	__u32 hi;

	if (i >= AT_MAX_WORKERS)
		return 1;
	barrier_var(i);
	owner = &worker_idle[i & (AT_MAX_WORKERS - 1)].owner;
	if (*owner || __sync_val_compare_and_swap(owner, 0, c->owner))
		return 0;
	if (bpf_map_update_elem(&worker_slots, &c->key, &i, BPF_NOEXIST)) {
		*owner = 0; /* ours goes back */
		c->raced = 1;
		return 1;
	}
	for (int tries = 0; tries < 4; tries++) {
		hi = worker_slots_hi;
		if (hi > i || __sync_val_compare_and_swap(&worker_slots_hi, hi, i + 1) == hi)
			break;
	}
	c->slot = i;
	return 1;
}

/*
 * A worker met for the first time: the first free slot is its own. Paid
 * once per worker (and per thread for the few left without a slot: the
 * thread remembers). Slots of a process that is gone are freed by userspace.
 * A function of its own (a global one: the verifier checks it once, not at
 * every place that may claim a slot).
 */
__noinline __u32 worker_slot_claim(__u32 tgid, __u32 worker)
{
	struct slot_claim c = {
		.key = { .tgid = tgid, .worker = worker },
		.owner = at_worker_owner(tgid, worker),
		.slot = WORKER_NO_SLOT,
	};
	__u32 *found;

	bpf_loop(AT_MAX_WORKERS, slot_claim_step, &c, 0);
	if (c.slot < AT_MAX_WORKERS)
		return c.slot;
	found = bpf_map_lookup_elem(&worker_slots, &c.key);
	if (found)
		return *found;
	__sync_fetch_and_add(&runtime_stats.unknown_workers, 1);
	return WORKER_NO_SLOT;
}

/* The slot of a worker of process tgid; WORKER_NO_SLOT when none was left. */
static __always_inline __u32 worker_slot_of(__u32 tgid, __u32 worker)
{
	struct at_worker_key k = { .tgid = tgid, .worker = worker };
	__u32 *slot = bpf_map_lookup_elem(&worker_slots, &k);

	return slot ? *slot : worker_slot_claim(tgid, worker);
}

/*
 * A worker's slot, from a probe on a thread of its process, whose state is
 * t (NULL: not looked up). A thread keeps the slot of the worker it polls
 * for (thread_worker()): its own, nearly always.
 */
static __always_inline __u32 worker_slot(const struct thread_state *t, __u32 worker)
{
	if (t && t->wslot_of == worker + 1)
		return t->wslot;
	return worker_slot_of(tgid_of(t), worker);
}

/* The worker this thread polls for is worker: its slot, kept in the thread. */
static __always_inline void thread_worker(struct thread_state *t, __u32 worker)
{
	if (t->wslot_of != worker + 1) {
		t->wslot = worker_slot_of(t->tgid, worker);
		t->wslot_of = worker + 1;
	}
}

static __always_inline struct at_worker_stats *worker_at(__u32 slot)
{
	if (slot >= AT_MAX_WORKERS)
		return NULL;
	/*
	 * The verifier cannot follow clang's folded bounds check: hide the
	 * value from the optimizer, then mask it (AT_MAX_WORKERS is 2^n).
	 */
	barrier_var(slot);
	return &worker_stats[slot & (AT_MAX_WORKERS - 1)];
}

static __always_inline struct at_worker_stats *worker_get(const struct thread_state *t,
							  __u32 worker)
{
	return worker_at(worker_slot(t, worker));
}

/* A queue named in a probe (a worker's, or AT_QUEUE_INJECT) as a worker id. */
static __always_inline bool queue_worker(__s32 queue, __u32 *worker)
{
	if (queue == AT_QUEUE_INJECT)
		*worker = AT_WORKER_PROCESS;
	else if (queue >= 0)
		*worker = (__u32)queue;
	else
		return false;
	return true;
}

/*
 * Per-task statistics of a task in the hash start once it has lived
 * TASK_STATS_AGE_NS, or at a poll of TASK_STATS_POLL_NS or more: inserting
 * into a full LRU map of 16384 tasks evicts one, about 600 ns, which tasks
 * that live a few milliseconds (a request each, tens of thousands a second)
 * would pay on every spawn for numbers nobody reads. Their polls still count
 * per worker. A task in a slot has its statistics there from the start, and
 * leaves them to the hash when it finishes if it passed the same bar.
 */
#define TASK_STATS_AGE_NS (10 * 1000 * 1000ull)
#define TASK_STATS_POLL_NS (1000 * 1000ull)

static __always_inline struct at_task_stats *task_stats_get(struct at_task_key k, __u64 born,
							    __u64 now, __u64 dur)
{
	struct at_task_stats *s = bpf_map_lookup_elem(&task_stats, &k);

	if (s || (now - born < TASK_STATS_AGE_NS && dur < TASK_STATS_POLL_NS))
		return s;
	bpf_map_update_elem(&task_stats, &k, &zero_task_stats, BPF_NOEXIST);
	s = bpf_map_lookup_elem(&task_stats, &k);
	/* its counters count from here */
	if (s && !s->first_ts)
		s->first_ts = now;
	return s;
}

/*
 * Some queue now holds depth tasks: a worker's local queue or the injection
 * queue, of the process of the thread whose state is t (NULL: not looked up).
 */
static __always_inline void queue_depth(const struct thread_state *t, __s32 queue, __u32 depth,
					__u64 now)
{
	struct at_worker_stats *w;
	__u32 worker;

	if (queue_worker(queue, &worker) && (w = worker_get(t, worker)))
		queue_set(&w->queue, depth, now);
}

/* t: the current thread's state, if the caller has it; NULL: ask the kernel */
static __always_inline void *event_reserve(__u32 kind, __u32 size, const struct thread_state *t)
{
	__u32 cpu = bpf_get_smp_processor_id();
	void *ring = bpf_map_lookup_elem(&rings, &cpu);
	struct at_hdr *h = ring ? bpf_ringbuf_reserve(ring, size, 0) : NULL;

	if (!h) {
		stat_inc(AT_STAT_DROP_BASE + kind);
		return NULL;
	}
	h->kind = kind;
	h->size = size;
	if (t) {
		h->tid = t->tid;
		h->pid = t->tgid;
	} else {
		__u64 id = bpf_get_current_pid_tgid();

		h->tid = (__u32)id;
		h->pid = id >> 32;
	}
	h->pad = 0;
	return h;
}

/*
 * No wake-up per record: the reader drains on its own clock, and is woken
 * once this CPU has written wakeup_bytes since the last wake-up (counted
 * here: asking the ring how full it is would be one more helper call).
 */
static __always_inline void event_submit(void *e)
{
	struct at_runtime_counts *c = session_counts();
	__u64 flags = BPF_RB_NO_WAKEUP;

	if (c) {
		c->ring_bytes += ((struct at_hdr *)e)->size;
		if (c->ring_bytes >= wakeup_bytes) {
			c->ring_bytes = 0;
			flags = BPF_RB_FORCE_WAKEUP;
		}
	}
	bpf_ringbuf_submit(e, flags);
}

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

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct cpu_thread);
} cpu_thread SEC(".maps");

__u32 thread_self_off CACHE_LINE; /* .bss: set when a check found a wrong answer */

static __always_inline struct thread_state *thread_self(void *ctx, bool create, __u32 *tidp)
{
	__u32 zero = 0, tid;
	__u64 id;
	struct cpu_thread *c = bpf_map_lookup_elem(&cpu_thread, &zero);
	struct thread_state *t;

	/*
	 * Sample mode: only an escalated process's probes count. Its links
	 * close after its bit is cleared (traced__deescalate()), and a push its
	 * schedule probe saw after the poll probe had gone would stay in
	 * tokio's queue depth for good.
	 */
	if (sample_period_ns && !tgid_in(probed_tgids, bpf_get_current_pid_tgid() >> 32))
		return NULL;
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

/* Task id of the runtime in process tgid: how the maps know a task. */
static __always_inline struct at_task_key task_key(__u32 tgid, __u64 id)
{
	struct at_task_key k = { .id = id, .tgid = tgid };

	return k;
}

/*
 * Whether slot s holds the task k. The tgid is written just after the slot
 * is claimed (its id swapped in): a slot whose tgid is still 0 is being
 * claimed, and is taken as the task's (two processes claiming one slot for
 * the same id in that instant would have to).
 */
static __always_inline bool slot_holds(const struct at_task_slot *s, struct at_task_key k)
{
	__u32 tgid;

	if (!k.id || s->task != k.id)
		return false;
	tgid = s->tgid;
	return tgid == k.tgid || !tgid;
}

static __always_inline struct at_task_slot *task_slot(struct at_task_key k)
{
	__u32 i = at_hash_bits(k.id ^ (__u64)k.tgid << 32, task_slot_bits);

	return bpf_map_lookup_elem(&task_slots, &i);
}

/*
 * A live task's state, or NULL if we never met it. *slot: its slot, where its
 * statistics are too; NULL if it lives in the hashes.
 */
static __always_inline struct at_task_state *task_find(struct at_task_key k,
							struct at_task_slot **slot)
{
	struct at_task_slot *s = task_slot(k);

	*slot = NULL;
	if (s && slot_holds(s, k)) {
		*slot = s;
		return &s->st;
	}
	return bpf_map_lookup_elem(&tasks, &k);
}

/* A free slot claimed for task k: false if another took it first (*held: its id). */
static __always_inline bool slot_claim(struct at_task_slot *s, struct at_task_key k, __u64 *held)
{
	*held = __sync_val_compare_and_swap(&s->task, 0, k.id);
	if (*held)
		return false;
	s->tgid = k.tgid;
	return true;
}

/*
 * A task met for the first time: into its slot if claim and the slot is
 * free, else into the hash. Only an event that proves the task alive (its
 * spawn, its poll, a wake that queued it) claims a slot: slots are never
 * evicted, and a wake may come after its task finished.
 */
static __always_inline void task_insert(struct at_task_key k, const struct at_task_state *fresh,
					bool claim)
{
	struct at_task_slot *s = task_slot(k);
	__u64 held;

	if (claim && s && k.id && !s->task) {
		if (slot_claim(s, k, &held)) {
			/* A free slot is all zeroes: a reader meanwhile sees a task with no news. */
			s->st = *fresh;
			s->s.first_ts = fresh->first_ts;
			return;
		}
		if (held == k.id && slot_holds(s, k))
			return; /* another CPU met it at the same moment: one copy */
	}
	bpf_map_update_elem(&tasks, &k, fresh, BPF_NOEXIST);
}

/*
 * The task finished. Its statistics stay for the report (in the hash, if it
 * lived long enough or had a long poll to be worth the insert); its slot is
 * cleared and freed for the next task, and remembers who it was.
 */
static __always_inline void task_done(struct at_task_key k, struct at_task_slot *slot, __u64 now)
{
	struct at_task_slot *home = slot ? slot : task_slot(k);
	struct at_task_stats *s;

	if (home) {
		home->last_task = k.id;
		home->last_tgid = k.tgid;
	}
	if (!slot) {
		bpf_map_delete_elem(&tasks, &k);
		s = bpf_map_lookup_elem(&task_stats, &k);
		if (s)
			s->done = 1;
		return;
	}
	if (now - slot->st.first_ts >= TASK_STATS_AGE_NS ||
	    slot->s.max_poll_ns >= TASK_STATS_POLL_NS) {
		slot->s.done = 1;
		bpf_map_update_elem(&task_stats, &k, &slot->s, BPF_ANY);
	}
	__builtin_memset(&slot->st, 0, sizeof(slot->st));
	__builtin_memset(&slot->s, 0, sizeof(slot->s));
	slot->tgid = 0;
	barrier();
	slot->task = 0;
}

/*
 * Whether ts (from task_find(), slot as it said) is still task k's: between
 * a lookup and a write, on another CPU the task may finish and another take
 * its place (a slot reclaimed, a hash element reused at once).
 */
static __always_inline bool task_still(struct at_task_key k, const struct at_task_state *ts,
				       const struct at_task_slot *slot)
{
	if (slot)
		return slot_holds(slot, k);
	return bpf_map_lookup_elem(&tasks, &k) == ts;
}

/*
 * Remember the first wake since the task's last poll began: that is the one
 * the next poll answers. Later wakes before that poll are coalesced into it.
 * Returns the new flow id, or 0 if coalesced (or the task finished: a late
 * wake). spawn: the task is new (a runtime may reuse a finished task's id).
 */
static __always_inline __u64 task_note_wake(struct at_task_key k, __u64 now, __s32 queue,
					    __u32 depth, __u64 name_addr, bool self, bool spawn)
{
	struct at_task_slot *slot, *home;
	struct at_task_state *ts = task_find(k, &slot);
	struct at_task_state fresh = {};
	__u64 wake_id;

	AT_RACE_POINT("wake:found");
	if (!ts) {
		home = task_slot(k);
		if (!spawn && home && home->last_task == k.id && home->last_tgid == k.tgid)
			return 0; /* a waker kept past its task's end */
		fresh.first_ts = now;
		fresh.name_addr = name_addr;
		fresh.wakes = !self;
		fresh.self_wakes = self;
		fresh.wake_ts = now;
		fresh.wake_id = next_wake_id();
		fresh.queued_on = queue;
		fresh.queued_depth = depth;
		task_insert(k, &fresh, spawn || queue != AT_QUEUE_NONE);
		return fresh.wake_id;
	}
	/*
	 * Counted here, taken into the task's statistics by its next poll.
	 * Only the thread polling the task makes its self-wakes: no lock.
	 */
	if (self)
		ts->self_wakes++;
	else
		__sync_fetch_and_add(&ts->wakes, 1);
	/* In place: an update would allocate a new LRU element. */
	if (ts->wake_id) {
		/* coalesced: a later push is still where it waits */
		if (queue != AT_QUEUE_NONE) {
			ts->queued_on = queue;
			ts->queued_depth = depth;
		}
		return 0;
	}
	/*
	 * What the poll will read, before the flow id that makes it read it: a
	 * wake_ts without a wake_id is never taken (a racing waker's, or one
	 * written into a slot another task took meanwhile).
	 */
	wake_id = next_wake_id();
	ts->wake_ts = now;
	if (queue != AT_QUEUE_NONE) {
		ts->queued_on = queue;
		ts->queued_depth = depth;
	}
	/* two wakers at once: one queues the poll, the other is coalesced into it */
	if (__sync_val_compare_and_swap(&ts->wake_id, 0, wake_id))
		return 0;
	/* the compare-and-swap ordered this after our wake_id: a new owner shows now */
	if (!task_still(k, ts, slot)) {
		__sync_val_compare_and_swap(&ts->wake_id, wake_id, 0);
		return wake_id;
	}
	if (queue == AT_QUEUE_NONE) {
		/* not queued by this wake: a push to come says where */
		ts->queued_on = AT_QUEUE_NONE;
		ts->queued_depth = 0;
	}
	if (name_addr && !ts->name_addr)
		ts->name_addr = name_addr;
	return wake_id;
}

/* The task was put on a queue after its wake was noted: remember where. */
static __always_inline void task_queued(struct at_task_key k, struct at_task_state *ts,
					__s32 queue, __u32 depth)
{
	struct at_task_slot *slot;

	if (!ts)
		ts = task_find(k, &slot);
	if (ts) {
		ts->queued_on = queue;
		ts->queued_depth = depth;
	}
}

/* ---- events ----------------------------------------------------------- */

/*
 * A task was created and queued. name: a string in the target (USDT), or
 * NULL with name_addr naming it (a runtime whose names come from symbols).
 * t: the spawning thread's state (NULL: not looked up).
 */
static __always_inline void on_spawn(const struct thread_state *t, __u64 task, __u64 parent,
				     const char *name, __u64 name_addr, __s32 queue, __u32 depth)
{
	__u64 now = bpf_ktime_get_ns();
	__u64 wake_id = task_note_wake(task_key(tgid_of(t), task), now, queue, depth, name_addr,
				       false, true);
	struct at_spawn *e;

	COUNT_AT(process_slot(t), spawns, 1);
	queue_depth(t, queue, depth, now);
	if (!trace_events)
		return;
	e = event_reserve(AT_EV_SPAWN, sizeof(*e), t);
	if (!e)
		return;
	e->hdr.ts = now;
	e->task = task;
	e->parent = parent;
	e->wake_id = wake_id;
	e->queue = queue;
	e->depth = depth;
	e->name_addr = name_addr;
	e->name[0] = '\0';
	if (name && bpf_probe_read_user_str(e->name, sizeof(e->name), name) < 0)
		e->name[0] = '\0';
	event_submit(e);
}

/*
 * The task was taken from another worker's queue: if that worker is in a
 * poll, when did it begin? A long one there explains a long wait here.
 */
static __always_inline __u64 holder_begin(const struct thread_state *t, __u32 worker)
{
	struct at_worker_stats *w = worker_get(t, worker);
	struct thread_state *holder;
	__u32 tid;

	if (!w || !w->tid)
		return 0;
	tid = w->tid;
	holder = thread_find(tid);
	return holder && holder->task ? holder->begin : 0;
}

static __always_inline struct at_worker_idle *worker_idle_of(const struct thread_state *t)
{
	__u32 slot = t->wslot;

	/* it never polled, or its worker has no slot: not a worker we know */
	if (!t->begin || t->wslot_of != t->worker + 1 || slot >= AT_MAX_WORKERS)
		return NULL;
	barrier_var(slot);
	return &worker_idle[slot & (AT_MAX_WORKERS - 1)];
}

/*
 * A worker's thread stops sleeping at @woke (the kernel woke it; it may have
 * waited for a CPU since, which is not idle time but the host's): it was
 * asleep, idle, from asleep_since until then.
 */
static __always_inline void awake(struct thread_state *t, __u64 woke)
{
	struct at_worker_idle *w = worker_idle_of(t);

	if (w) {
		if (woke > t->asleep_since) {
			w->asleep_ns += woke - t->asleep_since;
			w->slept_from = t->asleep_since;
			w->slept_until = woke;
		}
		w->asleep_since = 0;
	}
	t->asleep_since = 0;
}

/* How much of [from, to] a worker slept: now, or in its latest sleep. */
static __always_inline __u64 slept_within(const struct at_worker_idle *w, __u64 from, __u64 to)
{
	__u64 since = w->asleep_since, a = w->slept_from, b = w->slept_until, best = 0;

	if (since && since < to)
		best = to - (since > from ? since : from);
	if (b > from && a < to) {
		b = b < to ? b : to;
		a = a > from ? a : from;
		if (b - a > best)
			best = b - a;
	}
	return best;
}

struct spare_walk {
	__u64 from, to;
	__u64 best;	/* the longest sleep within [from, to] so far */
	__u32 tgid;
};

/* bpf_loop's step: worker slot i, if it is one of the process's. */
static long spare_step(__u32 i, struct spare_walk *w)
{
	const struct at_worker_idle *idle;
	__u64 s;

	if (i >= AT_MAX_WORKERS)
		return 1;
	barrier_var(i);
	idle = &worker_idle[i & (AT_MAX_WORKERS - 1)];
	/* (the process's own slot, its injection queue, is no worker) */
	if (idle->owner >> 32 != w->tgid || (__u32)idle->owner == AT_WORKER_PROCESS)
		return 0;
	s = slept_within(idle, w->from, w->to);
	if (s > w->best)
		w->best = s;
	return 0;
}

static __always_inline __u64 host_wait(const struct thread_state *t, __u64 from);

/*
 * A late poll in process tgid: the largest share of its wait one of the
 * process's workers spent asleep (it could have run the task), as a percent
 * with AT_SPARE_KNOWN (at_poll.spare). Only workers met count (a tokio
 * worker is met at its first poll or steal attempt). Late polls are rare:
 * the walk over the workers (with bpf_loop: the verifier need not follow
 * each step) is paid only by them.
 */
static __always_inline __u8 spare_share(__u32 tgid, __u64 from, __u64 to)
{
	struct spare_walk w = { .from = from, .to = to, .tgid = tgid };
	__u32 n = worker_slots_hi < AT_MAX_WORKERS ? worker_slots_hi : AT_MAX_WORKERS;

	bpf_loop(n, spare_step, &w, 0);
	return AT_SPARE_KNOWN | (__u8)(w.best >= to - from ? 100 : w.best * 100 / (to - from));
}

/*
 * A task about to be polled is surely alive: a task we never met (older than
 * the session) is met here, and one that lives in the hashes (met first at a
 * wake that queued nothing, or whose slot was held) moves into its slot if
 * that is free now, with its statistics. Returns its state; *slot: as
 * task_find() says.
 */
static __always_inline struct at_task_state *task_settle(struct at_task_key k,
							 struct at_task_state *ts,
							 struct at_task_slot **slot,
							 __u64 name_addr, __u64 now)
{
	struct at_task_state fresh = {};
	struct at_task_stats *kept;
	struct at_task_slot *s;
	__u64 held;

	if (*slot)
		return ts;
	if (!ts) {
		fresh.first_ts = now;
		fresh.name_addr = name_addr;
		fresh.queued_on = AT_QUEUE_NONE;
		task_insert(k, &fresh, true);
		return task_find(k, slot);
	}
	s = task_slot(k);
	if (!s || !k.id || s->task || !slot_claim(s, k, &held))
		return ts;
	s->st = *ts;
	kept = bpf_map_lookup_elem(&task_stats, &k);
	if (kept) {
		s->s = *kept;
		bpf_map_delete_elem(&task_stats, &k);
	} else {
		s->s.first_ts = ts->first_ts;
	}
	bpf_map_delete_elem(&tasks, &k);
	*slot = s;
	return &s->st;
}

/* ts, slot: the task's state as task_find() gave it (NULL: none yet). */
static __always_inline void on_poll_begin(struct thread_state *t, __u64 task,
					  struct at_task_state *ts, struct at_task_slot *slot,
					  __u32 worker, __u32 depth, __u64 name_addr)
{
	__u64 now = bpf_ktime_get_ns();
	struct at_worker_stats *w;
	__u32 wakes;

	/* no switch in was traced (it happens): it woke by now at the latest */
	if (t->asleep_since)
		awake(t, now);

	/*
	 * A uprobe program can be preempted (preemptible RCU), and sched_switch
	 * then runs in the middle of it: it accounts only threads with a task,
	 * so the task is set last, once the rest is in place.
	 */
	t->task = 0;
	t->oncpu = 0;
	t->blocked = 0;
	t->runnable = 0;
	t->nr_blocked = 0;
	t->nr_preempted = 0;
	t->off_cpu = 0;
	t->completed = 0;
	t->s_last = 0; /* a probe's poll (sample mode sets it after) */
	/* a self-wake whose poll never ended (a poll inside a poll took over) */
	if (t->sw_pending)
		stat_inc(AT_STAT_DROP_BASE + AT_EV_WAKE);
	t->sw_pending = 0;
	thread_worker(t, worker);
	t->worker = worker;
	t->depth = depth;
	t->name_addr = name_addr;
	t->wake_ts = 0;
	t->wake_id = 0;
	t->queued_on = AT_QUEUE_NONE;
	t->queued_depth = 0;
	t->wakes = 0;
	t->self_wakes = 0;
	t->born = now;
	if (long_poll_ns && CONFIG_HZ)
		t->charged = charged_cpu();
	ts = task_settle(task_key(t->tgid, task), ts, &slot, name_addr, now);
	if (ts) {
		/* its latest poll from now: an older poll's late end no longer leaves it idle */
		ts->polled = now;
		ts->idle_since = 0;
		t->born = ts->first_ts;
		/*
		 * The wake this poll answers, consumed. Cleared only if there was
		 * one: a wake landing meanwhile then coalesces into it rather than
		 * being wiped (wakes publish with a compare-and-swap from 0).
		 */
		t->wake_id = ts->wake_id;
		barrier();
		t->wake_ts = t->wake_id ? ts->wake_ts : 0;
		t->queued_on = ts->queued_on;
		t->queued_depth = ts->queued_depth;
		if (t->wake_id) {
			ts->wake_ts = 0;
			barrier();
			ts->wake_id = 0;
		}
		/* Wakes by others keep counting as this runs: take those since the last poll. */
		wakes = *(volatile __u32 *)&ts->wakes;
		AT_RACE_POINT("poll_begin:wakes");
		t->wakes = wakes - ts->wakes_seen;
		ts->wakes_seen = wakes;
		t->self_wakes = ts->self_wakes;
		ts->self_wakes = 0;
		ts->name_addr = name_addr;
	}
	t->holder_begin = t->queued_on >= 0 && (__u32)t->queued_on != worker
				  ? holder_begin(t, (__u32)t->queued_on)
				  : 0;
	w = worker_get(t, worker);
	if (w) {
		w->tid = t->tid;
		queue_set(&w->queue, depth, now);
		if (t->wake_ts && t->wake_ts <= now) {
			hist_add(&w->delay, now - t->wake_ts);
			w->delay_ns += now - t->wake_ts;
		}
	}
	t->spare = 0;
	if (sched_delay_ns && t->wake_ts && now > t->wake_ts && now - t->wake_ts >= sched_delay_ns) {
		t->spare = spare_share(t->tgid, t->wake_ts, now);
		/*
		 * a worker slept through half the wait, but this one, which took
		 * the task, spent half of it waiting for a CPU: a host short of CPU
		 * (whichever worker the runtime had woken would have waited as
		 * well), not a scheduling fault
		 */
		if ((t->spare & ~AT_SPARE_KNOWN) >= 50 &&
		    2 * host_wait(t, t->wake_ts) >= now - t->wake_ts)
			t->spare = AT_SPARE_KNOWN;
	}
	t->begin = now;
	t->since = now;
	barrier();
	t->task = task;
}

static __always_inline void account_poll(struct thread_state *t, __u64 task,
					 struct at_task_slot *slot, __u64 dur)
{
	struct at_worker_stats *w = worker_get(t, t->worker);
	struct at_task_stats *s = slot ? &slot->s
				       : task_stats_get(task_key(t->tgid, task), t->born, t->begin, dur);

	if (w) {
		w->polls++;
		w->busy_ns += dur;
		w->oncpu_ns += t->oncpu;
		if (dur > w->max_poll_ns)
			w->max_poll_ns = dur;
		hist_add(&w->poll, dur);
		hist_add(&w->oncpu, t->oncpu);
	}
	if (s) {
		s->polls++;
		s->wakes += t->wakes + t->self_wakes;
		s->self_wakes += t->self_wakes;
		s->poll_ns += dur;
		s->oncpu_ns += t->oncpu;
		s->name_addr = t->name_addr;
		if (dur > s->max_poll_ns)
			s->max_poll_ns = dur;
		hist32_add(&s->poll, dur);
		hist32_add(&s->oncpu, t->oncpu);
		if (t->wake_ts && t->wake_ts <= t->begin)
			hist32_add(&s->delay, t->begin - t->wake_ts);
	}
}

/*
 * The poll that began at begin returned Pending and left the task waiting.
 * Old news if another poll of it began since (this probe fired late), or if
 * it is gone (it finished meanwhile): see at_task_idle_since().
 */
static __always_inline void task_idle(struct at_task_state *ts, __u64 begin, __u64 now)
{
	if (!ts || ts->polled != begin)
		return;
	ts->idle_since = now;
	barrier();
	ts->idle_poll = begin;
}

static __always_inline bool poll_wanted(const struct thread_state *t, __u64 dur)
{
	if (trace_events)
		return true;
	if (long_poll_ns && dur >= long_poll_ns)
		return true;
	if (starve_depth && t->queued_depth >= starve_depth)
		return false;
	return sched_delay_ns && t->wake_ts && t->begin > t->wake_ts &&
	       t->begin - t->wake_ts >= sched_delay_ns;
}

/*
 * The thread is back on a CPU at @now: close its time off it. Asleep, that
 * was blocked time until @woke (when the kernel woke it; @now if unknown)
 * and runnable after; preempted, runnable. missed: it runs, yet
 * sched_switch never showed it taking the CPU back (some kernels do not
 * trace a switch away from certain threads: on the CI machines, those of
 * the sandbox's own agent); then a preempted thread's time off is counted as
 * on the CPU (a preempted thread is soon back; after a sleep's wake the poll
 * rarely runs long).
 */
static __always_inline void back_after_wake(struct thread_state *t, __u64 now, __u64 woke,
					    const bool missed)
{
	if (t->off_blocked) {
		if (woke < t->since || woke > now)
			woke = now;
		t->blocked += woke - t->since;
		t->runnable += now - woke;
		t->nr_blocked++;
	} else {
		if (missed)
			t->oncpu += now - t->since;
		else
			t->runnable += now - t->since;
		t->nr_preempted++;
	}
	t->since = now;
	t->off_cpu = 0;
	if (missed)
		stat_inc(AT_STAT_MISSED_SWITCH_IN);
}

static __always_inline void back_on_cpu(struct thread_state *t, __u64 now, const bool missed)
{
	back_after_wake(t, now, now, missed);
}

/*
 * The thread of a poll in progress runs at @now: its time on the CPU
 * counted up to then (its time off it first, if no switch in was traced).
 */
static __always_inline void on_cpu_until(struct thread_state *t, __u64 now)
{
	if (t->off_cpu)
		back_on_cpu(t, now, true);
	t->oncpu += now - t->since;
	t->since = now;
}

/*
 * The poll in progress on this thread ended; queue: where the task went back.
 * known_end: whether ready is known; if not, a task not requeued may have
 * finished, so it is not marked as waiting (no lost-waker on it). ts, slot:
 * what task_find() gave for the task. unwakeable: it returned Pending and
 * nothing holds its waker (the runtime can tell: tokio's reference count),
 * so nothing can ever wake it: its record goes out whatever the mode, for
 * the lost-waker detector to say at once.
 */
/*
 * ... at now, when the kernel had charged the thread charged_now (the two
 * are the moment of the call but for sample mode, which ends a run where
 * it last saw it: sample_close()); sampled: flags of what measured it.
 */
static __always_inline void poll_end_inline(struct thread_state *t, __u64 task,
					    struct at_task_state *ts, struct at_task_slot *slot,
					    int ready, __s32 queue, __u32 depth, bool known_end,
					    bool unwakeable, bool preempted, __u64 now,
					    __u64 charged_now, __u8 flags)
{
	struct at_poll_self_wake *pw;
	__u64 cpu = 0, charged, dur;
	struct at_poll *e;

	/*
	 * A uprobe program can be preempted after it read the clock: the
	 * switch back in then stamped the thread later than now. The poll
	 * ends there, never before it began or before its on-CPU time did.
	 */
	if (now < t->since)
		now = t->since;
	if (now < t->begin)
		now = t->begin;
	t->task = 0;
	on_cpu_until(t, now);
	dur = now - t->begin;
	/*
	 * On the CPU long enough to be a long poll: how much of it the kernel
	 * charged the thread for, a tick's worth allowed (the detector judges
	 * by that: at_poll.cpu_ns).
	 */
	if (long_poll_ns && CONFIG_HZ && t->oncpu >= long_poll_ns) {
		charged = charged_now - t->charged + 1000000000ull / CONFIG_HZ;
		cpu = charged < t->oncpu ? charged : t->oncpu;
		flags |= AT_POLL_CPU_CHARGED;
	}
	account_poll(t, task, slot, dur);
	if (ready) {
		COUNT_AT(t->pslot, completed, 1);
		task_done(task_key(t->tgid, task), slot, now);
	} else if (queue == AT_QUEUE_NONE) {
		if (known_end || unwakeable)
			task_idle(ts, t->begin, now);
		if (unwakeable)
			flags |= AT_POLL_UNWAKEABLE;
	} else {
		queue_depth(t, queue, depth, now);
		if (ts)
			task_queued(task_key(t->tgid, task), ts, queue, depth);
	}

	/* (a sampled run may have been up to a sample period longer) */
	if (preempted && dur + (flags & AT_POLL_SAMPLED ? sample_period_ns : 0) >= AT_PREEMPTED_LONG_NS)
		flags |= AT_POLL_PREEMPTED;
	if (!poll_wanted(t, dur) && !(flags & (AT_POLL_UNWAKEABLE | AT_POLL_PREEMPTED)))
		return;
	if (t->sw_pending) {
		/* with the wake the task made of itself in this poll appended */
		t->sw_pending = 0;
		pw = event_reserve(AT_EV_POLL, sizeof(*pw), t);
		if (!pw) {
			stat_inc(AT_STAT_DROP_BASE + AT_EV_WAKE);
			return;
		}
		pw->wake = t->sw;
		e = &pw->poll;
	} else {
		e = event_reserve(AT_EV_POLL, sizeof(*e), t);
		if (!e)
			return;
	}
	e->hdr.ts = t->begin;
	e->task = task;
	e->duration_ns = dur;
	e->oncpu_ns = t->oncpu;
	e->blocked_ns = t->blocked;
	e->runnable_ns = t->runnable;
	e->wake_ts = t->wake_ts;
	e->wake_id = t->wake_id;
	e->name_addr = t->name_addr;
	e->worker = t->worker;
	e->depth = t->depth;
	e->requeue = queue;
	e->requeue_depth = depth;
	e->nr_blocked = t->nr_blocked;
	e->nr_preempted = t->nr_preempted;
	e->ready = ready != 0;
	e->spare = t->spare;
	e->flags = flags;
	e->pad = 0;
	e->queued_on = t->queued_on;
	e->queued_depth = t->queued_depth;
	e->holder_begin = t->holder_begin;
	e->cpu_ns = cpu;
	event_submit(e);
}

/* How a poll ended: poll_end_at()'s arguments, for poll_finish(). */
struct poll_end_how {
	__u64 task, now, charged_now;
	__s32 ready, queue;
	__u32 depth;
	__u8 known_end, unwakeable, preempted, flags;
};

/*
 * poll_end_inline() as a global function: the verifier checks it once, on
 * its own, with any arguments (ts and slot may be NULL), rather than again
 * on every path of every program that ends a poll. Inlined, it took Go's
 * casgstatus program to within 2% of the verifier's limit of a million
 * instructions, and sample mode's past it.
 */
__noinline int poll_finish(struct thread_state *t, struct at_task_state *ts,
			struct at_task_slot *slot, const struct poll_end_how *how)
{
	if (t && how)
		poll_end_inline(t, how->task, ts, slot, how->ready, how->queue, how->depth,
				how->known_end, how->unwakeable, how->preempted, how->now,
				how->charged_now, how->flags);
	return 0;
}

static __always_inline void poll_end_at(struct thread_state *t, __u64 task,
					struct at_task_state *ts, struct at_task_slot *slot,
					int ready, __s32 queue, __u32 depth, bool known_end,
					bool unwakeable, bool preempted, __u64 now, __u64 charged_now,
					__u8 flags)
{
	struct poll_end_how how = {
		.task = task, .now = now, .charged_now = charged_now, .ready = ready,
		.queue = queue, .depth = depth, .known_end = known_end,
		.unwakeable = unwakeable, .preempted = preempted, .flags = flags,
	};

	poll_finish(t, ts, slot, &how);
}

static __always_inline void on_poll_end(struct thread_state *t, __u64 task,
					struct at_task_state *ts, struct at_task_slot *slot,
					int ready, __s32 queue, __u32 depth, bool known_end,
					bool unwakeable, bool preempted)
{
	poll_end_at(t, task, ts, slot, ready, queue, depth, known_end, unwakeable, preempted,
		    bpf_ktime_get_ns(), charged_cpu(), 0);
}

/* A wake record's body (its header's kind, size, tid and pid are the caller's). */
static __always_inline void wake_fill(struct at_wake *e, __u64 now, __u64 task, __u64 waker_task,
				      __u64 wake_id, __s32 waker_worker, __s32 queue, __u32 depth)
{
	e->hdr.ts = now;
	e->task = task;
	e->waker_task = waker_task;
	e->wake_id = wake_id;
	e->waker_worker = waker_worker;
	e->queue = queue;
	e->depth = depth;
	e->pad = 0;
}

/*
 * t: the waking thread's state, which a self-wake needs (NULL: none, or not
 * looked up). Returns when it happened.
 */
static __always_inline __u64 on_wake(struct thread_state *t, __u64 task,
				     __u64 waker_task, __s32 waker_worker, __s32 queue,
				     __u32 depth, __u64 name_addr)
{
	__u64 now = bpf_ktime_get_ns();
	bool self = waker_task == task;
	__u64 wake_id = task_note_wake(task_key(tgid_of(t), task), now, queue, depth, name_addr,
				       self, false);
	struct at_worker_stats *w;
	struct at_wake *e;

	queue_depth(t, queue, depth, now);
	/* A worker's wakes count on the worker; userspace adds the rest. */
	if (waker_worker >= 0 && (w = worker_get(t, (__u32)waker_worker))) {
		w->wakes++;
		if (self)
			w->self_wakes++;
	} else {
		__u32 p = process_slot(t);

		COUNT_AT(p, wakes, 1);
		if (self)
			COUNT_AT(p, self_wakes, 1);
		if (waker_worker < 0)
			COUNT_AT(p, outside_wakes, 1);
	}

	if (!trace_events)
		return now;
	/* A task waking itself inside its poll: the wake rides in the poll's record. */
	if (self && t && t->task == task && !t->sw_pending) {
		t->sw.hdr.kind = AT_EV_WAKE;
		t->sw.hdr.size = sizeof(t->sw);
		t->sw.hdr.tid = t->tid;
		t->sw.hdr.pid = t->tgid;
		t->sw.hdr.pad = 0;
		wake_fill(&t->sw, now, task, waker_task, wake_id, waker_worker, queue, depth);
		t->sw_pending = 1;
		return now;
	}
	e = event_reserve(AT_EV_WAKE, sizeof(*e), t);
	if (!e)
		return now;
	wake_fill(e, now, task, waker_task, wake_id, waker_worker, queue, depth);
	event_submit(e);
	return now;
}

/*
 * Worker thief took count tasks from victim (AT_WORKER_UNKNOWN: not known),
 * on the thread whose state is t (NULL: not looked up). The pair is counted
 * by their slots: unique across processes.
 */
static __always_inline void on_steal(const struct thread_state *t, __u32 thief, __u32 victim,
				     __u32 count, __u32 thief_depth, __u32 victim_depth,
				     __u32 flags)
{
	struct at_steal_key key = { .thief = worker_slot(t, thief), .victim = AT_WORKER_UNKNOWN };
	__u64 now = bpf_ktime_get_ns();
	struct at_worker_stats *w = worker_at(key.thief);
	struct at_steal_stats *pair;
	struct at_steal *e;

	if (w) {
		w->steals++;
		w->stolen += count;
		queue_set(&w->queue, thief_depth, now);
	}
	if (victim != AT_WORKER_UNKNOWN) {
		key.victim = worker_slot(t, victim);
		if ((w = worker_at(key.victim)))
			queue_set(&w->queue, victim_depth, now);
		else
			key.victim = AT_WORKER_UNKNOWN;
	}
	if (key.thief >= AT_MAX_WORKERS)
		return; /* counted as an unknown worker */
	pair = bpf_map_lookup_elem(&steals, &key);
	if (!pair) {
		bpf_map_update_elem(&steals, &key, &zero_steal_stats, BPF_NOEXIST);
		pair = bpf_map_lookup_elem(&steals, &key);
	}
	if (pair) {
		__sync_fetch_and_add(&pair->ops, 1);
		__sync_fetch_and_add(&pair->tasks, count);
	}

	if (!trace_events)
		return;
	e = event_reserve(AT_EV_STEAL, sizeof(*e), t);
	if (!e)
		return;
	e->hdr.ts = now;
	e->thief = thief;
	e->victim = victim;
	e->count = count;
	e->thief_depth = thief_depth;
	e->victim_depth = victim_depth;
	e->flags = flags;
	event_submit(e);
}

/* t: the parking thread's state (NULL: not looked up) */
static __always_inline void on_park(const struct thread_state *t, __u32 worker)
{
	struct at_worker_stats *w = worker_get(t, worker);

	if (w) {
		w->parks++;
		w->park_since = bpf_ktime_get_ns();
		w->tid = current_tid();
	}
}

static __always_inline void on_unpark(const struct thread_state *t, __u32 worker)
{
	struct at_worker_stats *w = worker_get(t, worker);
	__u64 now = bpf_ktime_get_ns(), since;
	struct at_park *e;

	if (!w || !w->park_since)
		return; /* parked before we attached */
	since = w->park_since;
	w->park_since = 0;
	w->park_ns += now - since;

	if (!trace_events)
		return;
	e = event_reserve(AT_EV_PARK, sizeof(*e), t);
	if (!e)
		return;
	e->hdr.ts = since;
	e->duration_ns = now - since;
	e->worker = worker;
	e->pad = 0;
	event_submit(e);
}

/* ---- sched_switch ----------------------------------------------------- */

#define PF_EXITING 0x00000004

/* Kernels before 5.14 called task_struct::__state "state". */
struct task_struct___pre514 {
	long state;
} __attribute__((preserve_access_index));

/*
 * Fields of a task_struct: tp_btf hands us trusted pointers, read directly
 * (a load each); raw_tp's are plain numbers, read with probe reads (a helper
 * call each, five times dearer). direct is a constant in each caller.
 */
#define TASK_READ(p, field, direct) ((direct) ? (p)->field : BPF_CORE_READ(p, field))

static __always_inline long task_state(struct task_struct *p, const bool direct)
{
	if (bpf_core_field_exists(p->__state))
		return TASK_READ(p, __state, direct);
	return TASK_READ((struct task_struct___pre514 *)p, state, direct);
}

/* Kernels without CONFIG_SCHED_INFO keep no run_delay: then no wait is known. */
static __always_inline __u64 run_delay(struct task_struct *p, const bool direct)
{
	if (!bpf_core_field_exists(p->sched_info))
		return 0;
	return TASK_READ(p, sched_info.run_delay, direct);
}

/*
 * How long the current thread (t) waited for a CPU since from, at least: its
 * run_delay now, less what it was at its latest switch-in before from (a
 * stretch that began before from counted only after it), or, when it took a
 * CPU more than AT_CPU_MARKS times since, at the oldest switch-in it keeps.
 */
static __always_inline __u64 host_wait(const struct thread_state *t, __u64 from)
{
	__u64 total = run_delay(bpf_get_current_task_btf(), false);
	__u64 at = 0, rd = 0, oldest = ~0ull, oldest_rd = 0, w;

	for (int i = 0; i < AT_CPU_MARKS; i++) {
		__u64 ts = t->in_ts[i];

		if (!ts)
			continue;
		if (ts <= from && ts > at) {
			at = ts;
			rd = t->in_run_delay[i];
		}
		if (ts < oldest) {
			oldest = ts;
			oldest_rd = t->in_run_delay[i];
		}
	}
	if (at) {
		w = total > rd ? total - rd : 0;
		return w > from - at ? w - (from - at) : 0;
	}
	if (oldest == ~0ull)
		return 0;
	return total > oldest_rd ? total - oldest_rd : 0;
}

/*
 * The kernel stamps a thread's wake-up with its run queue's clock
 * (sched_info.last_queued, cleared once it runs), a clock of its own
 * (sched_clock), not bpf_ktime_get_ns(). rq_clock_offset is the one minus
 * the other, calibrated on our own threads: one that took the CPU after a
 * sleep at arrived_at (ktime, read in sched_switch) has, when it leaves,
 * sched_info.last_arrival (the run queue clock of that same switch). Both
 * are read microseconds apart, so the offset is kept unless it moved by more.
 */
__s64 rq_clock_offset CACHE_LINE;
bool rq_clock_known;

#define RQ_CLOCK_SLACK_NS 50000

static __always_inline void calibrate_rq_clock(struct thread_state *t, struct task_struct *p,
					       const bool direct)
{
	__u64 arrival;
	__s64 off, d;

	if (!t->arrived_at || !bpf_core_field_exists(p->sched_info.last_arrival))
		return;
	arrival = TASK_READ(p, sched_info.last_arrival, direct);
	off = (__s64)(t->arrived_at - arrival);
	t->arrived_at = 0;
	if (!arrival)
		return;
	d = off - rq_clock_offset;
	if (!rq_clock_known || d > RQ_CLOCK_SLACK_NS || d < -RQ_CLOCK_SLACK_NS) {
		rq_clock_offset = off;
		rq_clock_known = true;
	}
}

/*
 * When @p, about to take the CPU at @now (ktime), was woken; @now if that is
 * not known (no sched_info, or no calibration yet). A woken thread moved to
 * another CPU's run queue is queued there anew: the time it waited on the
 * first is in run_delay already, beyond @seen (run_delay when it went to
 * sleep).
 */
static __always_inline __u64 woken_at(struct task_struct *p, __u64 now, __u64 seen,
				      const bool direct)
{
	__u64 queued, woke, total, moved = 0;

	if (!rq_clock_known || !bpf_core_field_exists(p->sched_info.last_queued))
		return now;
	queued = TASK_READ(p, sched_info.last_queued, direct);
	if (!queued)
		return now;
	total = run_delay(p, direct);
	if (seen && total > seen)
		moved = total - seen;
	woke = queued + (__u64)rq_clock_offset;
	if (moved >= woke)
		return now;
	woke -= moved;
	return woke < now ? woke : now;
}

/*
 * Whether a worker's sleep between polls is idleness. A runtime that says
 * when its workers park (worker_park, worker_unpark): only a sleep while
 * parked; any other (a lock whose holder was preempted, a blocking call in
 * the runtime) is no room to spare. Without park probes, every sleep.
 */
static __always_inline bool idle_sleep(const struct thread_state *t)
{
	const struct at_worker_stats *w;

	if (!(t->flags & AT_TARGET_PARKS_PROBED))
		return true;
	w = worker_at(t->wslot); /* between_polls() made sure it is the thread's worker's */
	return w && w->park_since;
}

/*
 * A worker's thread leaves the CPU outside a poll. The kernel brought its
 * run-queue time up to date when it took the CPU: the wait before that, if
 * it was not inside a poll then, was time the worker could have run and the
 * host gave it no CPU (preempted between polls, or slow to run after a
 * wake-up); inside a poll it is the poll's runnable time. Asleep now, it is
 * idle until it runs again.
 */
static __always_inline void between_polls(struct thread_state *t, struct task_struct *p,
					  bool asleep, const bool direct)
{
	struct at_worker_idle *w = worker_idle_of(t);
	__u64 total = run_delay(p, direct), seen = t->run_delay_seen;

	t->run_delay_seen = total;
	if (!w)
		return;
	if (seen && total > seen && !t->arrived_in_poll)
		w->cpu_wait_ns += total - seen;
	if (asleep && !t->task && idle_sleep(t)) {
		t->asleep_since = bpf_ktime_get_ns();
		w->asleep_since = t->asleep_since;
	}
}


/*
 * A thread of the target left or took a CPU: a poll in progress is split
 * into on-CPU, blocked and runnable time, a worker between polls counts its
 * waits for a CPU. The tgid test keeps the rest of the system cheap.
 */
/* ---- stacks of long polls (--stacks) ------------------------------------ */

/* Sample a poll's stack once it has run (or slept) this long; 0: stacks are off. */
const volatile __u64 stack_after_ns = 0;
#define AT_STACK_PIECE 512

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct at_stack);
} stack_scratch SEC(".maps");

/* A thread's stack where it went to sleep inside a poll, until it wakes. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, struct at_stack);
} asleep_stacks SEC(".maps");

/*
 * The current thread's user registers, the top of its stack and its
 * frame-pointer walk, into e (not its header).
 */
static __always_inline void stack_fill(void *ctx, struct at_stack *e,
				       const struct thread_state *t, struct task_struct *task,
				       __u64 now, __u32 flags)
{
	/* the registers user space had when it entered the kernel (an interrupt, or a call) */
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(task);
	struct uprobe_task *ut = BPF_CORE_READ(task, utask);
	struct return_instance *ri = ut ? BPF_CORE_READ(ut, return_instances) : NULL;
	__u64 sp = BPF_CORE_READ(regs, sp);
	__u32 n = 0, len = 0;
	long got;

	e->hdr.ts = now;
	e->task = t->task;
	e->poll_begin = t->begin;
	e->ip = BPF_CORE_READ(regs, ip);
	e->sp = sp;
	e->bp = BPF_CORE_READ(regs, bp);
	e->flags = flags;
	/* the return addresses our uretprobes replaced, for the unwinder to see through */
	for (int i = 0; i < AT_STACK_RETURNS; i++) {
		if (!ri)
			break;
		e->returns[i].slot = BPF_CORE_READ(ri, stack);
		e->returns[i].ret = BPF_CORE_READ(ri, orig_ret_vaddr);
		ri = BPF_CORE_READ(ri, next);
		n++;
	}
	e->nr_returns = n;
	e->pad = 0;
	e->woke = 0;
	e->nr_kstack = 0;
	got = bpf_get_stack(ctx, e->fp, sizeof(e->fp), BPF_F_USER_STACK);
	e->nr_fp = got > 0 ? (__u32)got / sizeof(e->fp[0]) : 0;
	/*
	 * As much as is mapped, a piece at a time: a thread's stack may end less
	 * than a whole copy above sp (a worker a few frames deep into its loop).
	 */
	for (int i = 0; i < AT_STACK_BYTES / AT_STACK_PIECE; i++) {
		if (bpf_probe_read_user(e->stack + i * AT_STACK_PIECE, AT_STACK_PIECE,
					(void *)(sp + i * AT_STACK_PIECE)))
			break;
		len += AT_STACK_PIECE;
	}
	e->len = len;
}

/*
 * A thread going to sleep inside a poll (prev, the current task): its stack
 * is kept until it wakes, when it goes out if it slept stack_after_ns. The
 * copy is paid only by polls that block, which async code should not do.
 */
static __always_inline void stack_asleep(void *ctx, struct thread_state *t,
					 struct task_struct *prev, __u32 tid, __u64 now)
{
	__u32 zero = 0;
	struct at_stack *e;
	long n;

	if (!stack_after_ns)
		return;
	e = bpf_map_lookup_elem(&stack_scratch, &zero);
	if (!e)
		return;
	stack_fill(ctx, e, t, prev, now, AT_STACK_BLOCKED);
	/* which wait: the kernel stack of prev, still the current task here */
	n = bpf_get_stack(ctx, e->kstack, sizeof(e->kstack), 0);
	e->nr_kstack = n > 0 ? (__u32)n / sizeof(e->kstack[0]) : 0;
	bpf_map_update_elem(&asleep_stacks, &tid, e, BPF_ANY);
}

/* It woke: if it slept long, where it slept goes out. */
static __always_inline void stack_awake(struct thread_state *t, __u32 tid, __u64 now)
{
	struct at_stack *kept, *e;
	struct at_hdr h;

	if (!stack_after_ns || now - t->since < stack_after_ns)
		return;
	kept = bpf_map_lookup_elem(&asleep_stacks, &tid);
	if (!kept || kept->poll_begin != t->begin)
		return;
	e = event_reserve(AT_EV_STACK, sizeof(*e), t);
	if (!e)
		return;
	h = e->hdr;
	bpf_probe_read_kernel(e, sizeof(*e), kept);
	h.ts = kept->hdr.ts;
	e->hdr = h;
	e->woke = now;
	event_submit(e);
}

static __always_inline void on_switch(void *ctx, bool preempt, struct task_struct *prev,
				      struct task_struct *next, const bool direct)
{
	struct thread_state *t;
	bool asleep;
	__u32 tid;
	__u64 now;

	if (tgid_traced(TASK_READ(prev, tgid, direct))) {
		tid = TASK_READ(prev, pid, direct);
		/* exiting: it runs no more code of its own, so no probe will need it */
		if (TASK_READ(prev, flags, direct) & PF_EXITING) {
			thread_release(tid);
		} else if ((t = thread_find(tid))) {
			/* TASK_RUNNING (0) when switched out: preempted, not asleep. */
			asleep = !preempt && task_state(prev, direct) != 0;
			calibrate_rq_clock(t, prev, direct);
			between_polls(t, prev, asleep, direct);
			if (t->task) {
				now = bpf_ktime_get_ns();
				on_cpu_until(t, now);
				t->off_cpu = 1;
				t->off_blocked = asleep;
				if (asleep)
					stack_asleep(ctx, t, prev, tid, now);
			}
		}
	}
	if (tgid_traced(TASK_READ(next, tgid, direct))) {
		tid = TASK_READ(next, pid, direct);
		t = thread_find(tid);
		if (t) {
			now = bpf_ktime_get_ns();
			/* only the scheduling-delay detector reads them (host_wait()) */
			if (sched_delay_ns) {
				__u32 m = t->in_next++ & (AT_CPU_MARKS - 1);

				t->in_ts[m] = now;
				t->in_run_delay[m] = run_delay(next, direct);
			}
			t->arrived_in_poll = t->task != 0;
			if (t->task && t->off_cpu) {
				if (t->off_blocked) {
					stack_awake(t, tid, now);
					t->arrived_at = now;
					back_after_wake(t, now, woken_at(next, now, t->run_delay_seen, direct),
							false);
				} else {
					back_on_cpu(t, now, false);
				}
			} else if (t->asleep_since) {
				t->arrived_at = now;
				awake(t, woken_at(next, now, t->run_delay_seen, direct));
			}
		}
	}
}

#endif
