// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * Processes that start (following the host): exec, and forks of a traced
 * process, told to userspace through a ring of their own.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "thread.bpf.h"

/*
 * The tgids of processes that exec'd, and of processes a traced one forked:
 * userspace looks at each (a new image may run a known runtime; a fork runs
 * its parent's). Loaded only when following the host; rare events, each
 * woken up for.
 */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 64 * 1024);
} births SEC(".maps");

static __always_inline void born(__u32 tgid)
{
	if (bpf_ringbuf_output(&births, &tgid, sizeof(tgid), 0))
		stat_inc(AT_STAT_BIRTHS_LOST);
}

SEC("?raw_tp/sched_process_exec")
int BPF_PROG(on_exec)
{
	born(bpf_get_current_pid_tgid() >> 32);
	return 0;
}

SEC("?raw_tp/sched_process_fork")
int BPF_PROG(on_fork, struct task_struct *parent, struct task_struct *child)
{
	__u32 tgid = BPF_CORE_READ(child, tgid);

	/* a new process (not a thread) of a traced one */
	if (tgid == (__u32)BPF_CORE_READ(child, pid) && tgid_traced(BPF_CORE_READ(parent, tgid)))
		born(tgid);
	return 0;
}
