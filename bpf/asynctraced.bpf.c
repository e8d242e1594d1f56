// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * BPF side of asynctraced: USDT probes of the asynctrace provider plus the
 * sched_switch tracepoint, for one target process.
 *
 * Per thread it tracks the poll in progress and splits its duration into
 * on-CPU, blocked and runnable time as sched_switch moves the thread off and
 * onto a CPU. Per task it remembers the wake that queued the next poll, so
 * every poll carries its wake-to-poll delay and a flow id back to that wake.
 * One fixed-size record per poll, wake, spawn, steal and park goes to the
 * ring buffer; a record that does not fit is counted, never lost silently.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include <bpf/usdt.bpf.h>
#include "asynctraced.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";

const volatile __u32 target_tgid = 0;
/* Wake the consumer only once this much is waiting: batches epoll wake-ups. */
const volatile __u64 wakeup_bytes = 256 * 1024;

struct thread_state {
	__u64 task;		/* task being polled, 0 if none */
	__u64 begin;		/* poll begin */
	__u64 since;		/* last switch in or out inside the poll */
	__u64 oncpu;
	__u64 blocked;
	__u64 runnable;
	__u64 wake_ts;
	__u64 wake_id;
	__u64 park_ts;
	__u64 name_addr;
	__u32 worker;
	__u32 depth;
	__u16 nr_blocked;
	__u16 nr_preempted;
	__u8 off_cpu;		/* switched out inside the poll */
	__u8 off_blocked;	/* ... asleep rather than preempted */
};

struct task_state {
	__u64 wake_ts;		/* first wake since the last poll began */
	__u64 wake_id;
};

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 16 * 1024 * 1024); /* resized by the loader */
} events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, AT_MAX_THREADS);
	__type(key, __u32);
	__type(value, struct thread_state);
} threads SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, AT_MAX_TASKS);
	__type(key, __u64);
	__type(value, struct task_state);
} tasks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, AT_STAT_NR);
	__type(key, __u32);
	__type(value, __u64);
} stats SEC(".maps");

/* Flow ids: unique for the whole session, never reused. */
__u64 wake_seq = 0;

static __always_inline void stat_inc(__u32 idx)
{
	__u64 *v = bpf_map_lookup_elem(&stats, &idx);

	if (v)
		*v += 1;
}

static __always_inline void *event_reserve(__u32 kind, __u32 size)
{
	struct at_hdr *h = bpf_ringbuf_reserve(&events, size, 0);

	if (!h) {
		stat_inc(AT_STAT_DROP_BASE + kind);
		return NULL;
	}
	h->kind = kind;
	h->size = size;
	h->tid = (__u32)bpf_get_current_pid_tgid();
	return h;
}

static __always_inline void event_submit(void *e)
{
	__u64 flags = bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) >= wakeup_bytes
			      ? BPF_RB_FORCE_WAKEUP
			      : BPF_RB_NO_WAKEUP;

	bpf_ringbuf_submit(e, flags);
}

static __always_inline struct thread_state *thread_get(__u32 tid)
{
	struct thread_state *t = bpf_map_lookup_elem(&threads, &tid);
	struct thread_state zero = {};

	if (t)
		return t;
	bpf_map_update_elem(&threads, &tid, &zero, BPF_NOEXIST);
	t = bpf_map_lookup_elem(&threads, &tid);
	if (!t)
		stat_inc(AT_STAT_THREADS_FULL);
	return t;
}

/*
 * Remember the first wake since the task's last poll began: that is the one
 * the next poll answers. Later wakes before that poll are coalesced into it.
 * Returns the new flow id, or 0 if coalesced.
 */
static __always_inline __u64 task_note_wake(__u64 task, __u64 now)
{
	struct task_state *ts = bpf_map_lookup_elem(&tasks, &task);
	struct task_state fresh = {};

	if (ts && ts->wake_id)
		return 0;
	fresh.wake_ts = now;
	fresh.wake_id = __sync_fetch_and_add(&wake_seq, 1) + 1;
	bpf_map_update_elem(&tasks, &task, &fresh, BPF_ANY);
	return fresh.wake_id;
}

SEC("usdt")
int BPF_USDT(usdt_task_spawn, __u64 task, __u64 parent, const char *name, int queue,
	     __u32 depth)
{
	__u64 now = bpf_ktime_get_ns();
	struct at_spawn *e;

	e = event_reserve(AT_EV_SPAWN, sizeof(*e));
	if (!e) {
		task_note_wake(task, now);
		return 0;
	}
	e->hdr.ts = now;
	e->task = task;
	e->parent = parent;
	e->wake_id = task_note_wake(task, now);
	e->queue = queue;
	e->depth = depth;
	if (bpf_probe_read_user_str(e->name, sizeof(e->name), name) < 0)
		e->name[0] = '\0';
	event_submit(e);
	return 0;
}

SEC("usdt")
int BPF_USDT(usdt_poll_begin, __u64 task, __u32 worker, __u32 depth, __u64 name_addr)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct thread_state *t = thread_get(tid);
	struct task_state *ts;
	__u64 now;

	if (!t)
		return 0;
	now = bpf_ktime_get_ns();
	t->task = task;
	t->begin = now;
	t->since = now;
	t->oncpu = 0;
	t->blocked = 0;
	t->runnable = 0;
	t->nr_blocked = 0;
	t->nr_preempted = 0;
	t->off_cpu = 0;
	t->worker = worker;
	t->depth = depth;
	t->name_addr = name_addr;
	t->wake_ts = 0;
	t->wake_id = 0;
	ts = bpf_map_lookup_elem(&tasks, &task);
	if (ts) {
		t->wake_ts = ts->wake_ts;
		t->wake_id = ts->wake_id;
		/* Consumed: wakes from here on queue the next poll. */
		ts->wake_ts = 0;
		ts->wake_id = 0;
	}
	return 0;
}

SEC("usdt")
int BPF_USDT(usdt_poll_end, __u64 task, __u32 worker, int ready, int queue, __u32 depth)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct thread_state *t = bpf_map_lookup_elem(&threads, &tid);
	__u64 now = bpf_ktime_get_ns();
	struct at_poll *e;

	if (!t || t->task != task) {
		stat_inc(AT_STAT_ORPHAN_POLL_END);
		return 0;
	}
	t->task = 0;
	if (!t->off_cpu)
		t->oncpu += now - t->since;
	if (ready)
		bpf_map_delete_elem(&tasks, &task);

	e = event_reserve(AT_EV_POLL, sizeof(*e));
	if (!e)
		return 0;
	e->hdr.ts = t->begin;
	e->task = task;
	e->duration_ns = now - t->begin;
	e->oncpu_ns = t->oncpu;
	e->blocked_ns = t->blocked;
	e->runnable_ns = t->runnable;
	e->wake_ts = t->wake_ts;
	e->wake_id = t->wake_id;
	e->name_addr = t->name_addr;
	e->worker = worker;
	e->depth = t->depth;
	e->requeue = queue;
	e->requeue_depth = depth;
	e->nr_blocked = t->nr_blocked;
	e->nr_preempted = t->nr_preempted;
	e->ready = ready != 0;
	e->pad[0] = e->pad[1] = e->pad[2] = 0;
	event_submit(e);
	return 0;
}

SEC("usdt")
int BPF_USDT(usdt_wake, __u64 task, __u64 waker_task, int waker_worker, int queue, __u32 depth)
{
	__u64 now = bpf_ktime_get_ns();
	__u64 wake_id = task_note_wake(task, now);
	struct at_wake *e;

	e = event_reserve(AT_EV_WAKE, sizeof(*e));
	if (!e)
		return 0;
	e->hdr.ts = now;
	e->task = task;
	e->waker_task = waker_task;
	e->wake_id = wake_id;
	e->waker_worker = waker_worker;
	e->queue = queue;
	e->depth = depth;
	e->pad = 0;
	event_submit(e);
	return 0;
}

SEC("usdt")
int BPF_USDT(usdt_steal, __u32 thief, __u32 victim, __u32 count, __u32 thief_depth,
	     __u32 victim_depth)
{
	struct at_steal *e = event_reserve(AT_EV_STEAL, sizeof(*e));

	if (!e)
		return 0;
	e->hdr.ts = bpf_ktime_get_ns();
	e->thief = thief;
	e->victim = victim;
	e->count = count;
	e->thief_depth = thief_depth;
	e->victim_depth = victim_depth;
	e->pad = 0;
	event_submit(e);
	return 0;
}

SEC("usdt")
int BPF_USDT(usdt_worker_park, __u32 worker)
{
	struct thread_state *t = thread_get((__u32)bpf_get_current_pid_tgid());

	if (t)
		t->park_ts = bpf_ktime_get_ns();
	return 0;
}

SEC("usdt")
int BPF_USDT(usdt_worker_unpark, __u32 worker)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct thread_state *t = bpf_map_lookup_elem(&threads, &tid);
	struct at_park *e;
	__u64 park_ts;

	if (!t || !t->park_ts)
		return 0; /* parked before we attached */
	park_ts = t->park_ts;
	t->park_ts = 0;
	e = event_reserve(AT_EV_PARK, sizeof(*e));
	if (!e)
		return 0;
	e->hdr.ts = park_ts;
	e->duration_ns = bpf_ktime_get_ns() - park_ts;
	e->worker = worker;
	e->pad = 0;
	event_submit(e);
	return 0;
}

/* Kernels before 5.14 called task_struct::__state "state". */
struct task_struct___pre514 {
	long state;
} __attribute__((preserve_access_index));

static __always_inline long task_state(struct task_struct *p)
{
	if (bpf_core_field_exists(p->__state))
		return BPF_CORE_READ(p, __state);
	return BPF_CORE_READ((struct task_struct___pre514 *)p, state);
}

/*
 * A thread of the target left or took a CPU. Only threads inside a poll have
 * anything to account; the tgid test keeps the rest of the system cheap.
 */
static __always_inline void on_switch(bool preempt, struct task_struct *prev,
				      struct task_struct *next)
{
	struct thread_state *t;
	__u32 tid;
	__u64 now;

	if (BPF_CORE_READ(prev, tgid) == target_tgid) {
		tid = BPF_CORE_READ(prev, pid);
		t = bpf_map_lookup_elem(&threads, &tid);
		if (t && t->task && !t->off_cpu) {
			now = bpf_ktime_get_ns();
			t->oncpu += now - t->since;
			t->since = now;
			t->off_cpu = 1;
			/* TASK_RUNNING (0) when switched out: preempted, not asleep. */
			t->off_blocked = !preempt && task_state(prev) != 0;
		}
	}
	if (BPF_CORE_READ(next, tgid) == target_tgid) {
		tid = BPF_CORE_READ(next, pid);
		t = bpf_map_lookup_elem(&threads, &tid);
		if (t && t->task && t->off_cpu) {
			now = bpf_ktime_get_ns();
			if (t->off_blocked) {
				t->blocked += now - t->since;
				t->nr_blocked++;
			} else {
				t->runnable += now - t->since;
				t->nr_preempted++;
			}
			t->since = now;
			t->off_cpu = 0;
		}
	}
}

SEC("?tp_btf/sched_switch")
int BPF_PROG(handle_sched_switch, bool preempt, struct task_struct *prev,
	     struct task_struct *next)
{
	on_switch(preempt, prev, next);
	return 0;
}

SEC("?raw_tp/sched_switch")
int BPF_PROG(handle_sched_switch_raw, bool preempt, struct task_struct *prev,
	     struct task_struct *next)
{
	on_switch(preempt, prev, next);
	return 0;
}
