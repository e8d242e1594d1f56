// SPDX-License-Identifier: MIT
#include "tracer.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "asynctraced.skel.h"

struct tracer {
	struct asynctraced_bpf *skel;
	struct ring_buffer *rb;
	struct bpf_link **links;
	size_t nr_links;
	enum sched_hook hook;
	tracer_record_fn fn;
	void *ctx;
	size_t budget;		/* records left in this tracer__consume() */
	size_t consumed;
};

/* The sentinel that makes libbpf stop draining: the budget is spent. */
#define BUDGET_SPENT (-EAGAIN)

static int on_record(void *ctx, void *data, size_t size)
{
	struct tracer *t = ctx;
	int err = t->fn(t->ctx, data, size);

	if (err)
		return err < 0 ? err : -err;
	/* libbpf has already consumed this record when we stop here. */
	return ++t->consumed >= t->budget ? BUDGET_SPENT : 0;
}

int tracer__check_btf(const char *path)
{
	return access(path ? path : "/sys/kernel/btf/vmlinux", R_OK) ? -errno : 0;
}

static int open_and_load(struct tracer *t, const struct tracer_opts *o, enum sched_hook hook)
{
	LIBBPF_OPTS(bpf_object_open_opts, open_opts, .btf_custom_path = o->btf_path);
	struct asynctraced_bpf *skel;
	int err;

	skel = asynctraced_bpf__open_opts(&open_opts);
	if (!skel)
		return -errno;
	skel->rodata->target_tgid = (__u32)o->pid;
	skel->rodata->wakeup_bytes = o->ringbuf_bytes / 16;
	err = bpf_map__set_max_entries(skel->maps.events, (__u32)o->ringbuf_bytes);
	if (!err)
		err = bpf_program__set_autoload(skel->progs.handle_sched_switch,
						hook == SCHED_HOOK_TP_BTF);
	if (!err)
		err = bpf_program__set_autoload(skel->progs.handle_sched_switch_raw,
						hook == SCHED_HOOK_RAW_TP);
	if (!err)
		err = asynctraced_bpf__load(skel);
	if (err) {
		asynctraced_bpf__destroy(skel);
		return err;
	}
	t->skel = skel;
	t->hook = hook;
	return 0;
}

int tracer__new(struct tracer **tp, const struct tracer_opts *o, tracer_record_fn fn, void *ctx)
{
	struct tracer *t = calloc(1, sizeof(*t));
	int err;

	if (!t)
		return -ENOMEM;
	t->fn = fn;
	t->ctx = ctx;
	if (o->sched_hook == SCHED_HOOK_AUTO) {
		/* tp_btf is cheaper; kernels without it still have raw_tp. */
		err = open_and_load(t, o, SCHED_HOOK_TP_BTF);
		if (err)
			err = open_and_load(t, o, SCHED_HOOK_RAW_TP);
	} else {
		err = open_and_load(t, o, o->sched_hook);
	}
	if (err)
		goto fail;
	t->rb = ring_buffer__new(bpf_map__fd(t->skel->maps.events), on_record, t, NULL);
	if (!t->rb) {
		err = -errno;
		goto fail;
	}
	*tp = t;
	return 0;
fail:
	tracer__free(t);
	return err;
}

static int add_link(struct tracer *t, struct bpf_link *link)
{
	struct bpf_link **links;

	if (!link)
		return -errno;
	links = realloc(t->links, (t->nr_links + 1) * sizeof(*links));
	if (!links) {
		bpf_link__destroy(link);
		return -ENOMEM;
	}
	t->links = links;
	t->links[t->nr_links++] = link;
	return 0;
}

int tracer__attach_sched(struct tracer *t)
{
	struct bpf_program *prog = t->hook == SCHED_HOOK_TP_BTF
					   ? t->skel->progs.handle_sched_switch
					   : t->skel->progs.handle_sched_switch_raw;

	return add_link(t, bpf_program__attach(prog));
}

static struct bpf_program *usdt_prog(struct tracer *t, const char *probe)
{
	const struct {
		const char *probe;
		struct bpf_program *prog;
	} table[] = {
		{ "task_spawn", t->skel->progs.usdt_task_spawn },
		{ "poll_begin", t->skel->progs.usdt_poll_begin },
		{ "poll_end", t->skel->progs.usdt_poll_end },
		{ "wake", t->skel->progs.usdt_wake },
		{ "steal", t->skel->progs.usdt_steal },
		{ "worker_park", t->skel->progs.usdt_worker_park },
		{ "worker_unpark", t->skel->progs.usdt_worker_unpark },
	};

	for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++)
		if (!strcmp(table[i].probe, probe))
			return table[i].prog;
	return NULL;
}

int tracer__attach_usdt(struct tracer *t, const char *binary, const char *probe)
{
	struct bpf_program *prog = usdt_prog(t, probe);

	if (!prog)
		return -ENOENT;
	return add_link(t, bpf_program__attach_usdt(prog, (pid_t)t->skel->rodata->target_tgid,
						    binary, AT_USDT_PROVIDER, probe, NULL));
}

int tracer__fd(const struct tracer *t)
{
	return ring_buffer__epoll_fd(t->rb);
}

int tracer__consume(struct tracer *t, size_t max)
{
	int err;

	t->budget = max ? max : SIZE_MAX;
	t->consumed = 0;
	err = ring_buffer__consume(t->rb);
	if (err < 0 && err != BUDGET_SPENT)
		return err;
	return t->consumed > INT32_MAX ? INT32_MAX : (int)t->consumed;
}

void tracer__detach(struct tracer *t)
{
	/* Reverse order: USDT probes first, sched_switch (attached first) last. */
	while (t->nr_links)
		bpf_link__destroy(t->links[--t->nr_links]);
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

const char *tracer__sched_hook(const struct tracer *t)
{
	return t->hook == SCHED_HOOK_TP_BTF ? "tp_btf" : "raw_tp";
}

size_t tracer__nr_links(const struct tracer *t)
{
	return t->nr_links;
}

void tracer__free(struct tracer *t)
{
	if (!t)
		return;
	tracer__detach(t);
	ring_buffer__free(t->rb);
	asynctraced_bpf__destroy(t->skel);
	free(t->links);
	free(t);
}
