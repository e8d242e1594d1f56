// SPDX-License-Identifier: MIT
#include "source/tracer.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "lib/util.h"
#include "source/rings.h"
#include "source/tracer_priv.h"
#include "source/uprobe_multi.h"

/* Threads that remove uprobes at once when detaching (at most 64). */
#define DETACH_THREADS 32

/*
 * How long a record may take from its timestamp to its ring: a program
 * preempted in between. Live reading holds records back this long, unless
 * every CPU's ring already has a later one.
 */
#define RING_MARGIN_NS (10 * 1000 * 1000ull)

static int on_record(void *ctx, const void *data, size_t size)
{
	struct tracer *t = ctx;
	int err = t->fn(t->ctx, data, size);

	return err > 0 ? -err : err;
}

/* Each CPU's share of the ring buffer space: a power of two, at least a page. */
static size_t ring_size_per_cpu(uint64_t total, int ncpu)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE), per = page;

	while (per * 2 * (size_t)ncpu <= total)
		per *= 2;
	return per;
}

/* The rings, one per possible CPU; the first is the rings map's template. */
static int make_rings(struct tracer *t)
{
	if (t->ring_fds)
		return 0;
	t->ring_fds = calloc((size_t)t->nr_rings, sizeof(*t->ring_fds));
	if (!t->ring_fds)
		return -ENOMEM;
	for (int i = 0; i < t->nr_rings; i++)
		t->ring_fds[i] = -1;
	for (int i = 0; i < t->nr_rings; i++) {
		t->ring_fds[i] = bpf_map_create(BPF_MAP_TYPE_RINGBUF, "ring", 0, 0,
						(__u32)t->ring_size, NULL);
		if (t->ring_fds[i] < 0) {
			int err = -errno;

			/* none, rather than some: a retry makes them again */
			while (i--)
				close(t->ring_fds[i]);
			free(t->ring_fds);
			t->ring_fds = NULL;
			return err;
		}
	}
	return 0;
}

/* The rings into the map the programs pick theirs from, then read them. */
static int plug_rings(struct tracer *t)
{
	int outer = bpf_map__fd(t->skel->maps.rings);

	for (__u32 i = 0; i < (__u32)t->nr_rings; i++)
		if (bpf_map_update_elem(outer, &i, &t->ring_fds[i], BPF_ANY))
			return -errno;
	return rings__new(&t->rings, t->ring_fds, t->nr_rings, t->ring_size, on_record, t);
}

int tracer__check_btf(const char *path)
{
	return access(path ? path : "/sys/kernel/btf/vmlinux", R_OK) ? -errno : 0;
}

static struct bpf_program *uprobe_prog(struct asynctraced_bpf *skel, bool empty,
				       enum tracer_uprobe which, bool *ret)
{
	const struct {
		struct bpf_program *prog;
		bool ret;
	} table[] = {
		[UPROBE_TOKIO_POLL] = { skel->progs.tokio_poll, false },
		[UPROBE_TOKIO_POLL_RET] = { skel->progs.tokio_poll_ret, true },
		[UPROBE_TOKIO_WAKE] = { skel->progs.tokio_wake, false },
		[UPROBE_TOKIO_SCHEDULE] = { skel->progs.tokio_schedule, false },
		[UPROBE_TOKIO_BIND_RET] = { skel->progs.tokio_bind_ret, true },
		[UPROBE_TOKIO_BIND_INNER] = { skel->progs.tokio_bind_inner, false },
		[UPROBE_TOKIO_REMOVE] = { skel->progs.tokio_remove, false },
		[UPROBE_TOKIO_STEAL_RET] = { skel->progs.tokio_steal_ret, true },
		[UPROBE_GO_CASGSTATUS] = { skel->progs.go_casgstatus, false },
		[UPROBE_GO_NEWPROC1_RET] = { skel->progs.go_newproc1_ret, false },
		[UPROBE_GO_RUNQSTEAL] = { skel->progs.go_runqsteal, false },
		[UPROBE_GO_RUNQSTEAL_TOOK] = { skel->progs.go_runqsteal_took, false },
		[UPROBE_GO_HANDOFFP] = { skel->progs.go_handoffp, false },
		[UPROBE_GO_STOP_THE_WORLD] = { skel->progs.go_stop_the_world, false },
		[UPROBE_GO_PREEMPT_PARK] = { skel->progs.go_preempt_park, false },
	};

	*ret = table[which].ret;
	if (empty)
		return *ret ? skel->progs.floor_uretprobe : skel->progs.floor_uprobe;
	return table[which].prog;
}

/* The program for asynctrace probe id (enum at_usdt_probe, 0 .. AT_USDT_NR_PROBES - 1). */
static struct bpf_program *usdt_prog_of(struct asynctraced_bpf *skel, bool empty, int id)
{
	struct bpf_program *progs[AT_USDT_NR_PROBES] = {
		[AT_USDT_TASK_SPAWN] = skel->progs.usdt_task_spawn,
		[AT_USDT_POLL_BEGIN] = skel->progs.usdt_poll_begin,
		[AT_USDT_POLL_END] = skel->progs.usdt_poll_end,
		[AT_USDT_WAKE] = skel->progs.usdt_wake,
		[AT_USDT_STEAL] = skel->progs.usdt_steal,
		[AT_USDT_WORKER_PARK] = skel->progs.usdt_worker_park,
		[AT_USDT_WORKER_UNPARK] = skel->progs.usdt_worker_unpark,
	};

	return empty ? skel->progs.floor_usdt : progs[id];
}

/* The sched_switch program for a hook, real or empty. */
static struct bpf_program *sched_prog(struct asynctraced_bpf *skel, bool empty,
				      enum sched_hook hook)
{
	if (hook == SCHED_HOOK_TP_BTF)
		return empty ? skel->progs.floor_sched_switch : skel->progs.handle_sched_switch;
	return empty ? skel->progs.floor_sched_switch_raw : skel->progs.handle_sched_switch_raw;
}

/*
 * Which programs load: the real ones, or (empty) the floor's; of either,
 * the one sched_switch hook asked for.
 */
static int choose_programs(struct asynctraced_bpf *skel, bool empty, enum sched_hook hook,
			   bool births, bool stacks, bool sample, bool escalate)
{
	struct bpf_program *prog;
	int err = 0;

	/*
	 * sample mode: not one uprobe program (they are BPF_PROG_TYPE_KPROBE),
	 * unless escalations will attach them
	 */
	bpf_object__for_each_program(prog, skel->obj) {
		bool floor = !strncmp(bpf_program__name(prog), "floor_", 6);
		bool uprobe = bpf_program__type(prog) == BPF_PROG_TYPE_KPROBE;

		if (!err)
			err = bpf_program__set_autoload(prog, floor == empty &&
								     !(sample && uprobe && !escalate));
	}
	if (!err)
		err = bpf_program__set_autoload(sched_prog(skel, empty, SCHED_HOOK_TP_BTF),
						hook == SCHED_HOOK_TP_BTF);
	if (!err)
		err = bpf_program__set_autoload(sched_prog(skel, empty, SCHED_HOOK_RAW_TP),
						hook == SCHED_HOOK_RAW_TP);
	if (!err)
		err = bpf_program__set_autoload(skel->progs.on_exec, births);
	if (!err)
		err = bpf_program__set_autoload(skel->progs.on_fork, births);
	if (!err)
		err = bpf_program__set_autoload(skel->progs.on_cpu_sample, (stacks || sample) && !empty);
	if (!err)
		err = bpf_program__set_autoload(skel->progs.sample_signal, sample && !empty);
	return err;
}

static int open_and_load(struct tracer *t, const struct tracer_opts *o, enum sched_hook hook,
			 bool multi)
{
	LIBBPF_OPTS(bpf_object_open_opts, open_opts, .btf_custom_path = o->btf_path);
	struct asynctraced_bpf *skel;
	int err;

	skel = asynctraced_bpf__open_opts(&open_opts);
	if (!skel)
		return -errno;
	t->nr_rings = libbpf_num_possible_cpus();
	if (t->nr_rings <= 0) {
		asynctraced_bpf__destroy(skel);
		return t->nr_rings ? t->nr_rings : -ENODEV;
	}
	t->ring_size = ring_size_per_cpu(o->ringbuf_bytes, t->nr_rings);
	skel->rodata->wakeup_bytes = t->ring_size / 16;
	skel->rodata->trace_events = o->trace_events;
	skel->rodata->long_poll_ns = o->detect.long_poll_ns;
	skel->rodata->sched_delay_ns = o->detect.sched_delay_ns;
	skel->rodata->starve_depth = o->detect.starve_depth;
	skel->rodata->stack_after_ns = o->stack_after_ns;
	skel->rodata->sample_period_ns = o->sample_period_ns;
	/* 8 KiB a kept stack: without --stacks, room for none (one entry, unused) */
	if (!o->stack_after_ns)
		bpf_map__set_max_entries(skel->maps.asleep_stacks, 1);
	skel->rodata->task_slot_bits = (__u32)__builtin_ctz(o->task_slots);
	if (o->usdt_specs)
		memcpy((void *)skel->rodata->usdt_fixed, o->usdt_specs,
		       sizeof(skel->rodata->usdt_fixed));
	err = make_rings(t);
	if (!err)
		err = bpf_map__set_max_entries(skel->maps.rings, (__u32)t->nr_rings);
	if (!err)
		err = bpf_map__set_inner_map_fd(skel->maps.rings, t->ring_fds[0]);
	if (!err)
		err = bpf_map__set_max_entries(skel->maps.task_slots, o->task_slots);
	if (!err)
		err = choose_programs(skel, o->empty_programs, hook, o->births != NULL,
				      o->stack_after_ns != 0, o->sample_period_ns != 0, o->escalate);
	for (int u = 0; multi && !err && u < UPROBE_MAX; u++) {
		bool ret;

		err = bpf_program__set_expected_attach_type(
			uprobe_prog(skel, o->empty_programs, u, &ret), AT_BPF_TRACE_UPROBE_MULTI);
	}
	for (int id = 0; multi && !err && id < AT_USDT_NR_PROBES; id++)
		err = bpf_program__set_expected_attach_type(
			usdt_prog_of(skel, o->empty_programs, id), AT_BPF_TRACE_UPROBE_MULTI);
	if (!err)
		err = asynctraced_bpf__load(skel);
	if (err) {
		asynctraced_bpf__destroy(skel);
		return err;
	}
	t->skel = skel;
	t->hook = hook;
	t->multi = multi;
	t->empty = o->empty_programs;
	return 0;
}

/*
 * -v: each loaded program and the instructions the verifier went through
 * for it (its limit is a million a program: a program near it is one
 * compiler or kernel away from not loading at all).
 */
static void say_verified(const struct asynctraced_bpf *skel)
{
	struct bpf_program *prog;

	bpf_object__for_each_program(prog, skel->obj) {
		struct bpf_prog_info info = {};
		__u32 len = sizeof(info);

		if (!bpf_program__autoload(prog) ||
		    bpf_obj_get_info_by_fd(bpf_program__fd(prog), &info, &len))
			continue;
		info_msg("BPF program %s: %u instructions verified\n", bpf_program__name(prog),
			 info.verified_insns);
	}
}

int tracer__new(struct tracer **tp, const struct tracer_opts *o, tracer_record_fn fn, void *ctx)
{
	struct tracer *t = calloc(1, sizeof(*t));
	int err;

	if (!t)
		return -ENOMEM;
	t->fn = fn;
	t->ctx = ctx;
	t->birth_fn = o->births;
	t->birth_ctx = o->births_ctx;
	t->dumps = calloc(DUMP_NR, sizeof(*t->dumps));
	if (!t->dumps) {
		free(t);
		return -ENOMEM;
	}
	/* uprobe_multi where the kernel has it (6.6); one link per uprobe otherwise. */
	for (int multi = 1; multi >= 0; multi--) {
		if (o->sched_hook == SCHED_HOOK_AUTO) {
			/* tp_btf is cheaper; kernels without it still have raw_tp. */
			err = open_and_load(t, o, SCHED_HOOK_TP_BTF, multi);
			if (err)
				err = open_and_load(t, o, SCHED_HOOK_RAW_TP, multi);
		} else {
			err = open_and_load(t, o, o->sched_hook, multi);
		}
		if (!err)
			break;
	}
	if (err)
		goto fail;
	if (o->verbose)
		say_verified(t->skel);
	err = plug_rings(t);
	if (err)
		goto fail;
	t->nr_slots = o->task_slots;
	t->slots_size = sizeof(struct at_task_slot) * t->nr_slots;
	t->slots = mmap(NULL, t->slots_size, PROT_READ, MAP_SHARED,
			bpf_map__fd(t->skel->maps.task_slots), 0);
	if (t->slots == MAP_FAILED) {
		t->slots = NULL;
		err = -errno;
		goto fail;
	}
	*tp = t;
	return 0;
fail:
	tracer__free(t);
	return err;
}

/* Sets or clears pid's bit in a bitmap of tgids (traced_tgids, probed_tgids). */
static void tgid_bit(__u64 *set, pid_t pid, bool on)
{
	__u64 *word = &set[pid / 64], bit = 1ull << (pid % 64);

	if (on)
		__atomic_fetch_or(word, bit, __ATOMIC_RELAXED);
	else
		__atomic_fetch_and(word, ~bit, __ATOMIC_RELAXED);
}

static void follow_bit(struct tracer *t, pid_t pid, bool on)
{
	tgid_bit(t->skel->bss->traced_tgids, pid, on);
}

void tracer__escalate(struct tracer *t, pid_t pid, bool on)
{
	const struct at_worker_idle *idle = t->skel->bss->worker_idle;

	if (pid <= 0 || (__u32)pid >= AT_MAX_TGID)
		return;
	/*
	 * tokio's queue depths are the probes' pushes less their pops: a task
	 * the last escalation's probes saw queued and not polled is no longer
	 * in the queue, for all anyone knows. The count starts anew.
	 */
	if (on)
		for (__u32 i = 0; i < AT_MAX_WORKERS; i++)
			if (__atomic_load_n(&idle[i].owner, __ATOMIC_ACQUIRE) >> 32 == (__u32)pid)
				__atomic_store_n(&t->skel->bss->tokio_depth[i][0], 0, __ATOMIC_RELAXED);
	tgid_bit(t->skel->bss->probed_tgids, pid, on);
}

int tracer__follow(struct tracer *t, pid_t pid, uint32_t flags)
{
	__u32 tgid = (__u32)pid;

	if (pid <= 0 || tgid >= AT_MAX_TGID)
		return -EINVAL;
	/* before any of its threads is met: each keeps the flags it was met with */
	if (bpf_map_update_elem(bpf_map__fd(t->skel->maps.target_flags), &tgid, &flags, BPF_ANY))
		return -errno;
	follow_bit(t, pid, true);
	return thread_samples__follow(t, pid);
}

int tracer__tokio_base(struct tracer *t, pid_t pid, uint64_t base, const uint64_t *defer_ret,
		       size_t nr_defer)
{
	struct at_tokio_process p = { .base = base };
	__u32 tgid = (__u32)pid;

	for (size_t i = 0; i < nr_defer && i < AT_TOKIO_DEFER_SITES; i++)
		p.defer_ret[i] = defer_ret[i];
	if (bpf_map_update_elem(bpf_map__fd(t->skel->maps.tokio_bases), &tgid, &p, BPF_ANY))
		return -errno;
	return 0;
}

int tracer__tokio_current(struct tracer *t, pid_t pid, int64_t tpoff, uint32_t task_id,
			  uint32_t budget)
{
	int fd = bpf_map__fd(t->skel->maps.tokio_bases);
	struct at_tokio_process p;
	__u32 tgid = (__u32)pid;

	if (bpf_map_lookup_elem(fd, &tgid, &p))
		return -errno;
	p.ctx_tpoff = tpoff;
	p.ctx_task_id = (__u16)task_id;
	p.ctx_budget = (__u16)budget;
	if (bpf_map_update_elem(fd, &tgid, &p, BPF_EXIST))
		return -errno;
	return 0;
}

int tracer__go_layout(struct tracer *t, pid_t pid, const struct at_go_layout *l)
{
	__u32 tgid = (__u32)pid;

	if (bpf_map_update_elem(bpf_map__fd(t->skel->maps.go_layouts), &tgid, l, BPF_ANY))
		return -errno;
	return 0;
}

void tracer__unfollow(struct tracer *t, pid_t pid)
{
	__u32 tgid = (__u32)pid;

	if (pid <= 0 || tgid >= AT_MAX_TGID)
		return;
	follow_bit(t, pid, false);
	thread_samples__unfollow(t, pid);
	tracer__escalate(t, pid, false);
	bpf_map_delete_elem(bpf_map__fd(t->skel->maps.target_flags), &tgid);
	bpf_map_delete_elem(bpf_map__fd(t->skel->maps.tokio_bases), &tgid);
	bpf_map_delete_elem(bpf_map__fd(t->skel->maps.go_layouts), &tgid);
	bpf_map_delete_elem(bpf_map__fd(t->skel->maps.usdt_currents), &tgid);
}

int tracer__usdt_current(struct tracer *t, pid_t pid, uint64_t addr)
{
	__u32 tgid = (__u32)pid;

	if (bpf_map_update_elem(bpf_map__fd(t->skel->maps.usdt_currents), &tgid, &addr, BPF_ANY))
		return -errno;
	return 0;
}

int tracer__add_link(struct tracer *t, long owner, struct bpf_link *link)
{
	struct bpf_link **links;
	long *owners;

	if (!link)
		return -errno;
	links = realloc(t->links, (t->nr_links + 1) * sizeof(*links));
	if (links)
		t->links = links;
	owners = links ? realloc(t->link_owners, (t->nr_links + 1) * sizeof(*owners)) : NULL;
	if (!owners) {
		bpf_link__destroy(link);
		return -ENOMEM;
	}
	t->link_owners = owners;
	t->link_owners[t->nr_links] = owner;
	t->links[t->nr_links++] = link;
	return 0;
}

static int on_birth(void *ctx, void *data, size_t size)
{
	struct tracer *t = ctx;
	__u32 tgid;

	if (size >= sizeof(tgid)) {
		memcpy(&tgid, data, sizeof(tgid));
		t->birth_fn(t->birth_ctx, (pid_t)tgid);
	}
	return 0;
}

int tracer__attach_sched(struct tracer *t)
{
	int err = tracer__add_link(t, 0, bpf_program__attach(sched_prog(t->skel, t->empty, t->hook)));

	if (err || !t->birth_fn)
		return err;
	t->births = ring_buffer__new(bpf_map__fd(t->skel->maps.births), on_birth, t, NULL);
	if (!t->births)
		return -errno;
	err = tracer__add_link(t, 0, bpf_program__attach(t->skel->progs.on_exec));
	if (!err)
		err = tracer__add_link(t, 0, bpf_program__attach(t->skel->progs.on_fork));
	return err;
}

int tracer__attach_samples(struct tracer *t, uint32_t hz)
{
	if (!bpf_program__autoload(t->skel->progs.on_cpu_sample))
		return 0;
	if (bpf_program__autoload(t->skel->progs.sample_signal)) {
		int err = tracer__add_link(t, 0, bpf_program__attach(t->skel->progs.sample_signal));

		if (err)
			return err;
	}
	t->sample_hz = hz;
	return 0;
}

int tracer__births_fd(const struct tracer *t)
{
	return t->births ? ring_buffer__epoll_fd(t->births) : -1;
}

void tracer__births_consume(struct tracer *t)
{
	if (t->births)
		ring_buffer__consume(t->births);
}


int uprobe_multi__link(int prog_fd, const char *path, const uint64_t *offsets,
		       const uint64_t *ref_ctrs, const uint64_t *cookies, __u32 cnt, bool ret,
		       __u32 pid)
{
	union {
		struct link_create_uprobe_multi uprobe;
		char attr[144]; /* what union bpf_attr was when uprobe_multi came */
	} a;
	int fd;

	memset(&a, 0, sizeof(a));
	a.uprobe.prog_fd = (__u32)prog_fd;
	a.uprobe.attach_type = AT_BPF_TRACE_UPROBE_MULTI;
	a.uprobe.path = (uintptr_t)path;
	a.uprobe.offsets = (uintptr_t)offsets;
	a.uprobe.ref_ctr_offsets = (uintptr_t)ref_ctrs;
	a.uprobe.cookies = (uintptr_t)cookies;
	a.uprobe.cnt = cnt;
	a.uprobe.multi_flags = ret ? AT_BPF_F_UPROBE_MULTI_RETURN : 0;
	a.uprobe.pid = pid;
	fd = (int)syscall(__NR_bpf, BPF_LINK_CREATE, &a, sizeof(a));
	return fd < 0 ? -errno : fd;
}

static int attach_multi(struct tracer *t, pid_t pid, long owner, struct bpf_program *prog,
			bool ret, const char *binary, const uint64_t *offsets,
			const uint64_t *ref_ctrs, const uint64_t *cookies, size_t n)
{
	long *owners;
	int *fds, fd;

	fds = realloc(t->multi_fds, (t->nr_multi + 1) * sizeof(*fds));
	if (!fds)
		return -ENOMEM;
	t->multi_fds = fds;
	owners = realloc(t->multi_owners, (t->nr_multi + 1) * sizeof(*owners));
	if (!owners)
		return -ENOMEM;
	t->multi_owners = owners;
	/* pid 0: every process */
	fd = uprobe_multi__link(bpf_program__fd(prog), binary, offsets, ref_ctrs, cookies, (__u32)n,
				ret, pid < 0 ? 0 : (__u32)pid);
	if (fd < 0)
		return fd;
	t->multi_owners[t->nr_multi] = owner;
	t->multi_fds[t->nr_multi++] = fd;
	return 0;
}

/* n probes of prog in binary, each with its cookie and semaphore (ref_ctrs: NULL for none). */
static int attach_probes(struct tracer *t, pid_t pid, long owner, struct bpf_program *prog,
			 bool ret, const char *binary, const uint64_t *offsets,
			 const uint64_t *ref_ctrs, const uint64_t *cookies, size_t n)
{
	size_t before = t->nr_links;

	if (!n)
		return 0;
	if (t->multi)
		return attach_multi(t, pid, owner, prog, ret, binary, offsets, ref_ctrs, cookies,
				    n);
	for (size_t i = 0; i < n; i++) {
		LIBBPF_OPTS(bpf_uprobe_opts, opts, .bpf_cookie = cookies[i], .retprobe = ret,
			    .ref_ctr_offset = ref_ctrs ? (size_t)ref_ctrs[i] : 0);
		int err = tracer__add_link(t, owner,
				   bpf_program__attach_uprobe_opts(prog, pid, binary, offsets[i],
								   &opts));

		/* all or none, as a uprobe_multi link: the caller may try them again */
		while (err && t->nr_links > before)
			bpf_link__destroy(t->links[--t->nr_links]);
		if (err)
			return err;
	}
	return 0;
}

int tracer__attach_uprobes(struct tracer *t, pid_t pid, long owner, enum tracer_uprobe which,
			   const char *binary, const uint64_t *offsets, const uint64_t *cookies,
			   size_t n)
{
	bool ret;
	struct bpf_program *prog = uprobe_prog(t->skel, t->empty, which, &ret);

	return attach_probes(t, pid, owner, prog, ret, binary, offsets, NULL, cookies, n);
}

/*
 * The id of spec in usdt_specs, stored there the first time it is seen: a
 * build of a runtime has one spec a probe, so ids are few and kept for the
 * session (what a process gone leaves is another process's, often).
 */
static int usdt_spec_id(struct tracer *t, const struct at_usdt_spec *spec, __u32 *id)
{
	struct at_usdt_spec *grown;
	int err;

	for (__u32 i = 0; i < t->nr_usdt_specs; i++)
		if (!memcmp(&t->usdt_specs[i], spec, sizeof(*spec))) {
			*id = i;
			return 0;
		}
	if (t->nr_usdt_specs == AT_USDT_MAX_SPECS)
		return -ENOSPC;
	grown = realloc(t->usdt_specs, (t->nr_usdt_specs + 1) * sizeof(*grown));
	if (!grown)
		return -ENOMEM;
	t->usdt_specs = grown;
	*id = t->nr_usdt_specs;
	err = bpf_map__update_elem(t->skel->maps.usdt_specs, id, sizeof(*id), spec,
				   sizeof(*spec), BPF_ANY);
	if (err)
		return err;
	grown[t->nr_usdt_specs++] = *spec;
	return 0;
}

int tracer__attach_usdt(struct tracer *t, pid_t pid, long owner, const char *binary, int id,
			const uint64_t *offsets, const uint64_t *ref_ctrs,
			const struct at_usdt_spec *specs, size_t n)
{
	struct bpf_program *prog = id >= 0 && id < AT_USDT_NR_PROBES
					   ? usdt_prog_of(t->skel, t->empty, id)
					   : NULL;
	uint64_t *cookies;
	int err = 0;

	if (!prog)
		return -ENOENT;
	cookies = calloc(n ? n : 1, sizeof(*cookies));
	if (!cookies)
		return -ENOMEM;
	for (size_t i = 0; i < n && !err; i++) {
		__u32 spec_id;

		err = usdt_spec_id(t, &specs[i], &spec_id);
		cookies[i] = spec_id;
	}
	if (!err)
		err = attach_probes(t, pid, owner, prog, false, binary, offsets, ref_ctrs, cookies,
				    n);
	free(cookies);
	return err;
}

/* An owner's links, destroyed on a thread of their own (each waits for RCU). */
struct reap_job {
	struct reap_job *next;
	pthread_t thread;
	bool started;
	int done;		/* atomic: the thread has finished */
	struct bpf_link **links;
	size_t nr_links;
	int *fds;		/* uprobe_multi links */
	size_t nr_fds;
};

static void *reap(void *arg)
{
	struct reap_job *job = arg;

	for (size_t i = 0; i < job->nr_links; i++)
		bpf_link__destroy(job->links[i]);
	for (size_t i = 0; i < job->nr_fds; i++)
		close(job->fds[i]);
	__atomic_store_n(&job->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

/* Joins the reaping threads that are done (all: every one, waiting). */
static void join_reaped(struct tracer *t, bool all)
{
	struct reap_job **p = &t->reaping;

	while (*p) {
		struct reap_job *job = *p;

		if (!all && !__atomic_load_n(&job->done, __ATOMIC_ACQUIRE)) {
			p = &job->next;
			continue;
		}
		if (job->started)
			pthread_join(job->thread, NULL);
		*p = job->next;
		free(job->links);
		free(job->fds);
		free(job);
	}
}

void tracer__detach_owner(struct tracer *t, long owner)
{
	struct reap_job *job;
	size_t n = 0;

	if (!owner)
		return; /* the session's own hooks go with the session */
	join_reaped(t, false);
	job = calloc(1, sizeof(*job));
	if (job) {
		job->links = calloc(t->nr_links + 1, sizeof(*job->links));
		job->fds = calloc(t->nr_multi + 1, sizeof(*job->fds));
	}
	for (size_t i = 0; i < t->nr_links; i++) {
		if (t->link_owners[i] != owner) {
			t->links[n] = t->links[i];
			t->link_owners[n++] = t->link_owners[i];
		} else if (job && job->links) {
			job->links[job->nr_links++] = t->links[i];
		} else {
			bpf_link__destroy(t->links[i]);
		}
	}
	t->nr_links = n;
	n = 0;
	for (size_t i = 0; i < t->nr_multi; i++) {
		if (t->multi_owners[i] != owner) {
			t->multi_fds[n] = t->multi_fds[i];
			t->multi_owners[n++] = t->multi_owners[i];
		} else if (job && job->fds) {
			job->fds[job->nr_fds++] = t->multi_fds[i];
		} else {
			close(t->multi_fds[i]);
		}
	}
	t->nr_multi = n;
	if (!job)
		return;
	if (!job->nr_links && !job->nr_fds) {
		/* owner held nothing (a process's samples, none taken): no thread for it */
		free(job->links);
		free(job->fds);
		free(job);
		return;
	}
	/*
	 * Off the caller's thread: removing a uprobe waits for an RCU grace
	 * period, tens of ms each, and the session's loop must go on draining.
	 */
	job->started = !pthread_create(&job->thread, NULL, reap, job);
	if (!job->started)
		reap(job);
	job->next = t->reaping;
	t->reaping = job;
}

int tracer__fd(const struct tracer *t)
{
	return rings__fd(t->rings);
}

int tracer__consume(struct tracer *t, size_t max, bool all)
{
	struct timespec now;
	uint64_t until = UINT64_MAX;
	int n;

	if (!all) {
		clock_gettime(CLOCK_MONOTONIC, &now);
		until = (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec -
			RING_MARGIN_NS;
		return rings__consume(t->rings, max, until);
	}
	/* A program still writing a record holds the rest back: give it 100 ms. */
	for (int tries = 0; tries < 100; tries++) {
		n = rings__consume(t->rings, max, until);
		if (n != 0 || !rings__pending(t->rings))
			return n;
		usleep(1000);
	}
	return 0;
}

struct detach_job {
	struct bpf_link **links;
	size_t nr;
};

static void *detach_some(void *arg)
{
	struct detach_job *job = arg;

	for (size_t i = 0; i < job->nr; i++)
		bpf_link__destroy(job->links[i]);
	return NULL;
}

/*
 * Removing a uprobe waits for an RCU grace period (~100 ms here), one link
 * after the other: a tokio binary with hundreds of poll instances would take
 * minutes to leave. Threads let those waits overlap.
 */
void tracer__detach(struct tracer *t)
{
	pthread_t threads[DETACH_THREADS];
	struct detach_job jobs[DETACH_THREADS];
	size_t nr = t->nr_links, per, started = 0;

	join_reaped(t, true);
	while (t->nr_multi)
		close(t->multi_fds[--t->nr_multi]);
	if (!nr)
		return;
	/* The probes first, sched_switch (attached first) last, on this thread. */
	nr--;
	per = (nr + DETACH_THREADS - 1) / DETACH_THREADS;
	for (size_t i = 0; i < DETACH_THREADS && i * per < nr; i++) {
		jobs[i].links = t->links + 1 + i * per;
		jobs[i].nr = nr - i * per < per ? nr - i * per : per;
		if (pthread_create(&threads[i], NULL, detach_some, &jobs[i]))
			detach_some(&jobs[i]);
		else
			started |= 1ul << i;
	}
	for (size_t i = 0; i < DETACH_THREADS; i++)
		if (started & (1ul << i))
			pthread_join(threads[i], NULL);
	bpf_link__destroy(t->links[0]);
	t->nr_links = 0;
}

const char *tracer__sched_hook(const struct tracer *t)
{
	return t->hook == SCHED_HOOK_TP_BTF ? "tp_btf" : "raw_tp";
}

void tracer__free(struct tracer *t)
{
	if (!t)
		return;
	tracer__detach(t);
	ring_buffer__free(t->births);
	rings__free(t->rings);
	for (int i = 0; t->ring_fds && i < t->nr_rings; i++)
		if (t->ring_fds[i] >= 0)
			close(t->ring_fds[i]);
	free(t->ring_fds);
	if (t->slots)
		munmap((void *)t->slots, t->slots_size);
	asynctraced_bpf__destroy(t->skel);
	free(t->links);
	free(t->link_owners);
	free(t->multi_fds);
	free(t->multi_owners);
	for (int i = 0; t->dumps && i < DUMP_NR; i++) {
		free(t->dumps[i].keys);
		free(t->dumps[i].vals);
	}
	free(t->dumps);
	free(t);
}
