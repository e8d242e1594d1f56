// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * sched_switch, on every context switch of the host: the tgid test keeps
 * the rest of the system cheap.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "switch.bpf.h"

SEC("?tp_btf/sched_switch")
int BPF_PROG(handle_sched_switch, bool preempt, struct task_struct *prev,
	     struct task_struct *next)
{
	on_switch(ctx, preempt, prev, next, true);
	return 0;
}

SEC("?raw_tp/sched_switch")
int BPF_PROG(handle_sched_switch_raw, bool preempt, struct task_struct *prev,
	     struct task_struct *next)
{
	on_switch(ctx, preempt, prev, next, false);
	return 0;
}
