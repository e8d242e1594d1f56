/* SPDX-License-Identifier: MIT */
/*
 * The asynctrace USDT probe ABI, as the sample executor implements it.
 *
 * Any executor (C, C++, or Rust through a USDT crate) that emits these probes
 * under the provider "asynctrace" can be traced by asynctraced. The ABI itself
 * (argument order, types and meaning) is specified in docs/usdt-abi.md; this
 * header is one implementation of it on top of <sys/sdt.h>.
 *
 * Every probe has a semaphore: the kernel raises it while a tracer is
 * attached, so an untraced executor pays one predictable branch per site and
 * never computes the arguments (queue depths need atomic loads).
 */
#ifndef ASYNCTRACE_PROBES_H
#define ASYNCTRACE_PROBES_H

#define _SDT_HAS_SEMAPHORES 1
/*
 * Every argument in a register: a tracer then reads it from the saved
 * registers instead of copying it out of the process's memory, about 40 ns
 * less per argument per hit (docs/performance.md). The arguments are only
 * computed while a tracer is attached (the semaphores), so the registers
 * this ties up cost an untraced executor nothing.
 */
#define STAP_SDT_ARG_CONSTRAINT r
#include <sys/sdt.h>

#if defined(__x86_64__)
/*
 * A 5-byte nop at each probe site instead of <sys/sdt.h>'s 1-byte one: the
 * kernel (6.18 and later) turns a uprobe on a nopl 0(%rax,%rax,1) into a
 * call to a trampoline, about a third cheaper per hit than the breakpoint
 * trap a 1-byte nop takes (docs/performance.md). Older kernels trap on it
 * as on any nop. The macro is expanded where the probes are, so it takes
 * effect for them alone.
 */
#undef _SDT_NOP
#define _SDT_NOP .byte 0x0f; .byte 0x1f; .byte 0x44; .byte 0x00; .byte 0x00
#endif

/* Queue argument values that are not a worker's local queue. */
#define ASYNCTRACE_QUEUE_INJECT (-1) /* the global injection queue */
#define ASYNCTRACE_QUEUE_NONE (-2)   /* not queued by this call */

#define ASYNCTRACE_SEMAPHORE(name)                                           \
	__extension__ extern volatile unsigned short asynctrace_##name##_semaphore

ASYNCTRACE_SEMAPHORE(task_spawn);
ASYNCTRACE_SEMAPHORE(poll_begin);
ASYNCTRACE_SEMAPHORE(poll_end);
ASYNCTRACE_SEMAPHORE(wake);
ASYNCTRACE_SEMAPHORE(steal);
ASYNCTRACE_SEMAPHORE(worker_park);
ASYNCTRACE_SEMAPHORE(worker_unpark);

/* Define the semaphores in exactly one translation unit. */
#define ASYNCTRACE_DEFINE_SEMAPHORE(name)                                    \
	__extension__ volatile unsigned short asynctrace_##name##_semaphore  \
		__attribute__((section(".probes"), used))

#define ASYNCTRACE_ENABLED(name)                                             \
	__builtin_expect(asynctrace_##name##_semaphore != 0, 0)

/* task_spawn(u64 task, u64 parent, const char *name, s32 queue, u32 depth) */
#define ASYNCTRACE_TASK_SPAWN(task, parent, name, queue, depth)              \
	STAP_PROBE5(asynctrace, task_spawn, (unsigned long long)(task),      \
		    (unsigned long long)(parent), (const char *)(name),      \
		    (int)(queue), (unsigned int)(depth))

/*
 * poll_begin(u64 task, u32 worker, u32 depth, const char *name)
 * The name lets a tracer that attached after the spawn still name the task.
 */
#define ASYNCTRACE_POLL_BEGIN(task, worker, depth, name)                     \
	STAP_PROBE4(asynctrace, poll_begin, (unsigned long long)(task),      \
		    (unsigned int)(worker), (unsigned int)(depth),           \
		    (const char *)(name))

/* poll_end(u64 task, u32 worker, s32 ready, s32 queue, u32 depth) */
#define ASYNCTRACE_POLL_END(task, worker, ready, queue, depth)               \
	STAP_PROBE5(asynctrace, poll_end, (unsigned long long)(task),        \
		    (unsigned int)(worker), (int)(ready), (int)(queue),      \
		    (unsigned int)(depth))

/* wake(u64 task, u64 waker_task, s32 waker_worker, s32 queue, u32 depth) */
#define ASYNCTRACE_WAKE(task, waker_task, waker_worker, queue, depth)        \
	STAP_PROBE5(asynctrace, wake, (unsigned long long)(task),            \
		    (unsigned long long)(waker_task), (int)(waker_worker),   \
		    (int)(queue), (unsigned int)(depth))

/* steal(u32 thief, u32 victim, u32 count, u32 thief_depth, u32 victim_depth) */
#define ASYNCTRACE_STEAL(thief, victim, count, thief_depth, victim_depth)    \
	STAP_PROBE5(asynctrace, steal, (unsigned int)(thief),                \
		    (unsigned int)(victim), (unsigned int)(count),           \
		    (unsigned int)(thief_depth), (unsigned int)(victim_depth))

/* worker_park(u32 worker), worker_unpark(u32 worker): on the worker's thread */
#define ASYNCTRACE_WORKER_PARK(worker)                                       \
	STAP_PROBE1(asynctrace, worker_park, (unsigned int)(worker))
#define ASYNCTRACE_WORKER_UNPARK(worker)                                     \
	STAP_PROBE1(asynctrace, worker_unpark, (unsigned int)(worker))

/*
 * What a worker thread polls now, kept in a thread-local for a tracer that
 * reads instead of probing (sample mode; docs/usdt-abi.md, version 1). No
 * probe fires for it: each poll costs its thread four plain stores. The
 * stores are ordered for an observer on the same thread (a CPU sample
 * interrupts it): a signal fence, no barrier instruction.
 */
struct asynctrace_current {
	unsigned long long task;	/* the task being polled; 0: none */
	unsigned long long polls;	/* polls this thread began: a poll is a (task, polls) */
	const char *name;		/* the task's name, as poll_begin's */
	unsigned int worker;		/* this thread's worker */
	unsigned int version;		/* ASYNCTRACE_CURRENT_VERSION once set up */
};

#define ASYNCTRACE_CURRENT_VERSION 1

extern __thread struct asynctrace_current asynctrace_current;
/*
 * Where asynctrace_current is from the thread pointer (&asynctrace_current
 * less __builtin_thread_pointer(), the same in every thread for a variable
 * of the executable or of a library loaded at start), set before any
 * worker runs; 0 until then.
 */
extern long asynctrace_current_tpoff;

#define ASYNCTRACE_CURRENT_BEGIN(id, task_name)                              \
	do {                                                                 \
		asynctrace_current.polls++;                                  \
		asynctrace_current.name = (task_name);                       \
		__atomic_signal_fence(__ATOMIC_SEQ_CST);                     \
		asynctrace_current.task = (id);                              \
		__atomic_signal_fence(__ATOMIC_SEQ_CST);                     \
	} while (0)

#define ASYNCTRACE_CURRENT_END()                                             \
	do {                                                                 \
		__atomic_signal_fence(__ATOMIC_SEQ_CST);                     \
		asynctrace_current.task = 0;                                 \
	} while (0)

#endif /* ASYNCTRACE_PROBES_H */
