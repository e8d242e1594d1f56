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

#include "attach.h"
#include "sandbox.h"
#include "util.h"

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
		decided[first] = ret ? 1 : 2;
	}
	*pid = -1;
	*owner = owners[first];
	return decided[first] == 1;
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
		err = tracer__attach_usdt(t, pid, owner, site->path, site->probe, site->name);

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
				site->name, site->path, strerror(-err),
				err == -EACCES && !sandbox__has_cap(CAP_SYS_ADMIN)
					? ": Linux creates the uprobes of USDT probes only for "
					  "CAP_SYS_ADMIN (docs/security.md)"
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

/* -v: where a tokio probe goes, and why it is single-stepped if it is. */
static void say_site(const struct tokio_binary *tb, enum tokio_kind kind,
		     const struct tokio_site *site, uint64_t skip)
{
	const struct placement *p = &site->place;
	char where[256];

	if (skip)
		snprintf(where, sizeof(where), "+%llu: past %s, at %s%s",
			 (unsigned long long)skip, p->entry, p->at,
			 p->arg_reg >= 0 ? ", its argument moved" : "");
	else if (p->cheap && !p->skip)
		snprintf(where, sizeof(where), "%s", p->entry);
	else
		snprintf(where, sizeof(where), "%s, single-stepped: %s", p->entry[0] ? p->entry : "?",
			 p->cheap ? "--probe-at entry" : p->why[0] ? p->why : "not x86-64");
	info_msg("attaching %s at %s+0x%llx (%s)%s%s\n", tokio_kind_str(kind), tb->target_path,
		(unsigned long long)site->offset, where, site->future ? ": " : "",
		site->future ? site->future : "");
}

/* Every site of one kind at once: their offsets, and cookies (a poll's address). */
static int attach_tokio_kind(struct tracer *t, const struct discovery *d,
			     const struct attach_opts *o, pid_t pid, long owner,
			     enum tokio_kind kind, struct attach_counts *counts)
{
	const struct tokio_binary *tb = &d->tokio;
	uint64_t *offsets = calloc(tb->rt.nr + 1, sizeof(*offsets));
	uint64_t *cookies = calloc(tb->rt.nr + 1, sizeof(*cookies));
	size_t n = 0, moved = 0, stepped = 0;
	uint64_t skip;
	int err = 0;

	if (!offsets || !cookies) {
		err = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < tb->rt.nr; i++) {
		const struct tokio_site *site = &tb->rt.sites[i];

		if (site->kind != kind || site->internal)
			continue;
		/* past a single-stepped entry to the first emulated instruction (placement.h) */
		skip = o->probe_at_entry ? 0 : site->place.skip;
		offsets[n] = site->offset + skip;
		/* vtable[0] of a task is its raw::poll: its file offset names the task */
		cookies[n] = site->offset;
		if (skip && site->place.arg_reg >= 0)
			cookies[n] |= (uint64_t)(site->place.arg_reg / 8 + 1) << AT_COOKIE_REG_SHIFT;
		if (skip)
			cookies[n] |= (uint64_t)(site->place.frame / 8) << AT_COOKIE_FRAME_SHIFT;
		if (o->verbose)
			say_site(tb, kind, site, skip);
		moved += skip != 0;
		stepped += !skip && !(site->place.cheap && !site->place.skip);
		n++;
	}
	if (tokio_uprobes[kind].has_entry)
		err = tracer__attach_uprobes(t, pid, owner, tokio_uprobes[kind].entry, tb->path, offsets,
					     cookies, n);
	if (!err && tokio_uprobes[kind].has_ret)
		err = tracer__attach_uprobes(t, pid, owner, tokio_uprobes[kind].ret, tb->path, offsets,
					     cookies, n);
	if (err)
		err_msg("failed to attach uprobes on %s in %s: %s\n", tokio_kind_str(kind),
			tb->target_path, strerror(-err));
	counts->moved += moved;
	counts->stepped += stepped;
out:
	free(offsets);
	free(cookies);
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
		pid = -1;
		err = 0;
	}
	for (size_t k = 0; !err && k < sizeof(tokio_attach_order) / sizeof(tokio_attach_order[0]);
	     k++)
		err = attach_tokio_kind(t, d, o, pid, owner, tokio_attach_order[k], counts);
	return err;
}

/* newproc1's ret instructions: at most this many are probed. */
#define GO_RETS 16

/*
 * Where a Go function's entry probe goes: past the stack-bound check (a
 * `cmp` the kernel would single-step) to the branch after it, which it
 * emulates, unless --probe-at entry; the file offset.
 */
static int go_entry(const struct discovery *d, const struct elf_image *im,
		    const struct attach_opts *o, enum go_func f, uint64_t *off,
		    struct attach_counts *counts)
{
	uint64_t addr = d->go.funcs[f], size = golang__func_size(&d->go, addr);
	const uint8_t *code = size ? elf_image__bytes(im, addr, size) : NULL;
	struct placement_need need = { .arg = -1, .spills = true };
	int64_t at = elf_image__offset(im, addr);
	struct placement p = { 0 };
	bool moved;

	if (at < 0)
		return -ENOENT;
	/* placement keeps memory and control flow; the registers read are checked here */
	moved = !o->probe_at_entry && code && !placement__entry(code, size, addr, &need, &p) &&
		p.cheap && p.skip && golang__keeps_args(code, p.skip, addr);
	*off = (uint64_t)at + (moved ? p.skip : 0);
	counts->moved += moved;
	counts->stepped += !moved;
	if (o->verbose && moved)
		info_msg("attaching %s at %s+0x%llx (+%llu: past %s, at %s)\n", go_func_names[f],
			 d->go_target_path, (unsigned long long)at, (unsigned long long)p.skip,
			 p.entry, p.at);
	else if (o->verbose)
		info_msg("attaching %s at %s+0x%llx (%s, single-stepped: %s)\n", go_func_names[f],
			 d->go_target_path, (unsigned long long)at, p.entry[0] ? p.entry : "?",
			 o->probe_at_entry ? "--probe-at entry"
			 : p.why[0]	   ? p.why
			 : p.skip	   ? "it would move past a register a probe reads"
					   : "no cheaper instruction before its first side effect");
	return 0;
}

static int attach_go(struct tracer *t, const struct discovery *d, const struct attach_opts *o,
		     struct attach_counts *counts)
{
	uint64_t off[GO_RETS], cookies[GO_RETS] = { 0 }, rets[GO_RETS];
	uint64_t addr = d->go.funcs[GO_NEWPROC1], size = golang__func_size(&d->go, addr);
	static const struct {
		enum go_func f;
		enum tracer_uprobe which;
	} entries[] = { { GO_CASGSTATUS, UPROBE_GO_CASGSTATUS },
			{ GO_RUNQSTEAL, UPROBE_GO_RUNQSTEAL } };
	const struct elf_image *im = d->go_image; /* read at discovery (RUNTIME_GO has it) */
	pid_t pid = o->pid;
	long owner = o->pid;
	int n, err;

	if (o->share) {
		err = o->share(o->share_ctx, d->go_path, &owner);
		if (err <= 0)
			return err;
		pid = -1;
	}
	/* newproc1 returns the goroutine it made: probed at its rets, never by a uretprobe */
	n = size && elf_image__bytes(im, addr, size)
		    ? golang__rets(elf_image__bytes(im, addr, size), size, addr, rets, GO_RETS)
		    : -ENOENT;
	for (int i = 0; i < n; i++) {
		int64_t at = elf_image__offset(im, rets[i]);

		if (at < 0)
			n = -ENOENT;
		else
			off[i] = (uint64_t)at;
	}
	err = n > 0 ? 0 : n < 0 ? n : -ENOENT;
	if (err)
		err_msg("cannot find the returns of runtime.newproc1 in %s: %s\n", d->go_target_path,
			strerror(-err));
	if (!err)
		err = tracer__attach_uprobes(t, pid, owner, UPROBE_GO_NEWPROC1_RET, d->go_path, off,
					     cookies, (size_t)n);
	counts->stepped += n > 0 ? (size_t)n : 0;
	for (size_t i = 0; !err && i < sizeof(entries) / sizeof(entries[0]); i++) {
		err = go_entry(d, im, o, entries[i].f, &off[0], counts);
		if (!err)
			err = tracer__attach_uprobes(t, pid, owner, entries[i].which, d->go_path, off,
						     cookies, 1);
	}
	if (err)
		err_msg("failed to attach the Go probes in %s: %s\n", d->go_target_path,
			strerror(-err));
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
