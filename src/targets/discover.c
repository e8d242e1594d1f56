// SPDX-License-Identifier: MIT
#include "targets/discover.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "asynctraced.h"
#include "lib/util.h"
#include "targets/elf_image.h"
#include "targets/placement.h"

static int usdt_probe_id(const char *name)
{
	static const char *const names[AT_USDT_NR_PROBES] = {
		[AT_USDT_TASK_SPAWN] = "task_spawn",
		[AT_USDT_POLL_BEGIN] = "poll_begin",
		[AT_USDT_POLL_END] = "poll_end",
		[AT_USDT_WAKE] = "wake",
		[AT_USDT_STEAL] = "steal",
		[AT_USDT_WORKER_PARK] = "worker_park",
		[AT_USDT_WORKER_UNPARK] = "worker_unpark",
	};

	for (int i = 0; i < AT_USDT_NR_PROBES; i++)
		if (!strcmp(names[i], name))
			return i;
	return -1;
}

/*
 * Keeps a probe's argument spec while every site of it (in every file)
 * agrees; one that differs, or that we cannot parse, leaves it unknown, and
 * the probe's programs look up each site's spec by its attach cookie.
 */
static void merge_spec(struct discovery *d, const struct usdt_probe *p)
{
	int id = usdt_probe_id(p->name);
	struct at_usdt_spec spec = { 0 };

	if (id < 0)
		return;
	if (p->args_known)
		usdt__parse_args(p->args, &spec); /* fails unknown */
	if (!(d->specs_seen & (1u << id)))
		d->specs[id] = spec;
	else if (memcmp(&d->specs[id], &spec, sizeof(spec)))
		memset(&d->specs[id], 0, sizeof(d->specs[id]));
	d->specs_seen |= 1u << id;
}

/*
 * Where probe p of the file at path is: its uprobe's and semaphore's file
 * offsets and its arguments. A site whose code is not in the file, or whose
 * operands we cannot read, is left out, and said (its polls or wakes would
 * go missing without a word otherwise).
 */
static int site_of(const struct usdt_probe *p, const char *target_path, struct usdt_site *at)
{
	memset(at, 0, sizeof(*at));
	if (!p->offset) {
		warn_msg("usdt '%s:%s' at %#llx in %s is in no code of the file: not traced\n",
			 p->provider, p->name, (unsigned long long)p->pc, target_path);
		return -ENOENT;
	}
	if (!p->args_known || usdt__parse_args(p->args, &at->spec)) {
		warn_msg("usdt '%s:%s' at %#llx in %s: cannot read its arguments (%s): not "
			 "traced\n",
			 p->provider, p->name, (unsigned long long)p->pc, target_path,
			 p->args_known ? p->args : "too long");
		return -EINVAL;
	}
	at->offset = p->offset;
	at->ref_ctr = p->sema_offset;
	return 0;
}

static int by_name(const void *a, const void *b, void *probes)
{
	const struct usdt_probe *p = probes;
	size_t x = *(const size_t *)a, y = *(const size_t *)b;
	int c = strcmp(p[x].name, p[y].name);

	return c ? c : x < y ? -1 : x > y;
}

/* The site of probe name in the file at path among the first nr, or NULL. */
static struct probe_site *site_named(struct discovery *d, size_t nr, const char *path,
				     const char *name)
{
	for (size_t j = 0; j < nr; j++)
		if (!strcmp(d->sites[j].path, path) && !strcmp(d->sites[j].name, name))
			return &d->sites[j];
	return NULL;
}

/* Appends the places of probes order[from] .. order[to - 1] (one name) to site s. */
static int add_places(struct probe_site *s, const struct usdt_probe *probes,
		      const size_t *order, size_t from, size_t to, const char *target_path)
{
	struct usdt_site *grown = realloc(s->at, (s->nr_at + to - from + 1) * sizeof(*grown));

	if (!grown)
		return -ENOMEM;
	s->at = grown;
	for (size_t k = from; k < to; k++)
		if (!site_of(&probes[order[k]], target_path, &s->at[s->nr_at]))
			s->nr_at++;
	return 0;
}

/*
 * A site for each probe name of a file (one attach covers every place of a
 * probe in one file), holding every place of it, in the order its notes
 * first give the names. The names are sorted once to group them: not each
 * probe checked against every site so far, which a file of a hundred
 * thousand notes made quadratic. Sites of this path from before, which would
 * mean the file was scanned twice (target__open_files gives each file
 * once), are looked through as before. A name none of whose places can be
 * read gets no site.
 */
static int add_sites(struct discovery *d, const char *path, const char *target_path,
		     const struct usdt_probe *probes, size_t nr)
{
	size_t *order = malloc((nr ? nr : 1) * sizeof(*order)), before = d->nr;
	size_t *group = malloc((nr ? nr : 1) * sizeof(*group)); /* probe -> its name's first k */
	bool again = false;
	int err = -ENOMEM;

	for (size_t j = 0; !again && j < before; j++)
		again = !strcmp(d->sites[j].path, path);
	if (!order || !group)
		goto out;
	for (size_t i = 0; i < nr; i++)
		order[i] = i;
	qsort_r(order, nr, sizeof(*order), by_name, (void *)probes);
	for (size_t k = 0, start = 0; k < nr; k++) {
		if (k && strcmp(probes[order[k]].name, probes[order[k - 1]].name))
			start = k;
		group[order[k]] = start;
	}
	err = 0;
	for (size_t i = 0; i < nr && !err; i++) {
		size_t from = group[i], to = from + 1;
		struct probe_site *s;

		if (order[from] != i)
			continue; /* not its name's first place */
		while (to < nr && group[order[to]] == from)
			to++;
		s = again ? site_named(d, before, path, probes[i].name) : NULL;
		if (s) {
			err = add_places(s, probes, order, from, to, target_path);
			continue;
		}
		s = realloc(d->sites, (d->nr + 1) * sizeof(*s));
		if (!s) {
			err = -ENOMEM;
			break;
		}
		d->sites = s;
		s = &d->sites[d->nr];
		memset(s, 0, sizeof(*s));
		s->path = strdup(path);
		s->target_path = strdup(target_path);
		snprintf(s->name, sizeof(s->name), "%s", probes[i].name);
		s->probe = usdt_probe_id(probes[i].name);
		err = s->path && s->target_path ? add_places(s, probes, order, from, to, target_path)
						: -ENOMEM;
		if (!err && s->nr_at) {
			d->nr++;
			continue;
		}
		free(s->path);
		free(s->target_path);
		free(s->at);
	}
out:
	free(order);
	free(group);
	return err;
}

static int scan_usdt(void *ctx, const char *path, const char *target_path,
		     const struct target_mapping *map)
{
	struct discovery *d = ctx;
	struct usdt_probe *probes;
	uint64_t current;
	size_t nr;
	int err;

	if (d->images && image_cache__lacks(d->images, path, IMAGE_NO_USDT))
		return 0;
	d->scanned++;
	err = usdt__read(path, AT_USDT_PROVIDER, &probes, &nr, &current);
	if (err) {
		if (d->verbose)
			info_msg("skipping %s: %s\n", target_path, strerror(-err));
		if (err == -ENOEXEC && d->images)
			image_cache__note(d->images, path, IMAGE_NO_USDT | IMAGE_NO_TOKIO);
		return 0;
	}
	if (!nr && d->images)
		image_cache__note(d->images, path, IMAGE_NO_USDT);
	for (size_t i = 0; i < nr; i++)
		merge_spec(d, &probes[i]);
	/* the file with the probes keeps the thread-local, placed as its code is */
	if (nr && current && !d->usdt_current && map->start >= map->offset)
		d->usdt_current = map->start - map->offset + current;
	err = add_sites(d, path, target_path, probes, nr);
	free(probes);
	return err;
}

static int scan_tokio(void *ctx, const char *path, const char *target_path,
		      const struct target_mapping *map)
{
	struct discovery *d = ctx;
	struct tokio_binary *tb = &d->tokio;
	int err;

	if (d->images && image_cache__lacks(d->images, path, IMAGE_NO_TOKIO))
		return 0;
	err = tokio__detect(path, d->rules, &tb->rt);
	if (err == -ENOENT || err == -ENOEXEC) {
		if (d->images)
			image_cache__note(d->images, path, IMAGE_NO_TOKIO);
		return 0;
	}
	if (err)
		return err;
	/* a library's thread-locals lie where the loader put its block, unknown here */
	if (d->files.exe < 0 || strcmp(path, d->files.f[d->files.exe].path)) {
		tb->rt.current.tpoff = 0;
		snprintf(tb->rt.current.why, sizeof(tb->rt.current.why),
			 "tokio is in a library, whose thread-locals sample mode cannot place");
	}
	tb->path = strdup(path);
	tb->target_path = strdup(target_path);
	tb->map = *map;
	if (!tb->path || !tb->target_path)
		return -ENOMEM;
	return 1; /* found: one tokio per process is what we trace */
}

/*
 * Where a Go function's entry probe goes: past the stack-bound check (a
 * `cmp` the kernel would single-step) to the branch after it, which it
 * emulates, unless --probe-at entry.
 */
static int place_go_entry(struct discovery *d, const struct elf_image *im, enum go_func f,
			  struct go_probe *gp)
{
	uint64_t addr = d->go.funcs[f], size = golang__func_size(&d->go, addr);
	const uint8_t *code = size ? elf_image__bytes(im, addr, size) : NULL;
	struct placement_need need = { .arg = -1, .spills = true };
	int64_t at = addr ? elf_image__offset(im, addr) : -1;
	struct placement p = { 0 };

	if (at < 0)
		return -ENOENT;
	/* placement keeps memory and control flow; the registers read are checked here */
	gp->moved = !d->probe_at_entry && code &&
		    !placement__entry(code, size, addr, &need, d->rules, &p) && p.cheap && p.skip &&
		    golang__keeps_args(code, p.skip, addr);
	gp->entry = (uint64_t)at;
	gp->at = (uint64_t)at + (gp->moved ? p.skip : 0);
	gp->optimized = gp->moved && p.verdict == PROBE_OPTIMIZED;
	if (gp->moved)
		snprintf(gp->said, sizeof(gp->said), "attaching %s at %s+0x%llx (+%llu: past %s, at "
			 "%s, %s)", go_func_names[f], d->go_target_path, (unsigned long long)at,
			 (unsigned long long)p.skip, p.entry, p.at, probe_verdict_str(p.verdict));
	else
		snprintf(gp->said, sizeof(gp->said), "attaching %s at %s+0x%llx (%s, single-stepped: "
			 "%s)", go_func_names[f], d->go_target_path, (unsigned long long)at,
			 p.entry[0] ? p.entry : "?",
			 d->probe_at_entry ? "--probe-at entry"
			 : p.why[0]	   ? p.why
			 : p.skip	   ? "it would move past a register a probe reads"
					   : "no cheaper instruction before its first side effect");
	return 0;
}

/* newproc1 returns the goroutine it made: probed at its rets, never by a uretprobe. */
static int place_go_rets(struct discovery *d, const struct elf_image *im)
{
	uint64_t addr = d->go.funcs[GO_NEWPROC1], size = golang__func_size(&d->go, addr);
	const uint8_t *code = size ? elf_image__bytes(im, addr, size) : NULL;
	uint64_t rets[GO_RETS];
	int n = code ? golang__rets(code, size, addr, rets, GO_RETS) : -ENOENT;

	for (int i = 0; i < n; i++) {
		int64_t at = elf_image__offset(im, rets[i]);

		if (at < 0)
			return -ENOENT;
		d->go_rets[i] = (struct go_probe){ .at = (uint64_t)at, .entry = (uint64_t)at };
	}
	return n > 0 ? n : n < 0 ? n : -ENOENT;
}

/*
 * casgstatus's call sites that carry a change the probes need (the entry
 * fires for every call: a system call's two changes cost two traps).
 */
static void place_go_sites(struct discovery *d, const struct elf_image *im)
{
	struct go_status_site all[GO_STATUS_SITES];
	int n = d->probe_at_entry ? -ENOTSUP : golang__status_sites(&d->go, im, all, GO_STATUS_SITES);

	d->nr_go_sites = n < 0 ? n : 0;
	d->go_sites_skipped = 0;
	for (int i = 0; i < n; i++) {
		int64_t at = elf_image__offset(im, all[i].addr);

		if (at < 0) {
			d->nr_go_sites = -ENOENT;
			return;
		}
		if (!golang__status_site_needed(&all[i])) {
			d->go_sites_skipped++;
			continue;
		}
		d->go_site_at[d->nr_go_sites] = (uint64_t)at;
		d->go_sites[d->nr_go_sites++] = all[i];
	}
	if (!d->nr_go_sites)
		d->nr_go_sites = -ENOENT;
}

/*
 * runqsteal probed where only a steal that took something goes: an idle P
 * tries every other P's queue, mostly empty, at each look for work.
 */
static void place_go_steal(struct discovery *d, const struct elf_image *im)
{
	uint64_t addr = d->go.funcs[GO_RUNQSTEAL], size = golang__func_size(&d->go, addr);
	const uint8_t *code = size ? elf_image__bytes(im, addr, size) : NULL;
	uint64_t taken = code && !d->probe_at_entry ? golang__steal_taken(code, size, addr) : 0;
	int64_t at = taken ? elf_image__offset(im, taken) : -1;
	struct go_probe *gp = &d->go_steal_taken;

	memset(gp, 0, sizeof(*gp));
	if (at < 0 || d->go.off.p_runq < 0)
		return;
	gp->at = gp->entry = (uint64_t)at;
	snprintf(gp->said, sizeof(gp->said), "attaching runtime.runqsteal's steals that took "
		 "something at %s+0x%llx (+%llu: past runqgrab's call and its test; "
		 "single-stepped, hit by those steals only)",
		 d->go_target_path, (unsigned long long)at, (unsigned long long)(taken - addr));
}

/*
 * What the probes and the names need of a Go binary's code, taken while it
 * is read: where each probe goes, where the binary was loaded (PIE), and
 * each goroutine start function's name. Its code is not kept.
 */
static void read_go_code(struct discovery *d, const struct elf_image *im,
			 const struct target_mapping *map)
{
	static const enum go_func entry_funcs[GO_ENTRY_PROBES] = {
		[GO_PROBE_CASGSTATUS] = GO_CASGSTATUS,
		[GO_PROBE_RUNQSTEAL] = GO_RUNQSTEAL,
		[GO_PROBE_HANDOFFP] = GO_HANDOFFP,
		[GO_PROBE_STOP_THE_WORLD] = GO_STOP_THE_WORLD,
		[GO_PROBE_PREEMPT_PARK] = GO_PREEMPT_PARK,
	};

	/* PIE: where it was loaded, by the file offset of a function in its text */
	if (d->go.pie) {
		uint64_t vaddr = d->go.funcs[GO_EXECUTE];
		int64_t off = vaddr ? elf_image__offset(im, vaddr) : -1;

		if (off >= 0)
			d->go_bias = map->start + ((uint64_t)off - map->offset) - vaddr;
	}
	d->nr_go_rets = place_go_rets(d, im);
	place_go_sites(d, im);
	place_go_steal(d, im);
	for (int i = 0; i < GO_ENTRY_PROBES; i++)
		if (place_go_entry(d, im, entry_funcs[i], &d->go_entries[i]))
			d->go_entries[i].said[0] = '\0'; /* entry 0: not found */
	golang__name_goroutines(&d->go, im);
}

/* The first Go binary the target maps (its executable, or a c-shared library). */
static int scan_go(void *ctx, const char *path, const char *target_path,
		   const struct target_mapping *map)
{
	struct discovery *d = ctx;
	struct elf_image im;
	int err;

	if (d->images && image_cache__lacks(d->images, path, IMAGE_NO_GO))
		return 0;
	d->go_err = golang__detect(path, &d->go);
	if (d->go_err == -ENOENT || d->go_err == -ENOEXEC || !d->go.version[0]) {
		golang__free(&d->go);
		d->go_err = 0;
		if (d->images)
			image_cache__note(d->images, path, IMAGE_NO_GO);
		return 0;
	}
	d->is_go = true;
	d->go_path = strdup(path);
	d->go_target_path = strdup(target_path);
	d->go_map = *map;
	if (!d->go_path || !d->go_target_path)
		return -ENOMEM;
	err = elf_image__open(&im, path);
	if (err) {
		d->go_err = d->go_err ? d->go_err : err;
		d->nr_go_rets = -ENOENT;
		d->nr_go_sites = -ENOENT;
		return 1;
	}
	read_go_code(d, &im, map);
	elf_image__close(&im);
	return 1;
}

/*
 * Whether tokio could be in the executable where no symbol shows it: it is
 * stripped, and Rust. Stripped libraries do not count: nearly every
 * distribution strips libc and ld.so, which hold no tokio, and saying that a
 * C program's binary is stripped tells its user nothing useful.
 */
static bool stripped_rust(struct discovery *d, pid_t pid)
{
	const char *marker = NULL;
	struct elf_image im;

	if (d->files.exe < 0 || elf_image__open(&im, d->files.f[d->files.exe].path))
		return false;
	if (!im.has_symtab)
		marker = elf_image__rust_marker(&im);
	elf_image__close(&im);
	if (marker && d->verbose)
		warn_msg("the executable of pid %d is stripped, and Rust (%s)\n", pid, marker);
	return marker != NULL;
}

typedef int (*scan_fn)(void *ctx, const char *path, const char *target_path,
		       const struct target_mapping *map);

/* fn for every file, until one returns nonzero: its value. */
static int scan(struct discovery *d, scan_fn fn)
{
	int ret = 0;

	for (size_t i = 0; !ret && i < d->files.nr; i++) {
		if (d->reading)
			d->reading(d->reading_ctx, i);
		ret = fn(d, d->files.f[i].path, d->files.f[i].target_path, &d->files.f[i].map);
	}
	return ret;
}

int discover_files(struct discovery *d, pid_t pid)
{
	int err = scan(d, scan_usdt);

	if (err)
		return err;
	if (d->nr) {
		d->kind = RUNTIME_USDT;
		return 0;
	}
	err = scan(d, scan_tokio);
	if (err < 0)
		return err;
	if (err > 0) {
		d->kind = RUNTIME_TOKIO;
		return 0;
	}
	err = scan(d, scan_go);
	if (err < 0)
		return err;
	if (d->is_go && !d->go_err)
		d->kind = RUNTIME_GO;
	if (!d->is_go)
		d->stripped = stripped_rust(d, pid);
	return 0;
}

int discover(struct discovery *d, const struct target *t)
{
	int err = target__open_files(t, &d->files);

	return err ? err : discover_files(d, t->pid);
}

bool discovered(const struct discovery *d, const char *probe)
{
	for (size_t i = 0; i < d->nr; i++)
		if (!strcmp(d->sites[i].name, probe))
			return true;
	return false;
}

uint64_t discovery__tokio_addr(const struct discovery *d, uint64_t offset)
{
	return d->tokio.map.start + (offset - d->tokio.map.offset);
}

void discovery__free(struct discovery *d)
{
	for (size_t i = 0; i < d->nr; i++) {
		free(d->sites[i].path);
		free(d->sites[i].target_path);
		free(d->sites[i].at);
	}
	free(d->sites);
	free(d->tokio.path);
	free(d->tokio.target_path);
	tokio__free(&d->tokio.rt);
	golang__free(&d->go);
	free(d->go_path);
	free(d->go_target_path);
	target_files__close(&d->files);
	memset(d, 0, sizeof(*d));
}
