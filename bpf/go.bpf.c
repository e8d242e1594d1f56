// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * Go: the scheduler's own functions (docs/go.md).
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "events.bpf.h"

/*
 * A goroutine is a task (its goid), a P a worker, an M a thread. Its
 * status changes (runtime.casgstatus(gp, old, new): RAX, RBX, RCX in Go's
 * register ABI) give the rest: to running, a run slice (a "poll") begins;
 * from running, it ends (parked, preempted or yielding, in a syscall, done);
 * waiting to runnable is a wake by the goroutine running on this thread (0:
 * the scheduler). newproc1's returns give each goroutine made, and its
 * parent; runqsteal, a P stealing from another. No uretprobe: Go moves
 * stacks and walks return addresses (docs/go.md).
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, AT_MAX_TARGETS);
	__type(key, __u32);
	__type(value, struct at_go_layout);
} go_layouts SEC(".maps");

enum { GO_IDLE = 0, GO_RUNNABLE = 1, GO_RUNNING = 2, GO_WAITING = 4, GO_DEAD = 6,
       GO_SCAN = 0x1000 };

static __always_inline __u64 go_read(__u64 addr, __s32 off)
{
	__u64 v = 0;

	bpf_probe_read_user(&v, sizeof(v), (const void *)(addr + off));
	return v;
}

static __always_inline __u8 go_read8(__u64 addr, __s32 off)
{
	__u8 v = 0;

	bpf_probe_read_user(&v, sizeof(v), (const void *)(addr + off));
	return v;
}

static __always_inline __u32 go_read32(__u64 addr, __s32 off)
{
	__u32 v = 0;

	bpf_probe_read_user(&v, sizeof(v), (const void *)(addr + off));
	return v;
}

/* The P that g's M holds: its id and its local run queue's length; false if none. */
static __always_inline bool go_p_of(const struct at_go_layout *l, __u64 g, __u32 *id,
				    __u32 *depth)
{
	__u64 m = g ? go_read(g, l->g_m) : 0, p = m ? go_read(m, l->m_p) : 0;

	if (!p)
		return false;
	*id = go_read32(p, l->p_id);
	*depth = go_read32(p, l->p_runqtail) - go_read32(p, l->p_runqhead);
	return true;
}

/* Whether wait reason why is in set (256 bits). */
static __always_inline bool go_in(const __u64 *set, __u8 why)
{
	return (set[why >> 6] >> (why & 63)) & 1;
}

static __always_inline const struct at_go_layout *go_layout(void)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;

	return bpf_map_lookup_elem(&go_layouts, &tgid);
}

SEC("uprobe")
int BPF_KPROBE(go_casgstatus)
{
	const struct at_go_layout *l = go_layout();
	__u32 from = (__u32)ctx->bx & ~GO_SCAN, to = (__u32)ctx->cx & ~GO_SCAN;
	__u32 tid, worker = 0, depth = 0;
	struct at_task_state *ts;
	struct at_task_slot *slot;
	struct thread_state *t;
	__u64 gp = ctx->ax, goid, waker;
	bool has_p;
	__u8 why;

	if (!l || !gp || from == to)
		return 0;
	goid = go_read(gp, l->g_goid);
	if (to == GO_RUNNING) {
		t = thread_self(ctx, true, &tid);
		if (!t)
			return 0;
		go_p_of(l, gp, &worker, &depth);
		ts = task_find(task_key(t->tgid, goid), &slot);
		on_poll_begin(t, goid, ts, slot, worker, depth,
			      ts && ts->name_addr ? ts->name_addr : go_read(gp, l->g_startpc));
	} else if (from == GO_RUNNING) {
		t = thread_self(ctx, false, &tid);
		if (!t || t->task != goid) {
			if (self_traced(t))
				stat_inc(AT_STAT_ORPHAN_POLL_END);
			return 0;
		}
		ts = task_find(task_key(t->tgid, goid), &slot);
		/*
		 * preempted or yielding: back on the global run queue; preempted
		 * if a preemption was asked of it (cleared when it runs again)
		 */
		/*
		 * parked: idle (the lost-waker detector's to judge) only when a
		 * channel or a lock holds it, unwakeable on a nil channel; in a
		 * syscall, asleep, waiting on I/O or for the GC, by design
		 */
		why = to == GO_WAITING ? go_read8(gp, l->g_waitreason) : 0;
		on_poll_end(t, goid, ts, slot, to == GO_DEAD,
			    to == GO_RUNNABLE ? AT_QUEUE_INJECT : AT_QUEUE_NONE, 0,
			    to == GO_WAITING && go_in(l->may_lose, why),
			    to == GO_WAITING && go_in(l->never_woken, why),
			    to == GO_RUNNABLE && go_read8(gp, l->g_preempt));
	} else if (from == GO_WAITING && to == GO_RUNNABLE) {
		t = thread_self(ctx, true, &tid);
		if (!t)
			return 0;
		/* ready() puts it on the P of the thread that woke it (R14: its g) */
		has_p = go_p_of(l, ctx->r14, &worker, &depth);
		waker = t->task;
		on_wake(t, goid, waker, waker && has_p ? (__s32)worker : -1,
			has_p ? (__s32)worker : AT_QUEUE_NONE, depth + 1, go_read(gp, l->g_startpc));
	}
	return 0;
}

/* At each ret of runtime.newproc1: RAX is the goroutine made, its goid set. */
SEC("uprobe")
int BPF_KPROBE(go_newproc1_ret)
{
	const struct at_go_layout *l = go_layout();
	__u32 tid, worker = 0, depth = 0;
	struct thread_state *t;
	__u64 newg = ctx->ax;
	bool has_p;

	if (!l || !newg)
		return 0;
	t = thread_self(ctx, true, &tid);
	if (!t)
		return 0;
	/* newproc puts it next on this P (runnext) */
	has_p = go_p_of(l, ctx->r14, &worker, &depth);
	on_spawn(t, go_read(newg, l->g_goid), t->task, NULL, go_read(newg, l->g_startpc),
		 has_p ? (__s32)worker : AT_QUEUE_NONE, depth + 1);
	return 0;
}

/* runtime.runqsteal(pp, p2, stealRunNextG): pp takes half of p2's queue. */
SEC("uprobe")
int BPF_KPROBE(go_runqsteal)
{
	const struct at_go_layout *l = go_layout();
	__u64 pp = ctx->ax, p2 = ctx->bx;
	struct thread_state *t;
	__u32 tid, n, thief_depth;

	if (!l || !pp || !p2)
		return 0;
	t = thread_self(ctx, false, &tid);
	if (!self_traced(t))
		return 0;
	n = go_read32(p2, l->p_runqtail) - go_read32(p2, l->p_runqhead);
	if (n > 256) /* read while it moved */
		return 0;
	thief_depth = go_read32(pp, l->p_runqtail) - go_read32(pp, l->p_runqhead);
	if (n)
		on_steal(t, go_read32(pp, l->p_id), go_read32(p2, l->p_id), n - n / 2,
			 thief_depth + n - n / 2, n / 2, 0);
	return 0;
}
