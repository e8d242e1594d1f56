/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * What the kernel says of a thread: its state and run delay (CO-RE, or
 * read directly in a tp_btf program), how long a late poll waited for a
 * CPU, and when a thread that slept was woken.
 */
#ifndef KERNEL_BPF_H
#define KERNEL_BPF_H

#include "thread.bpf.h"

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
AT_SHARED __s64 rq_clock_offset CACHE_LINE;
AT_SHARED bool rq_clock_known;

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

#endif
