/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * sched_switch: a poll in progress split into on-CPU, blocked and runnable
 * time; a worker between polls, idle or waiting for a CPU.
 */
#ifndef SWITCH_BPF_H
#define SWITCH_BPF_H

#include "events.bpf.h"
#include "stack.bpf.h"

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
				if (t->off_cpu)
					back_on_cpu(t, now, true);
				t->oncpu += now - t->since;
				t->since = now;
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
