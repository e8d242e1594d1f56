/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * Tasks: in the slot their id hashes to, else in the hashes; their pending
 * wake, and the queue that holds them.
 */
#ifndef TASK_BPF_H
#define TASK_BPF_H

#include "thread.bpf.h"

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

#endif
