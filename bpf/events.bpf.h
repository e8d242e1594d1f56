/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * One function per executor event (spawn, poll begin, poll end, wake, steal,
 * park): the front-ends (usdt.bpf.c, tokio.bpf.c, go.bpf.c) turn their
 * runtime's probes into calls of these, so every runtime feeds the same
 * aggregates and records.
 */
#ifndef EVENTS_BPF_H
#define EVENTS_BPF_H

#include "kernel.bpf.h"
#include "task.bpf.h"

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
 * The poll in progress on this thread ended; queue: where the task went back.
 * known_end: whether ready is known; if not, a task not requeued may have
 * finished, so it is not marked as waiting (no lost-waker on it). ts, slot:
 * what task_find() gave for the task. unwakeable: it returned Pending and
 * nothing holds its waker (the runtime can tell: tokio's reference count),
 * so nothing can ever wake it: its record goes out whatever the mode, for
 * the lost-waker detector to say at once.
 */
static __always_inline void on_poll_end(struct thread_state *t, __u64 task,
					struct at_task_state *ts, struct at_task_slot *slot,
					int ready, __s32 queue, __u32 depth, bool known_end,
					bool unwakeable, bool preempted)
{
	__u64 now = bpf_ktime_get_ns(), dur;
	struct at_poll_self_wake *pw;
	__u64 cpu = 0, charged;
	struct at_poll *e;
	__u8 flags = 0;

	t->task = 0;
	if (t->off_cpu)
		back_on_cpu(t, now, true);
	t->oncpu += now - t->since;
	dur = now - t->begin;
	/*
	 * On the CPU long enough to be a long poll: how much of it the kernel
	 * charged the thread for, a tick's worth allowed (the detector judges
	 * by that: at_poll.cpu_ns).
	 */
	if (long_poll_ns && CONFIG_HZ && t->oncpu >= long_poll_ns) {
		charged = charged_cpu() - t->charged + 1000000000ull / CONFIG_HZ;
		cpu = charged < t->oncpu ? charged : t->oncpu;
		flags = AT_POLL_CPU_CHARGED;
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

	if (preempted && dur >= AT_PREEMPTED_LONG_NS)
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

#endif
