/* SPDX-License-Identifier: MIT */
/*
 * The contract between the BPF programs and userspace: event kinds, the
 * fixed-size event records they exchange through the ring buffer, limits and
 * statistics. Both sides include this one header; nothing here is duplicated.
 *
 * Event kinds are append-only: a retired number stays reserved, because
 * captures written by older versions keep using it.
 */
#ifndef ASYNCTRACED_H
#define ASYNCTRACED_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

#define AT_USDT_PROVIDER "asynctrace"

#define AT_TASK_NAME_LEN 48
#define AT_MAX_THREADS 8192	/* threads of the target tracked at once */
#define AT_MAX_TASKS 131072	/* tasks with a pending wake (LRU) */

/* Queue values in probe arguments (docs/usdt-abi.md). */
#define AT_QUEUE_INJECT (-1)
#define AT_QUEUE_NONE (-2)

enum at_event_kind {
	AT_EV_SPAWN = 1,
	AT_EV_POLL = 2,
	AT_EV_WAKE = 3,
	AT_EV_STEAL = 4,
	AT_EV_PARK = 5,
	AT_EV_KIND_MAX, /* one past the last kind; grows, never shrinks */
};

/* Every record starts with this header. */
struct at_hdr {
	__u16 kind;	/* enum at_event_kind */
	__u16 size;	/* of the whole record, header included */
	__u32 tid;	/* the thread that hit the probe */
	__u64 ts;	/* CLOCK_MONOTONIC ns; what it marks depends on the kind */
};

/* A task was created. hdr.ts: spawn time. */
struct at_spawn {
	struct at_hdr hdr;
	__u64 task;
	__u64 parent;	/* 0: spawned from outside any task */
	__u64 wake_id;	/* flow to the task's first poll */
	__s32 queue;	/* worker index, AT_QUEUE_INJECT */
	__u32 depth;	/* of that queue after the push */
	char name[AT_TASK_NAME_LEN];
};

/*
 * One poll of one task, emitted when it ends. hdr.ts: poll begin.
 * duration = oncpu + blocked + runnable: the kernel's sched_switch splits the
 * poll into time on the CPU, time asleep (the poll blocked in a syscall) and
 * time runnable but not running (the thread was preempted).
 */
struct at_poll {
	struct at_hdr hdr;
	__u64 task;
	__u64 duration_ns;
	__u64 oncpu_ns;
	__u64 blocked_ns;
	__u64 runnable_ns;
	__u64 wake_ts;		/* the wake that queued this poll; 0 unknown */
	__u64 wake_id;		/* its flow id; 0 none */
	__u64 name_addr;	/* task name in the target's memory */
	__u32 worker;
	__u32 depth;		/* worker's local queue after the pop */
	__s32 requeue;		/* AT_QUEUE_NONE, or where the task went back */
	__u32 requeue_depth;
	__u16 nr_blocked;	/* voluntary switches inside the poll */
	__u16 nr_preempted;	/* involuntary ones */
	__u8 ready;		/* the task completed */
	__u8 pad[3];
};

/* A wake() call. hdr.ts: wake time. */
struct at_wake {
	struct at_hdr hdr;
	__u64 task;		/* the woken task */
	__u64 waker_task;	/* 0: not woken from inside a poll */
	__u64 wake_id;		/* nonzero if this wake queued the next poll */
	__s32 waker_worker;	/* -1: not a worker thread */
	__s32 queue;		/* worker, AT_QUEUE_INJECT or AT_QUEUE_NONE */
	__u32 depth;
	__u32 pad;
};

/* A worker stole tasks from another. hdr.ts: steal time; hdr.tid: thief. */
struct at_steal {
	struct at_hdr hdr;
	__u32 thief;
	__u32 victim;
	__u32 count;
	__u32 thief_depth;
	__u32 victim_depth;
	__u32 pad;
};

/* A worker slept with nothing to do. hdr.ts: park time; emitted at unpark. */
struct at_park {
	struct at_hdr hdr;
	__u64 duration_ns;
	__u32 worker;
	__u32 pad;
};

/* Per-CPU counters in the "stats" map, indexed by this enum. */
enum at_stat {
	AT_STAT_DROP_BASE = 0, /* + kind: records lost to a full ring buffer */
	AT_STAT_ORPHAN_POLL_END = AT_EV_KIND_MAX, /* poll began before attach */
	AT_STAT_THREADS_FULL,	/* thread map full: a poll went untracked */
	AT_STAT_NR,
};

#endif /* ASYNCTRACED_H */
