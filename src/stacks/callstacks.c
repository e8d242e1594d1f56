// SPDX-License-Identifier: MIT
#include "stacks/callstacks.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stacks/unwind.h"

/* FNV-1a, over a string with its end, or over raw bytes. */
static uint64_t mix(uint64_t h, const void *p, size_t n)
{
	const unsigned char *b = p;

	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 0x100000001b3ull;
	return h;
}

static uint64_t mix_str(uint64_t h, const char *s)
{
	return mix(h, s ? s : "", (s ? strlen(s) : 0) + 1);
}

static const char *or_empty(const char *s)
{
	return s ? s : "";
}

/*
 * A frame is its function in its image: samples a few instructions apart
 * in one function are one frame, so that a task's time adds up by where it
 * was, as in a flame graph. Only a frame no symbol names keeps its address.
 */
static uint64_t frame_pc(const struct stack_frame *f)
{
	return f->function && *f->function ? 0 : f->rel_pc;
}

static uint32_t frame_line(const struct stack_frame *f)
{
	return f->line > 0 ? (uint32_t)f->line : 0;
}

/* by_line: a table of places (callstacks.by_line), where the line tells frames apart too */
static uint64_t frame_hash(const struct stack_frame *f, bool by_line)
{
	uint64_t h = 0xcbf29ce484222325ull, pc = frame_pc(f);
	uint8_t bits = (uint8_t)(f->inlined | f->kernel << 1);
	uint32_t line = by_line ? frame_line(f) : 0;

	h = mix_str(h, f->function);
	h = mix_str(h, f->module);
	h = mix(h, &pc, sizeof(pc));
	h = mix(h, &bits, sizeof(bits));
	h = mix(h, &line, sizeof(line));
	return h ? h : 1;
}

static bool frame_is(const struct cs_frame *k, const struct stack_frame *f)
{
	return !strcmp(k->function, or_empty(f->function)) &&
	       !strcmp(k->module, or_empty(f->module)) &&
	       (k->function[0] || k->rel_pc == f->rel_pc) && k->inlined == f->inlined &&
	       k->kernel == f->kernel;
}

/* Room for one more in a growing array of pointers. */
static int grow(void *arr, uint32_t nr, uint32_t *cap)
{
	void ***a = arr;
	uint32_t n = *cap ? *cap * 2 : 256;
	void **p;

	if (nr < *cap)
		return 0;
	p = realloc(*a, n * sizeof(*p));
	if (!p)
		return -ENOMEM;
	*a = p;
	*cap = n;
	return 0;
}

/*
 * Finds the entry of hash h that eq() says is the same, or the free key it
 * would take: the next after h that is not used (a collision, vanishingly rare).
 */
static void *find(const struct u64map *m, uint64_t *h, bool (*eq)(const void *, const void *),
		  const void *what)
{
	void *v;

	while ((v = u64map__get(m, *h))) {
		if (eq(v, what))
			return v;
		*h = *h + 1 ? *h + 1 : 1;
	}
	return NULL;
}

struct frame_want {
	const struct stack_frame *f;
	bool by_line;
};

static bool frame_eq(const void *k, const void *want)
{
	const struct frame_want *w = want;

	return frame_is(k, w->f) &&
	       (!w->by_line || ((const struct cs_frame *)k)->line == frame_line(w->f));
}

static uint32_t frame_id(struct callstacks *c, const struct stack_frame *f)
{
	uint64_t h = frame_hash(f, c->by_line);
	struct cs_frame *k = find(&c->frame_by_hash, &h, frame_eq,
				  &(struct frame_want){ f, c->by_line });
	size_t fn = strlen(or_empty(f->function)) + 1, mod = strlen(or_empty(f->module)) + 1;
	size_t file = strlen(or_empty(f->file)) + 1;
	char *s;

	if (k)
		return k->id;
	if (grow(&c->frames, c->nr_frames, &c->cap_frames))
		return 0;
	/* the frame and its strings in one block */
	k = malloc(sizeof(*k) + fn + mod + file);
	if (!k)
		return 0;
	s = (char *)(k + 1);
	*k = (struct cs_frame){ .id = c->nr_frames + 1, .hash = h,
				.function = memcpy(s, or_empty(f->function), fn),
				.module = memcpy(s + fn, or_empty(f->module), mod),
				.file = memcpy(s + fn + mod, or_empty(f->file), file),
				.line = frame_line(f), .rel_pc = f->rel_pc,
				.inlined = f->inlined, .kernel = f->kernel };
	if (u64map__set(&c->frame_by_hash, h, k)) {
		free(k);
		return 0;
	}
	c->frames[c->nr_frames++] = k;
	return k->id;
}

struct stack_key {
	const uint32_t *ids;
	uint32_t nr;
};

static bool stack_eq(const void *k, const void *what)
{
	const struct callstack *cs = k;
	const struct stack_key *w = what;

	return cs->nr == w->nr && !memcmp(cs->frames, w->ids, w->nr * sizeof(*w->ids));
}

uint32_t callstacks__intern(struct callstacks *c, const struct stack_frame *f, int n)
{
	uint32_t ids[CALLSTACK_FRAMES];
	struct stack_key key = { .ids = ids };
	struct callstack *cs;
	uint64_t h;

	if (n <= 0)
		return 0;
	for (int i = 0; i < n && key.nr < CALLSTACK_FRAMES; i++) {
		ids[key.nr] = frame_id(c, &f[i]);
		if (!ids[key.nr])
			goto drop;
		key.nr++;
	}
	h = mix(0xcbf29ce484222325ull, ids, key.nr * sizeof(*ids));
	h = h ? h : 1;
	cs = find(&c->stack_by_hash, &h, stack_eq, &key);
	if (cs)
		return cs->id;
	if (c->nr_stacks >= CALLSTACKS_MAX || grow(&c->stacks, c->nr_stacks, &c->cap_stacks))
		goto drop;
	cs = malloc(sizeof(*cs) + key.nr * sizeof(*ids));
	if (!cs)
		goto drop;
	*cs = (struct callstack){ .id = c->nr_stacks + 1, .nr = key.nr, .hash = h };
	memcpy(cs->frames, ids, key.nr * sizeof(*ids));
	if (u64map__set(&c->stack_by_hash, h, cs)) {
		free(cs);
		goto drop;
	}
	c->stacks[c->nr_stacks++] = cs;
	return cs->id;
drop:
	c->dropped++;
	return 0;
}

const struct callstack *callstacks__get(const struct callstacks *c, uint32_t id)
{
	return id && id <= c->nr_stacks ? c->stacks[id - 1] : NULL;
}

const struct cs_frame *callstacks__frame(const struct callstacks *c, uint32_t id)
{
	return id && id <= c->nr_frames ? c->frames[id - 1] : NULL;
}

void callstacks__init(struct callstacks *c)
{
	memset(c, 0, sizeof(*c));
	u64map__init(&c->frame_by_hash);
	u64map__init(&c->stack_by_hash);
}

void callstacks__free(struct callstacks *c)
{
	for (uint32_t i = 0; i < c->nr_frames; i++)
		free(c->frames[i]);
	for (uint32_t i = 0; i < c->nr_stacks; i++)
		free(c->stacks[i]);
	free(c->frames);
	free(c->stacks);
	u64map__clear(&c->frame_by_hash);
	u64map__clear(&c->stack_by_hash);
	memset(c, 0, sizeof(*c));
}

/*
 * Whether a Go function is of the standard library (or made by the
 * toolchain: "type:.eq.T", "go:buildid"): its package path's first element
 * is one of the standard library's ("runtime.gopark",
 * "net/http.(*conn).serve", "vendor/golang.org/x/..."). A module path's
 * first element may lack a dot too ("module myapp", "example/hello"), so a
 * dot alone does not tell them.
 */
static bool go_std(const char *fn)
{
	/* what compilers append to a C function's name for its clones: "f.cold", "f.isra.0" */
	static const char *const clones[] = { "cold", "constprop", "isra", "part", "lto_priv",
					      "llvm", "localalias", "clone", "specialized",
					      "resume", "destroy", "cleanup" };
	/* the standard library's top-level packages (Go 1.19 to 1.27), sorted */
	static const char *const std[] = {
		"archive", "arena", "bufio", "builtin", "bytes", "cmp", "compress", "container",
		"context", "crypto", "database", "debug", "embed", "encoding", "errors", "expvar",
		"flag", "fmt", "go", "hash", "html", "image", "index", "internal", "io", "iter",
		"log", "maps", "math", "mime", "net", "os", "path", "plugin", "reflect", "regexp",
		"runtime", "slices", "sort", "strconv", "strings", "structs", "sync", "syscall",
		"testing", "text", "time", "unicode", "unique", "unsafe", "vendor", "weak",
	};
	size_t slash = strcspn(fn, "/"), dot = strcspn(fn, ".");
	size_t elem = fn[slash] && !memchr(fn, '(', slash) && !memchr(fn, '[', slash) ? slash : dot;

	/* the toolchain's: "type:.eq.T" ("type..eq.T" before Go 1.20), "go:buildid" */
	if (!strncmp(fn, "type:", 5) || !strncmp(fn, "type..", 6) || !strncmp(fn, "go:", 3))
		return true;
	if (!fn[dot] || strstr(fn, "::") || strchr(fn, ' ') || memchr(fn, '.', elem))
		return false; /* not Go's, or a module's of a domain ("github.com/x/y.F") */
	for (size_t i = 0; i < sizeof(clones) / sizeof(clones[0]); i++)
		if (!strncmp(fn + dot + 1, clones[i], strlen(clones[i])))
			return false;
	for (size_t i = 0; i < sizeof(std) / sizeof(std[0]); i++)
		if (strlen(std[i]) == elem && !strncmp(fn, std[i], elem))
			return true;
	return false;
}

bool callstacks__own_function(const char *fn)
{
	static const char *const runtime[] = { "std::", "core::", "alloc::", "tokio::", "<std::",
					       "<core::", "<alloc::", "<tokio::", "__rust",
					       "__libc", "_start" };

	if (!fn || !fn[0] || go_std(fn))
		return false;
	for (size_t i = 0; i < sizeof(runtime) / sizeof(runtime[0]); i++)
		if (!strncmp(fn, runtime[i], strlen(runtime[i])))
			return false;
	return true;
}

bool callstacks__runtime_function(const char *fn)
{
	static const char *const runtime[] = { "runtime.", "runtime/", "internal/",
					       "tokio::runtime::", "std::", "core::",
					       "alloc::", "<std::", "<core::", "<alloc::" };

	if (!fn || !fn[0])
		return true;
	for (size_t i = 0; i < sizeof(runtime) / sizeof(runtime[0]); i++)
		if (!strncmp(fn, runtime[i], strlen(runtime[i])))
			return true;
	return false;
}

bool callstacks__own_frame(const struct cs_frame *f)
{
	if (!f->function[0] || f->kernel || f->module[0] == '[') /* [vdso] */
		return false;
	if (!strncmp(f->module, "libc.so", 7) || !strncmp(f->module, "libstd-", 7) ||
	    !strncmp(f->module, "ld-linux", 8) || !strncmp(f->module, "libpthread", 10))
		return false;
	return callstacks__own_function(f->function);
}

/* The frame a wait is placed at (callstacks__waiting); NULL for none. */
static const struct cs_frame *wait_frame(const struct callstacks *c, uint32_t id)
{
	const struct callstack *cs = callstacks__get(c, id);
	const struct cs_frame *f = NULL;

	/* the innermost of the program's own with a line (an .await's), else without */
	for (int lined = 1; lined >= 0 && !f; lined--)
		for (uint32_t i = 0; cs && i < cs->nr && !f; i++) {
			const struct cs_frame *k = callstacks__frame(c, cs->frames[i]);

			if (callstacks__own_frame(k) && (!lined || k->line))
				f = k;
		}
	/* a wait all in libraries: the innermost call outside the runtime */
	for (uint32_t i = 0; cs && i < cs->nr && !f; i++) {
		const struct cs_frame *k = callstacks__frame(c, cs->frames[i]);

		if (k->line && !callstacks__runtime_function(k->function))
			f = k;
	}
	if (!f && cs && cs->nr)
		f = callstacks__frame(c, cs->frames[0]);
	return f && f->function[0] ? f : NULL;
}

void callstacks__waiting(const struct callstacks *c, uint32_t id, const char *what, char *buf,
			 size_t size)
{
	const struct cs_frame *f = wait_frame(c, id);

	buf[0] = '\0';
	if (f && f->file[0] && f->line)
		snprintf(buf, size, "%s %s (%s:%u)", what, f->function, f->file, f->line);
	else if (f)
		snprintf(buf, size, "%s %s", what, f->function);
}

void callstacks__parked(const struct callstacks *c, uint32_t id, char *buf, size_t size)
{
	const struct cs_frame *f = wait_frame(c, id);

	buf[0] = '\0';
	if (f && f->file[0] && f->line)
		snprintf(buf, size, "; parked at %s (%s:%u)", f->function, f->file, f->line);
	else if (f)
		snprintf(buf, size, "; parked in %s", f->function);
}

/* The crate (Rust) or namespace (C++) a function's name begins with; "" for C. */
static size_t crate_len(const char *fn)
{
	const char *colons = strstr(fn, "::");

	return colons ? (size_t)(colons - fn) : 0;
}

/* Whether two functions are of the same crate: "std::thread::sleep", "<std::fs::File ..." */
static bool same_crate(const char *a, const char *b)
{
	size_t n;

	a += *a == '<';
	b += *b == '<';
	n = crate_len(a);
	return n && n == crate_len(b) && !strncmp(a, b, n);
}

void callstacks__where(const struct callstacks *c, uint32_t id, bool asleep, char *buf,
		       size_t size)
{
	const struct callstack *cs = callstacks__get(c, id);
	const struct cs_frame *f[CALLSTACK_FRAMES];
	int nr = cs ? (int)cs->nr : 0, user = 0, first = -1, second = -1;

	buf[0] = '\0';
	for (int i = 0; i < nr; i++)
		f[i] = callstacks__frame(c, cs->frames[i]);
	while (user < nr && f[user]->kernel)
		user++;
	/* asleep: the call it slept in, the first frame out of the kernel */
	if (asleep && user < nr && f[user]->function[0] && f[user]->module[0] != '[')
		first = user;
	for (int i = user; i < nr && second < 0; i++) {
		if (!callstacks__own_frame(f[i]))
			continue;
		if (first < 0)
			first = i;
		else if (strcmp(f[i]->function, f[first]->function))
			second = i;
	}
	/*
	 * Asleep in code that is all std's or tokio's (or the program's own
	 * without the DWARF to say so): the library call the program made,
	 * the outermost frame of the first library outside libc.
	 */
	for (int i = first + 1; first >= 0 && second < 0 && asleep && i < nr; i++) {
		if (!f[i]->function[0] || f[i]->module[0] == '[' ||
		    !strncmp(f[i]->module, "libc.so", 7))
			continue;
		second = i;
		while (second + 1 < nr && same_crate(f[second + 1]->function, f[i]->function))
			second++;
	}
	if (first < 0)
		return;
	if (second < 0)
		snprintf(buf, size, " in %s", f[first]->function);
	else
		snprintf(buf, size, " in %s <- %s", f[first]->function, f[second]->function);
}

void callstacks__text(const struct callstacks *c, uint32_t id, char *buf, size_t size)
{
	const struct callstack *cs = callstacks__get(c, id);
	size_t len = 0;

	if (!size)
		return;
	buf[0] = '\0';
	for (uint32_t i = 0; cs && i < cs->nr && len < size; i++) {
		const struct cs_frame *f = callstacks__frame(c, cs->frames[i]);
		char where[512] = "";
		int n;

		/* " (module file:line)", of which what is known (a task's place has no module) */
		if (f->module[0] || f->file[0])
			snprintf(where, sizeof(where), " (%s%s%s%s%.0u)", f->module,
				 f->module[0] && f->file[0] ? " " : "", f->file,
				 f->file[0] && f->line ? ":" : "", f->file[0] ? f->line : 0);
		n = snprintf(buf + len, size - len, "%s%s%s%s", i ? "\n" : "",
			     f->inlined ? "[inlined] " : "", f->function[0] ? f->function : "?",
			     where);
		if (n < 0)
			break;
		len += (size_t)n;
	}
}
