// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * The asynctrace USDT provider (docs/usdt-abi.md): its probes carry
 * everything as arguments.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "events.bpf.h"
#include "usdt_args.bpf.h"

/*
 * Each program reads its probe's argument spec once (usdt_args.bpf.h) and
 * only the arguments it uses: poll_end's worker is the one its poll_begin
 * gave, and a task's name address is read from the target only until the
 * task's state remembers it.
 */
#define USDT_PROBE(id)                                                                             \
	const int probe = id;                                                                      \
	usdt_spec_t spec = usdt_spec(ctx, probe)
#define ARG(n) usdt_arg(ctx, spec, probe, n)

SEC("usdt")
int usdt_task_spawn(struct pt_regs *ctx)
{
	USDT_PROBE(AT_USDT_TASK_SPAWN);
	__u32 tid;
	/* its worker's slot, kept there: the queue is its own, most often */
	struct thread_state *t = thread_self(ctx, false, &tid);

	if (!self_traced(t))
		return 0;
	/* task, parent, name, queue, depth */
	on_spawn(t, ARG(0), ARG(1), (const char *)ARG(2), 0, (int)ARG(3), (__u32)ARG(4));
	return 0;
}

SEC("usdt")
int usdt_poll_begin(struct pt_regs *ctx)
{
	USDT_PROBE(AT_USDT_POLL_BEGIN);
	__u32 tid;
	struct thread_state *t = thread_self(ctx, true, &tid);
	__u64 task = ARG(0);
	struct at_task_state *ts;
	struct at_task_slot *slot;

	if (!t)
		return 0;
	/* task, worker, depth, name_addr */
	ts = task_find(task_key(t->tgid, task), &slot);
	on_poll_begin(t, task, ts, slot, (__u32)ARG(1), (__u32)ARG(2),
		      ts && ts->name_addr ? ts->name_addr : ARG(3));
	return 0;
}

SEC("usdt")
int usdt_poll_end(struct pt_regs *ctx)
{
	USDT_PROBE(AT_USDT_POLL_END);
	__u32 tid;
	struct thread_state *t = thread_self(ctx, false, &tid);
	__u64 task = ARG(0);
	struct at_task_state *ts;
	struct at_task_slot *slot;

	if (!t || t->task != task) {
		if (self_traced(t))
			stat_inc(AT_STAT_ORPHAN_POLL_END);
		return 0;
	}
	ts = task_find(task_key(t->tgid, task), &slot);
	/* task, worker (known since poll_begin), ready, queue, depth */
	on_poll_end(t, task, ts, slot, (int)ARG(2), (int)ARG(3), (__u32)ARG(4), true, false,
		    false);
	return 0;
}

SEC("usdt")
int usdt_wake(struct pt_regs *ctx)
{
	USDT_PROBE(AT_USDT_WAKE);
	__u64 task = ARG(0), waker_task = ARG(1);
	__u32 tid;
	/* a self-wake is kept in its poll's thread state; the thread keeps its worker's slot */
	struct thread_state *t = thread_self(ctx, false, &tid);

	if (!self_traced(t))
		return 0;
	/* task, waker_task, waker_worker, queue, depth */
	on_wake(t, task, waker_task, (int)ARG(2), (int)ARG(3), (__u32)ARG(4), 0);
	return 0;
}

SEC("usdt")
int usdt_steal(struct pt_regs *ctx)
{
	USDT_PROBE(AT_USDT_STEAL);
	__u32 tid;
	struct thread_state *t = thread_self(ctx, false, &tid);

	if (!self_traced(t))
		return 0;
	/* thief, victim, count, thief_depth, victim_depth */
	on_steal(t, (__u32)ARG(0), (__u32)ARG(1), (__u32)ARG(2), (__u32)ARG(3), (__u32)ARG(4), 0);
	return 0;
}

SEC("usdt")
int usdt_worker_park(struct pt_regs *ctx)
{
	USDT_PROBE(AT_USDT_WORKER_PARK);
	__u32 tid;
	struct thread_state *t = thread_self(ctx, false, &tid);

	if (!self_traced(t))
		return 0;
	on_park(t, (__u32)ARG(0));
	return 0;
}

SEC("usdt")
int usdt_worker_unpark(struct pt_regs *ctx)
{
	USDT_PROBE(AT_USDT_WORKER_UNPARK);
	__u32 tid;
	struct thread_state *t = thread_self(ctx, false, &tid);

	if (!self_traced(t))
		return 0;
	on_unpark(t, (__u32)ARG(0));
	return 0;
}

#undef ARG
#undef USDT_PROBE
