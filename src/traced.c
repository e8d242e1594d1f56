// SPDX-License-Identifier: MIT
#include "traced.h"

#include <errno.h>
#include <linux/capability.h>
#include <stdlib.h>
#include <string.h>

#include "asynctraced.h"
#include "sandbox.h"
#include "util.h"

void traced__free(struct traced *tr)
{
	if (!tr)
		return;
	if (tr->piped) {
		pipeline__free(&tr->pipe);
		sampler__free(&tr->sampler);
	}
	stats__free(&tr->snap);
	u64map__clear_free(&tr->dumps);
	free(tr->files);
	discovery__free(&tr->disc);
	target__close(&tr->target);
	free(tr);
}

/* Why pid cannot be traced, when its runtime is none or lacks what we need. */
static int check_runtime(const struct traced *tr, pid_t pid, bool quiet)
{
	const struct discovery *d = &tr->disc;

	if (d->kind == RUNTIME_NONE && quiet)
		return -ENOENT;
	if (d->kind == RUNTIME_NONE && d->is_go) {
		err_msg("pid %d (%s) is a Go program (%s), but its runtime is not one this "
			"version can trace: %s\n",
			pid, tr->target.comm, d->go.version,
			d->go_err == -ENOTSUP
				? "a scheduler function is missing, or the binary has no DWARF and "
				  "its Go version's layout is not in the table (docs/go.md)"
				: strerror(-d->go_err));
		return -ENOENT;
	}
	if (d->kind == RUNTIME_NONE && d->stripped) {
		err_msg("no known runtime in pid %d (%s): no %s USDT probes, and its binary is "
			"stripped (no symbol table), so tokio cannot be looked for: asynctraced "
			"finds tokio by its function symbols; rebuild without `strip = true` "
			"(strip = \"debuginfo\" keeps them)\n",
			pid, tr->target.comm, AT_USDT_PROVIDER);
		return -ENOENT;
	}
	if (d->kind == RUNTIME_NONE) {
		err_msg("no known runtime in pid %d (%s): no %s USDT probes (see "
			"docs/usdt-abi.md), no tokio symbols and no Go runtime in its %zu mapped ELF "
			"files\n",
			pid, tr->target.comm, AT_USDT_PROVIDER, d->scanned);
		return -ENOENT;
	}
	if (d->kind == RUNTIME_USDT &&
	    (!discovered(d, "poll_begin") || !discovered(d, "poll_end"))) {
		err_msg("pid %d (%s) has %s probes but not poll_begin and poll_end: nothing to "
			"trace\n",
			pid, tr->target.comm, AT_USDT_PROVIDER);
		return -ENOENT;
	}
	return 0;
}

int traced__examine(struct traced **out, struct session *s, pid_t pid,
		    const struct examine_opts *o, bool quiet)
{
	struct traced *tr = calloc(1, sizeof(*tr));
	int err;

	*out = NULL;
	if (!tr)
		return -ENOMEM;
	tr->s = s;
	tr->disc.verbose = o->verbose;
	tr->disc.images = o->images;
	tr->disc.rules = o->rules;
	err = target__open(&tr->target, pid);
	if (err) {
		if (err == -ESRCH && !quiet)
			err_msg("no process with pid %d\n", pid);
		else if (err != -ESRCH)
			err_msg("cannot inspect pid %d: %s\n", pid, strerror(-err));
		goto fail;
	}
	err = discover(&tr->disc, &tr->target);
	if (err) {
		if (!quiet || target__alive(&tr->target))
			err_msg("cannot read the mappings of pid %d: %s%s\n", pid, strerror(-err),
				(err == -EACCES || err == -EPERM) &&
						!sandbox__has_cap(CAP_SYS_PTRACE)
					? ": a process of another user needs CAP_SYS_PTRACE"
					: "");
		goto fail;
	}
	err = check_runtime(tr, pid, quiet);
	if (err)
		goto fail;
	*out = tr;
	return 0;
fail:
	traced__free(tr);
	return err;
}
