/* SPDX-License-Identifier: MIT */
/*
 * The contract between the BPF programs and userspace: event kinds, the
 * fixed-size event records they exchange through the ring buffer, limits and
 * statistics. Both sides include this one header; nothing here is duplicated.
 *
 * Event kinds are append-only: a retired number stays reserved, because
 * captures written by older versions keep using it. Every shared layout is
 * pinned at the end of this file (_Static_assert on sizes and offsets), for
 * the BPF build and userspace alike.
 */
#ifndef ASYNCTRACED_H
#define ASYNCTRACED_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

#define AT_USDT_PROVIDER "asynctrace"

#define AT_TASK_NAME_LEN 128
#define AT_MAX_THREADS 8192	/* threads of the target tracked at once (a power of 2) */
#define AT_MAX_TASKS 65536	/* live tasks: pending wake, idle since (LRU) */
/* Process ids go up to PID_MAX_LIMIT (2^22 on 64-bit): a bit each for the traced ones. */
#define AT_MAX_TGID (1u << 22)
#define AT_TGID_WORDS (AT_MAX_TGID / 64)
#define AT_MAX_WORKERS 1024	/* workers with statistics, of every target (beyond: counted) */
#define AT_MAX_TARGETS 1024	/* processes with per-process state in BPF */
#define AT_MAX_TASK_STATS 16384	/* tasks with histograms (LRU) */
#define AT_TASK_SLOTS 16384	/* live tasks kept in place (array; a power of 2) */
#define AT_MAX_STEAL_PAIRS 4096	/* (thief, victim) pairs */

/* The probes of the asynctrace provider, as the BPF programs number them. */
enum at_usdt_probe {
	AT_USDT_TASK_SPAWN,
	AT_USDT_POLL_BEGIN,
	AT_USDT_POLL_END,
	AT_USDT_WAKE,
	AT_USDT_STEAL,
	AT_USDT_WORKER_PARK,
	AT_USDT_WORKER_UNPARK,
	AT_USDT_NR_PROBES,
};

#define AT_USDT_MAX_ARGS 6	/* arguments a fixed spec describes (the ABI uses 5) */
/*
 * Distinct argument specs of the USDT sites attached at once, each kept
 * once in usdt_specs by the id its sites carry as attach cookie (a build
 * of a runtime has one a probe: this is hundreds of distinct builds).
 */
#define AT_USDT_MAX_SPECS 1024

/*
 * A tokio probe's attach cookie: the probed function's file offset (a
 * raw::poll instance's names its tasks), and in the top byte where the argument
 * the program reads is at the probe when placement moved it (a thunk's
 * `mov %rdi,%rsi` before its tail jump): that register's offset in struct
 * pt_regs over 8, plus 1; 0 where the ABI puts it (src/targets/placement.h).
 */
#define AT_COOKIE_REG_SHIFT 56
/*
 * Below it, how far the stack pointer moved before the probe (a frame the
 * function made, in 8-byte words): the return address is that far above it.
 */
#define AT_COOKIE_FRAME_SHIFT 48
#define AT_COOKIE_OFFSET_MASK ((1ull << AT_COOKIE_FRAME_SHIFT) - 1)
#define AT_COOKIE_MAX_FRAME (255 * 8)

/* Where tokio's deferred wakes (yield_now) return to, at most this many (src/targets/tokio_defer.c). */
#define AT_TOKIO_DEFER_SITES 8

/* What the programs know of a traced tokio process: the tokio_bases map, by tgid. */
/*
 * Where process tgid's Go runtime keeps what its probes read: byte offsets
 * in runtime.g, runtime.m and runtime.p (userspace sets them before
 * attaching, from DWARF or its table: src/targets/golang.c).
 */
struct at_go_layout {
	__s32 g_goid, g_m, g_startpc;
	__s32 g_preempt;	/* bool: a preemption was asked of it */
	__s32 g_waitreason;	/* __u8: why it parks */
	__s32 m_p;
	__s32 p_id, p_runqhead, p_runqtail;
	__s32 p_runq;		/* its ring of 256 g pointers (0: unknown) */
	/*
	 * Sample mode: g's slot from the thread pointer (0: unknown, sample
	 * mode reads nothing), g.atomicstatus, g.trackingSeq (a byte bumped
	 * each time g leaves running), m.curg, p.schedtick (bumped for each
	 * run slice a P starts anew).
	 */
	__s32 tls_g, g_status, g_seq, m_curg, p_schedtick;
	/*
	 * Wait reasons, bit sets by value: a park for one of may_lose (a
	 * channel, a lock: only another goroutine ends it) leaves the goroutine
	 * idle for the lost-waker detector; one of never_woken (a nil channel)
	 * is a lost waker at once. Other parks (I/O, sleep, the GC's) are waits
	 * by design: never lost.
	 */
	__u64 may_lose[4], never_woken[4];
};

/* Go's goroutine statuses (runtime2.go's _G*; the same in every version read) */
enum at_go_status {
	AT_GO_IDLE = 0, AT_GO_RUNNABLE = 1, AT_GO_RUNNING = 2, AT_GO_SYSCALL = 3,
	AT_GO_WAITING = 4, AT_GO_DEAD = 6,
	AT_GO_COPYSTACK = 8,	/* its stack being moved (it grew): it stays on its M */
	AT_GO_DEAD_EXTRA = 11,	/* Go 1.26+: an idle extra M's goroutine, dead before */
	AT_GO_SCAN = 0x1000,	/* or'ed in while the GC scans its stack */
};

/* What the probes make of a goroutine's status change (runtime.casgstatus). */
enum at_go_change {
	AT_GO_IGNORED,
	AT_GO_RUN_BEGINS,	/* to running: a run slice (a poll) begins */
	AT_GO_RUN_ENDS,		/* from running: parked, yielding, preempted, done */
	AT_GO_WOKEN,		/* waiting to runnable: a wake */
	/*
	 * Into and out of a system call or a cgo call. Probes at casgstatus's
	 * entry see them: the run ends and begins again. Probes at its call
	 * sites skip them (two traps a system call): the run goes on through
	 * the call, and ends where the thread sleeps in it (sched_switch).
	 */
	AT_GO_SYSCALL_ENTERS,
	AT_GO_SYSCALL_RETURNS,
	/* a C thread calling into Go takes an extra M's goroutine: its run begins */
	AT_GO_CALLBACK_BEGINS,
	/* leaving a system call without a P (exitsyscall0), or a callback's end */
	AT_GO_SYSCALL_LEFT,
};

static inline enum at_go_change at_go_change(__u32 from, __u32 to)
{
	from &= ~(__u32)AT_GO_SCAN;
	to &= ~(__u32)AT_GO_SCAN;
	/* a stack's growth is no end of the run (the entry's probes saw one before) */
	if (from == to || from == AT_GO_COPYSTACK || to == AT_GO_COPYSTACK)
		return AT_GO_IGNORED;
	if (from == AT_GO_RUNNING)
		return to == AT_GO_SYSCALL ? AT_GO_SYSCALL_ENTERS : AT_GO_RUN_ENDS;
	if (to == AT_GO_RUNNING)
		return from == AT_GO_SYSCALL ? AT_GO_SYSCALL_RETURNS
		       : from == AT_GO_DEAD || from == AT_GO_DEAD_EXTRA ? AT_GO_IGNORED
									: AT_GO_RUN_BEGINS;
	if (from == AT_GO_WAITING && to == AT_GO_RUNNABLE)
		return AT_GO_WOKEN;
	if ((from == AT_GO_DEAD || from == AT_GO_DEAD_EXTRA) && to == AT_GO_SYSCALL)
		return AT_GO_CALLBACK_BEGINS;
	if (from == AT_GO_SYSCALL &&
	    (to == AT_GO_RUNNABLE || to == AT_GO_DEAD || to == AT_GO_DEAD_EXTRA))
		return AT_GO_SYSCALL_LEFT;
	return AT_GO_IGNORED;
}

struct at_tokio_process {
	__u64 base;	/* the address of its binary's file offset 0 */
	/* the file offsets waker::wake_by_val returns to from the defer loop (0: none) */
	__u64 defer_ret[AT_TOKIO_DEFER_SITES];
	/*
	 * Sample mode: tokio's thread-local CONTEXT from the thread pointer (0:
	 * not read), and in it current_task_id (Option<Id>: a u64 tag, 1 Some;
	 * the id) and the coop budget (Option<u8>: a tag byte, 1 Some): a task
	 * polls while both are Some (src/targets/tokio/tokio_current.c).
	 */
	__s64 ctx_tpoff;
	__u16 ctx_task_id, ctx_budget;
	__u32 pad;
};

enum at_usdt_arg_kind {
	AT_USDT_ARG_CONST = 1,	/* val */
	AT_USDT_ARG_REG,	/* the register at reg_off */
	AT_USDT_ARG_DEREF,	/* memory at that register + val */
};

/* Where one USDT argument is at its probe site. */
struct at_usdt_arg {
	__s64 val;
	__u16 reg_off;	/* the register, by its offset in struct pt_regs */
	__u8 kind;	/* enum at_usdt_arg_kind */
	__u8 shift;	/* 64 - the argument's bits */
	__u8 is_signed;
	__u8 pad[3];
};

/*
 * A USDT probe site's arguments, as its note's operands say them: a site's
 * attach cookie is the id of its spec in the usdt_specs map. When every
 * site of a probe in the target says the same (the usual case: one site a
 * probe), the loader fixes them as constants of the programs and the
 * lookup goes (docs/performance.md). known = 0: not known, every argument
 * reads 0 (usdt_fixed: look the site's spec up).
 */
struct at_usdt_spec {
	__u32 known;
	__u32 nr_args;
	struct at_usdt_arg args[AT_USDT_MAX_ARGS];
};

/*
 * What a traced process's runtime tells the programs: the "target_flags"
 * hash, tgid -> flags, set by userspace when it follows the process (each
 * image has its own: which functions a tokio build kept, whether a USDT
 * runtime says when its workers park), kept in each thread's state.
 */
enum at_target_flag {
	AT_TARGET_PARKS_PROBED = 1,	/* worker_park and worker_unpark: idle means parked */
	AT_TARGET_TOKIO_STEAL = 2,	/* steal_into is probed: steals are not inferred */
	AT_TARGET_TOKIO_REMOVE = 4,	/* OwnedTasks::remove is probed: completions are known */
	AT_TARGET_TOKIO_HDR_CACHE = 8,	/* the Header cache can be trusted (docs/tokio.md) */
};

/* Queue values in probe arguments (docs/usdt-abi.md). */
#define AT_QUEUE_INJECT (-1)
#define AT_QUEUE_NONE (-2)

enum at_event_kind {
	AT_EV_SPAWN = 1,
	AT_EV_POLL = 2,
	AT_EV_WAKE = 3,
	AT_EV_STEAL = 4,
	AT_EV_PARK = 5,
	AT_EV_WORKER_SAMPLE = 6, /* made by userspace from the maps */
	AT_EV_TASK_SAMPLE = 7,	 /* made by userspace from the maps */
	AT_EV_STACK = 8,	 /* a long poll's user stack (--stacks) */
	AT_EV_KIND_MAX, /* one past the last kind; grows, never shrinks */
};

/* Every record starts with this header. */
struct at_hdr {
	__u16 kind;	/* enum at_event_kind */
	__u16 size;	/* of the whole record, header included */
	__u32 tid;	/* the thread that hit the probe */
	__u64 ts;	/* CLOCK_MONOTONIC ns; what it marks depends on the kind */
	__u32 pid;	/* its process (tgid): records of many targets share the rings */
	__u32 pad;	/* 0 */
};

/* A task was created. hdr.ts: spawn time. */
struct at_spawn {
	struct at_hdr hdr;
	__u64 task;
	__u64 parent;	/* 0: spawned from outside any task */
	__u64 wake_id;	/* flow to the task's first poll */
	__s32 queue;	/* worker index, AT_QUEUE_INJECT */
	__u32 depth;	/* of that queue after the push */
	char name[AT_TASK_NAME_LEN]; /* may be empty: then name_addr names it */
	__u64 name_addr;	/* a name key: see at_poll.name_addr */
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
	/*
	 * Names the task: for USDT runtimes the address of its name string in
	 * the target; for runtimes named from symbols, the address of its poll
	 * function, which userspace maps to the future's type.
	 */
	__u64 name_addr;
	__u32 worker;
	__u32 depth;		/* worker's local queue after the pop */
	__s32 requeue;		/* AT_QUEUE_NONE, or where the task went back */
	__u32 requeue_depth;
	__u16 nr_blocked;	/* voluntary switches inside the poll */
	__u16 nr_preempted;	/* involuntary ones */
	__u8 ready;		/* the task completed */
	/*
	 * A late poll (its wait at least the scheduling-delay threshold):
	 * AT_SPARE_KNOWN | the largest share (percent) of its wait that one
	 * worker spent asleep, idle; 0: not known (not late, or a record from
	 * before this was measured).
	 */
	__u8 spare;
	__u8 flags;		/* AT_POLL_* */
	__u8 pad;
	__s32 queued_on;	/* the queue it waited in; AT_QUEUE_NONE unknown */
	__u32 queued_depth;	/* that queue's depth right after its push */
	/*
	 * Taken from another worker's queue while that worker was in a poll:
	 * when that poll began (what held the task up); 0 otherwise.
	 */
	__u64 holder_begin;
	/*
	 * Appended (a reader takes a poll that ends before it), known with
	 * AT_POLL_CPU_CHARGED: the part of oncpu_ns the kernel charged the
	 * thread for (its utime + stime over the poll, which the kernel counts
	 * a tick at a time: one tick more is allowed). The rest of oncpu_ns the
	 * CPU spent elsewhere while the thread was nominally running: a host
	 * that paused the virtual CPU (on a guest that reports no steal time),
	 * or interrupt work.
	 */
	__u64 cpu_ns;
};

/* at_poll.flags */
#define AT_POLL_CPU_CHARGED 1	/* cpu_ns is known */
/* it returned Pending and nothing holds its waker: nothing can wake it (tokio) */
#define AT_POLL_UNWAKEABLE 2
/*
 * the runtime preempted it (Go: sysmon asked it to yield; it ends
 * runnable): a poll of AT_PREEMPTED_LONG_NS or more is then a long poll,
 * whatever the threshold, as the runtime judged it so
 */
#define AT_POLL_PREEMPTED 4
/*
 * measured by samples (--mode sample), not probes: the run was seen from its
 * first sample (or switch-out) to its last; it began up to a sample period
 * before the first and ended up to one after the last, which duration_ns
 * leaves out (a long poll so found is one at least that long)
 */
#define AT_POLL_SAMPLED 8
/*
 * with AT_POLL_SAMPLED: one or more polls of the task, back to back as far as
 * the samples tell (tokio keeps no poll counter they could read): its time on
 * the CPU in polls of the task, never one long poll
 */
#define AT_POLL_RUNS 16
/*
 * the run lost its worker before it ended (Go: its P was handed off while
 * the goroutine was in a system call or a cgo call, as sysmon does after
 * 20 us to 10 ms): it did not hold the worker throughout, so it is no long
 * poll, and kept no one waiting behind it
 */
#define AT_POLL_WORKER_LOST 32
/* Go's forcePreemptNS: sysmon preempts a goroutine that has run this long. */
#define AT_PREEMPTED_LONG_NS 10000000ull
/* The shortest at_poll a reader takes: before cpu_ns was appended. */
#define AT_POLL_MIN_SIZE 128

/* Whether poll record p (hdr.size bytes of it) says how much CPU was charged (cpu_ns). */
static inline int at_poll_cpu_known(const struct at_poll *p)
{
	return p->hdr.size >= AT_POLL_MIN_SIZE + sizeof(p->cpu_ns) &&
	       (p->flags & AT_POLL_CPU_CHARGED);
}

/*
 * Flow ids: the arrows of a trace, from a wake (or spawn) to the poll it
 * caused, and from a steal's victim to its thief. Unique for the whole
 * session, never reused, and exact as a double (JSON): below 2^53.
 *
 * Wake flows are made by the BPF side, each CPU counting its own:
 * (cpu + 1) << AT_FLOW_CPU_SHIFT | n, below 2^52 with up to AT_FLOW_MAX_CPUS
 * CPUs (larger CPU numbers wrap: ids stay unique while n does). Steal flows
 * are made by the trace writers, from AT_STEAL_FLOW_BASE up: above every
 * wake flow, and apart for each process (its pid, below 2^22 on Linux,
 * above the count of its steals) when several share one trace.
 */
#define AT_FLOW_CPU_SHIFT 40
#define AT_FLOW_SEQ_MASK ((1ull << AT_FLOW_CPU_SHIFT) - 1)
#define AT_FLOW_MAX_CPUS 2048	/* a power of 2 */
#define AT_STEAL_FLOW_BASE (1ull << 52)
#define AT_STEAL_FLOW_PID_SHIFT 30

/* The n-th steal flow of process pid's trace writer. */
static inline __u64 at_steal_flow(__u32 pid, __u64 n)
{
	return AT_STEAL_FLOW_BASE + (((__u64)pid & ((1u << 22) - 1)) << AT_STEAL_FLOW_PID_SHIFT) +
	       (n & ((1ull << AT_STEAL_FLOW_PID_SHIFT) - 1));
}

static inline __u64 at_wake_flow_id(__u32 cpu, __u64 n)
{
	return (__u64)((cpu & (AT_FLOW_MAX_CPUS - 1)) + 1) << AT_FLOW_CPU_SHIFT |
	       (n & AT_FLOW_SEQ_MASK);
}

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

/*
 * A poll record with, appended, the wake its task made of itself during that
 * poll (a yield, a self-wake loop): one record instead of two for the
 * commonest wake there is. Readers hand the wake on right after the poll, as
 * if it had come alone: the poll answers the wake before it, this one waits
 * for the next poll (nothing can poll the task before this poll ends). A
 * reader that predates it sees a poll with appended fields.
 */
struct at_poll_self_wake {
	struct at_poll poll;	/* poll.hdr.size: the whole record */
	struct at_wake wake;	/* a complete wake record, header included */
};

/* A worker stole tasks from another. hdr.ts: steal time; hdr.tid: thief. */
struct at_steal {
	struct at_hdr hdr;
	__u32 thief;
	__u32 victim;		/* AT_WORKER_UNKNOWN: not known */
	__u32 count;
	__u32 thief_depth;
	__u32 victim_depth;
	__u32 flags;		/* AT_STEAL_* */
};

#define AT_SPARE_KNOWN 0x80

/* Not seen taken from a probe, but deduced: queued on one worker, polled by another. */
#define AT_STEAL_INFERRED 1
#define AT_WORKER_UNKNOWN 0xffffffffu

/* A worker slept with nothing to do. hdr.ts: park time; emitted at unpark. */
struct at_park {
	struct at_hdr hdr;
	__u64 duration_ns;
	__u32 worker;
	__u32 pad;
};

/*
 * Aggregates kept in BPF maps, in full-trace and maps-only mode alike.
 *
 * Histograms are log2: slot i counts values v (ns) with 2^i <= v < 2^(i+1),
 * slot 0 also counts 0; the last slot takes everything above.
 */
#define AT_HIST_SLOTS 40

struct at_hist {
	__u64 slot[AT_HIST_SLOTS];
};

/* The same, half the size: per task, where thousands are kept. */
struct at_hist32 {
	__u32 slot[AT_HIST_SLOTS];
};

/* A run queue's length over time: depth * ns accumulated in area. */
struct at_queue_stats {
	__u64 area;
	__u64 ts;		/* of the last change */
	__u32 depth;
	__u32 peak;
};

/*
 * The workers of every traced process share the .bss arrays worker_stats
 * and worker_idle (and the tokio queue depths): a worker has a slot there,
 * found by (tgid, its id in the runtime) in the "worker_slots" hash and
 * claimed at its first event. worker_idle[slot].owner says whose slot it
 * is (at_worker_owner(); 0: free). A process has a slot of its own, as
 * worker AT_WORKER_PROCESS: its injection queue's statistics, and its
 * counters' index in "runtime_counts".
 */
struct at_worker_key {
	__u32 tgid;
	__u32 worker;
};

#define AT_WORKER_PROCESS 0xfffffffeu /* not a runtime's worker id (AT_WORKER_UNKNOWN is 0xffffffff) */

static inline __u64 at_worker_owner(__u32 tgid, __u32 worker)
{
	return (__u64)tgid << 32 | worker;
}

/* worker_stats[slot]: a worker's statistics. */
struct at_worker_stats {
	__u64 polls;
	__u64 busy_ns;		/* sum of poll durations */
	__u64 oncpu_ns;
	__u64 max_poll_ns;
	__u64 wakes;		/* wake calls made from this worker */
	__u64 self_wakes;	/* ... by a task waking itself */
	__u64 steals;		/* steal operations as thief */
	__u64 stolen;		/* tasks taken as thief */
	__u64 parks;
	__u64 park_ns;		/* completed parks */
	__u64 park_since;	/* nonzero while parked */
	__u32 tid;
	/*
	 * Go: the times its P was handed off (runtime.handoffp: taken from a
	 * goroutine in a system call, by sysmon or as it entered one known to
	 * block); the run that held it lost it (AT_POLL_WORKER_LOST). In a
	 * process's own slot (AT_WORKER_PROCESS): its stops of the world
	 * (runtime.stopTheWorldWithSema), which take every P
	 */
	__u32 handoffs;
	struct at_queue_stats queue;
	struct at_hist poll;
	struct at_hist oncpu;
	struct at_hist delay;	/* wake to poll */
	__u64 delay_ns;		/* their sum (the metrics' histogram _sum) */
};

/*
 * .bss "worker_idle", by worker slot: where a worker's thread was between polls
 * (inside one, the poll's own split says it). Idle is asleep (parked, waiting
 * for work), not merely out of a poll: a worker that runs the runtime's own
 * code, or waits for a CPU the host does not give it, has no room to spare.
 * A cache line each: only the worker's own switches write it.
 */
struct at_worker_idle {
	__u64 asleep_ns;	/* off the CPU, asleep */
	__u64 cpu_wait_ns;	/* runnable without a CPU (preempted, or slow to run once woken) */
	__u64 asleep_since;	/* asleep now, since then; 0: awake */
	__u64 slept_from;	/* its latest sleep, over */
	__u64 slept_until;
	__u64 owner;		/* whose slot: at_worker_owner(tgid, worker); 0 free */
	__u64 pad[2];
};

/*
 * "runtime_counts" per-CPU array: counters every worker bumps, an entry per
 * process by its own worker slot (AT_WORKER_PROCESS). Wakes made by a
 * worker count on the worker (at_worker_stats); these count the others
 * (outside any worker, or from workers without a slot). Entry
 * AT_MAX_WORKERS is the session's: wake_seq, ring_bytes and hdr_checks, and the counts
 * of processes left without a slot.
 */
struct at_runtime_counts {
	__u64 spawns;
	__u64 completed;
	__u64 wakes;
	__u64 self_wakes;
	__u64 outside_wakes;
	__u64 wake_seq;		/* flow ids given on this CPU */
	__u64 ring_bytes;	/* written to this CPU's ring since it last woke the reader */
	__u64 hdr_checks;	/* tokio: answers of the Header cache on this CPU */
};

/*
 * What belongs to no worker: the injection queue in .bss, the counters
 * summed over the CPUs of runtime_counts by userspace.
 */
struct at_runtime_stats {
	__u64 spawns;
	__u64 completed;	/* polls that returned Ready */
	__u64 wakes;
	__u64 self_wakes;
	__u64 outside_wakes;	/* not from a worker thread */
	__u64 unknown_workers;	/* events of a worker left without a slot (AT_MAX_WORKERS) */
	struct at_queue_stats inject;
};

/*
 * Every live task the BPF side has met: in its slot of "task_slots", else in
 * the "tasks" LRU hash map, by task id.
 *
 * Probes of one task fire on several threads, and a runtime's probe may fire
 * late: a poll that returned Pending hits its poll_end probe after the task
 * went idle, by which time a wake may have queued it and another worker
 * polled it again (or even finished it). So whether a task waits unwoken is
 * not one flag that the last writer wins, but a relation readers check (see
 * at_task_idle_since()): it went idle after the poll that is still its
 * latest, and no wake has come since.
 */
struct at_task_state {
	__u64 wake_ts;		/* first wake since the last poll began; 0 none */
	__u64 wake_id;		/* its flow id; 0: no wake since the last poll began */
	__u64 idle_since;	/* when a poll returned Pending, not requeued */
	__u64 name_addr;
	__s32 queued_on;	/* where that wake put it */
	__u32 queued_depth;
	__u32 wakes;		/* by others: a running count (see wakes_seen) */
	__u32 self_wakes;	/* by itself since its last poll began (then moved to its stats) */
	__u64 first_ts;		/* first seen */
	__u64 hdr;		/* tokio: the Header it lives at, while it lives; 0 unknown */
	__u64 polled;		/* when its latest poll began; 0 never seen polled */
	__u64 idle_poll;	/* when the poll that left it idle at idle_since began */
	__u32 wakes_seen;	/* wakes when its latest poll began: the next one counts from here */
	__u32 pad;
};

/*
 * A task as the maps know it (the "tasks" and "task_stats" hashes): its id
 * in the runtime and its process. Task ids are a runtime's own: two
 * processes may well use the same.
 */
struct at_task_key {
	__u64 id;
	__u32 tgid;
	__u32 pad;
};

/*
 * When the task returned Pending and nothing has woken it since, or 0: the
 * poll that left it idle is still its latest one (a late poll_end of an
 * older poll counts for nothing), and no wake is pending.
 */
static inline __u64 at_task_idle_since(const struct at_task_state *st)
{
	if (!st->idle_since || st->wake_id || !st->polled || st->idle_poll != st->polled)
		return 0;
	return st->idle_since;
}

/*
 * A task's statistics: in its slot while it lives there, else (and once it
 * finished, if it lived 10 ms or polled 1 ms at once) in the "task_stats"
 * LRU hash map, by struct at_task_key.
 */
struct at_task_stats {
	__u64 polls;
	__u64 wakes;
	__u64 self_wakes;
	__u64 poll_ns;
	__u64 oncpu_ns;
	__u64 max_poll_ns;
	__u64 name_addr;
	__u64 first_ts;		/* counted from here: first seen in a slot; in the hash,
				   10 ms after first seen, or its first 1 ms poll */
	__u8 done;
	__u8 pad[7];
	struct at_hist32 poll;
	struct at_hist32 oncpu;
	struct at_hist32 delay;
};

/*
 * "task_slots" array, mmapped by userspace: a live task's state and its
 * statistics in the slot its id and process hash to (the top bits of the id, its tgid above, times the
 * golden ratio; 2^bits slots, --task-slots), found with no helper call. A task whose
 * slot another holds lives in the "tasks" and "task_stats" hashes instead.
 * task 0: the slot is free.
 */
struct at_task_slot {
	__u64 task;		/* its id in the runtime; 0: free */
	/*
	 * The last task that finished here, or whose id hashes here and
	 * finished in the hashes: a wake of it that comes late (a waker kept
	 * past its task's end) is not a new task to keep.
	 */
	__u64 last_task;
	__u32 tgid;		/* task's process; 0 while the slot is being claimed */
	__u32 last_tgid;	/* last_task's */
	struct at_task_state st;
	struct at_task_stats s;
} __attribute__((aligned(64))); /* no cache line shared by two tasks' slots */

/*
 * 2^64 / the golden ratio: multiplying by it spreads sequential ids and
 * aligned addresses over the top bits (Fibonacci hashing). Every hash of
 * ours uses it: task slots, the tokio caches and their checks, userspace's
 * u64map.
 */
#define AT_HASH_MULT 0x9e3779b97f4a7c15ull

/* The top bits of x times the golden ratio: a slot index for ids and addresses. */
static inline __u32 at_hash_bits(__u64 x, __u32 bits)
{
	return bits ? (__u32)((x * AT_HASH_MULT) >> (64 - (bits & 31))) : 0;
}

/* "steals" hash map: (thief, victim) -> counts; worker slots, victim AT_WORKER_UNKNOWN unknown. */
struct at_steal_key {
	__u32 thief;
	__u32 victim;
};

struct at_steal_stats {
	__u64 ops;
	__u64 tasks;
};

/*
 * Samples of the maps, made by userspace every tick and fed through the same
 * pipeline as the ring buffer's records (and kept in captures), so that the
 * detectors that watch state over time see the same input in every mode.
 * Counters are cumulative since attach. hdr.ts: when sampled.
 */
struct at_worker_sample {
	struct at_hdr hdr;	/* tid: the worker's thread, 0 unknown */
	__u32 worker;
	__u32 depth;
	__u64 polls;
	__u64 busy_ns;
	__u64 park_ns;		/* parked time, including a park in progress */
	__u64 depth_area;	/* depth * ns, up to hdr.ts */
	__u64 steals;
	__u64 wakes;
	__u64 self_wakes;
	__u8 parked;
	__u8 pad[7];
	/*
	 * Appended: older records end before them (AT_WORKER_SAMPLE_MIN_SIZE).
	 * Where the worker's thread was between polls (struct at_worker_idle).
	 */
	__u64 asleep_ns;
	__u64 cpu_wait_ns;
};

/* The shortest at_worker_sample a reader takes: before asleep_ns was appended. */
#define AT_WORKER_SAMPLE_MIN_SIZE 96

/*
 * A user stack sampled inside a poll that had run long (--stacks): the
 * thread's user registers and the top of its stack, for userspace to unwind
 * by the images' call-frame information (src/stacks/unwind.c). hdr.ts: when
 * sampled.
 */
#define AT_STACK_BYTES 8192
/* Return addresses a uretprobe took over, given back to the unwinder: at most this many. */
#define AT_STACK_RETURNS 4
/* Kernel frames kept of a stack that went to sleep. */
#define AT_KSTACK_FRAMES 32
/* User frames kept of the frame-pointer walk of a stack. */
#define AT_FP_FRAMES 32

enum at_stack_flag {
	AT_STACK_ONCPU = 1,	/* a CPU-clock sample: the poll was running */
	AT_STACK_BLOCKED = 2,	/* where the poll went to sleep (hdr.ts), sent when it woke */
};

struct at_stack {
	struct at_hdr hdr;
	__u64 task;		/* in a poll of this task... */
	__u64 poll_begin;	/* ... begun then (its poll record's hdr.ts) */
	__u64 ip;
	__u64 sp;
	__u64 bp;
	__u32 len;		/* bytes of stack copied, from sp */
	__u32 flags;		/* enum at_stack_flag */
	/*
	 * A function with a uretprobe (tokio's raw::poll, ours) returns to the
	 * kernel's trampoline: its return address on the stack was replaced.
	 * The kernel keeps the real ones; these are the newest: where on the
	 * stack (slot) and what was there (ret).
	 */
	__u32 nr_returns;
	__u32 pad;
	struct {
		__u64 slot;
		__u64 ret;
	} returns[AT_STACK_RETURNS];
	__u64 woke;		/* AT_STACK_BLOCKED: when it woke */
	__u32 nr_kstack;	/* AT_STACK_BLOCKED: kernel frames in kstack, innermost first */
	__u32 nr_fp;		/* pcs in fp: the kernel's frame-pointer walk of the user stack */
	__u64 kstack[AT_KSTACK_FRAMES]; /* where in the kernel it waited */
	/*
	 * The user stack by its frame pointers (bpf_get_stack), innermost first:
	 * the unwinder takes it as it is where every link is sound
	 */
	__u64 fp[AT_FP_FRAMES];
	__u8 stack[AT_STACK_BYTES];
};

struct at_task_sample {
	struct at_hdr hdr;
	__u64 task;
	__u64 polls;
	__u64 wakes;
	__u64 self_wakes;
	__u64 poll_ns;
	__u64 idle_since;	/* returned Pending and not woken since; 0 no */
	__u64 name_addr;
	__u64 first_ts;		/* counters count from here; 0 unknown */
	__u8 done;		/* returned Ready */
	__u8 pad[7];
};

/*
 * Per-CPU counters in the "stats" map, indexed by these numbers. They are
 * fixed, as event kinds are: captures keep the counters by number, so a
 * number is never moved nor given again. Append only, from AT_STAT_NR; a
 * retired counter keeps its line, renamed AT_STAT_RETIRED_<n>. (Captures of
 * version 1 numbered them from AT_EV_KIND_MAX: drops 1-7, then 8-11 for
 * the four below; their reader renumbers them.)
 */
enum at_stat {
	/*
	 * 0-31: records lost to a full ring buffer, by kind: AT_STAT_DROP_BASE
	 * + kind (0 is no kind: never counted). Kinds from 32 up would need a
	 * block of their own.
	 */
	AT_STAT_DROP_BASE = 0,
	AT_STAT_ORPHAN_POLL_END = 32,	/* poll began before attach */
	AT_STAT_THREADS_FULL = 33,	/* thread map full: a poll went untracked */
	AT_STAT_THREAD_SELF_WRONG = 34,	/* a thread known by its registers was another: off */
	AT_STAT_MISSED_SWITCH_IN = 35,	/* a thread in a poll ran again without a traced switch in */
	AT_STAT_BIRTHS_LOST = 36,	/* following the host: an exec or fork not told (ring full) */
	AT_STAT_NR = 37,		/* one past the highest number given */
};

#define AT_STAT_DROP_KINDS 32	/* the drops block: AT_STAT_DROP_BASE + 0 .. + 31 */

/*
 * The layouts above, pinned. BPF, userspace and captures on disk share them
 * byte for byte, so a change has to be a decision, never an accident of
 * reordering or of a wider type. Both compilers check these: clang -target
 * bpf for the programs, cc for userspace. What a failed check asks for:
 * - records (at_hdr, the events, the samples) go into captures as they are:
 *   one grows only at its end (readers check the size they need), with its
 *   new field's line added here; a field that moves or changes size is a
 *   new event kind, or a new capture version with a reader for the old one
 *   (docs/capture.md);
 * - map values and the loader's specs (at_worker_stats, at_task_state,
 *   at_usdt_spec, ...) are shared by BPF and userspace only (a capture
 *   copies them into structs of its own, src/capture/capture.h): one may change,
 *   with its numbers here and the copy in capture.c kept whole.
 */
#define AT_PIN_SIZE(type, n)                                                                       \
	_Static_assert(sizeof(type) == (n),                                                        \
		       "the size of " #type " changed: see the pinned layouts in asynctraced.h")
#define AT_PIN_OFF(type, field, n)                                                                 \
	_Static_assert(__builtin_offsetof(type, field) == (n), "the offset of " #type "." #field   \
		       " changed: see the pinned layouts in asynctraced.h")

AT_PIN_SIZE(struct at_usdt_arg, 16);
AT_PIN_OFF(struct at_usdt_arg, val, 0);
AT_PIN_OFF(struct at_usdt_arg, reg_off, 8);
AT_PIN_OFF(struct at_usdt_arg, kind, 10);
AT_PIN_OFF(struct at_usdt_arg, shift, 11);
AT_PIN_OFF(struct at_usdt_arg, is_signed, 12);
AT_PIN_OFF(struct at_usdt_arg, pad, 13);

AT_PIN_SIZE(struct at_usdt_spec, 104);
AT_PIN_OFF(struct at_usdt_spec, known, 0);
AT_PIN_OFF(struct at_usdt_spec, nr_args, 4);
AT_PIN_OFF(struct at_usdt_spec, args, 8);

AT_PIN_SIZE(struct at_hdr, 24);
AT_PIN_OFF(struct at_hdr, kind, 0);
AT_PIN_OFF(struct at_hdr, size, 2);
AT_PIN_OFF(struct at_hdr, tid, 4);
AT_PIN_OFF(struct at_hdr, ts, 8);
AT_PIN_OFF(struct at_hdr, pid, 16);
AT_PIN_OFF(struct at_hdr, pad, 20);

AT_PIN_SIZE(struct at_spawn, 192);
AT_PIN_OFF(struct at_spawn, hdr, 0);
AT_PIN_OFF(struct at_spawn, task, 24);
AT_PIN_OFF(struct at_spawn, parent, 32);
AT_PIN_OFF(struct at_spawn, wake_id, 40);
AT_PIN_OFF(struct at_spawn, queue, 48);
AT_PIN_OFF(struct at_spawn, depth, 52);
AT_PIN_OFF(struct at_spawn, name, 56);
AT_PIN_OFF(struct at_spawn, name_addr, 184);

AT_PIN_SIZE(struct at_poll, 136);
AT_PIN_OFF(struct at_poll, hdr, 0);
AT_PIN_OFF(struct at_poll, task, 24);
AT_PIN_OFF(struct at_poll, duration_ns, 32);
AT_PIN_OFF(struct at_poll, oncpu_ns, 40);
AT_PIN_OFF(struct at_poll, blocked_ns, 48);
AT_PIN_OFF(struct at_poll, runnable_ns, 56);
AT_PIN_OFF(struct at_poll, wake_ts, 64);
AT_PIN_OFF(struct at_poll, wake_id, 72);
AT_PIN_OFF(struct at_poll, name_addr, 80);
AT_PIN_OFF(struct at_poll, worker, 88);
AT_PIN_OFF(struct at_poll, depth, 92);
AT_PIN_OFF(struct at_poll, requeue, 96);
AT_PIN_OFF(struct at_poll, requeue_depth, 100);
AT_PIN_OFF(struct at_poll, nr_blocked, 104);
AT_PIN_OFF(struct at_poll, nr_preempted, 106);
AT_PIN_OFF(struct at_poll, ready, 108);
AT_PIN_OFF(struct at_poll, spare, 109);
AT_PIN_OFF(struct at_poll, flags, 110);
AT_PIN_OFF(struct at_poll, pad, 111);
AT_PIN_OFF(struct at_poll, queued_on, 112);
AT_PIN_OFF(struct at_poll, queued_depth, 116);
AT_PIN_OFF(struct at_poll, holder_begin, 120);
/* appended: a record of the first version ends here (AT_POLL_MIN_SIZE) */
AT_PIN_OFF(struct at_poll, cpu_ns, AT_POLL_MIN_SIZE);

AT_PIN_SIZE(struct at_wake, 64);
AT_PIN_OFF(struct at_wake, hdr, 0);
AT_PIN_OFF(struct at_wake, task, 24);
AT_PIN_OFF(struct at_wake, waker_task, 32);
AT_PIN_OFF(struct at_wake, wake_id, 40);
AT_PIN_OFF(struct at_wake, waker_worker, 48);
AT_PIN_OFF(struct at_wake, queue, 52);
AT_PIN_OFF(struct at_wake, depth, 56);
AT_PIN_OFF(struct at_wake, pad, 60);

AT_PIN_SIZE(struct at_poll_self_wake, 200);
AT_PIN_OFF(struct at_poll_self_wake, poll, 0);
AT_PIN_OFF(struct at_poll_self_wake, wake, 136);

AT_PIN_SIZE(struct at_steal, 48);
AT_PIN_OFF(struct at_steal, hdr, 0);
AT_PIN_OFF(struct at_steal, thief, 24);
AT_PIN_OFF(struct at_steal, victim, 28);
AT_PIN_OFF(struct at_steal, count, 32);
AT_PIN_OFF(struct at_steal, thief_depth, 36);
AT_PIN_OFF(struct at_steal, victim_depth, 40);
AT_PIN_OFF(struct at_steal, flags, 44);

AT_PIN_SIZE(struct at_park, 40);
AT_PIN_OFF(struct at_park, hdr, 0);
AT_PIN_OFF(struct at_park, duration_ns, 24);
AT_PIN_OFF(struct at_park, worker, 32);
AT_PIN_OFF(struct at_park, pad, 36);

AT_PIN_SIZE(struct at_hist, 320);
AT_PIN_OFF(struct at_hist, slot, 0);

AT_PIN_SIZE(struct at_hist32, 160);
AT_PIN_OFF(struct at_hist32, slot, 0);

AT_PIN_SIZE(struct at_queue_stats, 24);
AT_PIN_OFF(struct at_queue_stats, area, 0);
AT_PIN_OFF(struct at_queue_stats, ts, 8);
AT_PIN_OFF(struct at_queue_stats, depth, 16);
AT_PIN_OFF(struct at_queue_stats, peak, 20);

AT_PIN_SIZE(struct at_worker_stats, 1088);
AT_PIN_OFF(struct at_worker_stats, polls, 0);
AT_PIN_OFF(struct at_worker_stats, busy_ns, 8);
AT_PIN_OFF(struct at_worker_stats, oncpu_ns, 16);
AT_PIN_OFF(struct at_worker_stats, max_poll_ns, 24);
AT_PIN_OFF(struct at_worker_stats, wakes, 32);
AT_PIN_OFF(struct at_worker_stats, self_wakes, 40);
AT_PIN_OFF(struct at_worker_stats, steals, 48);
AT_PIN_OFF(struct at_worker_stats, stolen, 56);
AT_PIN_OFF(struct at_worker_stats, parks, 64);
AT_PIN_OFF(struct at_worker_stats, park_ns, 72);
AT_PIN_OFF(struct at_worker_stats, park_since, 80);
AT_PIN_OFF(struct at_worker_stats, tid, 88);
AT_PIN_OFF(struct at_worker_stats, handoffs, 92);
AT_PIN_OFF(struct at_worker_stats, queue, 96);
AT_PIN_OFF(struct at_worker_stats, poll, 120);
AT_PIN_OFF(struct at_worker_stats, oncpu, 440);
AT_PIN_OFF(struct at_worker_stats, delay, 760);
AT_PIN_OFF(struct at_worker_stats, delay_ns, 1080);

AT_PIN_SIZE(struct at_runtime_counts, 64);
AT_PIN_OFF(struct at_runtime_counts, spawns, 0);
AT_PIN_OFF(struct at_runtime_counts, completed, 8);
AT_PIN_OFF(struct at_runtime_counts, wakes, 16);
AT_PIN_OFF(struct at_runtime_counts, self_wakes, 24);
AT_PIN_OFF(struct at_runtime_counts, outside_wakes, 32);
AT_PIN_OFF(struct at_runtime_counts, wake_seq, 40);
AT_PIN_OFF(struct at_runtime_counts, ring_bytes, 48);
AT_PIN_OFF(struct at_runtime_counts, hdr_checks, 56);

AT_PIN_SIZE(struct at_runtime_stats, 72);
AT_PIN_OFF(struct at_runtime_stats, spawns, 0);
AT_PIN_OFF(struct at_runtime_stats, completed, 8);
AT_PIN_OFF(struct at_runtime_stats, wakes, 16);
AT_PIN_OFF(struct at_runtime_stats, self_wakes, 24);
AT_PIN_OFF(struct at_runtime_stats, outside_wakes, 32);
AT_PIN_OFF(struct at_runtime_stats, unknown_workers, 40);
AT_PIN_OFF(struct at_runtime_stats, inject, 48);

AT_PIN_SIZE(struct at_task_state, 88);
AT_PIN_OFF(struct at_task_state, wake_ts, 0);
AT_PIN_OFF(struct at_task_state, wake_id, 8);
AT_PIN_OFF(struct at_task_state, idle_since, 16);
AT_PIN_OFF(struct at_task_state, name_addr, 24);
AT_PIN_OFF(struct at_task_state, queued_on, 32);
AT_PIN_OFF(struct at_task_state, queued_depth, 36);
AT_PIN_OFF(struct at_task_state, wakes, 40);
AT_PIN_OFF(struct at_task_state, self_wakes, 44);
AT_PIN_OFF(struct at_task_state, first_ts, 48);
AT_PIN_OFF(struct at_task_state, hdr, 56);
AT_PIN_OFF(struct at_task_state, polled, 64);
AT_PIN_OFF(struct at_task_state, idle_poll, 72);
AT_PIN_OFF(struct at_task_state, wakes_seen, 80);

AT_PIN_SIZE(struct at_task_stats, 552);
AT_PIN_OFF(struct at_task_stats, polls, 0);
AT_PIN_OFF(struct at_task_stats, wakes, 8);
AT_PIN_OFF(struct at_task_stats, self_wakes, 16);
AT_PIN_OFF(struct at_task_stats, poll_ns, 24);
AT_PIN_OFF(struct at_task_stats, oncpu_ns, 32);
AT_PIN_OFF(struct at_task_stats, max_poll_ns, 40);
AT_PIN_OFF(struct at_task_stats, name_addr, 48);
AT_PIN_OFF(struct at_task_stats, first_ts, 56);
AT_PIN_OFF(struct at_task_stats, done, 64);
AT_PIN_OFF(struct at_task_stats, pad, 65);
AT_PIN_OFF(struct at_task_stats, poll, 72);
AT_PIN_OFF(struct at_task_stats, oncpu, 232);
AT_PIN_OFF(struct at_task_stats, delay, 392);

AT_PIN_SIZE(struct at_task_slot, 704);
AT_PIN_OFF(struct at_task_slot, task, 0);
AT_PIN_OFF(struct at_task_slot, last_task, 8);
AT_PIN_OFF(struct at_task_slot, tgid, 16);
AT_PIN_OFF(struct at_task_slot, last_tgid, 20);
AT_PIN_OFF(struct at_task_slot, st, 24);
AT_PIN_OFF(struct at_task_slot, s, 112);

AT_PIN_SIZE(struct at_task_key, 16);
AT_PIN_OFF(struct at_task_key, id, 0);
AT_PIN_OFF(struct at_task_key, tgid, 8);
AT_PIN_OFF(struct at_task_key, pad, 12);

AT_PIN_SIZE(struct at_worker_idle, 64);
AT_PIN_OFF(struct at_worker_idle, asleep_ns, 0);
AT_PIN_OFF(struct at_worker_idle, cpu_wait_ns, 8);
AT_PIN_OFF(struct at_worker_idle, asleep_since, 16);
AT_PIN_OFF(struct at_worker_idle, slept_from, 24);
AT_PIN_OFF(struct at_worker_idle, slept_until, 32);
AT_PIN_OFF(struct at_worker_idle, owner, 40);

AT_PIN_SIZE(struct at_worker_key, 8);
AT_PIN_OFF(struct at_worker_key, tgid, 0);
AT_PIN_OFF(struct at_worker_key, worker, 4);

AT_PIN_SIZE(struct at_steal_key, 8);
AT_PIN_OFF(struct at_steal_key, thief, 0);
AT_PIN_OFF(struct at_steal_key, victim, 4);

AT_PIN_SIZE(struct at_steal_stats, 16);
AT_PIN_OFF(struct at_steal_stats, ops, 0);
AT_PIN_OFF(struct at_steal_stats, tasks, 8);

AT_PIN_SIZE(struct at_worker_sample, 112);
AT_PIN_OFF(struct at_worker_sample, hdr, 0);
AT_PIN_OFF(struct at_worker_sample, worker, 24);
AT_PIN_OFF(struct at_worker_sample, depth, 28);
AT_PIN_OFF(struct at_worker_sample, polls, 32);
AT_PIN_OFF(struct at_worker_sample, busy_ns, 40);
AT_PIN_OFF(struct at_worker_sample, park_ns, 48);
AT_PIN_OFF(struct at_worker_sample, depth_area, 56);
AT_PIN_OFF(struct at_worker_sample, steals, 64);
AT_PIN_OFF(struct at_worker_sample, wakes, 72);
AT_PIN_OFF(struct at_worker_sample, self_wakes, 80);
AT_PIN_OFF(struct at_worker_sample, parked, 88);
AT_PIN_OFF(struct at_worker_sample, pad, 89);
/* appended: a record of the first version ends here (AT_WORKER_SAMPLE_MIN_SIZE) */
AT_PIN_OFF(struct at_worker_sample, asleep_ns, AT_WORKER_SAMPLE_MIN_SIZE);
AT_PIN_OFF(struct at_worker_sample, cpu_wait_ns, 104);

AT_PIN_SIZE(struct at_stack, 8864);
AT_PIN_OFF(struct at_stack, task, 24);
AT_PIN_OFF(struct at_stack, poll_begin, 32);
AT_PIN_OFF(struct at_stack, ip, 40);
AT_PIN_OFF(struct at_stack, sp, 48);
AT_PIN_OFF(struct at_stack, bp, 56);
AT_PIN_OFF(struct at_stack, len, 64);
AT_PIN_OFF(struct at_stack, flags, 68);
AT_PIN_OFF(struct at_stack, nr_returns, 72);
AT_PIN_OFF(struct at_stack, returns, 80);
AT_PIN_OFF(struct at_stack, woke, 144);
AT_PIN_OFF(struct at_stack, nr_kstack, 152);
AT_PIN_OFF(struct at_stack, kstack, 160);
AT_PIN_OFF(struct at_stack, nr_fp, 156);
AT_PIN_OFF(struct at_stack, fp, 416);
AT_PIN_OFF(struct at_stack, stack, 672);

AT_PIN_SIZE(struct at_task_sample, 96);
AT_PIN_OFF(struct at_task_sample, hdr, 0);
AT_PIN_OFF(struct at_task_sample, task, 24);
AT_PIN_OFF(struct at_task_sample, polls, 32);
AT_PIN_OFF(struct at_task_sample, wakes, 40);
AT_PIN_OFF(struct at_task_sample, self_wakes, 48);
AT_PIN_OFF(struct at_task_sample, poll_ns, 56);
AT_PIN_OFF(struct at_task_sample, idle_since, 64);
AT_PIN_OFF(struct at_task_sample, name_addr, 72);
AT_PIN_OFF(struct at_task_sample, first_ts, 80);
AT_PIN_OFF(struct at_task_sample, done, 88);
AT_PIN_OFF(struct at_task_sample, pad, 89);

/* Every event kind has its drops counter, inside the block. */
_Static_assert(AT_EV_KIND_MAX <= AT_STAT_DROP_KINDS, "the drops block of enum at_stat is full");
_Static_assert(AT_STAT_DROP_BASE + AT_STAT_DROP_KINDS <= AT_STAT_ORPHAN_POLL_END,
	       "the drops block of enum at_stat overlaps the counters after it");

/* Flow ids: every wake flow below the steal flows, all of them exact in a double. */
_Static_assert(((__u64)AT_FLOW_MAX_CPUS << AT_FLOW_CPU_SHIFT | AT_FLOW_SEQ_MASK) <
		       AT_STEAL_FLOW_BASE,
	       "wake flow ids must stay below AT_STEAL_FLOW_BASE");
_Static_assert(AT_STEAL_FLOW_BASE < (1ull << 53), "steal flow ids must stay exact as a double");
_Static_assert((AT_FLOW_MAX_CPUS & (AT_FLOW_MAX_CPUS - 1)) == 0, "AT_FLOW_MAX_CPUS is a mask + 1");

#endif /* ASYNCTRACED_H */
