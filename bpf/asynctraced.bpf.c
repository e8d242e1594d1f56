// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * BPF side of asynctraced, for one target process: front-ends that turn a
 * runtime's probes into the executor events of core.bpf.h, plus the
 * sched_switch tracepoint that splits each poll into on-CPU, blocked and
 * runnable time.
 *
 *  - USDT: the asynctrace provider (docs/usdt-abi.md), whose probes carry
 *    everything as arguments.
 *  - tokio: uprobes on an unmodified binary's own functions (raw::poll of
 *    every future type, the waker, schedule, steal_into, spawn, remove),
 *    whose arguments are task Header pointers; ids, names, workers and queue
 *    depths are recovered around them (docs/tokio.md).
 *
 * Per thread we track the poll in progress; per task, the wake that queued
 * its next poll. Aggregates go to maps in every mode; records go to the ring
 * buffer (all of them, or in maps-only mode just the polls alerts need).
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "core.bpf.h"
#include "usdt_args.bpf.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";

/* ---- USDT: the asynctrace provider -------------------------------------- */

/*
 * Each program reads its probe's argument spec once (usdt_args.bpf.h) and
 * only the arguments it uses: poll_end's worker is the one its poll_begin
 * gave, and a task's name address is read from the target only until the
 * task's state remembers it.
 */
#define USDT_PROBE(id)                                                                             \
	const int probe = id;                                                                      \
	usdt_spec_t spec = usdt_spec(ctx, probe)
#define ARG(n) usdt_arg(ctx, spec, probe, n)

SEC("uprobe")
int usdt_task_spawn(struct pt_regs *ctx)
{
	USDT_PROBE(AT_USDT_TASK_SPAWN);
	__u32 tid;
	/* its worker's slot, kept there: the queue is its own, most often */
	struct thread_state *t = thread_self(ctx, false, &tid);

	if (!self_traced(t))
		return 0;
	/* task, parent, name, queue, depth */
	on_spawn(t, ARG(0), ARG(1), (const char *)ARG(2), 0, (int)ARG(3), (__u32)ARG(4));
	return 0;
}

SEC("uprobe")
int usdt_poll_begin(struct pt_regs *ctx)
{
	USDT_PROBE(AT_USDT_POLL_BEGIN);
	__u32 tid;
	struct thread_state *t = thread_self(ctx, true, &tid);
	__u64 task = ARG(0);
	struct at_task_state *ts;
	struct at_task_slot *slot;

	if (!t)
		return 0;
	/* task, worker, depth, name_addr */
	ts = task_find(task_key(t->tgid, task), &slot);
	on_poll_begin(t, task, ts, slot, (__u32)ARG(1), (__u32)ARG(2),
		      ts && ts->name_addr ? ts->name_addr : ARG(3));
	return 0;
}

SEC("uprobe")
int usdt_poll_end(struct pt_regs *ctx)
{
	USDT_PROBE(AT_USDT_POLL_END);
	__u32 tid;
	struct thread_state *t = thread_self(ctx, false, &tid);
	__u64 task = ARG(0);
	struct at_task_state *ts;
	struct at_task_slot *slot;

	if (!t || t->task != task) {
		if (self_traced(t))
			stat_inc(AT_STAT_ORPHAN_POLL_END);
		return 0;
	}
	ts = task_find(task_key(t->tgid, task), &slot);
	/* task, worker (known since poll_begin), ready, queue, depth */
	on_poll_end(t, task, ts, slot, (int)ARG(2), (int)ARG(3), (__u32)ARG(4), true, false,
		    false);
	return 0;
}

SEC("uprobe")
int usdt_wake(struct pt_regs *ctx)
{
	USDT_PROBE(AT_USDT_WAKE);
	__u64 task = ARG(0), waker_task = ARG(1);
	__u32 tid;
	/* a self-wake is kept in its poll's thread state; the thread keeps its worker's slot */
	struct thread_state *t = thread_self(ctx, false, &tid);

	if (!self_traced(t))
		return 0;
	/* task, waker_task, waker_worker, queue, depth */
	on_wake(t, task, waker_task, (int)ARG(2), (int)ARG(3), (__u32)ARG(4), 0);
	return 0;
}

SEC("uprobe")
int usdt_steal(struct pt_regs *ctx)
{
	USDT_PROBE(AT_USDT_STEAL);
	__u32 tid;
	struct thread_state *t = thread_self(ctx, false, &tid);

	if (!self_traced(t))
		return 0;
	/* thief, victim, count, thief_depth, victim_depth */
	on_steal(t, (__u32)ARG(0), (__u32)ARG(1), (__u32)ARG(2), (__u32)ARG(3), (__u32)ARG(4), 0);
	return 0;
}

SEC("uprobe")
int usdt_worker_park(struct pt_regs *ctx)
{
	USDT_PROBE(AT_USDT_WORKER_PARK);
	__u32 tid;
	struct thread_state *t = thread_self(ctx, false, &tid);

	if (!self_traced(t))
		return 0;
	on_park(t, (__u32)ARG(0));
	return 0;
}

SEC("uprobe")
int usdt_worker_unpark(struct pt_regs *ctx)
{
	USDT_PROBE(AT_USDT_WORKER_UNPARK);
	__u32 tid;
	struct thread_state *t = thread_self(ctx, false, &tid);

	if (!self_traced(t))
		return 0;
	on_unpark(t, (__u32)ARG(0));
	return 0;
}

#undef ARG
#undef USDT_PROBE

/* ---- tokio: uprobes on an unmodified binary ----------------------------- */

/* Where a task's vtable and id live, from its Header (tokio >= 1.23). */
const volatile __u64 tokio_vtable_off = 0x10;
const volatile __u64 tokio_id_slot = 0x48;

/*
 * A task's state word, first in its Header (task/state.rs, the same from
 * tokio 1.0 on): flags in the low six bits, the reference count above.
 */
#define TOKIO_STATE_OFF 0
#define TOKIO_RUNNING 0x1
#define TOKIO_COMPLETE 0x2
#define TOKIO_NOTIFIED 0x4
#define TOKIO_JOIN_INTEREST 0x8
#define TOKIO_CANCELLED 0x20
#define TOKIO_REF_SHIFT 6
/*
 * Set when a sampled check found another task at a cached Header: a remove
 * we do not see (inlined for one scheduler type, folded away) let a Header
 * go. The cache is off from then on.
 */
__u32 tokio_hdr_cache_off CACHE_LINE = 0;
/* Every TOKIO_HDR_CHECK-th answer of the cache is checked against the Header. */
#define TOKIO_HDR_CHECK 16

/*
 * Worker ids, given per process in order of first poll: tgid -> the next.
 * Userspace drops a process's entry when it is gone.
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, AT_MAX_TARGETS);
	__type(key, __u32);
	__type(value, __u32);
} tokio_next_worker SEC(".maps");

/* The next worker id of process tgid (a thread's first poll); 0 when the map is full. */
static __always_inline __u32 tokio_new_worker(__u32 tgid)
{
	__u32 zero = 0, *next = bpf_map_lookup_elem(&tokio_next_worker, &tgid);

	if (!next) {
		bpf_map_update_elem(&tokio_next_worker, &tgid, &zero, BPF_NOEXIST);
		next = bpf_map_lookup_elem(&tokio_next_worker, &tgid);
	}
	return next ? __sync_fetch_and_add(next, 1) : 0;
}

/*
 * Where process tgid's tokio code is: the address of its binary's file
 * offset 0 (userspace sets it before attaching). A task is named by its
 * raw::poll instance as a file offset, the same in every process of the
 * binary: the poll probe's cookie, and a vtable's poll function less this.
 * So one set of probes on the file serves all of them.
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, AT_MAX_TARGETS);
	__type(key, __u32);
	__type(value, struct at_tokio_process);
} tokio_bases SEC(".maps");

static __always_inline __u64 tokio_base_of(__u32 tgid)
{
	struct at_tokio_process *p = bpf_map_lookup_elem(&tokio_bases, &tgid);

	return p ? p->base : 0;
}

/*
 * tokio's queue lengths are not in any argument: count them. Each push we
 * see adds one to its queue, each poll of a task takes one from the queue it
 * was pushed on. Indexed by the queue's worker slot (the injection queue has
 * its own).
 */
__u32 tokio_depth[AT_MAX_WORKERS][16] CACHE_LINE; /* [slot][0]; a cache line per queue */

struct tokio_task {
	__u64 id;	/* tokio's task id; the Header address if unreadable */
	__u64 poll_fn;	/* vtable[0]: the raw::poll instance, which names it */
};

/*
 * What a task's vtable says (one vtable per future type), cached per CPU in
 * the slot the vtable's address hashes to: an inlined index, no helper
 * call, no lock; a vtable that finds its slot taken is read again and takes
 * it over.
 */
struct tokio_vtable {
	__u64 vtable;	/* 0: empty */
	__u64 poll_fn;
	__u64 id_off;
	__u64 tgid;	/* the process: one address may be another binary's vtable there */
	__u64 check;	/* of the four: a program preempted mid-write leaves a mix */
};

static __always_inline __u64 tokio_vtable_check(__u64 vtable, __u64 tgid, __u64 poll_fn,
						__u64 id_off)
{
	return (vtable ^ poll_fn ^ (id_off << 32) ^ (id_off >> 32) ^ (tgid << 40)) * AT_HASH_MULT;
}

#define TOKIO_VTABLE_BITS 10

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1 << TOKIO_VTABLE_BITS);
	__type(key, __u32);
	__type(value, struct tokio_vtable);
} tokio_vtables SEC(".maps");

/* The start of a Header: its vtable, and often the id, are in it. */
#define TOKIO_HDR_READ 64

/*
 * Which task lives at a Header, remembered in the slot the Header's address
 * hashes to, so that most events need no read of the target's memory. Only
 * trusted when OwnedTasks::remove is probed for every bind: a task spawned
 * while we watch is bound to OwnedTasks, so it leaves through remove before
 * tokio can free its memory. Its state is marked bound at the spawn, names
 * its Header (at_task_state.hdr) from its first poll (it surely lives there
 * while it runs) until remove clears it. Tasks not seen spawned (older than
 * the session; spawn_blocking's, never bound) and tasks never polled (one
 * spawned into a runtime already shut down: removed before its spawn
 * returns) are always read. An entry whose task's state does not name this
 * Header (finished, another task's entry) is read again. Entries may be written by several CPUs at once: a torn one fails
 * the same check.
 */
struct tokio_hdr {
	__u64 hdr;
	__u64 id;
	__u64 id_off;	/* where in the Header the id was read */
};

#define TOKIO_HDR_BITS 14
/* at_task_state.hdr of a task seen bound, not yet polled (no Header is 1) */
#define TOKIO_HDR_BOUND 1

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1 << TOKIO_HDR_BITS);
	__type(key, __u32);
	__type(value, struct tokio_hdr);
} tokio_hdrs SEC(".maps");

static __always_inline struct tokio_hdr *tokio_hdr_slot(__u64 hdr)
{
	__u32 i = at_hash_bits(hdr, TOKIO_HDR_BITS);

	return bpf_map_lookup_elem(&tokio_hdrs, &i);
}

/*
 * Now and then, the cache's answer checked against the Header itself (the id
 * where it was read): true, and the cache off for good, if another task
 * lives there.
 */
static __always_inline bool tokio_hdr_check(const struct tokio_hdr *h, __u64 id)
{
	struct at_runtime_counts *c = session_counts();
	__u64 seen = 0, off = h->id_off;

	if (!c || (++c->hdr_checks % TOKIO_HDR_CHECK) || !off || off > (1 << 20))
		return false;
	if (bpf_probe_read_user(&seen, sizeof(seen), (void *)(h->hdr + off)) || seen == id)
		return false;
	tokio_hdr_cache_off = 1;
	return true;
}

/*
 * The task of process tgid (whose enum at_target_flag are flags) that surely
 * lives at hdr, with no read; false if unsure.
 */
static __always_inline bool tokio_task_known(__u32 tgid, __u32 flags, __u64 hdr,
					     struct tokio_task *tt)
{
	struct tokio_hdr *h = tokio_hdr_slot(hdr);
	struct at_task_slot *slot;
	struct at_task_state *ts;
	__u64 id;

	if (!(flags & AT_TARGET_TOKIO_HDR_CACHE) || tokio_hdr_cache_off || !h || h->hdr != hdr)
		return false;
	id = h->id;
	ts = task_find(task_key(tgid, id), &slot);
	if (!ts || ts->hdr != hdr)
		return false;
	if (tokio_hdr_check(h, id))
		return false;
	tt->id = id;
	tt->poll_fn = ts->name_addr;
	return true;
}

/* A read found task id at hdr + id_off. */
static __always_inline void tokio_hdr_remember(__u32 flags, __u64 hdr, __u64 id, __u64 id_off)
{
	struct tokio_hdr *h = tokio_hdr_slot(hdr);

	if ((flags & AT_TARGET_TOKIO_HDR_CACHE) && h) {
		h->id = id;
		h->id_off = id_off;
		h->hdr = hdr;
	}
}

/*
 * A task's id and poll function from its Header: the Header's first bytes in
 * one read, the vtable's two words from a cache. t (the calling thread, may
 * be NULL) remembers the last Header it resolved: a wake and the schedule
 * that follows it, or a task waking itself, then cost one read of the id,
 * which also proves the Header still belongs to the same task (ids are never
 * reused; Headers are).
 */
static __always_inline void tokio_task(struct thread_state *t, __u64 hdr, struct tokio_task *tt)
{
	__u64 buf[TOKIO_HDR_READ / 8] = {}, id = 0, vtable;
	struct tokio_vtable *vt, fresh = {};
	__u32 slot, tgid, flags;

	tt->id = hdr;
	tt->poll_fn = 0;
	if (t)
		t->woken_hdr = 0;
	if (!hdr)
		return;
	tgid = tgid_of(t);
	flags = flags_of(t, tgid);
	if (tokio_task_known(tgid, flags, hdr, tt))
		return;
	if (t && t->hdr == hdr && t->hdr_id &&
	    !bpf_probe_read_user(&id, sizeof(id), (void *)(hdr + t->hdr_id_off)) &&
	    id == t->hdr_id) {
		tt->id = id;
		tt->poll_fn = t->hdr_poll_fn;
		tokio_hdr_remember(flags, hdr, id, t->hdr_id_off);
		return;
	}
	if (bpf_probe_read_user(buf, sizeof(buf), (void *)hdr))
		return;
	vtable = buf[(tokio_vtable_off / 8) & (TOKIO_HDR_READ / 8 - 1)];
	if (!vtable)
		return;
	slot = at_hash_bits(vtable ^ (__u64)tgid << 32, TOKIO_VTABLE_BITS);
	vt = bpf_map_lookup_elem(&tokio_vtables, &slot);
	if (vt && vt->vtable == vtable && vt->tgid == tgid &&
	    vt->check == tokio_vtable_check(vtable, tgid, vt->poll_fn, vt->id_off)) {
		fresh.poll_fn = vt->poll_fn;
		fresh.id_off = vt->id_off;
		barrier();
		/* unchanged: no program that preempted us on this CPU rewrote it */
		if (vt->vtable != vtable ||
		    vt->check != tokio_vtable_check(vtable, tgid, fresh.poll_fn, fresh.id_off))
			return;
	} else {
		if (bpf_probe_read_user(&fresh.poll_fn, sizeof(fresh.poll_fn), (void *)vtable) ||
		    bpf_probe_read_user(&fresh.id_off, sizeof(fresh.id_off),
					(void *)(vtable + tokio_id_slot)))
			return;
		/* the instance as its file offset: the key the probes' cookies use */
		fresh.poll_fn -= tokio_base_of(tgid);
		if (vt) {
			vt->vtable = 0;
			barrier();
			vt->poll_fn = fresh.poll_fn;
			vt->id_off = fresh.id_off;
			vt->tgid = tgid;
			vt->check = tokio_vtable_check(vtable, tgid, fresh.poll_fn, fresh.id_off);
			barrier();
			vt->vtable = vtable;
		}
	}
	tt->poll_fn = fresh.poll_fn;
	if (!fresh.id_off || fresh.id_off > (1 << 20))
		return;
	/* ids are 8-byte aligned in the Header: in the first read, or read apart */
	if (fresh.id_off <= TOKIO_HDR_READ - 8 && !(fresh.id_off & 7))
		id = buf[(fresh.id_off / 8) & (TOKIO_HDR_READ / 8 - 1)];
	else if (bpf_probe_read_user(&id, sizeof(id), (void *)(hdr + fresh.id_off)))
		return;
	if (!id)
		return;
	tt->id = id;
	tokio_hdr_remember(flags, hdr, id, fresh.id_off);
	if (t) {
		t->hdr = hdr;
		t->hdr_id = id;
		t->hdr_id_off = fresh.id_off;
		t->hdr_poll_fn = fresh.poll_fn;
	}
}

/* A queue's depth, by its worker's slot (the thread t is of the queue's process). */
static __always_inline __u32 *tokio_depth_of(const struct thread_state *t, __s32 queue)
{
	__u32 worker, slot;

	if (!queue_worker(queue, &worker))
		return NULL;
	slot = worker_slot(t, worker);
	if (slot >= AT_MAX_WORKERS)
		return NULL;
	barrier_var(slot);
	return &tokio_depth[slot & (AT_MAX_WORKERS - 1)][0];
}

static __always_inline __u32 tokio_push(const struct thread_state *t, __s32 queue)
{
	__u32 *d = tokio_depth_of(t, queue);

	return d ? __sync_add_and_fetch(d, 1) : 0;
}

static __always_inline void tokio_pop(const struct thread_state *t, __s32 queue)
{
	__u32 *d = tokio_depth_of(t, queue);

	/* Tasks queued before we attached were never counted in. */
	if (d && *d)
		__sync_fetch_and_add(d, (__u32)-1);
}

/* The worker this thread is, numbered on its first poll; -1 if it never polled. */
static __always_inline __s32 tokio_worker_of(struct thread_state *t)
{
	return t && t->has_worker ? (__s32)t->own_worker : -1;
}

/* Where a push from this thread goes: its own worker's queue, else the injection queue. */
static __always_inline __s32 tokio_target_queue(struct thread_state *t)
{
	__s32 w = tokio_worker_of(t);

	return w >= 0 ? w : AT_QUEUE_INJECT;
}

/*
 * The argument an entry probe reads: where the ABI put it (abi), or where
 * the probe's cookie says it is when placement moved the probe past a copy
 * of it (AT_COOKIE_REG_SHIFT).
 */
static __always_inline __u64 tokio_arg(struct pt_regs *ctx, __u64 cookie, __u64 abi)
{
	__u32 reg = cookie >> AT_COOKIE_REG_SHIFT;

	return reg ? usdt_reg(ctx, (short)((reg - 1) * 8)) : abi;
}

SEC("uprobe")
int BPF_KPROBE(tokio_poll, __u64 hdr)
{
	__u64 cookie = bpf_get_attach_cookie(ctx);
	__u32 tid;
	struct thread_state *t = thread_self(ctx, true, &tid);
	struct at_task_state *ts;
	struct at_task_slot *slot;
	struct tokio_task tt;
	__s32 from = AT_QUEUE_NONE;
	__u32 worker, *depth;

	if (!t)
		return 0;
	hdr = tokio_arg(ctx, cookie, hdr);
	/*
	 * A poll inside a poll: the outer one is a container (the worker loop
	 * runs as a blocking task; block_on inside a task) and the inner one is
	 * what runs. The inner takes over; the outer's end is then an orphan.
	 */
	if (!t->has_worker) {
		t->own_worker = tokio_new_worker(t->tgid);
		t->has_worker = 1;
	}
	worker = t->own_worker;
	tokio_task(t, hdr, &tt);
	ts = task_find(task_key(t->tgid, tt.id), &slot);
	if (ts) {
		from = ts->queued_on;
		/* bound and running: it lives here until its remove */
		if (ts->hdr == TOKIO_HDR_BOUND && tt.id != hdr)
			ts->hdr = hdr;
	}
	t->poll_hdr = hdr;
	tokio_pop(t, from);
	if (!(t->flags & AT_TARGET_TOKIO_STEAL) && from >= 0 && (__u32)from != worker)
		on_steal(t, worker, (__u32)from, 1, 0, 0, AT_STEAL_INFERRED);
	thread_worker(t, worker);
	depth = tokio_depth_of(t, (__s32)worker);
	/* the cookie is this instance (its file offset): the future type names the task */
	on_poll_begin(t, tt.id, ts, slot, worker, depth ? *depth : 0,
		      cookie & AT_COOKIE_OFFSET_MASK);
	return 0;
}

/*
 * The task whose poll just returned on this thread, left idle: can anything
 * still wake it? Every Waker of a task holds a reference on it, and so do
 * the runtime's list of its tasks (OwnedTasks) and the JoinHandle while it
 * lives (JOIN_INTEREST). Idle (not running, notified, complete nor
 * cancelled) with no reference beyond those two, no waker exists and none
 * can be made: nothing will ever poll the future again. The poll's return
 * comes after tokio made the task idle; if it was woken and ran meanwhile,
 * the flags say so, and a Header freed and given to another task since is
 * told by its id.
 */
static __always_inline bool tokio_unwakeable(struct thread_state *t, __u64 task)
{
	__u64 state = 0, refs;
	struct tokio_task tt;

	if (!t->poll_hdr ||
	    bpf_probe_read_user(&state, sizeof(state), (void *)(t->poll_hdr + TOKIO_STATE_OFF)))
		return false;
	if (state & (TOKIO_RUNNING | TOKIO_COMPLETE | TOKIO_NOTIFIED | TOKIO_CANCELLED))
		return false;
	refs = state >> TOKIO_REF_SHIFT;
	if (refs != 1 + !!(state & TOKIO_JOIN_INTEREST))
		return false;
	tokio_task(t, t->poll_hdr, &tt);
	return tt.id == task;
}

SEC("uretprobe")
int BPF_KRETPROBE(tokio_poll_ret)
{
	__u32 tid;
	struct thread_state *t = thread_self(ctx, false, &tid);
	struct at_task_state *ts;
	struct at_task_slot *slot;
	__s32 queue = AT_QUEUE_NONE;
	__u32 depth = 0;
	__u64 task;

	if (t)
		t->woken_hdr = 0;
	if (!t || !t->task) {
		if (self_traced(t))
			stat_inc(AT_STAT_ORPHAN_POLL_END);
		return 0;
	}
	task = t->task;
	/*
	 * Woken while it ran: tokio yields it back onto this worker's queue,
	 * unless the wake came after it went idle and already scheduled it.
	 */
	ts = task_find(task_key(t->tgid, task), &slot);
	if (!t->completed && ts && ts->wake_id && ts->queued_on == AT_QUEUE_NONE) {
		queue = (__s32)t->worker;
		depth = tokio_push(t, queue);
	}
	on_poll_end(t, task, ts, slot, t->completed, queue, depth,
		    t->flags & AT_TARGET_TOKIO_REMOVE,
		    !t->completed && queue == AT_QUEUE_NONE && tokio_unwakeable(t, task), false);
	t->poll_hdr = 0;
	return 0;
}

/*
 * A worker's wake outside any task: is it one a task deferred (yield_now)?
 * Then waker::wake_by_val returns into the loop that drains the defer list
 * (src/targets/tokio/tokio_defer.c): its return address, as a file offset, is
 * one of the process's defer_ret. The address is at the top of the stack,
 * above the frame the function made before the probe, if any (the cookie).
 */
static __always_inline bool tokio_deferred(struct pt_regs *ctx, struct thread_state *t,
					   __u64 cookie)
{
	struct at_tokio_process *p;
	__u64 ret = 0, sp;

	if (!t || !t->has_worker || t->task)
		return false;
	p = bpf_map_lookup_elem(&tokio_bases, &t->tgid);
	if (!p || !p->defer_ret[0])
		return false;
	sp = PT_REGS_SP(ctx) + ((cookie >> AT_COOKIE_FRAME_SHIFT) & 0xff) * 8;
	if (bpf_probe_read_user(&ret, sizeof(ret), (const void *)sp))
		return false;
	ret -= p->base;
	for (int i = 0; i < AT_TOKIO_DEFER_SITES; i++)
		if (p->defer_ret[i] && p->defer_ret[i] == ret)
			return true;
	return false;
}

/*
 * waker::wake_by_val and waker::wake_by_ref: arg0 is the woken task's
 * Header. The waker is the task polled on this thread, if any; a wake the
 * task deferred to its worker is its own.
 */
SEC("uprobe")
int BPF_KPROBE(tokio_wake, __u64 hdr)
{
	__u64 cookie = bpf_get_attach_cookie(ctx);
	__u32 tid;
	struct thread_state *t = thread_self(ctx, false, &tid);
	struct tokio_task tt;
	__u64 now, waker;

	if (!self_traced(t))
		return 0;
	hdr = tokio_arg(ctx, cookie, hdr);
	tokio_task(t, hdr, &tt);
	waker = t ? t->task : 0;
	if (tokio_deferred(ctx, t, cookie))
		waker = tt.id;
	now = on_wake(t, tt.id, waker, tokio_worker_of(t), AT_QUEUE_NONE, 0, tt.poll_fn);
	if (t && tt.id != hdr) {
		t->woken_hdr = hdr;
		t->woken_id = tt.id;
		t->woken_ts = now;
	}
	return 0;
}

/*
 * raw::schedule: the wake (just seen on this thread) really queued the task.
 * Called from inside that wake, whose waker keeps the task alive: the Header
 * the wake resolved needs no second read. Not every schedule comes from a
 * wake, though (a JoinHandle's abort calls it directly), and a wake need not
 * schedule (its task was running): the Header the last wake resolved may
 * since have been freed and given to another task. So the wake's answer
 * stands only while that task's state still names the Header, which its
 * remove undoes before tokio can free it (when every remove is probed: the
 * Header cache's condition); otherwise the Header is read again.
 */
SEC("uprobe")
int BPF_KPROBE(tokio_schedule, __u64 hdr)
{
	__u32 tid;
	struct thread_state *t = thread_self(ctx, false, &tid);
	__s32 queue = tokio_target_queue(t);
	struct at_task_state *ts = NULL;
	struct at_task_slot *slot;
	struct tokio_task tt;
	__u32 depth;
	__u64 now;

	if (!self_traced(t))
		return 0;
	hdr = tokio_arg(ctx, bpf_get_attach_cookie(ctx), hdr);
	depth = tokio_push(t, queue);
	if (t && t->woken_hdr == hdr && (t->flags & AT_TARGET_TOKIO_HDR_CACHE) &&
	    !tokio_hdr_cache_off &&
	    (ts = task_find(task_key(t->tgid, t->woken_id), &slot)) && ts->hdr == hdr) {
		/* and it happened at the wake, as far as queue depth over time can tell */
		t->woken_hdr = 0;
		tt.id = t->woken_id;
		now = t->woken_ts;
	} else {
		ts = NULL;
		tokio_task(t, hdr, &tt);
		now = bpf_ktime_get_ns();
	}
	task_queued(task_key(tgid_of(t), tt.id), ts, queue, depth);
	queue_depth(t, queue, depth, now);
	return 0;
}

static __always_inline void tokio_spawned(void *ctx, __u64 hdr)
{
	__u32 tid;
	struct thread_state *t = thread_self(ctx, false, &tid);
	__s32 queue = tokio_target_queue(t);
	struct at_task_slot *slot;
	struct at_task_state *ts;
	struct tokio_task tt;

	if (!hdr || !self_traced(t))
		return;
	tokio_task(t, hdr, &tt);
	on_spawn(t, tt.id, t ? t->task : 0, NULL, tt.poll_fn, queue, tokio_push(t, queue));
	/* bound: its first poll will say where it lives (tokio_task_known) */
	ts = task_find(task_key(tgid_of(t), tt.id), &slot);
	if (ts && tt.id != hdr && !ts->hdr)
		ts->hdr = TOKIO_HDR_BOUND;
}

/* OwnedTasks::bind (tokio < 1.49): the new task is in the JoinHandle it returns. */
SEC("uretprobe")
int BPF_KRETPROBE(tokio_bind_ret)
{
	tokio_spawned(ctx, PT_REGS_RC(ctx));
	return 0;
}

/* OwnedTasks::bind_inner (tokio >= 1.49): arg1 is the new task's Header. */
SEC("uprobe")
int BPF_KPROBE(tokio_bind_inner, void *self, __u64 hdr)
{
	tokio_spawned(ctx, tokio_arg(ctx, bpf_get_attach_cookie(ctx), hdr));
	return 0;
}

/* OwnedTasks::remove(&self, &Task): the task is done, released after completing. */
SEC("uprobe")
int BPF_KPROBE(tokio_remove, void *self, __u64 *task)
{
	__u32 tid;
	struct thread_state *t = thread_self(ctx, false, &tid);
	struct at_task_slot *slot;
	struct at_task_state *ts;
	struct tokio_task tt;
	__u64 hdr = 0;

	if (!self_traced(t))
		return 0;
	task = (__u64 *)tokio_arg(ctx, bpf_get_attach_cookie(ctx), (__u64)task);
	if (bpf_probe_read_user(&hdr, sizeof(hdr), task))
		return 0;
	tokio_task(t, hdr, &tt);
	/* tokio may free the Header from here on: it no longer names this task */
	ts = task_find(task_key(tgid_of(t), tt.id), &slot);
	if (ts)
		ts->hdr = 0;
	if (t && t->task && tt.id == t->task)
		t->completed = 1;
	return 0;
}

/*
 * Steal::steal_into returns the first stolen task (or None): from whom, its
 * queue says. Only workers steal: a thread that tries is a worker, numbered
 * now if it has not polled yet, so that its idleness counts (spare_share())
 * before its first poll.
 */
SEC("uretprobe")
int BPF_KRETPROBE(tokio_steal_ret)
{
	__u32 tid;
	struct thread_state *t = thread_self(ctx, true, &tid);
	__u64 hdr = PT_REGS_RC(ctx);
	struct at_task_state *ts;
	struct at_task_slot *slot;
	struct tokio_task tt;
	__u32 victim = AT_WORKER_UNKNOWN;

	if (!t)
		return 0;
	if (!t->has_worker) {
		t->own_worker = tokio_new_worker(t->tgid);
		t->has_worker = 1;
		thread_worker(t, t->own_worker);
	}
	if (!hdr)
		return 0;
	tokio_task(t, hdr, &tt);
	ts = task_find(task_key(t->tgid, tt.id), &slot);
	if (ts && ts->queued_on >= 0)
		victim = (__u32)ts->queued_on;
	on_steal(t, t->own_worker, victim, 1, 0, 0, 0);
	return 0;
}

/* ---- Go: the scheduler's own functions ----------------------------------- */

/*
 * A goroutine is a task (its goid), a P a worker, an M a thread. Its
 * status changes (runtime.casgstatus(gp, old, new): RAX, RBX, RCX in Go's
 * register ABI, at its entry or at a call of it) give the rest, as
 * at_go_change() reads them: to running, a run slice (a "poll") begins;
 * from running, it ends (parked, preempted or yielding, done); waiting to
 * runnable is a wake by the goroutine running on this thread (0: the
 * scheduler). newproc1's returns give each goroutine made, and its parent;
 * runqsteal, a P stealing from another. No uretprobe: Go moves stacks and
 * walks return addresses (docs/go.md).
 *
 * Probed at its call sites (the default), the changes into and out of a
 * system call are not seen: a run goes on through its system calls, and
 * ends where its thread sleeps in one (go_switch_out()); the thread's
 * return to the CPU resumes it (go_switch_in()).
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, AT_MAX_TARGETS);
	__type(key, __u32);
	__type(value, struct at_go_layout);
} go_layouts SEC(".maps");

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

/*
 * Whether the run in progress on t lost its P before its end: the P it
 * began on was handed off since (a goroutine in a system call or a cgo call
 * has its P taken by sysmon; go_handoffp()).
 */
static __always_inline bool go_p_lost(const struct thread_state *t)
{
	struct at_worker_stats *w, *p;

	if (!t->go_has_p)
		return false;
	w = worker_get(t, t->worker);
	p = worker_at(t->pslot);
	return (w && *(volatile __u32 *)&w->handoffs != t->go_handoffs) ||
	       (p && *(volatile __u32 *)&p->handoffs != t->go_stops);
}

/* A run begins on t's worker: the handoffs of its P and its process's stops of the world so far. */
static __always_inline void go_p_held(struct thread_state *t, __u32 worker)
{
	struct at_worker_stats *w = worker_get(t, worker), *p = worker_at(t->pslot);

	t->go_handoffs = w ? *(volatile __u32 *)&w->handoffs : 0;
	t->go_stops = p ? *(volatile __u32 *)&p->handoffs : 0;
	t->go_has_p = w != NULL;
}

/* The run in progress on t ends (on_poll_end()'s arguments); lost: it had lost its P. */
static __always_inline void go_run_ends(struct thread_state *t, __u64 goid,
					struct at_task_state *ts, struct at_task_slot *slot,
					int ready, __s32 queue, bool idle, bool unwakeable,
					bool preempted, bool lost)
{
	poll_end_at(t, goid, ts, slot, ready, queue, 0, idle, unwakeable, preempted,
		    bpf_ktime_get_ns(), charged_cpu(), lost ? AT_POLL_WORKER_LOST : 0);
	t->go_has_p = 0;
}

/* Whether wait reason why is in set (256 bits). */
static __always_inline bool go_in(const __u64 *set, __u8 why)
{
	return (set[why >> 6] >> (why & 63)) & 1;
}

static __always_inline const struct at_go_layout *go_layout_of(__u32 tgid)
{
	return bpf_map_lookup_elem(&go_layouts, &tgid);
}

static __always_inline const struct at_go_layout *go_layout(void)
{
	return go_layout_of(bpf_get_current_pid_tgid() >> 32);
}

/* Goroutine gp (goid) begins a run on thread t. */
static __always_inline void go_run_begins(struct thread_state *t, const struct at_go_layout *l,
					  __u64 gp, __u64 goid)
{
	struct at_task_state *ts;
	struct at_task_slot *slot;
	__u32 worker = 0, depth = 0;
	bool has_p = go_p_of(l, gp, &worker, &depth);

	ts = task_find(task_key(t->tgid, goid), &slot);
	t->go_has_p = 0;
	if (has_p)
		go_p_held(t, worker);
	t->go_g = gp;
	t->go_run = goid;
	t->go_resume = 0;
	on_poll_begin(t, goid, ts, slot, worker, depth,
		      ts && ts->name_addr ? ts->name_addr : go_read(gp, l->g_startpc));
}

SEC("uprobe")
int BPF_KPROBE(go_casgstatus)
{
	const struct at_go_layout *l = go_layout();
	__u32 from = (__u32)ctx->bx & ~AT_GO_SCAN, to = (__u32)ctx->cx & ~AT_GO_SCAN;
	enum at_go_change change = at_go_change(from, to);
	__u32 tid, worker = 0, depth = 0;
	struct at_task_state *ts;
	struct at_task_slot *slot;
	struct thread_state *t;
	__u64 gp = ctx->ax, goid, waker;
	bool has_p;
	__u8 why;

	if (!l || !gp || change == AT_GO_IGNORED)
		return 0;
	goid = go_read(gp, l->g_goid);
	switch (change) {
	case AT_GO_RUN_BEGINS:
	case AT_GO_SYSCALL_RETURNS:
	case AT_GO_CALLBACK_BEGINS:
		t = thread_self(ctx, true, &tid);
		if (t)
			go_run_begins(t, l, gp, goid);
		break;
	case AT_GO_RUN_ENDS:
	case AT_GO_SYSCALL_ENTERS:
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
		why = to == AT_GO_WAITING ? go_read8(gp, l->g_waitreason) : 0;
		go_run_ends(t, goid, ts, slot, to == AT_GO_DEAD,
			    to == AT_GO_RUNNABLE ? AT_QUEUE_INJECT : AT_QUEUE_NONE,
			    to == AT_GO_WAITING && go_in(l->may_lose, why),
			    to == AT_GO_WAITING && go_in(l->never_woken, why),
			    to == AT_GO_RUNNABLE && go_read8(gp, l->g_preempt), go_p_lost(t));
		break;
	case AT_GO_SYSCALL_LEFT:
		/* only a run that went on through its system call is still open */
		t = thread_self(ctx, false, &tid);
		if (!t || t->task != goid)
			return 0;
		/*
		 * back runnable: it left its system call with no P, the one it had
		 * taken meanwhile; dead: a cgo callback's end
		 */
		ts = task_find(task_key(t->tgid, goid), &slot);
		go_run_ends(t, goid, ts, slot, 0,
			    to == AT_GO_RUNNABLE ? AT_QUEUE_INJECT : AT_QUEUE_NONE, false, false,
			    false, to == AT_GO_RUNNABLE || go_p_lost(t));
		break;
	case AT_GO_WOKEN:
		t = thread_self(ctx, true, &tid);
		if (!t)
			return 0;
		/* ready() puts it on the P of the thread that woke it (R14: its g) */
		has_p = go_p_of(l, ctx->r14, &worker, &depth);
		waker = t->task;
		on_wake(t, goid, waker, waker && has_p ? (__s32)worker : -1,
			has_p ? (__s32)worker : AT_QUEUE_NONE, depth + 1, go_read(gp, l->g_startpc));
		break;
	default:
		break;
	}
	return 0;
}

/*
 * A thread of a Go process going to sleep (tid of tgid, the current task:
 * its memory is the one mapped) inside a run its probes began: if its
 * goroutine is in a system call, the run ends here, and resumes when the
 * thread is back (go_resume()). Asleep anywhere else (a lock, a page
 * fault, a raw system call the runtime does not know of), it holds its P,
 * and the run goes on, blocked. Global functions, these two: the verifier
 * checks each once, and their frames stay out of sched_switch's own (which
 * calls sample_observe() and poll_finish() too: 512 bytes for them all).
 */
__noinline int go_asleep(__u32 tgid, __u32 tid)
{
	const struct at_go_layout *l;
	struct at_task_state *ts;
	struct at_task_slot *slot;
	struct thread_state *t = thread_find(tid);
	__u64 goid;

	/* a run the probes began (sample mode's set s_last) */
	if (!t || !t->go_g || !t->task || t->task != t->go_run || t->s_last)
		return 0;
	l = go_layout_of(tgid);
	if (!l || (go_read32(t->go_g, l->g_status) & ~AT_GO_SCAN) != AT_GO_SYSCALL)
		return 0;
	goid = t->task;
	ts = task_find(task_key(tgid, goid), &slot);
	go_run_ends(t, goid, ts, slot, 0, AT_QUEUE_NONE, false, false, false, go_p_lost(t));
	t->go_resume = goid;
	return 0;
}

/* A thread that slept in a system call inside a run is back: the run goes on. */
__noinline int go_resume(__u32 tid, __u64 charged)
{
	struct at_task_state *ts;
	struct at_task_slot *slot;
	struct thread_state *t = thread_find(tid);
	__u64 goid;

	if (!t || !t->go_resume)
		return 0;
	goid = t->go_resume;
	t->go_resume = 0;
	if (t->task)
		return 0;
	ts = task_find(task_key(t->tgid, goid), &slot);
	/* its P, as far as is known: the one it had (exitsyscall takes it back if it can) */
	on_poll_begin(t, goid, ts, slot, t->worker, t->depth, ts ? ts->name_addr : 0);
	/*
	 * Its handoffs from now: sysmon takes the P of a thread asleep in a
	 * system call, which loses the P to no one while it sleeps
	 */
	go_p_held(t, t->worker);
	/* the kernel's charge is the thread's own, not the current task's */
	t->charged = charged;
	return 0;
}

static __always_inline void go_switch_out(struct task_struct *prev, bool preempt, const bool direct)
{
	__u32 tgid = TASK_READ(prev, tgid, direct);

	if (!preempt && tgid_traced(tgid) && task_state(prev, direct) != 0 &&
	    !(TASK_READ(prev, flags, direct) & PF_EXITING))
		go_asleep(tgid, TASK_READ(prev, pid, direct));
}

static __always_inline void go_switch_in(struct task_struct *next, const bool direct)
{
	if (tgid_traced(TASK_READ(next, tgid, direct)))
		go_resume(TASK_READ(next, pid, direct),
			  TASK_READ(next, utime, direct) + TASK_READ(next, stime, direct));
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

/*
 * A P of process tgid was taken (worker: its id; AT_WORKER_PROCESS: every
 * P, a stop of the world): counted where go_p_lost() looks. In sample mode,
 * only for a process escalated to the probes.
 */
static __always_inline void go_p_taken(__u32 tgid, __u32 worker)
{
	struct at_worker_stats *w;

	if (sample_period_ns && !tgid_in(probed_tgids, tgid))
		return;
	w = worker_at(worker_slot_of(tgid, worker));
	if (w)
		__sync_fetch_and_add(&w->handoffs, 1);
}

/*
 * runtime.handoffp(pp): P pp is handed off, taken from the goroutine that
 * held it in a system call or a cgo call (by sysmon, or as it entered one
 * known to block). That goroutine's run, still open here (a run goes on
 * through its system calls), holds no worker from now on: counted on the
 * worker, the run's end tells (go_p_lost()). Rare: sysmon takes a P after
 * 20 us in a system call at the soonest, when other work waits for it.
 */
SEC("uprobe")
int BPF_KPROBE(go_handoffp)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	const struct at_go_layout *l = go_layout_of(tgid);
	__u64 pp = ctx->ax;

	if (l && pp)
		go_p_taken(tgid, go_read32(pp, l->p_id));
	return 0;
}

/*
 * runtime.stopTheWorldWithSema: every P of the process is taken, those of
 * goroutines in system calls too (with no handoffp: a P in a system call is
 * taken by the stop itself). Counted in the process's own slot, which
 * go_p_lost() reads beside the worker's. Twice a garbage collection.
 */
SEC("uprobe")
int BPF_KPROBE(go_stop_the_world)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;

	if (go_layout_of(tgid))
		go_p_taken(tgid, AT_WORKER_PROCESS);
	return 0;
}

/*
 * runtime.preemptPark(gp): the garbage collector stops gp to scan its stack
 * (suspendG), from running to _Gpreempted with no casgstatus; it goes on
 * when readied (a wake, seen). Its run on this thread ends here: unseen, it
 * stayed open until another began on the thread, and its end was lost.
 */
SEC("uprobe")
int BPF_KPROBE(go_preempt_park)
{
	const struct at_go_layout *l = go_layout();
	struct at_task_state *ts;
	struct at_task_slot *slot;
	struct thread_state *t;
	__u64 gp = ctx->ax, goid;
	__u32 tid;

	if (!l || !gp)
		return 0;
	goid = go_read(gp, l->g_goid);
	t = thread_self(ctx, false, &tid);
	if (!t || t->task != goid)
		return 0;
	ts = task_find(task_key(t->tgid, goid), &slot);
	go_run_ends(t, goid, ts, slot, 0, AT_QUEUE_NONE, false, false, false, go_p_lost(t));
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

/*
 * In runqsteal, past `call runqgrab; test eax, eax; je`: only a steal that
 * took something gets here, EAX of them, into the thief's ring from its
 * runqtail on (not moved yet: the last one it runs at once, the rest it
 * queues). The thief is the P of this thread's M (R14: g0); the victim,
 * where the first one taken was queued, as its wake or spawn said (p2 is
 * in no register by then).
 */
SEC("uprobe")
int BPF_KPROBE(go_runqsteal_took)
{
	const struct at_go_layout *l = go_layout();
	__u32 tid, n = (__u32)ctx->ax, tail, thief, victim = AT_WORKER_UNKNOWN;
	struct at_task_state *ts;
	struct at_task_slot *slot;
	struct thread_state *t;
	__u64 m, pp, first;

	if (!l || l->p_runq <= 0 || !n || n > 256)
		return 0;
	t = thread_self(ctx, true, &tid);
	if (!t)
		return 0;
	m = go_read(ctx->r14, l->g_m);
	pp = m ? go_read(m, l->m_p) : 0;
	if (!pp)
		return 0;
	tail = go_read32(pp, l->p_runqtail);
	thief = go_read32(pp, l->p_id);
	first = go_read(pp + (__u64)(tail % 256) * 8, l->p_runq);
	ts = first ? task_find(task_key(t->tgid, go_read(first, l->g_goid)), &slot) : NULL;
	/* (where its wake queued it, unless that is the thief: a wake seen out of order) */
	if (ts && ts->queued_on >= 0 && (__u32)ts->queued_on != thief)
		victim = (__u32)ts->queued_on;
	/* runqgrab takes half, rounded up: the victim keeps n - 1 or n (n - 1 said) */
	on_steal(t, thief, victim, n,
		 tail - go_read32(pp, l->p_runqhead) + n - 1, n - 1, 0);
	return 0;
}

/* ---- sample mode: the running goroutine, read without a probe ------------ */

/*
 * --mode sample attaches no uprobe. A CPU-clock sample on every CPU, and a
 * followed thread's switch-out (its memory is still the one mapped then),
 * read which goroutine it runs from the runtime's own state: g from the
 * thread pointer, its M's curg, the P's schedtick. A run is one goroutine
 * seen again with the same g.trackingSeq (bumped each time it leaves
 * running) on a P whose schedtick (bumped for each slice a P starts anew)
 * has not moved: it runs from its first sighting to its last, and is then
 * a poll as the probes make them (AT_POLL_SAMPLED). Its time is split into
 * on-CPU, blocked and runnable by sched_switch as a probed poll's is.
 *
 * What a thread runs, as read: g and ident say which run (Go: g, seq |
 * schedtick << 8; an executor's thread-local: its poll count).
 */
struct run_seen {
	__u64 g, goid, startpc;
	__u32 ident, worker, depth;
};

/* fs: the thread's fsbase, its thread pointer */
static __always_inline bool go_run_seen(const struct at_go_layout *l, __u64 fs, struct run_seen *r)
{
	__u64 g, m, p;

	if (!l->tls_g || !fs)
		return false;
	g = go_read(fs, l->tls_g);
	m = g ? go_read(g, l->g_m) : 0;
	r->g = m ? go_read(m, l->m_curg) : 0;
	/* none: the scheduler runs; not running: in a syscall, or off its P */
	if (!r->g || (go_read32(r->g, l->g_status) & ~AT_GO_SCAN) != AT_GO_RUNNING)
		return false;
	p = go_read(m, l->m_p);
	if (!p)
		return false;
	r->goid = go_read(r->g, l->g_goid);
	r->startpc = go_read(r->g, l->g_startpc);
	r->worker = go_read32(p, l->p_id);
	r->depth = go_read32(p, l->p_runqtail) - go_read32(p, l->p_runqhead);
	r->ident = (__u32)go_read8(r->g, l->g_seq) | go_read32(p, l->p_schedtick) << 8;
	return true;
}

/*
 * Executors with the asynctrace probes keep what each worker polls in a
 * thread-local (docs/usdt-abi.md): tgid -> the address of its offset from
 * the thread pointer (asynctrace_current_tpoff).
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, AT_MAX_TARGETS);
	__type(key, __u32);
	__type(value, __u64);
} usdt_currents SEC(".maps");

/* asynctrace_current, version 1 */
struct usdt_current {
	__u64 task, polls, name;
	__u32 worker, version;
};

/* A run there is one poll: (task, polls), polls bumped at each poll's start. */
static __always_inline bool usdt_run_seen(__u64 tpoff_at, __u64 fs, struct run_seen *r)
{
	struct usdt_current c = {};
	__s64 tpoff = 0;

	if (!fs || bpf_probe_read_user(&tpoff, sizeof(tpoff), (const void *)tpoff_at) || !tpoff ||
	    bpf_probe_read_user(&c, sizeof(c), (const void *)(fs + tpoff)) || c.version != 1 ||
	    !c.task)
		return false;
	r->g = c.polls;
	r->goid = c.task;
	r->startpc = c.name;
	r->worker = c.worker;
	r->depth = 0;
	r->ident = 0;
	return true;
}

/*
 * tokio (src/targets/tokio/tokio_current.c): a thread polls a task while its
 * CONTEXT has the task's id and a coop budget (a worker's loop, itself a
 * blocking task, has an id but no budget). Nothing counts polls: a run is
 * the same task seen again, one poll or several (AT_POLL_RUNS), unless the
 * budget, reset for each poll the scheduler starts, went up in between.
 */
static __always_inline bool tokio_run_seen(struct thread_state *t,
					   const struct at_tokio_process *p, __u64 fs,
					   struct run_seen *r)
{
	__u64 id[2] = {};
	__u8 budget[2] = {};
	__u64 ctx;

	if (!fs || !p->ctx_tpoff)
		return false;
	ctx = fs + (__u64)p->ctx_tpoff;
	/* ids count up from 1: an address there would be another field read */
	if (bpf_probe_read_user(id, sizeof(id), (const void *)(ctx + p->ctx_task_id)) ||
	    id[0] != 1 || !id[1] || id[1] >> 40 ||
	    bpf_probe_read_user(budget, sizeof(budget), (const void *)(ctx + p->ctx_budget)) ||
	    budget[0] != 1)
		return false;
	if (!t->has_worker) {
		t->own_worker = tokio_new_worker(t->tgid);
		t->has_worker = 1;
	}
	r->g = id[1];
	r->goid = id[1];
	r->startpc = 0;
	r->worker = t->own_worker;
	r->depth = 0;
	/* budget left: a run whose budget grew back is a poll begun anew */
	r->ident = budget[1];
	return true;
}

/*
 * The run in progress on thread t ended after it was last seen: a poll
 * from its first sighting to its last, with its times as they were then.
 * What a goroutine is now says how it ended: done, back in a queue
 * (preempted, if the runtime asked it to yield), or waiting (l: Go's
 * layout; NULL, an executor's thread-local, which does not say).
 */
static __always_inline void sample_close(struct thread_state *t, const struct at_go_layout *l)
{
	__u32 status = l ? go_read32(t->s_g, l->g_status) & ~AT_GO_SCAN : 0;
	struct at_task_state *ts;
	struct at_task_slot *slot;
	__u64 task = t->task;

	t->oncpu = t->s_oncpu;
	t->blocked = t->s_blocked;
	t->runnable = t->s_runnable;
	t->nr_blocked = t->s_nr_blocked;
	t->nr_preempted = t->s_nr_preempted;
	t->since = t->s_last;
	t->off_cpu = 0;
	ts = task_find(task_key(t->tgid, task), &slot);
	/* preempted: back in a queue, or running again already, as the runtime asked */
	poll_end_at(t, task, ts, slot, status == AT_GO_DEAD,
		    status == AT_GO_RUNNABLE ? AT_QUEUE_INJECT : AT_QUEUE_NONE, 0, false, false,
		    l && (status == AT_GO_RUNNABLE || status == AT_GO_RUNNING) &&
			    (t->s_preempt || go_read8(t->s_g, l->g_preempt)),
		    t->s_last, t->s_charged, AT_POLL_SAMPLED | (t->s_runs ? AT_POLL_RUNS : 0));
}

/* The run in progress on t goes on at least until now: its times as they are. */
static __always_inline void sample_seen(struct thread_state *t, __u64 now, __u64 charged)
{
	t->s_last = now;
	t->s_oncpu = t->oncpu;
	t->s_blocked = t->blocked;
	t->s_runnable = t->runnable;
	t->s_nr_blocked = t->nr_blocked;
	t->s_nr_preempted = t->nr_preempted;
	t->s_charged = charged;
}

/*
 * Thread t (fs: its thread pointer; the current thread) seen now: its run
 * goes on, ends, or begins. At a switch-out (switching), a thread that runs
 * no task and had no run open is let be: the switches of an idle thread,
 * most of a server's, cost three reads and no more; runs are opened by
 * samples (and by a switch-out inside a task's run: it may be blocking), so
 * the work beyond those reads goes at the rate of the samples, not of the
 * switches.
 *
 * A global function: the verifier checks it once, on its own, with any
 * arguments. Inlined into sched_switch's program and the sample's, its
 * paths multiplied theirs to within a few percent of the verifier's limit
 * of a million instructions, and past it for some sample periods.
 */
__noinline int sample_observe(struct thread_state *t, __u64 fs, bool switching)
{
	const struct at_go_layout *l;
	const struct at_tokio_process *tp = NULL;
	struct at_task_state *ts;
	struct at_task_slot *slot;
	struct run_seen r = {};
	__u64 *current = NULL;
	bool running;
	__u64 now;

	if (!t)
		return 0;
	l = bpf_map_lookup_elem(&go_layouts, &t->tgid);
	if (!l)
		current = bpf_map_lookup_elem(&usdt_currents, &t->tgid);
	if (!l && !current)
		tp = bpf_map_lookup_elem(&tokio_bases, &t->tgid);
	if (!l && !current && (!tp || !tp->ctx_tpoff))
		return 0;
	if (tgid_in(probed_tgids, t->tgid)) {
		/* escalated: its probes see its polls; a run the samples had open ends where last seen */
		if (t->task && t->s_last)
			sample_close(t, l);
		return 0;
	}
	/* a poll its probes began, and will not end: they were detached */
	if (t->task && !t->s_last)
		t->task = 0;
	if (l)
		running = go_run_seen(l, fs, &r);
	else if (current)
		running = usdt_run_seen(*current, fs, &r);
	else
		running = tp && tokio_run_seen(t, tp, fs, &r);
	if (switching && !running && !t->task)
		return 0;
	/* tokio's budget only goes down within a poll: up, a new one */
	if (t->task && (!running || r.g != t->s_g ||
			(tp ? r.ident > t->s_ident : r.ident != t->s_ident)))
		sample_close(t, l);
	if (!running)
		return 0;
	if (!t->task) {
		ts = task_find(task_key(t->tgid, r.goid), &slot);
		on_poll_begin(t, r.goid, ts, slot, r.worker, r.depth,
			      ts && ts->name_addr ? ts->name_addr : r.startpc);
		t->s_g = r.g;
		t->s_preempt = 0;
		t->s_runs = tp != NULL;
	}
	t->s_ident = r.ident;
	now = bpf_ktime_get_ns();
	on_cpu_until(t, now);
	sample_seen(t, now, charged_cpu());
	return 0;
}

/*
 * Thread t (next, not yet running its own code) takes a CPU with a run in
 * progress: the run went on at least until now, as a thread off its CPU
 * cannot end it, and comes back to the very code it left (a blocked poll
 * seen asleep is so measured to its wake, though no sample may fall in
 * the little it then runs).
 */
static __always_inline void sample_switch_in(struct task_struct *next, const bool direct)
{
	struct thread_state *t;

	if (!sample_period_ns || !tgid_traced(TASK_READ(next, tgid, direct)))
		return;
	t = thread_find(TASK_READ(next, pid, direct));
	/* (s_last: a sampled run's, not an escalated process's probed poll) */
	if (t && t->task && !t->off_cpu && t->s_last)
		sample_seen(t, bpf_ktime_get_ns(),
			    TASK_READ(next, utime, direct) + TASK_READ(next, stime, direct));
}

/*
 * The runtime asks a goroutine to yield with SIGURG to its thread (Go's
 * preemption, since 1.14): what ends that run is then a preemption.
 */
SEC("?tp_btf/signal_generate")
int BPF_PROG(sample_signal, int sig, struct kernel_siginfo *info, struct task_struct *task)
{
	struct thread_state *t;

	if (sig != 23 /* SIGURG */ || !tgid_traced(task->tgid))
		return 0;
	t = thread_find(task->pid);
	if (t && t->task)
		t->s_preempt = 1;
	return 0;
}

/* ---- sched_switch ----------------------------------------------------- */

/*
 * Sample mode: a followed thread (prev, the current task) seen as it goes to
 * sleep. Preempted, it comes back to the very code it left, so there is
 * nothing to see that the next sight would not (and a busy host preempts
 * often).
 */
static __always_inline void sample_switch_out(struct task_struct *prev, bool preempt,
					      const bool direct)
{
	struct thread_state *t;
	__u32 tgid = TASK_READ(prev, tgid, direct);

	if (!sample_period_ns || preempt || !tgid_traced(tgid) ||
	    (TASK_READ(prev, flags, direct) & PF_EXITING) || task_state(prev, direct) == 0)
		return;
	t = thread_get(TASK_READ(prev, pid, direct), tgid);
	if (t)
		sample_observe(t, BPF_CORE_READ(prev, thread.fsbase), true);
}

SEC("?tp_btf/sched_switch")
int BPF_PROG(handle_sched_switch, bool preempt, struct task_struct *prev,
	     struct task_struct *next)
{
	sample_switch_out(prev, preempt, true);
	go_switch_out(prev, preempt, true);
	on_switch(ctx, preempt, prev, next, true);
	go_switch_in(next, true);
	sample_switch_in(next, true);
	return 0;
}

SEC("?raw_tp/sched_switch")
int BPF_PROG(handle_sched_switch_raw, bool preempt, struct task_struct *prev,
	     struct task_struct *next)
{
	sample_switch_out(prev, preempt, false);
	go_switch_out(prev, preempt, false);
	on_switch(ctx, preempt, prev, next, false);
	go_switch_in(next, false);
	sample_switch_in(next, false);
	return 0;
}

/* ---- stacks of long polls (--stacks) ------------------------------------ */

/*
 * A CPU-clock sample of a thread of a followed process (each has its perf
 * event: src/source/thread_samples.c): in sample mode, it is seen
 * (sample_observe()); inside a poll that has run stack_after_ns already, it
 * gets its user registers and the top of its stack recorded. A thread the
 * maps do not follow (a process let go, its events not closed yet) returns
 * after a map lookup.
 * (The blocked half is in on_switch: core.bpf.h.)
 */
SEC("?perf_event")
int on_cpu_sample(struct bpf_perf_event_data *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id;
	struct thread_state *t;
	struct at_stack *e;
	__u64 now;

	if (sample_period_ns) {
		t = thread_get(tid, id >> 32);
		if (t)
			sample_observe(t, BPF_CORE_READ(bpf_get_current_task_btf(), thread.fsbase),
				       false);
	} else {
		t = thread_find(tid);
	}
	if (!stack_after_ns || !t || !t->task)
		return 0;
	now = bpf_ktime_get_ns();
	if (now - t->begin < stack_after_ns)
		return 0;
	e = event_reserve(AT_EV_STACK, sizeof(*e), t);
	if (!e)
		return 0;
	stack_fill(ctx, e, t, bpf_get_current_task_btf(), now, AT_STACK_ONCPU);
	event_submit(e);
	return 0;
}

/* ---- processes that start (following the host) -------------------------- */

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

/* ---- the floor --------------------------------------------------------- */

/*
 * --empty-programs (benchmarks): these replace every program above at the
 * same attach points, and do nothing. What tracing costs beyond them is our
 * BPF code; what they cost is the probe traps and the hooks themselves.
 */
SEC("?uprobe")
int floor_usdt(struct pt_regs *ctx)
{
	return 0;
}

SEC("?uprobe")
int floor_uprobe(struct pt_regs *ctx)
{
	return 0;
}

SEC("?uretprobe")
int floor_uretprobe(struct pt_regs *ctx)
{
	return 0;
}

SEC("?tp_btf/sched_switch")
int BPF_PROG(floor_sched_switch)
{
	return 0;
}

SEC("?raw_tp/sched_switch")
int BPF_PROG(floor_sched_switch_raw)
{
	return 0;
}
