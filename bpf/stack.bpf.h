/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * Stacks of long polls (--stacks): a user stack taken in a poll that runs
 * long (a CPU-clock sample) or goes to sleep (sched_switch), kept or sent.
 */
#ifndef STACK_BPF_H
#define STACK_BPF_H

#include "thread.bpf.h"

/* Sample a poll's stack once it has run (or slept) this long; 0: stacks are off. */
AT_SHARED const volatile __u64 stack_after_ns AT_INIT(0);
#define AT_STACK_PIECE 512

AT_SHARED struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct at_stack);
} stack_scratch SEC(".maps");

/* A thread's stack where it went to sleep inside a poll, until it wakes. */
AT_SHARED struct {
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

#endif
