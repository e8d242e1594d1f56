/* SPDX-License-Identifier: MIT */
/*
 * Each thread of a process and its thread pointer (x86-64's FS base), read
 * by a BPF task iterator (bpf/threads.bpf.c) without stopping the process:
 * where its thread-locals are, for `asynctraced tasks` (tokio's CONTEXT).
 */
#ifndef THREAD_PTRS_H
#define THREAD_PTRS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Threads read at most: far above a process's. */
#define THREAD_PTRS_MAX 65536

/*
 * Process pid's threads' pointers (FS bases; 0: none set) into *fsbase
 * (malloc'd), *n of them. 0, or -errno (loading or attaching the iterator
 * failed: no BPF, no BTF).
 */
int thread_ptrs__read(pid_t pid, uint64_t **fsbase, size_t *n);

/*
 * The same in two steps, for a process read again later: the iterator
 * loaded and attached (which needs CAP_BPF and CAP_PERFMON), then run as
 * often as needed (which needs neither: a confined tracer can).
 */
struct thread_ptrs;
int thread_ptrs__open(pid_t pid, struct thread_ptrs **h);
int thread_ptrs__take(struct thread_ptrs *h, uint64_t **fsbase, size_t *n);
void thread_ptrs__close(struct thread_ptrs *h);

#endif
