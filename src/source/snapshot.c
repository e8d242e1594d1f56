// SPDX-License-Identifier: MIT
/*
 * Snapshots of the BPF maps (tracer.h): the per-worker statistics and
 * runtime counters straight from the mapped .bss, the live tasks from their
 * mapped slots, the rest from the hash maps in batches, and the per-CPU
 * counters summed.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "lib/u64map.h"
#include "source/tracer_priv.h"

/*
 * Every entry of a hash map, keys and values into the dump's arrays (made
 * on first use, as large as the map can be), in batches: one syscall per few
 * thousand entries rather than two per entry.
 */
static int map_dump(struct dump *d, int fd, size_t ksz, size_t vsz, uint32_t max, void **keys,
		    void **vals, size_t *nr)
{
	LIBBPF_OPTS(bpf_map_batch_opts, opts);
	__u64 in = 0, out = 0; /* hash maps use a bucket index as the token */
	size_t total = 0;
	char *k, *v;
	int err;

	if (!d->keys)
		d->keys = malloc(ksz * max);
	if (!d->vals)
		d->vals = malloc(vsz * max);
	if (!d->keys || !d->vals)
		return -ENOMEM;
	k = d->keys;
	v = d->vals;
	while (total < max) {
		__u32 count = (__u32)(max - total);

		err = bpf_map_lookup_batch(fd, total ? &in : NULL, &out, k + total * ksz,
					   v + total * vsz, &count, &opts);
		total += count;
		if (err && errno == ENOENT)
			break; /* the whole map was read */
		if (err)
			return -errno;
		in = out;
	}
	*keys = k;
	*vals = v;
	*nr = total;
	return 0;
}

/*
 * The worker of this process whose slot in the arrays every target shares
 * (asynctraced.h) is slot: false if the slot is another process's, or free.
 */
static bool slot_worker(const struct tracer *t, pid_t pid, uint32_t slot, uint32_t *worker)
{
	uint64_t owner;

	if (slot >= AT_MAX_WORKERS)
		return false;
	owner = __atomic_load_n(&t->skel->bss->worker_idle[slot].owner, __ATOMIC_ACQUIRE);
	if (!owner || owner >> 32 != (uint64_t)pid)
		return false;
	*worker = (uint32_t)owner;
	return true;
}

/*
 * One slot's task, copied while the BPF side may be writing it: the id read
 * before and after the copy must agree, or the slot changed hands meanwhile
 * (the task finished, another took the slot) and the copy is dropped.
 */
static __u64 slot_copy(const struct at_task_slot *slot, struct at_task_slot *out)
{
	__u64 id = __atomic_load_n(&slot->task, __ATOMIC_ACQUIRE);

	if (!id)
		return 0;
	memcpy(out, slot, sizeof(*out));
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	return __atomic_load_n(&slot->task, __ATOMIC_RELAXED) == id ? id : 0;
}

/* Room for one more live task (and its idleness) in s: 0, or -ENOMEM. */
static int grow_live(struct stats *s, size_t *cap)
{
	struct task_entry *te;
	struct idle_entry *ie;

	if (s->nr_tasks < *cap && s->nr_idle < *cap)
		return 0;
	te = realloc(s->tasks, 2 * *cap * sizeof(*te));
	if (te)
		s->tasks = te;
	ie = te ? realloc(s->idle, 2 * *cap * sizeof(*ie)) : NULL;
	if (ie)
		s->idle = ie;
	if (!te || !ie)
		return -ENOMEM;
	*cap *= 2;
	return 0;
}

/* A task waiting since `idle` (0: it is not), listed once it has waited idle_min_ns. */
static void note_idle(struct stats *s, uint64_t id, __u64 idle, uint64_t name_addr,
		      uint64_t idle_min_ns)
{
	if (!idle || s->ts < idle + idle_min_ns)
		return;
	s->idle[s->nr_idle].id = id;
	s->idle[s->nr_idle].idle_since = idle;
	s->idle[s->nr_idle].name_addr = name_addr;
	s->nr_idle++;
}

/* The live tasks of process pid, from their slots; seen: those with statistics there. */
static int live_tasks(const struct tracer *t, pid_t pid, struct stats *s, uint64_t idle_min_ns,
		      struct u64map *seen)
{
	struct at_task_slot slot;
	size_t cap = 64;
	int err = 0;

	s->tasks = calloc(cap, sizeof(*s->tasks));
	s->idle = calloc(cap, sizeof(*s->idle));
	if (!s->tasks || !s->idle)
		return -ENOMEM;
	for (__u32 i = 0; !err && i < t->nr_slots; i++) {
		__u64 id = slot_copy(&t->slots[i], &slot);

		/* every traced process's tasks share the slots: this one's */
		if (!id || slot.tgid != (uint32_t)pid)
			continue;
		err = grow_live(s, &cap);
		/* its statistics come from here, not from task_stats */
		if (!err && slot.s.polls) {
			err = u64map__set(seen, id, seen) ? -ENOMEM : 0;
			s->tasks[s->nr_tasks].id = id;
			s->tasks[s->nr_tasks].s = slot.s;
			s->nr_tasks += !err;
		}
		if (!err)
			note_idle(s, id, at_task_idle_since(&slot.st), slot.st.name_addr, idle_min_ns);
	}
	return err;
}

/* The statistics of process pid's other tasks (in the hash): those not seen in a slot. */
static int hashed_stats(const struct tracer *t, pid_t pid, struct stats *s,
			const struct u64map *seen)
{
	struct at_task_key *keys;
	struct at_task_stats *ts;
	struct task_entry *te;
	size_t n;
	int err;

	err = map_dump(&t->dumps[DUMP_TASK_STATS], bpf_map__fd(t->skel->maps.task_stats),
		       sizeof(*keys), sizeof(*ts), AT_MAX_TASK_STATS, (void **)&keys, (void **)&ts,
		       &n);
	if (err)
		return err;
	te = realloc(s->tasks, (s->nr_tasks + n + 1) * sizeof(*te));
	if (!te)
		return -ENOMEM;
	s->tasks = te;
	for (size_t i = 0; i < n; i++) {
		if (keys[i].tgid != (uint32_t)pid || u64map__get(seen, keys[i].id))
			continue;
		s->tasks[s->nr_tasks].id = keys[i].id;
		s->tasks[s->nr_tasks].s = ts[i];
		s->nr_tasks++;
	}
	return 0;
}

/* Process pid's idle tasks whose slot was taken (in the tasks hash). */
static int hashed_idle(const struct tracer *t, pid_t pid, struct stats *s, uint64_t idle_min_ns,
		       const struct u64map *seen)
{
	struct at_task_state *live;
	struct at_task_key *keys;
	struct idle_entry *ie;
	size_t n;
	int err;

	err = map_dump(&t->dumps[DUMP_TASKS], bpf_map__fd(t->skel->maps.tasks), sizeof(*keys),
		       sizeof(*live), AT_MAX_TASKS, (void **)&keys, (void **)&live, &n);
	if (err)
		return err;
	ie = realloc(s->idle, (s->nr_idle + n + 1) * sizeof(*ie));
	if (!ie)
		return -ENOMEM;
	s->idle = ie;
	for (size_t i = 0; i < n; i++)
		if (keys[i].tgid == (uint32_t)pid && !u64map__get(seen, keys[i].id))
			note_idle(s, keys[i].id, at_task_idle_since(&live[i]), live[i].name_addr,
				  idle_min_ns);
	return 0;
}

/* Process pid's steals, keyed by worker slots in the map, by its workers' ids here. */
static int steals(const struct tracer *t, pid_t pid, struct stats *s)
{
	struct at_steal_stats *ss;
	struct at_steal_key *sk;
	size_t n;
	int err;

	err = map_dump(&t->dumps[DUMP_STEALS], bpf_map__fd(t->skel->maps.steals), sizeof(*sk),
		       sizeof(*ss), AT_MAX_STEAL_PAIRS, (void **)&sk, (void **)&ss, &n);
	if (err)
		return err;
	s->steals = calloc(n ? n : 1, sizeof(*s->steals));
	if (!s->steals)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		struct at_steal_key key = { .victim = AT_WORKER_UNKNOWN };

		if (!slot_worker(t, pid, sk[i].thief, &key.thief) ||
		    (sk[i].victim != AT_WORKER_UNKNOWN && !slot_worker(t, pid, sk[i].victim, &key.victim)))
			continue;
		s->steals[s->nr_steals].key = key;
		s->steals[s->nr_steals].s = ss[i];
		s->nr_steals++;
	}
	return 0;
}

/*
 * The tasks: live ones from their slots, the rest (tasks whose slot was
 * taken, finished ones kept for the report) from the hashes. A task met in
 * a slot and in a hash (evicted from the hash, back in a slot) is taken once,
 * from its slot.
 */
static int snapshot_tasks(const struct tracer *t, pid_t pid, struct stats *s,
			  uint64_t idle_min_ns)
{
	struct u64map seen;
	int err;

	u64map__init(&seen);
	err = live_tasks(t, pid, s, idle_min_ns, &seen);
	if (!err)
		err = hashed_stats(t, pid, s, &seen);
	if (!err)
		err = hashed_idle(t, pid, s, idle_min_ns, &seen);
	u64map__clear(&seen);
	return err ? err : steals(t, pid, s);
}

/* The process's per-CPU counters (at its own slot) into its totals: one syscall. */
static void sum_runtime_counts(const struct tracer *t, uint32_t slot, struct at_runtime_stats *rt)
{
	int ncpu = libbpf_num_possible_cpus();
	struct at_runtime_counts *c;

	if (ncpu <= 0 || !(c = calloc((size_t)ncpu, sizeof(*c))))
		return;
	if (!bpf_map_lookup_elem(bpf_map__fd(t->skel->maps.runtime_counts), &slot, c)) {
		for (int i = 0; i < ncpu; i++) {
			rt->spawns += c[i].spawns;
			rt->completed += c[i].completed;
			rt->wakes += c[i].wakes;
			rt->self_wakes += c[i].self_wakes;
			rt->outside_wakes += c[i].outside_wakes;
		}
	}
	free(c);
}

/* Worker ids a snapshot takes (as the model does): beyond, counted as unknown. */
#define SNAPSHOT_MAX_WORKER_ID 4096

int tracer__snapshot(const struct tracer *t, pid_t pid, struct stats *s, bool tasks,
		     uint64_t idle_min_ns, uint64_t at)
{
	const struct at_worker_stats *w = t->skel->bss->worker_stats;
	const struct at_worker_idle *idle = t->skel->bss->worker_idle;
	uint32_t n = 0, worker, slots = t->skel->bss->worker_slots_hi;
	struct timespec now;

	stats__free(s);
	clock_gettime(CLOCK_MONOTONIC, &now);
	s->pid = (uint32_t)pid;
	s->ts = at ? at : (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec;
	s->rt = t->skel->bss->runtime_stats;
	if (slots > AT_MAX_WORKERS)
		slots = AT_MAX_WORKERS;
	for (uint32_t i = 0; i < slots; i++) {
		if (!slot_worker(t, pid, i, &worker))
			continue;
		if (worker == AT_WORKER_PROCESS)
			sum_runtime_counts(t, i, &s->rt);
		else if (worker < SNAPSHOT_MAX_WORKER_ID && worker >= n)
			n = worker + 1;
	}
	s->workers = calloc(n ? n : 1, sizeof(*s->workers));
	s->between = calloc(n ? n : 1, sizeof(*s->between));
	if (!s->workers || !s->between)
		return -ENOMEM;
	/*
	 * This process's workers from their slots. Racing the BPF side: each
	 * number is whole, the set is nearly simultaneous.
	 */
	for (uint32_t i = 0; i < slots; i++) {
		if (!slot_worker(t, pid, i, &worker))
			continue;
		if (worker == AT_WORKER_PROCESS) {
			s->rt.inject = w[i].queue;
		} else if (worker < n) {
			s->workers[worker] = w[i];
			s->between[worker] = idle[i];
		} else {
			s->rt.unknown_workers++;
		}
	}
	s->nr_workers = n;
	/* wakes made by workers count on them; runtime_counts has the rest */
	for (uint32_t i = 0; i < n; i++) {
		s->rt.wakes += s->workers[i].wakes;
		s->rt.self_wakes += s->workers[i].self_wakes;
	}
	if (!tasks)
		return 0;
	{
		uint64_t st[AT_STAT_NR];

		if (tracer__stats(t, st) == 0)
			for (int k = 1; k < AT_EV_KIND_MAX; k++)
				s->dropped += st[AT_STAT_DROP_BASE + k];
	}
	return snapshot_tasks(t, pid, s, idle_min_ns);
}

int tracer__stats(const struct tracer *t, uint64_t stats[AT_STAT_NR])
{
	int ncpu = libbpf_num_possible_cpus();
	uint64_t *vals;
	int fd = bpf_map__fd(t->skel->maps.stats);

	if (ncpu < 0)
		return ncpu;
	vals = calloc((size_t)ncpu, sizeof(*vals));
	if (!vals)
		return -ENOMEM;
	for (__u32 i = 0; i < AT_STAT_NR; i++) {
		stats[i] = 0;
		if (bpf_map_lookup_elem(fd, &i, vals))
			continue;
		for (int c = 0; c < ncpu; c++)
			stats[i] += vals[c];
	}
	free(vals);
	return 0;
}
