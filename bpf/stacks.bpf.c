// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * Stacks of long polls (--stacks): a CPU-clock sample on every CPU.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "stack.bpf.h"

/*
 * A CPU-clock sample on every CPU: a thread of a traced process inside a
 * poll that has run stack_after_ns already gets its user registers and the
 * top of its stack recorded; anything else returns at once (a map lookup).
 * (The blocked half is in on_switch: switch.bpf.h.)
 */
SEC("?perf_event")
int on_cpu_sample(struct bpf_perf_event_data *ctx)
{
	__u32 tid = current_tid();
	struct thread_state *t = thread_find(tid);
	struct at_stack *e;
	__u64 now;

	if (!stack_after_ns || !t || !t->task)
		return 0;
	now = bpf_ktime_get_ns();
	if (now - t->begin < stack_after_ns)
		return 0;
	e = event_reserve(AT_EV_STACK, sizeof(*e), t);
	if (!e)
		return 0;
	stack_fill(ctx, e, t, bpf_get_current_task_btf(), now, AT_STACK_ONCPU);
	event_submit(e);
	return 0;
}
