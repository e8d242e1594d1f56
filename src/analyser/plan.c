// SPDX-License-Identifier: MIT
/*
 * The plan's bytes: little-endian fields in a fixed order, plain structs
 * of this very build where they hold no pointer (both ends are one
 * executable), strings as a length and their bytes. Written by the
 * analyser, read (and checked, field by field) by the privileged side.
 */
#include "analyser/plan.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PLAN_MAGIC 0x4c505441u /* "ATPL" */
#define PLAN_VERSION 5
#define NO_STRING UINT32_MAX

/* Bounds on what a plan may hold: far beyond any real runtime's. */
#define MAX_USDT_SITES (1u << 16)
#define MAX_PLACES (1u << 20)
#define MAX_GO_FUNCS (1u << 24)
#define MAX_STRING (64u << 10)
#define MAX_FRAME 4096u
/* struct pt_regs on x86-64: 21 registers; on arm64, 34 */
#define MAX_REG_OFF (34u * 8)

static void put(struct plan_buf *b, const void *p, size_t n)
{
	if (b->err)
		return;
	if (b->len + n > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;
		uint8_t *data;

		while (cap < b->len + n)
			cap *= 2;
		data = realloc(b->data, cap);
		if (!data) {
			b->err = -ENOMEM;
			return;
		}
		b->data = data;
		b->cap = cap;
	}
	memcpy(b->data + b->len, p, n);
	b->len += n;
}

static void put_u32(struct plan_buf *b, uint32_t v)
{
	put(b, &v, sizeof(v));
}

static void put_u64(struct plan_buf *b, uint64_t v)
{
	put(b, &v, sizeof(v));
}

/* s, of at most max bytes (its array's size, or MAX_STRING); NULL: none */
static void put_str(struct plan_buf *b, const char *s, size_t max)
{
	size_t n = s ? strnlen(s, max < MAX_STRING ? max : MAX_STRING) : 0;

	put_u32(b, s ? (uint32_t)n : NO_STRING);
	put(b, s, n);
}

/* Which of d's files path is: -1 for none. */
static int32_t file_index(const struct discovery *d, const char *path)
{
	for (size_t i = 0; path && i < d->files.nr; i++)
		if (!strcmp(d->files.f[i].path, path))
			return (int32_t)i;
	return -1;
}

static void put_usdt(const struct discovery *d, struct plan_buf *b)
{
	put_u32(b, (uint32_t)d->nr);
	for (size_t i = 0; i < d->nr; i++) {
		const struct probe_site *s = &d->sites[i];

		put_u32(b, (uint32_t)file_index(d, s->path));
		put_str(b, s->name, sizeof(s->name));
		put_u32(b, (uint32_t)s->probe);
		put_u32(b, (uint32_t)s->nr_at);
		put(b, s->at, s->nr_at * sizeof(*s->at));
	}
	put(b, d->specs, sizeof(d->specs));
	put_u32(b, d->specs_seen);
	put_u64(b, d->usdt_current);
}

static void put_tokio(const struct discovery *d, struct plan_buf *b)
{
	const struct tokio_runtime *rt = &d->tokio.rt;

	put_u32(b, (uint32_t)file_index(d, d->tokio.path));
	put_u32(b, (uint32_t)rt->nr);
	for (size_t i = 0; i < rt->nr; i++) {
		const struct tokio_site *s = &rt->sites[i];

		put_u32(b, s->kind);
		put_u64(b, s->addr);
		put_u64(b, s->offset);
		put(b, &s->place, sizeof(s->place));
		put_u32(b, s->internal);
		put_str(b, s->future, MAX_STRING);
		put(b, s->code_off, sizeof(s->code_off));
		put(b, s->code_len, sizeof(s->code_len));
	}
	for (int k = 0; k < TOKIO_KIND_MAX; k++)
		put_u64(b, rt->count[k]);
	put_u64(b, rt->named);
	put_u64(b, rt->ambiguous);
	put_u64(b, rt->internal);
	put_u32(b, rt->v0);
	put(b, rt->defer_ret, sizeof(rt->defer_ret));
	put_u64(b, rt->nr_defer);
	put_u32(b, rt->has_symtab);
	put_u64(b, (uint64_t)rt->current.tpoff);
	put_u32(b, rt->current.size);
	put_u32(b, (uint32_t)rt->current.task_id);
	put_u32(b, (uint32_t)rt->current.budget);
	put_str(b, rt->current.why, sizeof(rt->current.why));
}

static void put_go(const struct discovery *d, struct plan_buf *b)
{
	const struct go_binary *g = &d->go;

	put_u32(b, (uint32_t)file_index(d, d->go_path));
	put(b, g->version, sizeof(g->version));
	put_u32(b, (uint32_t)g->major);
	put_u32(b, (uint32_t)g->minor);
	put_u32(b, g->has_symtab | g->has_dwarf << 1 | g->pie << 2);
	put(b, g->funcs, sizeof(g->funcs));
	put(b, &g->off, sizeof(g->off));
	put_u32(b, (uint32_t)g->tls_g);
	put(b, g->may_lose, sizeof(g->may_lose));
	put(b, g->never_woken, sizeof(g->never_woken));
	put_u64(b, g->nr_all);
	put(b, g->all, g->nr_all * sizeof(*g->all));
	put_u64(b, g->names_len);
	put(b, g->names, g->names_len);
	put_u32(b, (uint32_t)d->nr_go_rets);
	put(b, d->go_rets, sizeof(d->go_rets));
	put(b, d->go_entries, sizeof(d->go_entries));
	put(b, &d->go_steal_taken, sizeof(d->go_steal_taken));
	put_u32(b, (uint32_t)d->nr_go_sites);
	put_u32(b, d->go_sites_skipped);
	put(b, d->go_sites, sizeof(d->go_sites));
	put(b, d->go_site_at, sizeof(d->go_site_at));
	put_u64(b, d->go_bias);
}

int plan__encode(const struct discovery *d, struct plan_buf *b)
{
	put_u32(b, PLAN_MAGIC);
	put_u32(b, PLAN_VERSION);
	put_u32(b, d->kind);
	put_u64(b, d->scanned);
	put_u32(b, d->stripped | d->is_go << 1);
	put_u32(b, (uint32_t)d->go_err);
	put_usdt(d, b);
	put_tokio(d, b);
	put_go(d, b);
	return b->err;
}

void plan_buf__free(struct plan_buf *b)
{
	free(b->data);
	memset(b, 0, sizeof(*b));
}

/* The reader: the first fault is kept, and every read after it gets zeros. */
struct rd {
	const uint8_t *p;
	size_t left;
	const uint64_t *sizes;
	size_t nr_files;
	const char *why;
};

static bool fail(struct rd *r, const char *why)
{
	if (!r->why)
		r->why = why;
	r->left = 0;
	return false;
}

static bool get(struct rd *r, void *out, size_t n)
{
	if (r->why || n > r->left) {
		memset(out, 0, n);
		return fail(r, "cut short");
	}
	memcpy(out, r->p, n);
	r->p += n;
	r->left -= n;
	return true;
}

static uint32_t get_u32(struct rd *r)
{
	uint32_t v;

	get(r, &v, sizeof(v));
	return v;
}

static uint64_t get_u64(struct rd *r)
{
	uint64_t v;

	get(r, &v, sizeof(v));
	return v;
}

/* A string of at most max bytes, malloc'd; NULL when none was sent (or on a fault). */
static char *get_str(struct rd *r, size_t max)
{
	uint32_t n = get_u32(r);
	char *s;

	if (n == NO_STRING || r->why)
		return NULL;
	if (n > max || n > r->left || memchr(r->p, '\0', n)) {
		fail(r, "a string too long, or holding a NUL");
		return NULL;
	}
	s = malloc((size_t)n + 1);
	if (!s) {
		fail(r, "out of memory");
		return NULL;
	}
	get(r, s, n);
	s[n] = '\0';
	return s;
}

static int32_t get_file(struct rd *r, bool may_be_none)
{
	int32_t f = (int32_t)get_u32(r);

	if (f < (may_be_none ? -1 : 0) || (f >= 0 && (size_t)f >= r->nr_files))
		fail(r, "a file index out of range");
	return r->why ? -1 : f;
}

/* An offset inside file f (a probe, a semaphore, a return site). */
static bool in_file(struct rd *r, int32_t f, uint64_t offset)
{
	if (f < 0)
		return fail(r, "an offset in no file");
	return offset < r->sizes[f] || fail(r, "an offset past its file's end");
}

/* A fixed char array from the plan: its last byte made the end of the string. */
#define TERMINATE(a) ((a)[sizeof(a) - 1] = '\0')

static bool check_spec(struct rd *r, const struct at_usdt_spec *s)
{
	if (s->known > 1 || s->nr_args > AT_USDT_MAX_ARGS)
		return fail(r, "a USDT argument spec out of range");
	for (uint32_t i = 0; i < s->nr_args; i++)
		if (s->args[i].kind < AT_USDT_ARG_CONST || s->args[i].kind > AT_USDT_ARG_DEREF ||
		    s->args[i].reg_off >= MAX_REG_OFF || s->args[i].shift > 63 ||
		    s->args[i].is_signed > 1)
			return fail(r, "a USDT argument out of range");
	return true;
}

static int set_paths(const struct discovery *d, int32_t f, char **path, char **target_path)
{
	*path = strdup(d->files.f[f].path);
	*target_path = strdup(d->files.f[f].target_path);
	return *path && *target_path ? 0 : -ENOMEM;
}

static void get_usdt(struct rd *r, struct discovery *d)
{
	uint32_t nr = get_u32(r);

	if (nr > MAX_USDT_SITES || !(d->sites = calloc(nr + 1, sizeof(*d->sites)))) {
		fail(r, "too many USDT probes");
		return;
	}
	for (uint32_t i = 0; i < nr && !r->why; i++) {
		struct probe_site *s = &d->sites[d->nr++];
		int32_t f = get_file(r, false);
		char *name = get_str(r, USDT_NAME_LEN - 1);
		uint32_t nr_at;

		snprintf(s->name, sizeof(s->name), "%s", name ? name : "");
		free(name);
		s->probe = (int32_t)get_u32(r);
		nr_at = get_u32(r);
		if (s->probe < -1 || s->probe >= AT_USDT_NR_PROBES || !nr_at ||
		    nr_at > r->left / sizeof(*s->at)) {
			fail(r, "a USDT probe out of range");
			break;
		}
		if (!(s->at = calloc(nr_at, sizeof(*s->at))) ||
		    set_paths(d, f, &s->path, &s->target_path)) {
			fail(r, "out of memory");
			break;
		}
		s->nr_at = nr_at;
		get(r, s->at, nr_at * sizeof(*s->at));
		for (uint32_t j = 0; j < nr_at && !r->why; j++)
			if (in_file(r, f, s->at[j].offset) &&
			    (!s->at[j].ref_ctr || in_file(r, f, s->at[j].ref_ctr)))
				check_spec(r, &s->at[j].spec);
	}
	get(r, d->specs, sizeof(d->specs));
	for (int i = 0; i < AT_USDT_NR_PROBES && !r->why; i++)
		check_spec(r, &d->specs[i]);
	d->specs_seen = get_u32(r);
	/* an address in the target that BPF reads 8 bytes at: any value is harmless */
	d->usdt_current = get_u64(r);
}

static bool check_place(struct rd *r, struct placement *p)
{
	TERMINATE(p->entry);
	TERMINATE(p->at);
	TERMINATE(p->why);
	if ((unsigned)p->verdict > PROBE_OPTIMIZED || (unsigned)p->entry_verdict > PROBE_OPTIMIZED ||
	    p->cheap < 0 || p->cheap > 1 || p->frame > MAX_FRAME ||
	    (p->arg_reg != -1 && (p->arg_reg < 0 || p->arg_reg >= (int)MAX_REG_OFF)))
		return fail(r, "a tokio probe's placement out of range");
	return true;
}

/* Where sample mode reads the running task: a thread-local's offset and two fields in it. */
static void get_current(struct rd *r, struct tokio_current *c)
{
	char *why;

	c->tpoff = (int64_t)get_u64(r);
	c->size = get_u32(r);
	c->task_id = (int32_t)get_u32(r);
	c->budget = (int32_t)get_u32(r);
	why = get_str(r, sizeof(c->why));
	snprintf(c->why, sizeof(c->why), "%s", why ? why : "");
	free(why);
	/* tpoff 0: none (not tokio, or not found, as why says) */
	if (c->tpoff &&
	    (c->tpoff > 0 || c->tpoff < -(1 << 20) || c->size > 4096 || c->task_id < 0 ||
	     c->budget < 0 || (uint32_t)c->task_id + 16 > c->size ||
	     (uint32_t)c->budget + 2 > c->size || c->tpoff + (int64_t)c->size > 0))
		fail(r, "tokio's thread-local out of range");
}

static void get_tokio(struct rd *r, struct discovery *d)
{
	struct tokio_runtime *rt = &d->tokio.rt;
	int32_t f = get_file(r, true);
	uint32_t nr = get_u32(r);

	if (nr > MAX_PLACES || nr > r->left / 16 || !(rt->sites = calloc(nr + 1, sizeof(*rt->sites)))) {
		fail(r, "too many tokio sites");
		return;
	}
	if (nr && f < 0)
		fail(r, "tokio sites in no file");
	for (uint32_t i = 0; i < nr && !r->why; i++) {
		struct tokio_site *s = &rt->sites[rt->nr++];

		s->kind = get_u32(r);
		s->addr = get_u64(r);
		s->offset = get_u64(r);
		get(r, &s->place, sizeof(s->place));
		s->internal = get_u32(r) != 0;
		s->future = get_str(r, MAX_STRING);
		get(r, s->code_off, sizeof(s->code_off));
		get(r, s->code_len, sizeof(s->code_len));
		if (s->kind >= TOKIO_KIND_MAX || s->place.skip > 64)
			fail(r, "a tokio site out of range");
		else if (in_file(r, f, s->offset) && in_file(r, f, s->offset + s->place.skip))
			check_place(r, &s->place);
		/* where its polls run: inside the file, each piece whole */
		for (int k = 0; k < 1 + TOKIO_LAYERS && !r->why; k++)
			if (s->code_len[k] && in_file(r, f, s->code_off[k]))
				in_file(r, f, s->code_off[k] + s->code_len[k] - 1);
	}
	for (int k = 0; k < TOKIO_KIND_MAX; k++)
		if ((rt->count[k] = get_u64(r)) > nr)
			fail(r, "a tokio count out of range");
	rt->named = get_u64(r);
	rt->ambiguous = get_u64(r);
	rt->internal = get_u64(r);
	rt->v0 = get_u32(r) != 0;
	get(r, rt->defer_ret, sizeof(rt->defer_ret));
	rt->nr_defer = get_u64(r);
	rt->has_symtab = get_u32(r) != 0;
	get_current(r, &rt->current);
	if (rt->named > nr || rt->ambiguous > nr || rt->internal > nr ||
	    rt->nr_defer > AT_TOKIO_DEFER_SITES)
		fail(r, "a tokio count out of range");
	for (size_t i = 0; i < rt->nr_defer && !r->why; i++)
		in_file(r, f, rt->defer_ret[i]);
	if (f >= 0 && !r->why) {
		if (set_paths(d, f, &d->tokio.path, &d->tokio.target_path))
			fail(r, "out of memory");
		d->tokio.map = d->files.f[f].map;
	}
}

static void check_go_probe(struct rd *r, int32_t f, struct go_probe *p)
{
	TERMINATE(p->said);
	if (in_file(r, f, p->at) && in_file(r, f, p->entry) && p->at - p->entry > 64)
		fail(r, "a Go probe too far from its function's entry");
}

static void get_go(struct rd *r, struct discovery *d)
{
	struct go_binary *g = &d->go;
	int32_t f = get_file(r, true);
	uint32_t flags;
	uint64_t nr_all;
	const int32_t *off = (const int32_t *)&g->off;

	get(r, g->version, sizeof(g->version));
	TERMINATE(g->version);
	g->major = (int)get_u32(r);
	g->minor = (int)get_u32(r);
	flags = get_u32(r);
	g->has_symtab = flags & 1;
	g->has_dwarf = flags >> 1 & 1;
	g->pie = flags >> 2 & 1;
	get(r, g->funcs, sizeof(g->funcs));
	get(r, &g->off, sizeof(g->off));
	for (size_t i = 0; i < sizeof(g->off) / sizeof(*off); i++)
		if (off[i] < -1 || off[i] > (1 << 16))
			fail(r, "a Go offset out of range");
	g->tls_g = (int32_t)get_u32(r);
	if (g->tls_g > 0 || g->tls_g < -(1 << 20))
		fail(r, "g's TLS slot out of range");
	get(r, g->may_lose, sizeof(g->may_lose));
	get(r, g->never_woken, sizeof(g->never_woken));
	nr_all = get_u64(r);
	if (nr_all > MAX_GO_FUNCS || nr_all > r->left / sizeof(*g->all)) {
		fail(r, "too many Go functions");
		return;
	}
	g->all = malloc((nr_all + 1) * sizeof(*g->all));
	if (!g->all) {
		fail(r, "out of memory");
		return;
	}
	g->nr_all = g->cap_all = nr_all;
	get(r, g->all, nr_all * sizeof(*g->all));
	g->names_len = get_u64(r);
	if (g->names_len > r->left || (nr_all && !g->names_len)) {
		fail(r, "Go names cut short");
		return;
	}
	g->names = malloc(g->names_len + 1);
	if (!g->names) {
		fail(r, "out of memory");
		return;
	}
	g->names_cap = g->names_len;
	get(r, g->names, g->names_len);
	/* every name ends inside the table: the last one's NUL is its last byte */
	if (g->names_len && g->names[g->names_len - 1])
		fail(r, "Go names not terminated");
	for (size_t i = 0; i < nr_all && !r->why; i++)
		if (g->all[i].name >= g->names_len || g->all[i].goroutine >= g->names_len ||
		    (i && g->all[i].addr < g->all[i - 1].addr))
			fail(r, "a Go function out of range, or out of order");
	d->nr_go_rets = (int32_t)get_u32(r);
	get(r, d->go_rets, sizeof(d->go_rets));
	get(r, d->go_entries, sizeof(d->go_entries));
	get(r, &d->go_steal_taken, sizeof(d->go_steal_taken));
	d->nr_go_sites = (int32_t)get_u32(r);
	d->go_sites_skipped = get_u32(r);
	get(r, d->go_sites, sizeof(d->go_sites));
	get(r, d->go_site_at, sizeof(d->go_site_at));
	d->go_bias = get_u64(r);
	if (d->nr_go_sites > GO_STATUS_SITES || d->nr_go_sites < -4095 ||
	    d->go_sites_skipped > GO_STATUS_SITES)
		fail(r, "too many calls of casgstatus");
	for (int i = 0; i < d->nr_go_sites && !r->why; i++)
		in_file(r, f, d->go_site_at[i]);
	if (d->nr_go_rets > GO_RETS || d->nr_go_rets < -4095)
		fail(r, "too many returns of newproc1");
	for (int i = 0; i < d->nr_go_rets && !r->why; i++)
		check_go_probe(r, f, &d->go_rets[i]);
	for (int i = 0; i < GO_ENTRY_PROBES && !r->why; i++)
		if (d->go_entries[i].said[0]) /* else not found: not probed */
			check_go_probe(r, f, &d->go_entries[i]);
	if (d->go_steal_taken.said[0] && !r->why)
		check_go_probe(r, f, &d->go_steal_taken);
	if (f >= 0 && !r->why) {
		if (set_paths(d, f, &d->go_path, &d->go_target_path))
			fail(r, "out of memory");
		d->go_map = d->files.f[f].map;
	}
	if (d->kind == RUNTIME_GO && f < 0)
		fail(r, "a Go runtime in no file");
}

int plan__decode(const uint8_t *plan, size_t len, const uint64_t *sizes, struct discovery *d,
		 const char **why)
{
	struct rd r = { .p = plan, .left = len, .sizes = sizes, .nr_files = d->files.nr };
	struct target_files files = d->files;
	uint32_t flags;

	if (get_u32(&r) != PLAN_MAGIC || get_u32(&r) != PLAN_VERSION)
		fail(&r, "not a plan of this version");
	d->kind = get_u32(&r);
	d->scanned = get_u64(&r);
	flags = get_u32(&r);
	d->stripped = flags & 1;
	d->is_go = flags >> 1 & 1;
	d->go_err = (int)get_u32(&r);
	if (d->kind > RUNTIME_GO || d->scanned > r.nr_files || d->go_err > 0 || d->go_err < -4095)
		fail(&r, "its runtime out of range");
	get_usdt(&r, d);
	get_tokio(&r, d);
	get_go(&r, d);
	if (!r.why && r.left)
		fail(&r, "bytes after its end");
	if (!r.why && ((d->kind == RUNTIME_USDT && !d->nr) ||
		       (d->kind == RUNTIME_TOKIO && !d->tokio.rt.nr)))
		fail(&r, "a runtime with no probe");
	if (!r.why)
		return 0;
	*why = r.why;
	d->files = (struct target_files){ .exe = -1 };
	discovery__free(d);
	d->files = files;
	return -EBADMSG;
}
