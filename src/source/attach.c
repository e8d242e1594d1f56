// SPDX-License-Identifier: MIT
/*
 * Attaching a discovered runtime's probes: every asynctrace USDT probe, or
 * each kind of tokio function at every site of it, in an order that keeps
 * the counted queue depths right.
 */
#include <errno.h>
#include <linux/capability.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/sandbox.h"
#include "lib/util.h"
#include "source/attach.h"

static void say_alone(const char *target_path)
{
	info_msg("%s may be written by someone but root: its probes are for this process "
		 "alone\n",
		 target_path);
}

/*
 * Whether site's file gets its probes from this process (1, for pid as
 * owner), or has them already (0); the answer is asked once per file.
 */
static int usdt_file(const struct discovery *d, size_t i, const struct attach_opts *o,
		     int *decided, long *owners, pid_t *pid, long *owner)
{
	const char *path = d->sites[i].path;
	size_t first;
	int ret;

	*pid = o->pid;
	*owner = o->pid;
	if (!o->share)
		return 1;
	for (first = 0; strcmp(d->sites[first].path, path); first++)
		;
	if (!decided[first]) {
		ret = o->share(o->share_ctx, path, &owners[first]);
		if (ret < 0)
			return ret;
		decided[first] = ret == SHARE_ALONE ? 3 : ret ? 1 : 2;
	}
	if (decided[first] == 3) {
		if (o->verbose && first == i)
			say_alone(d->sites[i].target_path);
		return 1;
	}
	*pid = -1;
	*owner = owners[first];
	return decided[first] == 1;
}

/* Every site of one probe in one file, by its offsets, semaphores and specs. */
static int attach_sites(struct tracer *t, pid_t pid, long owner, const struct probe_site *site)
{
	uint64_t *offsets = calloc(site->nr_at + 1, 2 * sizeof(*offsets)), *ref_ctrs;
	struct at_usdt_spec *specs = calloc(site->nr_at + 1, sizeof(*specs));
	int err = -ENOMEM;

	if (offsets && specs) {
		ref_ctrs = offsets + site->nr_at;
		for (size_t i = 0; i < site->nr_at; i++) {
			offsets[i] = site->at[i].offset;
			ref_ctrs[i] = site->at[i].ref_ctr;
			specs[i] = site->at[i].spec;
		}
		err = tracer__attach_usdt(t, pid, owner, site->path, site->probe, offsets, ref_ctrs,
					  specs, site->nr_at);
	}
	free(offsets);
	free(specs);
	return err;
}

static int attach_usdt(struct tracer *t, const struct discovery *d, const struct attach_opts *o)
{
	int *decided = calloc(d->nr + 1, sizeof(*decided));
	long *owners = calloc(d->nr + 1, sizeof(*owners));
	bool verbose = o->verbose;
	int err = 0;

	if (!decided || !owners) {
		err = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < d->nr; i++) {
		const struct probe_site *site = &d->sites[i];
		pid_t pid;
		long owner;

		err = usdt_file(d, i, o, decided, owners, &pid, &owner);
		if (err <= 0) {
			if (err < 0)
				goto out;
			if (verbose)
				info_msg("usdt '%s:%s' in %s: attached already, for every process "
					"that maps it\n",
					AT_USDT_PROVIDER, site->name, site->target_path);
			continue;
		}
		err = attach_sites(t, pid, owner, site);

		if (err == -ENOENT) {
			/* A probe from a newer ABI than ours: not an error. */
			if (verbose)
				info_msg("ignoring unknown probe '%s:%s' in %s\n", AT_USDT_PROVIDER,
					site->name, site->target_path);
			err = 0;
			continue;
		}
		if (err) {
			err_msg("failed to attach usdt '%s:%s' in %s: %s%s\n", AT_USDT_PROVIDER,
				site->name, site->target_path,
				err == -ENOTSUPP_KERNEL
					? "the kernel refuses a uprobe on the instruction there"
					: strerror(-err),
				err == -EACCES && !sandbox__has_cap(CAP_SYS_ADMIN)
					? ": this kernel has no uprobe_multi links, and Linux "
					  "creates other uprobes only for CAP_SYS_ADMIN "
					  "(docs/security.md)"
					: "");
			goto out;
		}
		if (verbose)
			info_msg("attached usdt '%s:%s' in %s (arguments %s%s)\n", AT_USDT_PROVIDER,
				site->name, site->target_path,
				d->specs[site->probe].known ? "fixed at load" : "looked up per hit",
				pid < 0 ? "; for every process that maps it" : "");
	}
out:
	free(decided);
	free(owners);
	return err;
}

/* The uprobes each kind of tokio function gets. */
static const struct {
	enum tracer_uprobe entry, ret;
	bool has_entry, has_ret;
} tokio_uprobes[TOKIO_KIND_MAX] = {
	[TOKIO_POLL] = { UPROBE_TOKIO_POLL, UPROBE_TOKIO_POLL_RET, true, true },
	[TOKIO_WAKE] = { UPROBE_TOKIO_WAKE, 0, true, false },
	[TOKIO_SCHEDULE] = { UPROBE_TOKIO_SCHEDULE, 0, true, false },
	[TOKIO_BIND] = { 0, UPROBE_TOKIO_BIND_RET, false, true },
	[TOKIO_BIND_INNER] = { UPROBE_TOKIO_BIND_INNER, 0, true, false },
	[TOKIO_REMOVE] = { UPROBE_TOKIO_REMOVE, 0, true, false },
	[TOKIO_STEAL] = { 0, UPROBE_TOKIO_STEAL_RET, false, true },
};

/*
 * Polls first: a push (schedule, spawn) seen before the probe that sees its
 * pop would leave tokio's counted queue depth one too deep for good.
 */
static const enum tokio_kind tokio_attach_order[] = {
	TOKIO_POLL, TOKIO_REMOVE, TOKIO_STEAL, TOKIO_WAKE, TOKIO_SCHEDULE, TOKIO_BIND,
	TOKIO_BIND_INNER,
};

/* Where learnt rules that disagree with the kernel come from: learn them again. */
#define PROBE_RULES_HINT "asynctraced probe-rules learns them again"


/* The kernel refusing a probe's place, rather than a failure to attach at all. */
static bool refused(int err)
{
	return err == -ENOTSUPP_KERNEL || err == -EINVAL || err == -ENOTSUP;
}

/* Where one probe goes instead of its place, and how it went. */
struct probe_place {
	uint64_t entry, entry_cookie;	/* its function's entry, should the kernel refuse its place */
	bool optimized;			/* at its place, the kernel makes it a call (probe_rules.h) */
	bool fell_back;			/* refused at its place: at the entry */
	bool lost;			/* refused at both */
};

/*
 * Probes of one kind, attached as one link where the kernel takes them all:
 * where each goes and its cookie, as the link takes them, and the rest.
 */
struct probe_set {
	enum tracer_uprobe which;
	const char *path;
	size_t n;
	uint64_t *at, *cookie;
	struct probe_place *p;
	size_t to_entry, nr_lost;
};

static int probe_set__init(struct probe_set *ps, enum tracer_uprobe which, const char *path,
			   size_t max)
{
	memset(ps, 0, sizeof(*ps));
	ps->which = which;
	ps->path = path;
	ps->at = calloc(max + 1, sizeof(*ps->at));
	ps->cookie = calloc(max + 1, sizeof(*ps->cookie));
	ps->p = calloc(max + 1, sizeof(*ps->p));
	return ps->at && ps->cookie && ps->p ? 0 : -ENOMEM;
}

static void probe_set__free(struct probe_set *ps)
{
	free(ps->at);
	free(ps->cookie);
	free(ps->p);
}

static void probe_set__add(struct probe_set *ps, uint64_t at, uint64_t cookie, uint64_t entry,
			   uint64_t entry_cookie, bool optimized)
{
	ps->at[ps->n] = at;
	ps->cookie[ps->n] = cookie;
	ps->p[ps->n++] = (struct probe_place){ .entry = entry, .entry_cookie = entry_cookie,
					       .optimized = optimized };
}

/*
 * Probes [lo, hi) of ps, at once if the kernel takes them all. A link fails
 * as a whole when one place is refused: then each half on its own, down to
 * the refused probes alone, which try their function's entry, and are lost
 * if that is refused too. 0, or -errno when attaching failed for another
 * reason than a refusal.
 */
static int attach_range(struct tracer *t, pid_t pid, long owner, struct probe_set *ps, size_t lo,
			size_t hi)
{
	size_t mid = lo + (hi - lo) / 2;
	int err = tracer__attach_uprobes(t, pid, owner, ps->which, ps->path, ps->at + lo,
					 ps->cookie + lo, hi - lo);

	if (!err || !refused(err))
		return err;
	if (hi - lo > 1) {
		err = attach_range(t, pid, owner, ps, lo, mid);
		return err ? err : attach_range(t, pid, owner, ps, mid, hi);
	}
	if (ps->at[lo] != ps->p[lo].entry) {
		err = tracer__attach_uprobes(t, pid, owner, ps->which, ps->path, &ps->p[lo].entry,
					     &ps->p[lo].entry_cookie, 1);
		if (!err) {
			ps->at[lo] = ps->p[lo].entry;
			ps->cookie[lo] = ps->p[lo].entry_cookie;
			ps->p[lo].optimized = false;
			ps->p[lo].fell_back = true;
			ps->to_entry++;
			return 0;
		}
		if (!refused(err))
			return err;
	}
	ps->p[lo].lost = true;
	ps->nr_lost++;
	return 0;
}

static int attach_set(struct tracer *t, pid_t pid, long owner, struct probe_set *ps)
{
	return ps->n ? attach_range(t, pid, owner, ps, 0, ps->n) : 0;
}

/*
 * Registration can succeed and still place nothing (a process that maps
 * the file later meets a refusal silently): the breakpoint is looked for in
 * the process itself, through its /proc/PID/mem. An optimized probe may
 * already be a call into the trampoline. Each probe not there is lost.
 */
static void check_placed(struct probe_set *ps, int memfd, uint64_t (*addr)(const void *, uint64_t),
			 const void *ctx)
{
	for (size_t i = 0; memfd >= 0 && i < ps->n; i++) {
		uint8_t b = 0;

		if (ps->p[i].lost || pread(memfd, &b, 1, (off_t)addr(ctx, ps->at[i])) != 1)
			continue;
		if (b != 0xcc && !(b == 0xe8 && ps->p[i].optimized)) {
			ps->p[i].lost = true;
			ps->nr_lost++;
		}
	}
}

/* What a process loses with a kind of probe, as the warning says it. */
static const char *const tokio_loss[TOKIO_KIND_MAX] = {
	[TOKIO_POLL] = "its polls are not traced",
	[TOKIO_WAKE] = "wakes and waker thrash not traced",
	[TOKIO_SCHEDULE] = "wakes that queue a task not counted in queue depths",
	[TOKIO_BIND] = "spawns not seen",
	[TOKIO_BIND_INNER] = "spawns not seen",
	[TOKIO_REMOVE] = "completions not seen",
	[TOKIO_STEAL] = "steals not seen",
};

/* -v: where a tokio probe goes, and why it is single-stepped if it is. */
static void say_site(const struct tokio_binary *tb, enum tokio_kind kind,
		     const struct tokio_site *site, uint64_t skip)
{
	const struct placement *p = &site->place;
	char where[256];

	if (skip)
		snprintf(where, sizeof(where), "+%llu: past %s, at %s, %s%s",
			 (unsigned long long)skip, p->entry, p->at, probe_verdict_str(p->verdict),
			 p->arg_reg >= 0 ? ", its argument moved" : "");
	else if (p->cheap && !p->skip)
		snprintf(where, sizeof(where), "%s, %s", p->entry, probe_verdict_str(p->verdict));
	else
		snprintf(where, sizeof(where), "%s, %s: %s", p->entry[0] ? p->entry : "?",
			 probe_verdict_str(p->entry_verdict ? p->entry_verdict : PROBE_STEPPED),
			 p->cheap ? "--probe-at entry" : p->why[0] ? p->why : "not x86-64");
	info_msg("attaching %s at %s+0x%llx (%s)%s%s\n", tokio_kind_str(kind), tb->target_path,
		(unsigned long long)site->offset, where, site->future ? ": " : "",
		site->future ? site->future : "");
}

/* Each probe the kernel refused, said; how many were lost. */
static size_t say_lost(const struct tokio_binary *tb, enum tokio_kind kind,
		       const struct probe_set *ps, const size_t *site_of, pid_t pid)
{
	for (size_t i = 0; i < ps->n; i++) {
		const struct tokio_site *site = &tb->rt.sites[site_of[i]];

		if (ps->p[i].fell_back)
			warn_msg("pid %d: the kernel refused the %s probe at %s+0x%llx+%llu (%s), "
				 "which its rules said it takes: placed at the entry (%s)\n",
				 pid, tokio_kind_str(kind), tb->target_path,
				 (unsigned long long)site->offset,
				 (unsigned long long)site->place.skip, site->place.at,
				 PROBE_RULES_HINT);
		if (ps->p[i].lost)
			warn_msg("pid %d: the kernel refused the %s probe at %s+0x%llx%s%s (%s, and "
				 "at its entry): %s%s%s\n",
				 pid, tokio_kind_str(kind), tb->target_path,
				 (unsigned long long)site->offset, site->future ? " of " : "",
				 site->future ? site->future : "", site->place.at,
				 tokio_loss[kind], kind == TOKIO_POLL && site->future ? " for " : "",
				 kind == TOKIO_POLL && site->future ? site->future : "");
	}
	return ps->nr_lost;
}

static uint64_t tokio_addr(const void *d, uint64_t offset)
{
	return discovery__tokio_addr(d, offset);
}

/* The entry probes of the sites whose return probes are attached, at the very same places. */
static void same_places(const struct probe_set *ret, struct probe_set *entry)
{
	for (size_t i = 0; i < ret->n; i++)
		if (!ret->p[i].lost)
			probe_set__add(entry, ret->at[i], ret->cookie[i], ret->at[i], ret->cookie[i],
				       ret->p[i].optimized);
}

/* Every site of one kind at once: their offsets, and cookies (a poll's address). */
static int attach_tokio_kind(struct tracer *t, const struct discovery *d,
			     const struct attach_opts *o, pid_t pid, long owner,
			     enum tokio_kind kind, struct attach_counts *counts)
{
	const struct tokio_binary *tb = &d->tokio;
	bool has_ret = tokio_uprobes[kind].has_ret, has_entry = tokio_uprobes[kind].has_entry;
	struct probe_set first, entries = { 0 };
	size_t *site_of = calloc(tb->rt.nr + 1, sizeof(*site_of));
	int err;

	/* a return probe first, where it has both: a poll's end without its beginning is harmless */
	err = probe_set__init(&first, has_ret ? tokio_uprobes[kind].ret : tokio_uprobes[kind].entry,
			      tb->path, tb->rt.nr);
	if (!err && has_ret && has_entry)
		err = probe_set__init(&entries, tokio_uprobes[kind].entry, tb->path, tb->rt.nr);
	if (err || !site_of) {
		err = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < tb->rt.nr; i++) {
		const struct tokio_site *site = &tb->rt.sites[i];
		/* past a single-stepped entry to the first emulated instruction (placement.h) */
		uint64_t skip = o->probe_at_entry ? 0 : site->place.skip;
		/* vtable[0] of a task is its raw::poll: its file offset names the task */
		uint64_t cookie = site->offset;

		if (site->kind != kind || site->internal)
			continue;
		if (skip && site->place.arg_reg >= 0)
			cookie |= (uint64_t)(site->place.arg_reg / 8 + 1) << AT_COOKIE_REG_SHIFT;
		if (skip)
			cookie |= (uint64_t)(site->place.frame / 8) << AT_COOKIE_FRAME_SHIFT;
		if (o->verbose)
			say_site(tb, kind, site, skip);
		site_of[first.n] = i;
		probe_set__add(&first, site->offset + skip, cookie, site->offset, site->offset,
			       (skip || !o->probe_at_entry) && site->place.verdict == PROBE_OPTIMIZED);
	}
	err = attach_set(t, pid, owner, &first);
	if (!err && has_ret && has_entry) {
		same_places(&first, &entries);
		err = attach_set(t, pid, owner, &entries);
	}
	if (err) {
		err_msg("failed to attach uprobes on %s in %s: %s\n", tokio_kind_str(kind),
			tb->target_path, strerror(-err));
		goto out;
	}
	check_placed(&first, o->memfd, tokio_addr, d);
	counts->lost[kind] = say_lost(tb, kind, &first, site_of, o->pid);
	for (size_t i = 0; i < first.n; i++) {
		const struct placement *p = &tb->rt.sites[site_of[i]].place;

		if (first.p[i].lost)
			continue;
		if (first.at[i] != first.p[i].entry)
			counts->moved++;
		else if (!(p->cheap && !p->skip)) /* the entry, where it is not cheap itself */
			counts->stepped++;
	}
out:
	probe_set__free(&first);
	probe_set__free(&entries);
	free(site_of);
	return err;
}

static int attach_tokio(struct tracer *t, const struct discovery *d,
			const struct attach_opts *o, struct attach_counts *counts)
{
	pid_t pid = o->pid;
	long owner = o->pid;
	int err = 0;

	if (o->share) {
		err = o->share(o->share_ctx, d->tokio.path, &owner);
		if (err <= 0) {
			if (!err && o->verbose)
				info_msg("tokio in %s: attached already, for every process that maps "
					"it\n",
					d->tokio.target_path);
			return err;
		}
		if (err == SHARE_ALONE && o->verbose)
			say_alone(d->tokio.target_path);
		pid = err == SHARE_ALONE ? o->pid : -1;
		owner = err == SHARE_ALONE ? o->pid : owner;
		err = 0;
	}
	for (size_t k = 0; !err && k < sizeof(tokio_attach_order) / sizeof(tokio_attach_order[0]);
	     k++)
		err = attach_tokio_kind(t, d, o, pid, owner, tokio_attach_order[k], counts);
	/* nothing useful without a poll */
	if (!err && counts->lost[TOKIO_POLL] == d->tokio.rt.count[TOKIO_POLL])
		err = -ENOTSUPP_KERNEL;
	return err;
}

static uint64_t go_addr(const void *d, uint64_t offset)
{
	const struct target_mapping *m = &((const struct discovery *)d)->go_map;

	return m->start + (offset - m->offset);
}

/* A Go function's entry probe, where discovery placed it, into ps. */
static int go_entry(const struct attach_opts *o, const struct go_probe *gp, struct probe_set *ps,
		    struct attach_counts *counts)
{
	if (!gp->said[0])
		return -ENOENT;
	probe_set__add(ps, gp->at, 0, gp->entry, 0, gp->optimized);
	counts->moved += gp->moved;
	counts->stepped += !gp->moved;
	if (o->verbose)
		info_msg("%s\n", gp->said);
	return 0;
}

/*
 * casgstatus probed at the calls whose changes the probes need, not at its
 * entry: a system call's two changes are not trapped (docs/go.md). A call
 * instruction is emulated, never single-stepped.
 */
static int go_status_sites(const struct discovery *d, const struct attach_opts *o,
			   struct probe_set *ps, struct attach_counts *counts)
{
	for (int i = 0; i < d->nr_go_sites; i++) {
		const struct go_status_site *s = &d->go_sites[i];

		probe_set__add(ps, d->go_site_at[i], 0, d->go_site_at[i], 0, false);
		if (o->verbose)
			info_msg("attaching a call of runtime.casgstatus at %s+0x%llx, in %s "
				 "(%d -> %d; -1: not a constant)\n", d->go_target_path,
				 (unsigned long long)d->go_site_at[i],
				 golang__func_at(&d->go, s->addr) ?: "?", s->from, s->to);
	}
	if (o->verbose)
		info_msg("%d calls of runtime.casgstatus probed, %u let be (system calls' "
			 "changes, and changes the probes ignore), rather than its entry\n",
			 d->nr_go_sites, d->go_sites_skipped);
	return 0;
}

/* A Go probe set attached, checked, and its losses said: what each one costs. */
static int attach_go_set(struct tracer *t, const struct discovery *d,
			 const struct attach_opts *o, pid_t pid, long owner, struct probe_set *ps,
			 const char *what, const char *loss, struct attach_counts *counts)
{
	int err = attach_set(t, pid, owner, ps);

	if (err)
		return err;
	check_placed(ps, o->memfd, go_addr, d);
	if (ps->to_entry)
		warn_msg("pid %d: the kernel refused the %s probe past its entry in %s, which its "
			 "rules said it takes: placed at the entry (%s)\n",
			 o->pid, what, d->go_target_path, PROBE_RULES_HINT);
	if (ps->nr_lost)
		warn_msg("pid %d: the kernel refused %zu of the %zu %s probes in %s (and at the "
			 "function's entry): %s\n",
			 o->pid, ps->nr_lost, ps->n, what, d->go_target_path, loss);
	counts->moved -= ps->to_entry;
	counts->stepped += ps->to_entry;
	counts->lost_go += ps->nr_lost;
	return 0;
}

/*
 * runqsteal where only a steal that took something goes (*placed); not
 * placed, its entry is probed instead, every attempt a trap.
 */
static int go_steal_taken(struct tracer *t, const struct discovery *d,
			  const struct attach_opts *o, pid_t pid, long owner, bool *placed)
{
	const struct go_probe *gp = &d->go_steal_taken;
	struct probe_set ps;
	int err;

	*placed = false;
	if (!gp->said[0])
		return 0;
	if (probe_set__init(&ps, UPROBE_GO_RUNQSTEAL_TOOK, d->go_path, 1))
		return -ENOMEM;
	probe_set__add(&ps, gp->at, 0, gp->entry, 0, false);
	err = attach_set(t, pid, owner, &ps);
	if (!err)
		check_placed(&ps, o->memfd, go_addr, d);
	*placed = !err && !ps.nr_lost;
	if (!err && ps.nr_lost)
		warn_msg("pid %d: the kernel refused runqsteal's probe where a steal took something in "
			 "%s: its entry is probed instead, every attempt a trap\n", o->pid,
			 d->go_target_path);
	else if (*placed && o->verbose)
		info_msg("%s\n", gp->said);
	probe_set__free(&ps);
	return err;
}

static int attach_go(struct tracer *t, const struct discovery *d, const struct attach_opts *o,
		     struct attach_counts *counts)
{
	static const struct {
		enum go_entry_probe p;
		enum go_func f;
		enum tracer_uprobe which;
		const char *loss;
	} entries[] = {
		/* nothing useful without it */
		{ GO_PROBE_CASGSTATUS, GO_CASGSTATUS, UPROBE_GO_CASGSTATUS, NULL },
		{ GO_PROBE_RUNQSTEAL, GO_RUNQSTEAL, UPROBE_GO_RUNQSTEAL, "steals not seen" },
		/* a run whose P was taken in a system call would look like a long one */
		{ GO_PROBE_HANDOFFP, GO_HANDOFFP, UPROBE_GO_HANDOFFP,
		  "a P taken from a goroutine in a system call not seen" },
		{ GO_PROBE_STOP_THE_WORLD, GO_STOP_THE_WORLD, UPROBE_GO_STOP_THE_WORLD,
		  "the Ps a stop of the world takes not seen" },
		/* the GC stops a running goroutine with no casgstatus */
		{ GO_PROBE_PREEMPT_PARK, GO_PREEMPT_PARK, UPROBE_GO_PREEMPT_PARK,
		  "a goroutine stopped for the garbage collector ends its run late" },
	};
	struct probe_set ps;
	pid_t pid = o->pid;
	long owner = o->pid;
	int n = d->nr_go_rets, err;

	if (o->share) {
		err = o->share(o->share_ctx, d->go_path, &owner);
		if (err <= 0)
			return err;
		if (err == SHARE_ALONE && o->verbose)
			say_alone(d->go_target_path);
		pid = err == SHARE_ALONE ? o->pid : -1;
		owner = err == SHARE_ALONE ? o->pid : owner;
	}
	if (probe_set__init(&ps, UPROBE_GO_NEWPROC1_RET, d->go_path, GO_RETS))
		return -ENOMEM;
	/* newproc1 returns the goroutine it made: probed at its rets, never by a uretprobe */
	for (int i = 0; i < n && i < GO_RETS; i++)
		probe_set__add(&ps, d->go_rets[i].at, 0, d->go_rets[i].entry, 0, false);
	err = n > 0 ? 0 : n < 0 ? n : -ENOENT;
	if (err)
		err_msg("cannot find the returns of runtime.newproc1 in %s: %s\n", d->go_target_path,
			strerror(-err));
	if (!err)
		err = attach_go_set(t, d, o, pid, owner, &ps, "newproc1 return",
				    "goroutines made by the lost returns not seen", counts);
	counts->stepped += n > 0 ? (size_t)n : 0;
	for (size_t i = 0; !err && i < sizeof(entries) / sizeof(entries[0]); i++) {
		bool sites = entries[i].p == GO_PROBE_CASGSTATUS && d->nr_go_sites > 0, taken = false;

		if (entries[i].p == GO_PROBE_RUNQSTEAL) {
			err = go_steal_taken(t, d, o, pid, owner, &taken);
			counts->stepped += taken;
			counts->go_steals_taken = taken;
			if (err || taken)
				continue;
		}
		if (golang__optional(entries[i].f) && !d->go_entries[entries[i].p].said[0]) {
			warn_msg("pid %d: %s not found in %s: %s\n", o->pid,
				 go_func_names[entries[i].f], d->go_target_path, entries[i].loss);
			continue;
		}
		probe_set__free(&ps);
		err = probe_set__init(&ps, entries[i].which, d->go_path,
				      sites ? (size_t)d->nr_go_sites : 1);
		if (!err)
			err = sites ? go_status_sites(d, o, &ps, counts)
				    : go_entry(o, &d->go_entries[entries[i].p], &ps, counts);
		if (!err)
			err = attach_go_set(t, d, o, pid, owner, &ps, go_func_names[entries[i].f],
					    entries[i].loss ? entries[i].loss : "nothing to trace",
					    counts);
		if (!err && ps.nr_lost && !entries[i].loss)
			err = -ENOTSUPP_KERNEL;
		if (!err && entries[i].p == GO_PROBE_HANDOFFP)
			counts->go_handoffs = !ps.nr_lost;
		if (!err && entries[i].p == GO_PROBE_STOP_THE_WORLD)
			counts->go_handoffs = counts->go_handoffs && !ps.nr_lost;
	}
	probe_set__free(&ps);
	if (err)
		err_msg("failed to attach the Go probes in %s: %s\n", d->go_target_path,
			err == -ENOTSUPP_KERNEL ? "the kernel refused a probe it needs"
						: strerror(-err));
	return err;
}

int attach__probes(struct tracer *t, const struct discovery *d, const struct attach_opts *o,
		   struct attach_counts *counts)
{
	memset(counts, 0, sizeof(*counts));
	if (d->kind == RUNTIME_GO)
		return attach_go(t, d, o, counts);
	return d->kind == RUNTIME_TOKIO ? attach_tokio(t, d, o, counts)
					: attach_usdt(t, d, o);
}
