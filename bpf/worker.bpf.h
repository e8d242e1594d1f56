/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * Workers: each one's slot in worker_stats, a task's statistics, queue
 * depths; and the records they send to the rings.
 */
#ifndef WORKER_BPF_H
#define WORKER_BPF_H

#include "maps.bpf.h"

/*
 * A worker met for the first time: the first free slot is its own. Paid
 * once per worker (and per thread for the few left without a slot: the
 * thread remembers). Slots of a process that is gone are freed by userspace.
 * A function of its own (a global one: the verifier checks it once, not at
 * every place that may claim a slot).
 */
__u32 worker_slot_claim(__u32 tgid, __u32 worker);
#ifdef AT_STATE_HERE /* defined once, in state.bpf.c */
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
#endif

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

#endif
