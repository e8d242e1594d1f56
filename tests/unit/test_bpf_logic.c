// SPDX-License-Identifier: MIT
/*
 * The BPF programs themselves (bpf/asynctraced.bpf.c), compiled as ordinary
 * C against a simulated kernel (tests/unit/bpf_shim: maps, clock, threads,
 * CPUs, ring buffers; the target's memory is this process's), driven event
 * by event in orders a real run only hits by chance: a poll_end probe that
 * fires after the task was polled again elsewhere, a wake that comes after
 * its task finished, a program preempted between two of its own steps
 * (AT_RACE_POINT). Each test is a race a real run once lost, pinned down.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>
#include <cmocka.h>

#pragma GCC diagnostic ignored "-Wmissing-prototypes"
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wsign-compare"
#pragma GCC diagnostic ignored "-Wattributes"
#include "asynctraced.bpf.c"
#pragma GCC diagnostic warning "-Wmissing-prototypes"

/* ---- the simulated kernel ------------------------------------------------ */

#define NR_CPUS 4
#define TGID 4242

struct shim_map {
	void *def;
	int type;
	size_t key_size, value_size, max;
	char *data;		/* arrays: the values (per CPU: NR_CPUS rows); hashes: entries */
	bool *used;
	uint64_t *age;		/* hashes: last use, for LRU eviction */
	size_t high;		/* hashes: entries ever used */
};

static struct shim_map maps[32];
static size_t nr_maps;
static uint64_t clock_ns, use_clock;
static __u32 cur_cpu, cur_tid, cur_tgid = TGID;
static __u64 cookie;

/* records submitted to the ring buffers, in order */
static void *records[4096];
static size_t nr_records;

static void map_add(void *def, int type, size_t key_size, size_t value_size, size_t max)
{
	struct shim_map *m = &maps[nr_maps++];
	size_t rows = type == BPF_MAP_TYPE_PERCPU_ARRAY ? NR_CPUS : 1;

	assert_true(nr_maps <= sizeof(maps) / sizeof(maps[0]));
	m->def = def;
	m->type = type;
	m->key_size = key_size;
	m->value_size = value_size;
	m->max = max;
	m->data = calloc(rows * max, key_size + value_size);
	m->used = calloc(max, sizeof(*m->used));
	m->age = calloc(max, sizeof(*m->age));
	assert_non_null(m->data);
}

#define MAP(def)                                                                                   \
	map_add(&(def), sizeof(*(def).type) / sizeof(int), sizeof(*(def).key),                    \
		sizeof(*(def).value), sizeof(*(def).max_entries) / sizeof(int))

static struct shim_map *map_of(void *def)
{
	for (size_t i = 0; i < nr_maps; i++)
		if (maps[i].def == def)
			return &maps[i];
	fail_msg("a program used a map the shim does not know");
	return NULL;
}

static bool is_hash(const struct shim_map *m)
{
	return m->type == BPF_MAP_TYPE_HASH || m->type == BPF_MAP_TYPE_LRU_HASH;
}

static char *entry(const struct shim_map *m, size_t i)
{
	return m->data + i * (m->key_size + m->value_size);
}

static ssize_t hash_find(struct shim_map *m, const void *key)
{
	for (size_t i = 0; i < m->high; i++)
		if (m->used[i] && !memcmp(entry(m, i), key, m->key_size))
			return (ssize_t)i;
	return -1;
}

void *bpf_map_lookup_elem(void *def, const void *key)
{
	struct shim_map *m;
	ssize_t i;
	__u32 k;

	if (def == &rings)
		return *(const __u32 *)key < NR_CPUS ? &rings : NULL;
	m = map_of(def);
	if (is_hash(m)) {
		i = hash_find(m, key);
		if (i < 0)
			return NULL;
		m->age[i] = ++use_clock;
		return entry(m, (size_t)i) + m->key_size;
	}
	k = *(const __u32 *)key;
	if (k >= m->max)
		return NULL;
	if (m->type == BPF_MAP_TYPE_PERCPU_ARRAY)
		k += cur_cpu * (__u32)m->max;
	return m->data + (size_t)k * m->value_size;
}

long bpf_map_update_elem(void *def, const void *key, const void *value, __u64 flags)
{
	struct shim_map *m = map_of(def);
	ssize_t i = hash_find(m, key);
	size_t free_i = SIZE_MAX, oldest = 0;

	assert_true(is_hash(m));
	if (i >= 0) {
		if (flags == BPF_NOEXIST)
			return -EEXIST;
		memcpy(entry(m, (size_t)i) + m->key_size, value, m->value_size);
		return 0;
	}
	if (flags == BPF_EXIST)
		return -ENOENT;
	for (size_t j = 0; j < m->max && free_i == SIZE_MAX; j++)
		if (!m->used[j])
			free_i = j;
	if (free_i == SIZE_MAX) {
		if (m->type != BPF_MAP_TYPE_LRU_HASH)
			return -E2BIG;
		for (size_t j = 1; j < m->max; j++)
			if (m->age[j] < m->age[oldest])
				oldest = j;
		free_i = oldest;
	}
	/* a freed element is reused at once, as a preallocated BPF hash does */
	memcpy(entry(m, free_i), key, m->key_size);
	memcpy(entry(m, free_i) + m->key_size, value, m->value_size);
	m->used[free_i] = true;
	m->age[free_i] = ++use_clock;
	if (free_i >= m->high)
		m->high = free_i + 1;
	return 0;
}

long bpf_map_delete_elem(void *def, const void *key)
{
	struct shim_map *m = map_of(def);
	ssize_t i = hash_find(m, key);

	if (i < 0)
		return -ENOENT;
	m->used[i] = false;
	return 0;
}

__u64 bpf_ktime_get_ns(void)
{
	return clock_ns += 100;
}

__u32 bpf_get_smp_processor_id(void)
{
	return cur_cpu;
}

__u64 bpf_get_current_pid_tgid(void)
{
	return (__u64)cur_tgid << 32 | cur_tid;
}

/* The kernel's tick (CONFIG_HZ), and the thread the probes fire on, as the kernel charges it. */
unsigned int CONFIG_HZ = 250;
static struct task_struct current_task;

struct task_struct *bpf_get_current_task_btf(void)
{
	return &current_task;
}

/* the user registers the kernel saved at its entry, for --stacks' samples */
static struct pt_regs user_regs;

long bpf_task_pt_regs(struct task_struct *task)
{
	return (long)&user_regs;
}

/* The kernel's stack where a thread went to sleep (three frames), and its user stack's walk. */
static const __u64 kernel_stack[] = { 0xffffffff81001000, 0xffffffff81002000,
				      0xffffffff81003000 };
static const __u64 user_walk[] = { 0x401000, 0x402000 };

long bpf_get_stack(void *ctx, void *buf, __u32 size, __u64 flags)
{
	const __u64 *from = flags == BPF_F_USER_STACK ? user_walk : kernel_stack;
	__u32 n = flags == BPF_F_USER_STACK ? sizeof(user_walk) : sizeof(kernel_stack);

	assert_true(flags == 0 || flags == BPF_F_USER_STACK);
	n = size < n ? size : n;
	memcpy(buf, from, n);
	return n;
}

__u64 bpf_get_attach_cookie(void *ctx)
{
	return cookie;
}

void *bpf_ringbuf_reserve(void *ringbuf, __u64 size, __u64 flags)
{
	return nr_records < sizeof(records) / sizeof(records[0]) ? calloc(1, size) : NULL;
}

void bpf_ringbuf_submit(void *data, __u64 flags)
{
	records[nr_records++] = data;
}

/* births (following the host): what on_exec and on_fork told */
static __u32 told[16];
static int nr_told;

long bpf_ringbuf_output(void *ringbuf, void *data, __u64 size, __u64 flags)
{
	if (nr_told == sizeof(told) / sizeof(told[0]) || size != sizeof(told[0]))
		return -EBUSY;
	memcpy(&told[nr_told++], data, size);
	return 0;
}

long bpf_probe_read_user(void *dst, __u32 size, const void *src)
{
	if (!src) {
		memset(dst, 0, size);
		return -EFAULT;
	}
	memcpy(dst, src, size);
	return 0;
}

long bpf_probe_read_kernel(void *dst, __u32 size, const void *src)
{
	return bpf_probe_read_user(dst, size, src);
}

long bpf_probe_read_user_str(void *dst, __u32 size, const void *src)
{
	if (!src)
		return -EFAULT;
	snprintf(dst, size, "%s", (const char *)src);
	return (long)strnlen(dst, size - 1) + 1;
}

long bpf_loop(__u32 nr_loops, void *callback_fn, void *callback_ctx, __u64 flags)
{
	long (*step)(__u32, void *) = (long (*)(__u32, void *))callback_fn;
	__u32 i;

	for (i = 0; i < nr_loops; i++)
		if (step(i, callback_ctx))
			return i + 1;
	return i;
}

/* What runs when a program reaches a race point: once, then forgotten. */
static const char *race_at;
static void (*race_fn)(void);

void shim_race_point(const char *where)
{
	void (*fn)(void) = race_fn;

	if (fn && !strcmp(where, race_at)) {
		race_fn = NULL;
		fn();
	}
}

static void race(const char *where, void (*fn)(void))
{
	race_at = where;
	race_fn = fn;
}

/* ---- threads of the target, and the probes they hit ----------------------- */

struct thread {
	__u32 tid, cpu;
	__u32 tgid;		/* 0: TGID's */
	struct pt_regs regs;	/* a probe's context: its address is the thread's too */
};

static struct thread w0 = { .tid = 101, .cpu = 0 };
static struct thread w1 = { .tid = 102, .cpu = 1 };
static struct thread other = { .tid = 103, .cpu = 2 }; /* not a worker: a timer, an I/O thread */

/* USDT arguments sit in the registers of the x86-64 calling convention. */
static const short arg_regs[] = {
	offsetof(struct pt_regs, di), offsetof(struct pt_regs, si), offsetof(struct pt_regs, dx),
	offsetof(struct pt_regs, cx), offsetof(struct pt_regs, r8), offsetof(struct pt_regs, r9),
};

static struct pt_regs *on(struct thread *th, __u64 a0, __u64 a1, __u64 a2, __u64 a3, __u64 a4)
{
	cur_tid = th->tid;
	cur_cpu = th->cpu;
	cur_tgid = th->tgid ? th->tgid : TGID;
	th->regs.di = a0;
	th->regs.si = a1;
	th->regs.dx = a2;
	th->regs.cx = a3;
	th->regs.r8 = a4;
	return &th->regs;
}

static void spawn(struct thread *th, __u64 task, int queue)
{
	usdt_task_spawn(on(th, task, 0, (__u64)(uintptr_t) "task", (__u64)queue, 1));
}

static void poll_begin(struct thread *th, __u64 task, __u32 worker)
{
	usdt_poll_begin(on(th, task, worker, 0, (__u64)(uintptr_t) "task", 0));
}

static void poll_end(struct thread *th, __u64 task, __u32 worker, int ready, int queue)
{
	usdt_poll_end(on(th, task, worker, (__u64)ready, (__u64)queue, queue >= 0));
}

/* A wake from th, from inside waker's poll (0: from outside any poll). */
static void wake(struct thread *th, __u64 task, __u64 waker, int waker_worker, int queue)
{
	usdt_wake(on(th, task, waker, (__u64)waker_worker, (__u64)queue, queue >= 0));
}

/* ---- what the programs left behind ---------------------------------------- */

/* A task of the process TGID, as the maps know it. */
#define K(id) task_key(TGID, id)

/* The task's state wherever it lives (NULL: none), as a reader finds it. */
static struct at_task_state *state_of(__u64 task)
{
	struct at_task_slot *slot;

	return task_find(K(task), &slot);
}

/* Whether the task holds a slot, or an entry of the tasks hash. */
static bool holds_anything(__u64 task)
{
	struct at_task_key k = K(task);
	struct at_task_slot *slot = task_slot(k);

	return (slot && slot_holds(slot, k)) || bpf_map_lookup_elem(&tasks, &k);
}

/* What the sampler would report: returned Pending and not woken since. */
static __u64 idle_since(__u64 task)
{
	struct at_task_state *st = state_of(task);

	return st ? at_task_idle_since(st) : 0;
}

/* The statistics of a task in its slot (the tests' tasks live in slots). */
static struct at_task_stats *stats_of(__u64 task)
{
	struct at_task_key k = K(task);
	struct at_task_slot *slot = task_slot(k);

	return slot && slot_holds(slot, k) ? &slot->s : bpf_map_lookup_elem(&task_stats, &k);
}

/* A task id of TGID whose slot is the same as task's, and not task. */
static __u64 same_slot_as(__u64 task)
{
	struct at_task_slot *want = task_slot(K(task));

	for (__u64 id = task + 1;; id++)
		if (task_slot(K(id)) == want)
			return id;
}

static int setup(void **state)
{
	struct at_usdt_spec *spec;
	__u32 zero = 0;

	nr_maps = 0;
	MAP(thread_slots);
	MAP(threads);
	MAP(task_slots);
	MAP(tasks);
	MAP(task_stats);
	MAP(steals);
	MAP(stats);
	MAP(runtime_counts);
	MAP(cpu_thread);
	MAP(tokio_vtables);
	MAP(tokio_hdrs);
	MAP(usdt_specs);
	MAP(worker_slots);
	MAP(target_flags);
	MAP(tokio_next_worker);
	MAP(tokio_bases);
	MAP(stack_scratch);
	MAP(asleep_stacks);
	MAP(go_layouts);
	/* every site's spec, id 0 (the attach cookie here): six register arguments */
	spec = bpf_map_lookup_elem(&usdt_specs, &zero);
	spec->known = 1;
	spec->nr_args = 6;
	for (int i = 0; i < 6; i++) {
		spec->args[i].kind = AT_USDT_ARG_REG;
		spec->args[i].reg_off = (__u16)arg_regs[i];
	}
	memset(worker_stats, 0, sizeof(worker_stats));
	rq_clock_known = false;
	memset(traced_tgids, 0, sizeof(traced_tgids));
	/* the process under test is followed (follow()); others are not, unless a test says */
	traced_tgids[TGID / 64] |= 1ull << (TGID % 64);
	rq_clock_offset = 0;
	memset(&runtime_stats, 0, sizeof(runtime_stats));
	memset(&current_task, 0, sizeof(current_task));
	memset(tokio_depth, 0, sizeof(tokio_depth));
	memset(worker_idle, 0, sizeof(worker_idle));
	worker_slots_hi = 0;
	thread_self_off = 0;
	tokio_hdr_cache_off = 0;
	clock_ns = 1000000;
	race_fn = NULL;
	return 0;
}

static int teardown(void **state)
{
	for (size_t i = 0; i < nr_maps; i++) {
		free(maps[i].data);
		free(maps[i].used);
		free(maps[i].age);
	}
	for (size_t i = 0; i < nr_records; i++)
		free(records[i]);
	nr_records = 0;
	return 0;
}

/* ---- a poll_end probe that fires late ------------------------------------- */

/*
 * A poll returns Pending and the runtime marks the task idle; before the
 * worker reaches its poll_end probe, a wake queues the task, another worker
 * polls it to completion. The late poll_end must not bring the finished task
 * back as one waiting to be woken: the lost-waker alerts of `make test` on a
 * slow machine ("task 'request' returned Pending 1.58 s ago").
 */
static void late_poll_end_after_the_task_finished(void **state)
{
	spawn(&w0, 7, 0);
	poll_begin(&w0, 7, 0);
	/* w0's poll returned Pending; w0 is slow to reach its probe */
	wake(&other, 7, 0, -1, AT_QUEUE_INJECT);
	poll_begin(&w1, 7, 1);
	poll_end(&w1, 7, 1, 1, AT_QUEUE_NONE);
	poll_end(&w0, 7, 0, 0, AT_QUEUE_NONE);

	assert_int_equal(idle_since(7), 0);
	assert_false(holds_anything(7));
}

/* The same, with the next poll still running (or requeued) when the late probe fires. */
static void late_poll_end_during_the_next_poll(void **state)
{
	spawn(&w0, 7, 0);
	poll_begin(&w0, 7, 0);
	wake(&other, 7, 0, -1, AT_QUEUE_INJECT);
	poll_begin(&w1, 7, 1);
	poll_end(&w0, 7, 0, 0, AT_QUEUE_NONE);
	assert_int_equal(idle_since(7), 0);

	/* the next poll is woken while it runs, and requeued: still not idle */
	wake(&other, 7, 0, -1, AT_QUEUE_NONE);
	poll_end(&w1, 7, 1, 0, 1);
	assert_int_equal(idle_since(7), 0);
}

/* What it must still see: a task that returned Pending and was not woken. */
static void idle_after_its_latest_poll(void **state)
{
	spawn(&w0, 7, 0);
	poll_begin(&w0, 7, 0);
	poll_end(&w0, 7, 0, 0, AT_QUEUE_NONE);
	assert_int_not_equal(idle_since(7), 0);

	wake(&other, 7, 0, -1, AT_QUEUE_INJECT);
	assert_int_equal(idle_since(7), 0);
	poll_begin(&w1, 7, 1);
	assert_int_equal(idle_since(7), 0);
	poll_end(&w1, 7, 1, 0, AT_QUEUE_NONE);
	assert_int_not_equal(idle_since(7), 0);
}

/* A task older than the session, first met at a poll, can still be found idle. */
static void idle_task_first_met_at_its_poll(void **state)
{
	poll_begin(&w0, 9, 0);
	poll_end(&w0, 9, 0, 0, AT_QUEUE_NONE);
	assert_int_not_equal(idle_since(9), 0);
}

/* ---- wakes ------------------------------------------------------------------ */

/*
 * A wake that lands while the next poll of its task takes the count of
 * earlier wakes: counted once, by one poll or the next, never lost.
 */
static void other_wake(void)
{
	wake(&other, 7, 0, -1, AT_QUEUE_NONE);
}

static void wake_while_poll_begin_takes_the_count(void **state)
{
	spawn(&w0, 7, 0);
	poll_begin(&w0, 7, 0);
	poll_end(&w0, 7, 0, 0, AT_QUEUE_NONE);
	wake(&other, 7, 0, -1, AT_QUEUE_INJECT);
	race("poll_begin:wakes", other_wake);
	poll_begin(&w1, 7, 1);
	assert_null(race_fn); /* it ran */
	poll_end(&w1, 7, 1, 0, 1);
	poll_begin(&w1, 7, 1);
	poll_end(&w1, 7, 1, 0, AT_QUEUE_NONE);

	/* the spawn counts as a wake of its first poll */
	assert_int_equal(stats_of(7)->wakes, 3);
}

/*
 * A waker kept after its task finished (a channel's sender, a timer that was
 * not cancelled) wakes it late: a finished task is not a new one to keep.
 * Kept, it would hold its slot for the rest of the session.
 */
static void late_wake_of_a_finished_task(void **state)
{
	spawn(&w0, 7, 0);
	poll_begin(&w0, 7, 0);
	poll_end(&w0, 7, 0, 1, AT_QUEUE_NONE);
	wake(&other, 7, 0, -1, AT_QUEUE_NONE);

	assert_false(holds_anything(7));
	/* a runtime may reuse ids: a spawn is a new task */
	spawn(&w0, 7, 0);
	assert_true(holds_anything(7));
}

/* Even once another task finished in its slot since: no slot for a late wake. */
static void late_wake_never_takes_a_slot(void **state)
{
	__u64 b = same_slot_as(7);
	struct at_task_slot *slot = task_slot(K(7));

	spawn(&w0, 7, 0);
	poll_begin(&w0, 7, 0);
	poll_end(&w0, 7, 0, 1, AT_QUEUE_NONE);
	spawn(&w0, b, 0);
	poll_begin(&w0, b, 0);
	poll_end(&w0, b, 0, 1, AT_QUEUE_NONE);
	wake(&other, 7, 0, -1, AT_QUEUE_NONE);

	assert_int_equal(slot->task, 0);
}

/* A task older than the session, first met at a wake that queued it, gets its slot. */
static void woken_old_task_gets_its_slot(void **state)
{
	wake(&other, 9, 0, -1, AT_QUEUE_INJECT);
	assert_int_equal(task_slot(K(9))->task, 9);
	poll_begin(&w0, 9, 0);
	assert_int_not_equal(records[0] ? ((struct at_wake *)records[0])->wake_id : 0, 0);
}

/*
 * A task met first at a wake that queued nothing (tokio's wakes say nothing
 * of queues) lives in the hash until its poll proves it alive: then it moves
 * to its slot, with its pending wake and its statistics.
 */
static void hashed_task_moves_to_its_slot_when_polled(void **state)
{
	__u64 wake_id;

	wake(&other, 9, 0, -1, AT_QUEUE_NONE);
	assert_int_equal(task_slot(K(9))->task, 0);
	assert_non_null(bpf_map_lookup_elem(&tasks, &(struct at_task_key){ .id = 9, .tgid = TGID }));
	wake_id = ((struct at_wake *)records[nr_records - 1])->wake_id;
	assert_int_not_equal(wake_id, 0);

	poll_begin(&w0, 9, 0);
	assert_int_equal(task_slot(K(9))->task, 9);
	assert_null(bpf_map_lookup_elem(&tasks, &(struct at_task_key){ .id = 9, .tgid = TGID }));
	poll_end(&w0, 9, 0, 0, AT_QUEUE_NONE);
	/* the poll answered the wake, and counted it */
	assert_int_equal(((struct at_poll *)records[nr_records - 1])->wake_id, wake_id);
	assert_int_equal(stats_of(9)->wakes, 1);
	assert_int_not_equal(idle_since(9), 0);
}

/*
 * A wake found its task's slot, then (preempted) the task finished and
 * another task took the slot before the wake wrote: the new task must not
 * take the old one's wake, or its next poll would answer a wake it never
 * had (a false arrow, a false scheduling delay).
 */
static __u64 newcomer;

static void finish_and_reuse_the_slot(void)
{
	poll_begin(&w0, 7, 0);
	poll_end(&w0, 7, 0, 1, AT_QUEUE_NONE);
	spawn(&w1, newcomer, 1);
	poll_begin(&w1, newcomer, 1);
	poll_end(&w1, newcomer, 1, 0, AT_QUEUE_NONE);
}

static void stale_slot_after_the_wake_found_it(void **state)
{
	newcomer = same_slot_as(7);
	spawn(&w0, 7, 0);
	poll_begin(&w0, 7, 0);
	poll_end(&w0, 7, 0, 0, AT_QUEUE_NONE);

	race("wake:found", finish_and_reuse_the_slot);
	wake(&other, 7, 0, -1, AT_QUEUE_INJECT);
	assert_null(race_fn);

	assert_int_equal(task_slot(K(7))->task, newcomer);
	assert_int_equal(state_of(newcomer)->wake_id, 0);
	assert_int_not_equal(idle_since(newcomer), 0);
	/* nor the old wake's time: its next poll (a runtime's requeue, say) answers no wake */
	poll_begin(&w1, newcomer, 1);
	poll_end(&w1, newcomer, 1, 0, AT_QUEUE_NONE);
	assert_int_equal(((struct at_poll *)records[nr_records - 1])->wake_ts, 0);
	assert_int_equal(((struct at_poll *)records[nr_records - 1])->wake_id, 0);
}

/*
 * The loader's settings are read-only data, as in BPF (const volatile): a
 * test that needs another one makes its page writable first.
 */
static void set_config(const volatile void *var, const void *value, size_t size)
{
	long page = sysconf(_SC_PAGESIZE);
	uintptr_t start = (uintptr_t)var & ~(uintptr_t)(page - 1);
	uintptr_t end = ((uintptr_t)var + size + (uintptr_t)page - 1) & ~(uintptr_t)(page - 1);

	assert_int_equal(mprotect((void *)start, end - start, PROT_READ | PROT_WRITE), 0);
	memcpy((void *)(uintptr_t)var, value, size);
}

/* ---- sched_switch ----------------------------------------------------------- */

/* Where a worker of process tgid was between polls: its slot's. */
static struct at_worker_idle *idle_of(__u32 tgid, __u32 worker)
{
	struct at_worker_key k = { .tgid = tgid, .worker = worker };
	__u32 *slot = bpf_map_lookup_elem(&worker_slots, &k);

	assert_non_null(slot);
	assert_true(*slot < AT_MAX_WORKERS);
	assert_int_equal(worker_idle[*slot].owner, at_worker_owner(tgid, worker));
	return &worker_idle[*slot];
}

/* The statistics of a worker of process tgid. */
static struct at_worker_stats *stats_of_worker(__u32 tgid, __u32 worker)
{
	struct at_worker_key k = { .tgid = tgid, .worker = worker };
	__u32 *slot = bpf_map_lookup_elem(&worker_slots, &k);

	assert_non_null(slot);
	return &worker_stats[*slot];
}

static struct task_struct kthread_w0 = { .pid = 101, .tgid = TGID };
static struct task_struct kthread_else = { .pid = 7, .tgid = 7 }; /* another process */

/* Userspace's part: sched_switch accounts this process's threads. */
static void follow(__u32 tgid)
{
	traced_tgids[tgid / 64] |= 1ull << (tgid % 64);
}

/* ... and what its runtime offers (enum at_target_flag), before its threads are met. */
static void offers(__u32 tgid, __u32 flags)
{
	assert_int_equal(bpf_map_update_elem(&target_flags, &tgid, &flags, BPF_ANY), 0);
}

static void sched_switch(bool preempt, struct task_struct *prev, struct task_struct *next)
{
	unsigned long long ctx[3] = { preempt, (uintptr_t)prev, (uintptr_t)next };

	cur_cpu = 0;
	handle_sched_switch(ctx);
}

/*
 * Where a worker was between polls: asleep (idle, waiting for work), or on a
 * run queue (preempted, or slow to run once woken: the host's contention),
 * which the kernel's run_delay says once the thread has run again. Inside a
 * poll that time is the poll's own (blocked, runnable) instead.
 */
/*
 * sched_switch accounts the threads of the processes followed, by their
 * tgid's bit, and no other: not one whose tgid shares a word or a bit
 * position with a followed one.
 */
static void only_followed_processes_are_accounted(void **state)
{
	struct task_struct same_word = { .pid = 101, .tgid = TGID ^ 1, .__state = 1 };
	struct task_struct same_bit = { .pid = 101, .tgid = TGID + 64, .__state = 1 };

	follow(TGID);
	poll_begin(&w0, 7, 3);
	poll_end(&w0, 7, 3, 0, AT_QUEUE_NONE);
	/* a thread with the worker's tid (as another pid namespace would show it) */
	sched_switch(false, &same_word, &kthread_else);
	sched_switch(false, &same_bit, &kthread_else);
	assert_int_equal(idle_of(TGID, 3)->asleep_since, 0);
	kthread_w0.__state = 1;
	sched_switch(false, &kthread_w0, &kthread_else);
	assert_int_not_equal(idle_of(TGID, 3)->asleep_since, 0);
	kthread_w0.__state = 0;
}

static void worker_waits_for_a_cpu_between_polls(void **state)
{
	__u32 tgid = TGID;

	follow(tgid);
	kthread_w0.sched_info.run_delay = 1000;
	poll_begin(&w0, 7, 3);
	poll_end(&w0, 7, 3, 0, AT_QUEUE_NONE);
	sched_switch(true, &kthread_w0, &kthread_else);	/* the first look: a baseline */
	assert_int_equal(idle_of(TGID, 3)->cpu_wait_ns, 0);

	/* preempted, back after 5 ms on the run queue: known when it leaves again */
	kthread_w0.sched_info.run_delay += 5000000;
	sched_switch(false, &kthread_else, &kthread_w0);
	kthread_w0.__state = 1;
	sched_switch(false, &kthread_w0, &kthread_else);	/* parks */
	assert_int_equal(idle_of(TGID, 3)->cpu_wait_ns, 5000000);

	/* asleep 10 ms, woken, 2 ms before it ran: idle, then waiting for a CPU */
	clock_ns += 12000000;
	kthread_w0.__state = 0;
	kthread_w0.sched_info.run_delay += 2000000;
	sched_switch(false, &kthread_else, &kthread_w0);
	assert_in_range(idle_of(TGID, 3)->asleep_ns, 12000000, 12001000);
	poll_begin(&w0, 7, 3);
	sched_switch(true, &kthread_w0, &kthread_else);
	assert_int_equal(idle_of(TGID, 3)->cpu_wait_ns, 7000000);

	/* preempted inside a poll: the poll's runnable time, not the worker's wait */
	clock_ns += 3000000;
	kthread_w0.sched_info.run_delay += 3000000;
	sched_switch(false, &kthread_else, &kthread_w0);
	poll_end(&w0, 7, 3, 0, AT_QUEUE_NONE);
	sched_switch(true, &kthread_w0, &kthread_else);
	assert_int_equal(idle_of(TGID, 3)->cpu_wait_ns, 7000000);
	assert_in_range(((struct at_poll *)records[nr_records - 1])->runnable_ns, 3000000,
			3001000);
	assert_in_range(idle_of(TGID, 3)->asleep_ns, 12000000, 12001000);
}

/*
 * A late poll says how much of its wait some worker slept through: the
 * detector's question (could a worker have run it?) answered for that very
 * wait, not for the 100 ms around it.
 */
static void late_poll_says_if_a_worker_slept(void **state)
{
	__u32 tgid = TGID;
	__u64 delay = 20000000;
	struct task_struct kthread_w1 = { .pid = 102, .tgid = TGID };
	struct at_poll *p;

	follow(tgid);
	set_config(&sched_delay_ns, &delay, sizeof(delay));
	poll_begin(&w1, 9, 1);
	poll_end(&w1, 9, 1, 0, AT_QUEUE_NONE);
	kthread_w1.__state = 1;
	sched_switch(false, &kthread_w1, &kthread_else);	/* worker 1 parks */

	spawn(&other, 7, AT_QUEUE_INJECT);
	clock_ns += 30000000;
	poll_begin(&w0, 7, 0);
	poll_end(&w0, 7, 0, 0, AT_QUEUE_NONE);
	p = records[nr_records - 1];
	assert_int_equal(p->spare, AT_SPARE_KNOWN | 100);

	/* worker 1 runs again; a wait it did not sleep through */
	kthread_w1.__state = 0;
	sched_switch(false, &kthread_else, &kthread_w1);
	wake(&other, 7, 0, -1, AT_QUEUE_INJECT);
	clock_ns += 25000000;
	poll_begin(&w0, 7, 0);
	poll_end(&w0, 7, 0, 0, AT_QUEUE_NONE);
	p = records[nr_records - 1];
	assert_int_equal(p->spare, AT_SPARE_KNOWN | 0);

	/* a poll on time measures nothing */
	wake(&other, 7, 0, -1, AT_QUEUE_INJECT);
	poll_begin(&w0, 7, 0);
	poll_end(&w0, 7, 0, 0, AT_QUEUE_NONE);
	assert_int_equal(((struct at_poll *)records[nr_records - 1])->spare, 0);
	delay = 0;
	set_config(&sched_delay_ns, &delay, sizeof(delay));
}

/*
 * Two processes traced at once, each with its workers 0 and 1: each worker
 * has its own statistics, steals and queues; a late poll is judged by its
 * own process's workers (the other's sleeping worker could not have run
 * it); every record names its process.
 */
static void processes_keep_their_workers_apart(void **state)
{
	const __u32 tgid_b = 5151;
	struct thread b0 = { .tid = 201, .cpu = 2, .tgid = tgid_b };
	struct thread b1 = { .tid = 202, .cpu = 3, .tgid = tgid_b };
	struct task_struct kthread_b1 = { .pid = 202, .tgid = tgid_b };
	struct at_steal_key pair;
	__u64 delay = 20000000;
	struct at_poll *p;

	follow(TGID);
	follow(tgid_b);
	set_config(&sched_delay_ns, &delay, sizeof(delay));
	for (int i = 0; i < 3; i++) {
		poll_begin(&w0, 7, 0);
		poll_end(&w0, 7, 0, 0, AT_QUEUE_NONE);
	}
	poll_begin(&w1, 9, 1);
	poll_end(&w1, 9, 1, 0, AT_QUEUE_NONE);
	poll_begin(&b0, 8, 0);
	poll_end(&b0, 8, 0, 0, AT_QUEUE_NONE);
	poll_begin(&b1, 10, 1);
	poll_end(&b1, 10, 1, 0, AT_QUEUE_NONE);
	assert_int_equal(stats_of_worker(TGID, 0)->polls, 3);
	assert_int_equal(stats_of_worker(tgid_b, 0)->polls, 1);
	assert_int_equal(stats_of_worker(TGID, 1)->polls, 1);
	assert_ptr_not_equal(stats_of_worker(TGID, 0), stats_of_worker(tgid_b, 0));
	assert_int_equal(((struct at_hdr *)records[nr_records - 1])->pid, tgid_b);
	assert_int_equal(((struct at_hdr *)records[0])->pid, TGID);

	/* B's worker 1 sleeps: a late poll in A had no worker of its own to spare */
	kthread_b1.__state = 1;
	sched_switch(false, &kthread_b1, &kthread_else);
	assert_int_not_equal(idle_of(tgid_b, 1)->asleep_since, 0);
	assert_int_equal(idle_of(TGID, 1)->asleep_since, 0);
	spawn(&other, 11, AT_QUEUE_INJECT);
	clock_ns += 30000000;
	poll_begin(&w0, 11, 0);
	poll_end(&w0, 11, 0, 0, AT_QUEUE_NONE);
	p = records[nr_records - 1];
	assert_int_equal(p->hdr.pid, TGID);
	assert_int_equal(p->spare, AT_SPARE_KNOWN | 0);
	/* ... and one in B had */
	spawn(&b0, 12, 0);
	clock_ns += 30000000;
	poll_begin(&b0, 12, 0);
	poll_end(&b0, 12, 0, 0, AT_QUEUE_NONE);
	p = records[nr_records - 1];
	assert_int_equal(p->hdr.pid, tgid_b);
	assert_int_equal(p->spare, AT_SPARE_KNOWN | 100);

	/* a steal in B counts on B's workers, by their slots */
	usdt_steal(on(&b0, 0, 1, 2, 0, 0));
	assert_int_equal(stats_of_worker(tgid_b, 0)->stolen, 2);
	assert_int_equal(stats_of_worker(TGID, 0)->stolen, 0);
	pair.thief = (__u32)(stats_of_worker(tgid_b, 0) - worker_stats);
	pair.victim = (__u32)(stats_of_worker(tgid_b, 1) - worker_stats);
	assert_non_null(bpf_map_lookup_elem(&steals, &pair));
	/* each process has its injection queue */
	spawn(&b0, 13, AT_QUEUE_INJECT);
	assert_int_equal(((struct at_hdr *)records[nr_records - 1])->pid, tgid_b);
	assert_ptr_not_equal(stats_of_worker(TGID, AT_WORKER_PROCESS),
			     stats_of_worker(tgid_b, AT_WORKER_PROCESS));
	assert_int_equal(stats_of_worker(tgid_b, AT_WORKER_PROCESS)->queue.depth, 1);
	assert_int_equal(stats_of_worker(tgid_b, AT_WORKER_PROCESS)->queue.peak, 1);
	delay = 0;
	set_config(&sched_delay_ns, &delay, sizeof(delay));
}

/* A process's counters, summed over the CPUs, as userspace reads them. */
static struct at_runtime_counts counts_of(__u32 tgid)
{
	struct at_worker_key k = { .tgid = tgid, .worker = AT_WORKER_PROCESS };
	__u32 *slot = bpf_map_lookup_elem(&worker_slots, &k), cpu = cur_cpu;
	struct at_runtime_counts sum = { 0 }, *c;

	assert_non_null(slot);
	for (cur_cpu = 0; cur_cpu < NR_CPUS; cur_cpu++) {
		c = counts_at(*slot);
		sum.spawns += c->spawns;
		sum.completed += c->completed;
		sum.wakes += c->wakes;
		sum.outside_wakes += c->outside_wakes;
	}
	cur_cpu = cpu;
	return sum;
}

/*
 * Task ids are each runtime's own: two processes may use the same. One's
 * task 7 waits for a wake while the other's task 7 finishes; a late wake of
 * the finished one is not news about the waiting one, and the waiting one's
 * wake is its own.
 */
static void processes_keep_their_tasks_apart(void **state)
{
	const __u32 tgid_b = 5151;
	struct thread b0 = { .tid = 201, .cpu = 2, .tgid = tgid_b };
	struct thread b_other = { .tid = 203, .cpu = 3, .tgid = tgid_b };
	struct at_task_slot *slot;

	follow(tgid_b);
	spawn(&w0, 7, 0);
	poll_begin(&w0, 7, 0);
	poll_end(&w0, 7, 0, 0, AT_QUEUE_NONE);
	spawn(&b0, 7, 0);
	poll_begin(&b0, 7, 0);
	poll_end(&b0, 7, 0, 1, AT_QUEUE_NONE);

	assert_null(task_find(task_key(tgid_b, 7), &slot));
	assert_int_not_equal(idle_since(7), 0);
	assert_int_equal(stats_of(7)->polls, 1);
	wake(&b_other, 7, 0, -1, AT_QUEUE_NONE);	/* B's waker, kept past its task's end */
	assert_null(task_find(task_key(tgid_b, 7), &slot));
	assert_int_not_equal(idle_since(7), 0);
	wake(&other, 7, 0, -1, AT_QUEUE_INJECT);
	assert_int_equal(idle_since(7), 0);
	assert_int_not_equal(state_of(7)->wake_id, 0);
	assert_int_equal(((struct at_hdr *)records[nr_records - 1])->pid, TGID);
	/* and each process counts its own */
	assert_int_equal(counts_of(TGID).spawns, 1);
	assert_int_equal(counts_of(TGID).completed, 0);
	assert_int_equal(counts_of(TGID).outside_wakes, 1);
	assert_int_equal(counts_of(tgid_b).spawns, 1);
	assert_int_equal(counts_of(tgid_b).completed, 1);
	assert_int_equal(counts_of(tgid_b).outside_wakes, 1);
}

/*
 * The kernel woke a parked worker soon after the task was queued, but the
 * host gave it no CPU for most of the wait: that is contention, not a worker
 * left asleep. The sleep ends at the wake (sched_info.last_queued, on the run
 * queue's own clock, which the program calibrates on the worker's earlier
 * arrival, less the wait on another CPU's queue before it was moved), not
 * when the thread at last ran.
 */
static void waiting_for_a_cpu_is_not_sleeping(void **state)
{
	__u32 tgid = TGID;
	__u64 delay = 20000000, rq_offset = 5000000000ull;
	struct task_struct kthread_w1 = { .pid = 102, .tgid = TGID };

	follow(tgid);
	set_config(&sched_delay_ns, &delay, sizeof(delay));
	kthread_w1.sched_info.run_delay = 1000;
	poll_begin(&w1, 9, 1);
	poll_end(&w1, 9, 1, 0, AT_QUEUE_NONE);
	kthread_w1.__state = 1;
	sched_switch(false, &kthread_w1, &kthread_else);	/* worker 1 parks */
	/* wakes and parks again: the run queue clock is calibrated */
	kthread_w1.sched_info.last_arrival = clock_ns + rq_offset;
	sched_switch(false, &kthread_else, &kthread_w1);
	assert_false(rq_clock_known);
	sched_switch(false, &kthread_w1, &kthread_else);
	assert_true(rq_clock_known);
	assert_in_range(rq_clock_offset, -(__s64)rq_offset, -(__s64)rq_offset + 1000);

	spawn(&other, 7, AT_QUEUE_INJECT);
	clock_ns += 2000000;					/* it is woken for it */
	kthread_w1.__state = 0;
	clock_ns += 10000000;
	/* moved to another CPU after 10 ms: queued there anew, the wait so far counted */
	kthread_w1.sched_info.run_delay += 10000000;
	kthread_w1.sched_info.last_queued = clock_ns + rq_offset;
	clock_ns += 18000000;					/* and runs 28 ms after its wake */
	sched_switch(false, &kthread_else, &kthread_w1);
	kthread_w1.sched_info.last_queued = 0;
	poll_begin(&w1, 7, 1);
	poll_end(&w1, 7, 1, 0, AT_QUEUE_NONE);
	assert_in_range(((struct at_poll *)records[nr_records - 1])->spare,
			AT_SPARE_KNOWN | 6, AT_SPARE_KNOWN | 7);
	assert_in_range(idle_of(TGID, 1)->slept_until - idle_of(TGID, 1)->slept_from,
			2000000, 2010000);
	delay = 0;
	set_config(&sched_delay_ns, &delay, sizeof(delay));
}

/*
 * A worker slept through the whole wait, but the one that took the task was
 * runnable without a CPU for most of it (preempted by the host): the host's
 * doing, no room to spare (host_wait(): its run_delay over the wait, from
 * its switch-ins). The same wait with the poller on the CPU is a worker
 * left asleep.
 */
static void a_poller_short_of_cpu_is_the_hosts_doing(void **state)
{
	__u32 tgid = TGID;
	__u64 delay = 20000000;
	struct task_struct kthread_w1 = { .pid = 102, .tgid = TGID };

	(void)state;
	follow(tgid);
	set_config(&sched_delay_ns, &delay, sizeof(delay));
	for (int preempted = 1; preempted >= 0; preempted--) {
		kthread_w1.sched_info.run_delay = 1000;
		current_task.sched_info.run_delay = 1000;
		poll_begin(&w0, 9, 0);
		poll_end(&w0, 9, 0, 0, AT_QUEUE_NONE);
		kthread_w0.__state = 1;
		sched_switch(false, &kthread_w0, &kthread_else);	/* worker 0 parks */
		poll_begin(&w1, 8, 1);
		poll_end(&w1, 8, 1, 0, AT_QUEUE_NONE);
		sched_switch(true, &kthread_w1, &kthread_else);	/* worker 1 preempted */
		sched_switch(false, &kthread_else, &kthread_w1);	/* and back */
		clock_ns += 1000000;
		if (preempted)
			sched_switch(true, &kthread_w1, &kthread_else);
		spawn(&other, 7, AT_QUEUE_INJECT);
		clock_ns += 30000000;
		if (preempted) {
			/* runnable 28 of the 30 ms, then on the CPU again */
			kthread_w1.sched_info.run_delay += 28000000;
			sched_switch(false, &kthread_else, &kthread_w1);
		}
		current_task.sched_info.run_delay = kthread_w1.sched_info.run_delay;
		poll_begin(&w1, 7, 1);
		poll_end(&w1, 7, 1, 0, AT_QUEUE_NONE);
		if (preempted)
			assert_int_equal(((struct at_poll *)records[nr_records - 1])->spare,
					 AT_SPARE_KNOWN);
		else
			assert_int_equal(((struct at_poll *)records[nr_records - 1])->spare,
					 AT_SPARE_KNOWN | 100);
		kthread_w0.__state = 0;
		sched_switch(false, &kthread_else, &kthread_w0);
		clock_ns += 1000000;
	}
	delay = 0;
	set_config(&sched_delay_ns, &delay, sizeof(delay));
}

/*
 * Inside a poll, the same: blocked until the kernel woke the thread, then
 * runnable (waiting for a CPU) until it ran.
 */
static void blocked_until_woken_then_runnable(void **state)
{
	__u32 tgid = TGID;
	__u64 rq_offset = 7000000000ull;
	struct task_struct kthread_w1 = { .pid = 102, .tgid = TGID };
	struct at_poll *p;

	follow(tgid);
	/* calibration: worker 1 sleeps between polls, wakes, polls, sleeps */
	poll_begin(&w1, 9, 1);
	poll_end(&w1, 9, 1, 0, AT_QUEUE_NONE);
	kthread_w1.__state = 1;
	sched_switch(false, &kthread_w1, &kthread_else);
	kthread_w1.sched_info.last_arrival = clock_ns + rq_offset;
	sched_switch(false, &kthread_else, &kthread_w1);
	poll_begin(&w1, 9, 1);
	sched_switch(false, &kthread_w1, &kthread_else);	/* blocks in the poll */
	assert_true(rq_clock_known);
	clock_ns += 3000000;
	kthread_w1.sched_info.last_queued = clock_ns + rq_offset;
	clock_ns += 5000000;
	kthread_w1.__state = 0;
	sched_switch(false, &kthread_else, &kthread_w1);
	poll_end(&w1, 9, 1, 0, AT_QUEUE_NONE);
	p = records[nr_records - 1];
	assert_in_range(p->blocked_ns, 3000000, 3010000);
	assert_in_range(p->runnable_ns, 4990000, 5000000);
}

/*
 * --stacks: a poll that sleeps long sends where it went to sleep, the
 * kernel's frames with the user's, when it wakes; a short sleep sends nothing.
 */
static void a_long_sleep_in_a_poll_sends_where_it_slept(void **state)
{
	__u64 after = 1000000, slept_at;
	struct task_struct kthread_w1 = { .pid = 102, .tgid = TGID };
	struct at_stack *st;
	size_t before;

	set_config(&stack_after_ns, &after, sizeof(after));
	follow(TGID);
	poll_begin(&w1, 9, 1);
	kthread_w1.__state = 1;
	sched_switch(false, &kthread_w1, &kthread_else);
	clock_ns += 500000; /* half the threshold */
	kthread_w1.__state = 0;
	before = nr_records;
	sched_switch(false, &kthread_else, &kthread_w1);
	assert_int_equal(nr_records, before);

	kthread_w1.__state = 1;
	slept_at = clock_ns;
	sched_switch(false, &kthread_w1, &kthread_else);
	clock_ns += 3000000;
	kthread_w1.__state = 0;
	sched_switch(false, &kthread_else, &kthread_w1);
	assert_int_equal(nr_records, before + 1);
	st = records[nr_records - 1];
	assert_int_equal(st->hdr.kind, AT_EV_STACK);
	assert_int_equal(st->flags, AT_STACK_BLOCKED);
	assert_int_equal(st->task, 9);
	/* (the shim's clock ticks 100 ns a read) */
	assert_in_range(st->hdr.ts, slept_at, slept_at + 1000);
	assert_in_range(st->woke - st->hdr.ts, 3000000, 3001000);
	assert_int_equal(st->nr_kstack, 3);
	assert_memory_equal(st->kstack, kernel_stack, sizeof(kernel_stack));
	assert_int_equal(st->nr_fp, 2);
	assert_memory_equal(st->fp, user_walk, sizeof(user_walk));
	poll_end(&w1, 9, 1, 0, AT_QUEUE_NONE);
	after = 0;
	set_config(&stack_after_ns, &after, sizeof(after));
}

/*
 * With park probes, a worker is idle only while parked: a sleep between
 * polls outside them (a lock whose holder was preempted) is no room to
 * spare, and a late poll meanwhile is not blamed on the runtime.
 */
static void only_a_parked_worker_is_idle(void **state)
{
	__u64 delay = 20000000;
	struct task_struct kthread_w1 = { .pid = 102, .tgid = TGID };

	follow(TGID);
	offers(TGID, AT_TARGET_PARKS_PROBED);
	set_config(&sched_delay_ns, &delay, sizeof(delay));
	poll_begin(&w1, 9, 1);
	poll_end(&w1, 9, 1, 0, AT_QUEUE_NONE);
	kthread_w1.__state = 1;
	sched_switch(false, &kthread_w1, &kthread_else);	/* waits for a lock */
	assert_int_equal(idle_of(TGID, 1)->asleep_since, 0);
	spawn(&other, 7, AT_QUEUE_INJECT);
	clock_ns += 30000000;
	poll_begin(&w0, 7, 0);
	poll_end(&w0, 7, 0, 0, AT_QUEUE_NONE);
	assert_int_equal(((struct at_poll *)records[nr_records - 1])->spare, AT_SPARE_KNOWN | 0);

	/* runs again, then parks: idle */
	kthread_w1.__state = 0;
	sched_switch(false, &kthread_else, &kthread_w1);
	usdt_worker_park(on(&w1, 1, 0, 0, 0, 0));
	kthread_w1.__state = 1;
	sched_switch(false, &kthread_w1, &kthread_else);
	assert_int_not_equal(idle_of(TGID, 1)->asleep_since, 0);
	wake(&other, 7, 0, -1, AT_QUEUE_INJECT);
	clock_ns += 30000000;
	poll_begin(&w0, 7, 0);
	poll_end(&w0, 7, 0, 0, AT_QUEUE_NONE);
	assert_int_equal(((struct at_poll *)records[nr_records - 1])->spare, AT_SPARE_KNOWN | 100);
	delay = 0;
	set_config(&sched_delay_ns, &delay, sizeof(delay));
}

/*
 * A poll long on the CPU says how much of that time the kernel charged its
 * thread for (a tick's worth allowed): a host that paused the virtual CPU
 * while the thread ran (a guest that reports no steal time) is not the
 * task computing.
 */
static void long_poll_says_what_the_kernel_charged(void **state)
{
	const __u64 ms = 1000000, tick = 4 * ms;
	__u64 long_poll = 10 * ms;
	struct at_poll *p;

	set_config(&long_poll_ns, &long_poll, sizeof(long_poll));
	/* 15 ms on the CPU, of which one tick was charged: the rest was the host's */
	current_task.utime = 100 * ms;
	poll_begin(&w0, 7, 0);
	clock_ns += 15 * ms;
	current_task.utime += tick;
	poll_end(&w0, 7, 0, 0, 0);
	p = records[nr_records - 1];
	assert_in_range(p->oncpu_ns, 15 * ms, 15 * ms + 10000);
	assert_int_equal(p->flags, AT_POLL_CPU_CHARGED);
	assert_int_equal(p->cpu_ns, 2 * tick);
	/* 15 ms computed and charged: all of it (never more than on the CPU) */
	poll_begin(&w0, 7, 0);
	clock_ns += 15 * ms;
	current_task.stime += 12 * ms;
	current_task.utime += 4 * ms;
	poll_end(&w0, 7, 0, 0, 0);
	p = records[nr_records - 1];
	assert_int_equal(p->cpu_ns, p->oncpu_ns);
	/* a short poll: nothing to judge */
	poll_begin(&w0, 7, 0);
	poll_end(&w0, 7, 0, 0, 0);
	p = records[nr_records - 1];
	assert_int_equal(p->flags, 0);
	assert_int_equal(p->cpu_ns, 0);
	long_poll = 0;
	set_config(&long_poll_ns, &long_poll, sizeof(long_poll));
}

/*
 * Probes on an image fire in every process that maps it: those of a process
 * not followed leave nothing behind, and make no records.
 */
static void processes_not_followed_leave_nothing(void **state)
{
	struct thread stranger = { .tid = 301, .cpu = 1, .tgid = 6161 };
	struct at_worker_key k = { .tgid = 6161, .worker = 0 };

	spawn(&stranger, 7, 0);
	poll_begin(&stranger, 7, 0);
	wake(&stranger, 7, 7, 0, 0);
	poll_end(&stranger, 7, 0, 1, AT_QUEUE_NONE);
	usdt_steal(on(&stranger, 0, 1, 2, 0, 0));
	usdt_worker_park(on(&stranger, 0, 0, 0, 0, 0));
	assert_int_equal(nr_records, 0);
	assert_null(thread_find(stranger.tid));
	assert_null(bpf_map_lookup_elem(&worker_slots, &k));
	assert_null(task_find(task_key(6161, 7), &(struct at_task_slot *){ NULL }));
	for (__u32 i = 0; i < AT_STAT_NR; i++)
		assert_int_equal(*(__u64 *)bpf_map_lookup_elem(&stats, &i), 0);
}

/*
 * What a runtime offers is its process's: a sleep outside a park is no idle
 * time in a process whose runtime says when it parks, and is in one whose
 * runtime does not.
 */
static void each_process_offers_its_own(void **state)
{
	const __u32 tgid_b = 5151;
	struct thread b1 = { .tid = 202, .cpu = 3, .tgid = tgid_b };
	struct task_struct kthread_w1 = { .pid = 102, .tgid = TGID, .__state = 1 };
	struct task_struct kthread_b1 = { .pid = 202, .tgid = tgid_b, .__state = 1 };

	follow(TGID);
	follow(tgid_b);
	offers(TGID, AT_TARGET_PARKS_PROBED);
	poll_begin(&w1, 9, 1);
	poll_end(&w1, 9, 1, 0, AT_QUEUE_NONE);
	poll_begin(&b1, 9, 1);
	poll_end(&b1, 9, 1, 0, AT_QUEUE_NONE);
	sched_switch(false, &kthread_w1, &kthread_else);	/* both sleep, neither parked */
	sched_switch(false, &kthread_b1, &kthread_else);
	assert_int_equal(idle_of(TGID, 1)->asleep_since, 0);
	assert_int_not_equal(idle_of(tgid_b, 1)->asleep_since, 0);
}

/* ---- tokio ------------------------------------------------------------------ */

/* A task's Header in the target, as tokio >= 1.23 lays it out (the default offsets). */
#define ID_OFF 0x20
struct fake_header {
	__u64 word[8];		/* [2]: vtable, [ID_OFF / 8]: the task id */
};

static __u64 fake_vtable[16];	/* [0]: poll, [0x48 / 8]: where the id is */

static __u64 header_of(struct fake_header *h, __u64 id)
{
	fake_vtable[0] = 0x5000;
	fake_vtable[0x48 / 8] = ID_OFF;
	memset(h, 0, sizeof(*h));
	h->word[2] = (__u64)(uintptr_t)fake_vtable;
	h->word[ID_OFF / 8] = id;
	return (__u64)(uintptr_t)h;
}

static struct pt_regs *tokio_on(struct thread *th, __u64 a0, __u64 a1)
{
	return on(th, a0, a1, 0, 0, 0);
}

/* A JoinHandle's abort schedules the task without a wake. */
static struct fake_header hx, hz;

static void wake_then_abort_at_a_reused_header(bool cache)
{
	__u64 x = header_of(&hx, 100), z = header_of(&hz, 200), y_id = 300;
	__u64 task_ptr = x;
	struct at_task_state *y;

	offers(TGID, AT_TARGET_TOKIO_REMOVE | (cache ? AT_TARGET_TOKIO_HDR_CACHE : 0));
	tokio_bind_inner(tokio_on(&w0, 0, x));
	tokio_bind_inner(tokio_on(&w0, 0, z));
	tokio_poll(tokio_on(&w0, x, 0));
	tokio_poll_ret(tokio_on(&w0, 0, 0));
	tokio_poll(tokio_on(&w1, z, 0));	/* w1 is worker 1 */
	tokio_poll_ret(tokio_on(&w1, 0, 0));

	/* in a poll of z, w0 wakes x: x runs elsewhere, so nothing is scheduled */
	tokio_poll(tokio_on(&w0, z, 0));
	tokio_wake(tokio_on(&w0, x, 0));
	/* x finishes on w1; tokio frees its Header, and y is born at the same address */
	tokio_poll(tokio_on(&w1, x, 0));
	tokio_remove(tokio_on(&w1, 0, (__u64)(uintptr_t)&task_ptr));
	tokio_poll_ret(tokio_on(&w1, 0, 0));
	hx.word[ID_OFF / 8] = y_id;
	tokio_bind_inner(tokio_on(&w1, 0, x));
	y = state_of(y_id);
	assert_non_null(y);
	assert_int_equal(y->queued_on, 1);

	/* still in z's poll, w0 aborts y: it goes on w0's queue, and x stays gone */
	tokio_schedule(tokio_on(&w0, x, 0));
	assert_int_equal(state_of(y_id)->queued_on, 0);
	assert_false(holds_anything(100));
}

static void abort_at_a_reused_header(void **state)
{
	wake_then_abort_at_a_reused_header(false);
}

static void abort_at_a_reused_header_cached(void **state)
{
	wake_then_abort_at_a_reused_header(true);
}

/*
 * Following the host: every exec is told, and a fork only when a traced
 * process forks a new process (not a thread, and not an untraced parent).
 */
static void births_told(void **state)
{
	struct task_struct parent = { .pid = TGID, .tgid = TGID };
	struct task_struct child = { .pid = TGID + 10, .tgid = TGID + 10 };
	struct task_struct thread = { .pid = TGID + 11, .tgid = TGID };
	struct task_struct stranger = { .pid = TGID + 20, .tgid = TGID + 20 };
	unsigned long long ctx[2];

	nr_told = 0;
	cur_tgid = TGID + 30;
	cur_tid = TGID + 30;
	on_exec(ctx);
	ctx[0] = (uintptr_t)&parent;
	ctx[1] = (uintptr_t)&child;
	on_fork(ctx);
	ctx[1] = (uintptr_t)&thread;
	on_fork(ctx);
	ctx[0] = (uintptr_t)&stranger;
	ctx[1] = (uintptr_t)&child;
	on_fork(ctx);
	assert_int_equal(nr_told, 2);
	assert_int_equal(told[0], TGID + 30);
	assert_int_equal(told[1], TGID + 10);
}

/* ---- sample mode: Go's state read, no probe -------------------------------- */

/*
 * A Go program's memory as sample mode reads it: the thread's TLS slot of g
 * (8 bytes below the thread pointer), an M, its current goroutine and its
 * P, at Go 1.19's offsets.
 */
static struct {
	__u64 tls_g;	/* the thread pointer is just past it */
	__u8 g[400], m[400], p[500];
} go_mem;

static const struct at_go_layout go_19 = {
	.g_goid = 152, .g_m = 48, .g_startpc = 312, .g_preempt = 177, .g_waitreason = 176,
	.m_p = 208, .p_id = 0, .p_runqhead = 400, .p_runqtail = 404,
	.tls_g = -8, .g_status = 144, .g_seq = 189, .m_curg = 192, .p_schedtick = 16,
};

static void go_put(__u8 *base, int off, __u64 v, size_t size)
{
	memcpy(base + off, &v, size);
}

/* The thread runs goroutine goid (0: none, the scheduler), its seq and its P's schedtick. */
static void go_runs(__u64 goid, __u32 status, __u8 seq, __u32 schedtick)
{
	go_mem.tls_g = (uintptr_t)go_mem.g;
	go_put(go_mem.g, go_19.g_m, (uintptr_t)go_mem.m, 8);
	go_put(go_mem.m, go_19.m_curg, goid ? (uintptr_t)go_mem.g : 0, 8);
	go_put(go_mem.m, go_19.m_p, (uintptr_t)go_mem.p, 8);
	go_put(go_mem.g, go_19.g_goid, goid, 8);
	go_put(go_mem.g, go_19.g_status, status, 4);
	go_put(go_mem.g, go_19.g_seq, seq, 1);
	go_put(go_mem.g, go_19.g_startpc, 0x401000, 8);
	go_put(go_mem.p, go_19.p_schedtick, schedtick, 4);
}

/* A CPU-clock sample on thread 101, current. */
static void sample_now(void)
{
	struct bpf_perf_event_data ctx = { 0 };

	cur_tid = 101;
	cur_tgid = TGID;
	cur_cpu = 0;
	current_task.pid = 101;
	current_task.tgid = TGID;
	current_task.thread.fsbase = (uintptr_t)&go_mem.tls_g + 8;
	on_cpu_sample(&ctx);
}

static void sample_mode_on(__u64 period)
{
	__u32 tgid = TGID;
	__u64 long_poll = period ? 10000000 : 0;

	set_config(&sample_period_ns, &period, sizeof(period));
	set_config(&long_poll_ns, &long_poll, sizeof(long_poll));
	if (period) {
		follow(TGID);
		assert_int_equal(bpf_map_update_elem(&go_layouts, &tgid, &go_19, BPF_ANY), 0);
	}
}

/*
 * A run is one goroutine seen again with the same trackingSeq on a P whose
 * schedtick has not moved: from its first sighting to its last, then a
 * poll. A new seq (it left running and came back), a moved schedtick (a
 * new slice), another goroutine (runnext's, inheriting the slice), or the
 * scheduler: each ends it where it was last seen.
 */
static void sampled_runs_begin_and_end_where_seen(void **state)
{
	const __u64 ms = 1000000;
	struct at_poll *p;
	__u64 first;

	sample_mode_on(ms);
	go_runs(7, 2, 5, 10);
	sample_now();
	first = clock_ns;
	for (int i = 0; i < 12; i++) {
		clock_ns += ms;
		sample_now();
	}
	assert_int_equal(nr_records, 0);
	/* it left running and came back (seq 6): the run ended after the last sighting */
	clock_ns += ms;
	go_runs(7, 2, 6, 10);
	sample_now();
	assert_int_equal(nr_records, 1);
	p = records[0];
	assert_int_equal(p->hdr.kind, AT_EV_POLL);
	assert_int_equal(p->task, 7);
	assert_true(p->flags & AT_POLL_SAMPLED);
	assert_in_range(p->hdr.ts, first - 1000, first + 1000);
	assert_in_range(p->duration_ns, 12 * ms, 12 * ms + 5000);
	assert_in_range(p->oncpu_ns, 12 * ms, 12 * ms + 5000);
	/* the same g and seq, schedtick moved: a new slice */
	for (int i = 0; i < 11; i++) {
		clock_ns += ms;
		sample_now();
	}
	go_runs(7, 2, 6, 11);
	clock_ns += ms;
	sample_now();
	assert_int_equal(nr_records, 2);
	p = records[1];
	assert_in_range(p->duration_ns, 11 * ms, 11 * ms + 5000);
	/* another goroutine with the same schedtick (runnext's), then the scheduler */
	for (int i = 0; i < 11; i++) {
		clock_ns += ms;
		sample_now();
	}
	go_runs(8, 2, 1, 11);
	clock_ns += ms;
	sample_now();
	assert_int_equal(nr_records, 3);
	assert_int_equal(((struct at_poll *)records[2])->task, 7);
	clock_ns += ms;
	go_runs(0, 0, 0, 11);
	sample_now();
	/* goroutine 8, seen once and then the scheduler: a run known to have happened, no length */
	assert_int_equal(nr_records, 4);
	p = records[3];
	assert_int_equal(p->task, 8);
	assert_in_range(p->duration_ns, 0, 1000);
	sample_mode_on(0);
}

/*
 * A run seen as its thread goes to sleep, and seen no more once it wakes
 * (it parks within the period): it went on until its thread was back on a
 * CPU, blocked the while. A preemption signal (SIGURG) makes a run that
 * ends back in a queue a preempted one.
 */
static void sampled_run_blocked_to_its_wake(void **state)
{
	const __u64 ms = 1000000;
	struct task_struct *me = &current_task;
	unsigned long long sig[3] = { 23, 0, (uintptr_t)&current_task };
	struct at_poll *p;

	sample_mode_on(ms);
	go_runs(9, 2, 3, 20);
	sample_now();
	clock_ns += ms;
	me->__state = 1;
	sched_switch(false, me, &kthread_else);
	clock_ns += 20 * ms;
	me->__state = 0;
	sched_switch(false, &kthread_else, me);
	/* it parked meanwhile: the next sight is the scheduler */
	clock_ns += ms / 2;
	go_runs(0, 0, 0, 20);
	sample_now();
	assert_int_equal(nr_records, 1);
	p = records[0];
	assert_int_equal(p->task, 9);
	assert_in_range(p->duration_ns, 21 * ms, 21 * ms + 5000);
	assert_in_range(p->blocked_ns, 20 * ms, 20 * ms + 5000);
	assert_false(p->flags & AT_POLL_PREEMPTED);
	/* 9.5 ms as seen, the runtime asked it to yield, back in a queue: preempted */
	go_runs(9, 2, 4, 21);
	sample_now();
	clock_ns += 9 * ms + ms / 2;
	sample_now();
	sample_signal(sig);
	go_put(go_mem.g, go_19.g_status, 1, 4);
	clock_ns += ms;
	sample_now();
	assert_int_equal(nr_records, 2);
	p = records[1];
	assert_true(p->flags & AT_POLL_PREEMPTED);
	sample_mode_on(0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(late_poll_end_after_the_task_finished, setup,
						teardown),
		cmocka_unit_test_setup_teardown(late_poll_end_during_the_next_poll, setup, teardown),
		cmocka_unit_test_setup_teardown(idle_after_its_latest_poll, setup, teardown),
		cmocka_unit_test_setup_teardown(idle_task_first_met_at_its_poll, setup, teardown),
		cmocka_unit_test_setup_teardown(wake_while_poll_begin_takes_the_count, setup,
						teardown),
		cmocka_unit_test_setup_teardown(late_wake_of_a_finished_task, setup, teardown),
		cmocka_unit_test_setup_teardown(late_wake_never_takes_a_slot, setup, teardown),
		cmocka_unit_test_setup_teardown(woken_old_task_gets_its_slot, setup, teardown),
		cmocka_unit_test_setup_teardown(hashed_task_moves_to_its_slot_when_polled, setup,
						teardown),
		cmocka_unit_test_setup_teardown(stale_slot_after_the_wake_found_it, setup,
						teardown),
		cmocka_unit_test_setup_teardown(only_followed_processes_are_accounted, setup,
						teardown),
		cmocka_unit_test_setup_teardown(worker_waits_for_a_cpu_between_polls, setup,
						teardown),
		cmocka_unit_test_setup_teardown(late_poll_says_if_a_worker_slept, setup, teardown),
		cmocka_unit_test_setup_teardown(processes_keep_their_workers_apart, setup, teardown),
		cmocka_unit_test_setup_teardown(processes_keep_their_tasks_apart, setup, teardown),
		cmocka_unit_test_setup_teardown(only_a_parked_worker_is_idle, setup, teardown),
		cmocka_unit_test_setup_teardown(each_process_offers_its_own, setup, teardown),
		cmocka_unit_test_setup_teardown(processes_not_followed_leave_nothing, setup, teardown),
		cmocka_unit_test_setup_teardown(sampled_runs_begin_and_end_where_seen, setup, teardown),
		cmocka_unit_test_setup_teardown(sampled_run_blocked_to_its_wake, setup, teardown),
		cmocka_unit_test_setup_teardown(long_poll_says_what_the_kernel_charged, setup,
						teardown),
		cmocka_unit_test_setup_teardown(waiting_for_a_cpu_is_not_sleeping, setup, teardown),
		cmocka_unit_test_setup_teardown(a_poller_short_of_cpu_is_the_hosts_doing, setup,
						teardown),
		cmocka_unit_test_setup_teardown(blocked_until_woken_then_runnable, setup, teardown),
		cmocka_unit_test_setup_teardown(a_long_sleep_in_a_poll_sends_where_it_slept, setup,
						teardown),
		cmocka_unit_test_setup_teardown(abort_at_a_reused_header, setup, teardown),
		cmocka_unit_test_setup_teardown(abort_at_a_reused_header_cached, setup, teardown),
		cmocka_unit_test_setup_teardown(births_told, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
