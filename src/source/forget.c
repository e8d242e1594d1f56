// SPDX-License-Identifier: MIT
/*
 * What a process that is gone leaves in the maps, freed: its worker slots,
 * its tasks, its steal pairs, its tokio worker counter. A session that
 * follows processes as they come and go would otherwise fill its slots with
 * the dead, and a new process given a dead one's pid would inherit its tasks
 * (tokio numbers the tasks of every process from 1).
 *
 * Called once the process has exited and its probes are detached: no program
 * writes its state any more, and a slot whose owner word is cleared (last)
 * may be claimed by another process at once.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "source/tracer.h"
#include "source/tracer_priv.h"

/* Deletes every key of a hash map that keep() says goes. */
static int delete_keys(int fd, size_t key_size, bool (*gone)(const void *key, const void *ctx),
		       const void *ctx)
{
	char *keys = NULL, cur[64], next[64];
	size_t nr = 0, cap = 0;
	int err = 0;

	if (key_size > sizeof(cur))
		return -EINVAL;
	/* the keys first, then the deletes: deleting while walking restarts the walk */
	for (void *prev = NULL; bpf_map_get_next_key(fd, prev, next) == 0; prev = cur) {
		memcpy(cur, next, key_size);
		if (!gone(cur, ctx))
			continue;
		if (nr == cap) {
			char *k = realloc(keys, (cap = cap ? cap * 2 : 64) * key_size);

			if (!k) {
				err = -ENOMEM;
				break;
			}
			keys = k;
		}
		memcpy(keys + nr++ * key_size, cur, key_size);
	}
	for (size_t i = 0; i < nr; i++)
		bpf_map_delete_elem(fd, keys + i * key_size);
	free(keys);
	return err;
}

static bool task_of(const void *key, const void *ctx)
{
	return ((const struct at_task_key *)key)->tgid == *(const __u32 *)ctx;
}

/* the slots freed: a bit each */
struct slot_set {
	__u64 bits[AT_MAX_WORKERS / 64];
};

static bool slot_in(const struct slot_set *s, __u32 slot)
{
	return slot < AT_MAX_WORKERS && (s->bits[slot / 64] >> (slot % 64) & 1);
}

static bool steal_of(const void *key, const void *ctx)
{
	const struct at_steal_key *k = key;

	return slot_in(ctx, k->thief) || slot_in(ctx, k->victim);
}

/* The worker slots pid owns: statistics cleared, hash entries gone, the owner word last. */
static int free_worker_slots(struct tracer *t, __u32 tgid)
{
	struct at_worker_stats *w = t->skel->bss->worker_stats;
	struct at_worker_idle *idle = t->skel->bss->worker_idle;
	int counts_fd = bpf_map__fd(t->skel->maps.runtime_counts);
	int ncpu = libbpf_num_possible_cpus();
	struct at_runtime_counts *zero;
	struct slot_set freed = { 0 };
	bool any = false;
	int err = 0;

	if (ncpu < 0)
		return ncpu;
	zero = calloc((size_t)ncpu, sizeof(*zero));
	if (!zero)
		return -ENOMEM;
	for (__u32 i = 0; i < AT_MAX_WORKERS; i++) {
		__u64 owner = __atomic_load_n(&idle[i].owner, __ATOMIC_ACQUIRE);
		struct at_worker_key key = { .tgid = tgid, .worker = (__u32)owner };

		if (!owner || owner >> 32 != tgid)
			continue;
		bpf_map_delete_elem(bpf_map__fd(t->skel->maps.worker_slots), &key);
		memset(&w[i], 0, sizeof(w[i]));
		memset(&idle[i], 0, offsetof(struct at_worker_idle, owner));
		bpf_map_update_elem(counts_fd, &i, zero, BPF_ANY);
		freed.bits[i / 64] |= 1ull << (i % 64);
		any = true;
	}
	free(zero);
	if (any)
		err = delete_keys(bpf_map__fd(t->skel->maps.steals), sizeof(struct at_steal_key),
				  steal_of, &freed);
	/* now others may claim them */
	for (__u32 i = 0; i < AT_MAX_WORKERS; i++)
		if (slot_in(&freed, i))
			__atomic_store_n(&idle[i].owner, 0, __ATOMIC_RELEASE);
	return err;
}

/* The task slots pid's tasks hold, given back whole. */
static void free_task_slots(struct tracer *t, __u32 tgid)
{
	static const struct at_task_slot empty;
	int fd = bpf_map__fd(t->skel->maps.task_slots);

	for (__u32 i = 0; i < t->nr_slots; i++) {
		const struct at_task_slot *s = &t->slots[i];

		/*
		 * Only slots that hold a task of pid: nothing else writes them
		 * (a free slot is claimed by a compare-and-swap a whole-value
		 * write could undo).
		 */
		if (__atomic_load_n(&s->task, __ATOMIC_ACQUIRE) && s->tgid == tgid)
			bpf_map_update_elem(fd, &i, &empty, BPF_ANY);
	}
}

int tracer__forget(struct tracer *t, pid_t pid)
{
	__u32 tgid = (__u32)pid;
	int err, e;

	if (pid <= 0)
		return -EINVAL;
	err = free_worker_slots(t, tgid);
	free_task_slots(t, tgid);
	e = delete_keys(bpf_map__fd(t->skel->maps.tasks), sizeof(struct at_task_key), task_of,
			&tgid);
	if (!err)
		err = e;
	e = delete_keys(bpf_map__fd(t->skel->maps.task_stats), sizeof(struct at_task_key),
			task_of, &tgid);
	if (!err)
		err = e;
	bpf_map_delete_elem(bpf_map__fd(t->skel->maps.tokio_next_worker), &tgid);
	return err;
}
