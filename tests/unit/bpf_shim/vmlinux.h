/* SPDX-License-Identifier: MIT */
/*
 * The kernel types the BPF programs use, for compiling them as ordinary C in
 * a unit test (tests/unit/test_bpf_logic.c): the layouts the programs read,
 * nothing more. The helpers are in bpf/bpf_helpers.h next to this file.
 */
#ifndef SHIM_VMLINUX_H
#define SHIM_VMLINUX_H

#include <errno.h>
#include <linux/bpf.h>
#include <linux/types.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

/* x86-64's, field for field: USDT specs name registers by their offsets. */
struct pt_regs {
	unsigned long r15, r14, r13, r12, bp, bx, r11, r10, r9, r8;
	unsigned long ax, cx, dx, si, di, orig_ax, ip, cs, flags, sp, ss;
};

/* what a perf_event program is given (--stacks' CPU-clock samples) */
struct bpf_perf_event_data {
	struct pt_regs regs;
	unsigned long long sample_period;
	unsigned long long addr;
};

struct sched_info {
	unsigned long long run_delay;	/* ns on a run queue, up to its latest arrival */
	unsigned long long last_arrival;	/* run queue clock when it last took a CPU */
	unsigned long long last_queued;	/* run queue clock when it was queued; 0: not queued */
};

/* the return addresses uretprobes took over, newest first */
struct return_instance {
	unsigned long stack;		/* where the return address was */
	unsigned long orig_ret_vaddr;	/* what it was */
	struct return_instance *next;
};

struct uprobe_task {
	struct return_instance *return_instances;
};

struct thread_struct {
	unsigned long fsbase;	/* the thread pointer (FS) as the kernel keeps it */
};

struct task_struct {
	int pid;
	int tgid;
	unsigned int flags;
	unsigned int __state;
	struct sched_info sched_info;
	unsigned long long utime, stime;	/* CPU time charged, a tick at a time */
	struct uprobe_task *utask;
	struct thread_struct thread;
};

struct kernel_siginfo;

#endif
