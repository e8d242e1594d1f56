// SPDX-License-Identifier: GPL-2.0
/*
 * `asynctraced tasks`: each thread of a process and its thread pointer
 * (x86-64's FS base), which a thread-local lives at an offset from. No
 * interface of the kernel's gives another process's FS base without
 * stopping it (ptrace); a task iterator reads it from each thread's
 * task_struct as it walks them, stopping nothing. The iterator is made for
 * one process (its link's pid), so it walks that process's threads alone.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>

char LICENSE[] SEC("license") = "GPL";

/* one record a thread: what the reader takes from the iterator's file */
struct thread_ptr {
	__u32 tid;
	__u32 pad;
	__u64 fsbase;
};

SEC("iter/task")
int thread_pointers(struct bpf_iter__task *ctx)
{
	struct task_struct *task = ctx->task;
	struct thread_ptr rec = { 0 };

	if (!task)
		return 0;
	rec.tid = (__u32)BPF_CORE_READ(task, pid);
	rec.fsbase = BPF_CORE_READ(task, thread.fsbase);
	bpf_seq_write(ctx->meta->seq, &rec, sizeof(rec));
	return 0;
}
