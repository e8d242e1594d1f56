// SPDX-License-Identifier: MIT
#include "targets/tokio/tokio.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <capstone/capstone.h>

#include "lib/u64map.h"

/* How far into the calls of a raw::poll instance to look for its future. */
#define NAME_SEARCH_DEPTH 5
#define NAME_SEARCH_BYTES 65536

const char *tokio_kind_str(enum tokio_kind k)
{
	static const char *const names[TOKIO_KIND_MAX] = {
		[TOKIO_POLL] = "raw::poll",
		[TOKIO_WAKE] = "waker::wake_by_*",
		[TOKIO_SCHEDULE] = "raw::schedule",
		[TOKIO_BIND] = "OwnedTasks::bind",
		[TOKIO_BIND_INNER] = "OwnedTasks::bind_inner",
		[TOKIO_REMOVE] = "OwnedTasks::remove",
		[TOKIO_STEAL] = "Steal::steal_into",
	};

	return k < TOKIO_KIND_MAX ? names[k] : "?";
}

/* The index of the '>' closing the '<' at s[open], or -1. */
static long closing(const char *s, size_t open)
{
	int depth = 0;

	for (size_t i = open; s[i]; i++) {
		if (s[i] == '<')
			depth++;
		else if (s[i] == '>' && --depth == 0)
			return (long)i;
		else if (s[i] == '-' && s[i + 1] == '>')
			i++; /* "->" in fn types is not a bracket */
	}
	return -1;
}

static void append(char *out, size_t size, size_t *len, const char *s, size_t n)
{
	if (*len + n >= size)
		n = *len + 1 < size ? size - *len - 1 : 0;
	memcpy(out + *len, s, n);
	*len += n;
	out[*len] = '\0';
}

void tokio__strip_generics(const char *d, char *out, size_t size)
{
	size_t len = 0;

	out[0] = '\0';
	/* "<Type<...> as Trait>::f" or v0's "<Type<...>>::f": the type's path first */
	if (d[0] == '<') {
		long end = closing(d, 0);
		char inner[512];
		size_t n;

		if (end > 0) {
			n = (size_t)end - 1 < sizeof(inner) - 1 ? (size_t)end - 1 : sizeof(inner) - 1;
			memcpy(inner, d + 1, n);
			inner[n] = '\0';
			if (strstr(inner, " as "))
				*strstr(inner, " as ") = '\0';
			tokio__strip_generics(inner, out, size);
			len = strlen(out);
			d += end + 1;
		}
	}
	while (*d) {
		if (*d == '<') {
			long end = closing(d, 0);

			if (end < 0)
				break;
			d += end + 1;
			continue;
		}
		append(out, size, &len, d, 1);
		d++;
	}
	/* a turbofish left "f::": drop the "::" */
	while (len >= 2 && out[len - 1] == ':' && out[len - 2] == ':')
		out[len -= 2] = '\0';
}

/* The first top-level argument of the generic list opening at s[open]. */
static char *first_arg(const char *s, size_t open)
{
	int depth = 0;
	size_t i;

	for (i = open + 1; s[i]; i++) {
		if (s[i] == '<' || s[i] == '(' || s[i] == '[')
			depth++;
		else if (s[i] == '-' && s[i + 1] == '>')
			i++;
		else if ((s[i] == '>' || s[i] == ')' || s[i] == ']') && depth-- == 0)
			break;
		else if (s[i] == ',' && depth == 0)
			break;
	}
	if (!s[i] || i == open + 1)
		return NULL;
	return strndup(s + open + 1, i - open - 1);
}

char *tokio__future_of(const char *d)
{
	static const char *const wrappers[] = {
		"tokio::runtime::task::raw::poll::<",	/* v0: raw::poll::<T, S> */
		"::Stage<",				/* drop glue of Stage<T> */
		"::CoreStage<",
		"::Cell<",				/* drop glue of Cell<T, S> */
		"::task::core::Core<",			/* drop glue of Core<T, S> */
		"poll_future::{{closure}}::Guard<",	/* drop glue of poll_future's Guard<T, S> */
		"poll_future::{closure#0}::Guard<",
	};

	for (size_t w = 0; w < sizeof(wrappers) / sizeof(wrappers[0]); w++) {
		const char *at = strstr(d, wrappers[w]);

		if (w > 0 && (!at || !strstr(d, "drop_in_place")))
			continue;
		if (at)
			return first_arg(at, strlen(wrappers[w]) - 1);
	}
	return NULL;
}

static const char *const std_libs[] = { "tokio::", "core::", "std::", "alloc::" };

static bool of_std(const char *d)
{
	for (size_t i = 0; i < sizeof(std_libs) / sizeof(std_libs[0]); i++)
		if (!strncmp(d, std_libs[i], strlen(std_libs[i])))
			return true;
	return false;
}

/*
 * The future a function of the program (not of tokio or the standard
 * library) is the body of: an async fn's state machine
 * (`my_crate::handler::{{closure}}`), or a type that implements Future by
 * hand (`<my_crate::Lost as core::future::future::Future>::poll`: the type,
 * when it is not generic, which legacy mangling would spell `Wrapper<F>`).
 * NULL if none (malloc'd).
 */
static char *future_body(const char *d)
{
	static const char poll[] = " as core::future::future::Future>::poll";
	size_t n = strlen(d), p = sizeof(poll) - 1;

	if (d[0] == '<' && n > p + 1 && !strcmp(d + n - p, poll) && !of_std(d + 1) &&
	    !memchr(d + 1, '<', n - p - 1))
		return strndup(d + 1, n - p - 1);
	if (d[0] == '<' || of_std(d) || (!strstr(d, "{{closure}}") && !strstr(d, "{closure#")))
		return NULL;
	return strdup(d);
}

/*
 * The layers between raw::poll and the future, generic over it: look inside
 * them. tokio's task machinery (the harness, the core and its stage: what
 * opt-level "s" leaves as functions, set_stage among them, reaches the
 * future's drop glue), and catch_unwind's around the poll
 * (std::panicking::try, AssertUnwindSafe's call_once). A function of theirs
 * that is not generic over the future names none: looking costs only time.
 */
static bool is_poll_layer(const char *d)
{
	static const char *const layers[] = {
		"tokio::runtime::task::harness::", "tokio::runtime::task::core::",
		"tokio::runtime::task::raw::",	   "std::panicking::try",
		"std::panic::catch_unwind",
	};

	for (size_t i = 0; i < sizeof(layers) / sizeof(layers[0]); i++)
		if (!strncmp(d, layers[i], strlen(layers[i])))
			return true;
	return strstr(d, "AssertUnwindSafe<") && strstr(d, "::call_once");
}

struct search {
	const struct elf_image *im;
	csh cs;
	cs_insn *insn;
	/*
	 * Each function searched: the shallowest depth, plus one. Searched
	 * again only from shallower: from as deep or deeper it gives the same
	 * evidence again, or less. Without it two layers that call each other
	 * thousands of times are searched thousands to the fifth power times.
	 */
	struct u64map searched;
	char *found;	/* the future the evidence names */
	int found_depth; /* the calls down it was seen: only the shallowest evidence counts */
	char *body;	/* a future's body called along the way: second best */
	bool worker_loop; /* it runs the scheduler's worker loop: not a task */
	bool ambiguous;	/* evidence shared by several futures was seen, that deep */
};

static void ambiguity(struct search *s, int depth);

/*
 * The future a callee names, from all the symbols at its address: futures
 * with identical code share one body under several names (identical code
 * folding), and then the callee names none of them.
 */
static char *future_of_callee(struct search *s, const struct elf_func *callee, int depth)
{
	const struct elf_func *alias;
	size_t n = elf_image__aliases(s->im, callee->addr, &alias);
	char *found = NULL;

	for (size_t i = 0; i < n; i++) {
		char *f = tokio__future_of(elf_image__name(s->im, &alias[i]));

		if (!f)
			continue;
		if (found && strcmp(found, f)) {
			free(found);
			free(f);
			ambiguity(s, depth);
			return NULL;
		}
		free(found);
		found = f;
	}
	return found;
}

/*
 * One piece of evidence: the future a callee names, depth calls down from
 * the instance. All of it must agree: LLVM merges functions whose code is
 * identical (the drop glue of two futures of the same layout, and tokio's
 * generic layers over them) and keeps one name for all their callers, so a
 * callee can name another future than the instance's. Disagreement leaves
 * the instance unnamed rather than named wrong. The deeper the callee, the
 * likelier it was merged: evidence counts only from the shallowest depth
 * that has any (the instance's own calls, unless it is a thunk to layers).
 */
static void evidence(struct search *s, char *future, int depth)
{
	if (!s->found || depth < s->found_depth) {
		free(s->found);
		s->found = future;
		s->ambiguous = depth == s->found_depth && s->ambiguous;
		s->found_depth = depth;
		return;
	}
	if (depth == s->found_depth && strcmp(s->found, future))
		s->ambiguous = true;
	free(future);
}

/* Symbols that disagree at one address, depth calls down: evidence of several futures. */
static void ambiguity(struct search *s, int depth)
{
	if (depth < s->found_depth) {
		free(s->found);
		s->found = NULL;
		s->found_depth = depth;
		s->ambiguous = true;
	} else if (depth == s->found_depth) {
		s->ambiguous = true;
	}
}

/* The multi-thread scheduler's worker loop, inlined into its blocking task. */
static bool is_worker_loop(const char *d)
{
	return strstr(d, "::multi_thread::worker::Context::run_task") ||
	       strstr(d, "::multi_thread::worker::run");
}

/*
 * Where a call or jump goes: its immediate, or the address in the slot
 * `*disp(%rip)` reads (a thunk through the GOT, as thin LTO at opt-level
 * "s" makes one: a relative relocation's slot holds its target in the
 * file); 0 if neither.
 */
static uint64_t branch_target(const struct search *s, const cs_x86 *x)
{
	const cs_x86_op *op = &x->operands[0];
	const uint8_t *slot;
	uint64_t to;

	if (op->type == X86_OP_IMM)
		return (uint64_t)op->imm;
	if (op->type != X86_OP_MEM || op->mem.base != X86_REG_RIP ||
	    op->mem.index != X86_REG_INVALID || op->mem.segment != X86_REG_INVALID)
		return 0;
	slot = elf_image__bytes(s->im, s->insn->address + s->insn->size + (uint64_t)op->mem.disp,
				sizeof(to));
	if (!slot)
		return 0;
	memcpy(&to, slot, sizeof(to));
	return to;
}

/* Looks through the direct calls and jumps of the function at addr, and of tokio's poll layers. */
static void search_code(struct search *s, uint64_t addr, int depth)
{
	const struct elf_func *f = elf_image__func_at(s->im, addr, false);
	uint64_t size, pc = addr;
	const uint8_t *code;
	size_t left;

	uintptr_t was;

	if (!f || depth > NAME_SEARCH_DEPTH || s->worker_loop)
		return;
	was = (uintptr_t)u64map__get(&s->searched, f->addr);
	if ((was && was - 1 <= (uintptr_t)depth) ||
	    u64map__set(&s->searched, f->addr, (void *)(uintptr_t)(depth + 1)))
		return;
	size = f->size ? f->size : 256;
	if (size > NAME_SEARCH_BYTES)
		size = NAME_SEARCH_BYTES;
	code = elf_image__bytes(s->im, addr, size);
	if (!code)
		return;
	left = size;
	while (cs_disasm_iter(s->cs, &code, &left, &pc, s->insn)) {
		const cs_x86 *x = &s->insn->detail->x86;
		const struct elf_func *callee;
		const char *name;
		char *found;

		if ((s->insn->id != X86_INS_CALL && s->insn->id != X86_INS_JMP) || x->op_count != 1)
			continue;
		callee = elf_image__func_at(s->im, branch_target(s, x), false);
		if (!callee || callee == f)
			continue;
		name = elf_image__name(s->im, callee);
		if (is_worker_loop(name)) {
			s->worker_loop = true;
			return;
		}
		found = future_of_callee(s, callee, depth);
		if (found) {
			evidence(s, found, depth);
			continue;
		}
		if (!s->body && (s->body = future_body(name)))
			continue;
		/* the cursor state is per call: search the callee with its own */
		if (is_poll_layer(name))
			search_code(s, callee->addr, depth + 1);
	}
}

/*
 * The future type a legacy-mangled raw::poll instance polls, from its code;
 * *worker_loop set when it runs the scheduler's loop instead.
 */
static char *future_from_code(const struct elf_image *im, uint64_t addr, bool *worker_loop,
			      bool *ambiguous)
{
	struct search s = { .im = im, .found_depth = NAME_SEARCH_DEPTH + 1 };
	char *found;

	if (!im->is_x86_64 || cs_open(CS_ARCH_X86, CS_MODE_64, &s.cs) != CS_ERR_OK)
		return NULL;
	cs_option(s.cs, CS_OPT_DETAIL, CS_OPT_ON);
	s.insn = cs_malloc(s.cs);
	u64map__init(&s.searched);
	if (s.insn)
		search_code(&s, addr, 0);
	u64map__clear(&s.searched);
	if (s.found && !s.ambiguous && (!s.body || strstr(s.found, s.body))) {
		/* the glue agrees with itself, and with the future's own code if called */
		found = s.found;
		free(s.body);
	} else {
		/* the glue named several futures, or another one than the code it runs: the code */
		found = s.body;
		free(s.found);
	}
	if (s.insn)
		cs_free(s.insn, 1);
	cs_close(&s.cs);
	*worker_loop = s.worker_loop;
	*ambiguous = !found && s.ambiguous;
	if (s.worker_loop) {
		free(found);
		found = strdup("tokio worker loop");
	}
	return found;
}

/*
 * Older rustc wraps every async fn's state machine in GenFuture<...>: the
 * closure inside is the name a reader knows. Unwrapped wherever it appears.
 */
static void tidy(char *future)
{
	static const char wrapper[] = "core::future::from_generator::GenFuture<";
	const size_t n = sizeof(wrapper) - 1;
	char *at;

	while ((at = strstr(future, wrapper))) {
		long end = closing(at, n - 1);

		if (end < 0)
			return;
		/* drop the closing '>' first, then the opening wrapper */
		memmove(at + end, at + end + 1, strlen(at + end + 1) + 1);
		memmove(at, at + n, strlen(at + n) + 1);
	}
}

/* The runtime's own loops run as tasks too; they are containers, not work. */
static bool is_internal(const char *future)
{
	return future && strstr(future, "BlockingTask<") &&
	       (strstr(future, "multi_thread::worker::") ||
		strstr(future, "multi_thread_alt::worker::"));
}

static const struct {
	const char *path;	/* without generics */
	bool suffix;		/* match the end of the path only */
	enum tokio_kind kind;
} matchers[] = {
	{ "tokio::runtime::task::raw::poll", false, TOKIO_POLL },
	{ "tokio::runtime::task::waker::wake_by_val", false, TOKIO_WAKE },
	{ "tokio::runtime::task::waker::wake_by_ref", false, TOKIO_WAKE },
	{ "tokio::runtime::task::raw::schedule", false, TOKIO_SCHEDULE },
	{ "tokio::runtime::task::list::OwnedTasks::bind", false, TOKIO_BIND },
	{ "tokio::runtime::task::list::OwnedTasks::bind_inner", false, TOKIO_BIND_INNER },
	{ "tokio::runtime::task::list::OwnedTasks::remove", false, TOKIO_REMOVE },
	{ "::queue::Steal::steal_into", true, TOKIO_STEAL },
};

/*
 * What each kind's programs read where they are placed (bpf/asynctraced.bpf.c):
 * the argument an entry probe reads, and whether a return probe shares the
 * place. Placement keeps those (placement.h).
 */
static const struct placement_need needs[TOKIO_KIND_MAX] = {
	[TOKIO_POLL] = { .arg = 0, .ret = true },
	[TOKIO_WAKE] = { .arg = 0 },
	[TOKIO_SCHEDULE] = { .arg = 0 },
	[TOKIO_BIND] = { .arg = -1, .ret = true },
	[TOKIO_BIND_INNER] = { .arg = 1 },
	[TOKIO_REMOVE] = { .arg = 1 },
	[TOKIO_STEAL] = { .arg = -1, .ret = true },
};

static bool matches(const char *path, size_t m)
{
	size_t n = strlen(path), k = strlen(matchers[m].path);

	if (matchers[m].suffix)
		return n >= k && !strcmp(path + n - k, matchers[m].path);
	return !strcmp(path, matchers[m].path);
}

struct detect {
	const struct elf_image *im;
	const struct probe_rules *rules;
	struct tokio_runtime *rt;
	size_t cap;		/* of rt->sites */
	/*
	 * The kinds of the sites at each address (bits), by address: identical
	 * code folding gives one body several symbols, and it gets one probe.
	 */
	struct u64map kinds_at;
	int err;
};

/* One more piece of code a stack of site's polls may run in (the function f). */
static void add_code(const struct elf_image *im, struct tokio_site *site, const struct elf_func *f)
{
	int64_t off = elf_image__offset(im, f->addr);

	if (off < 0 || !f->size || f->size > UINT32_MAX)
		return;
	for (int i = 0; i < 1 + TOKIO_LAYERS; i++) {
		if (site->code_len[i] && site->code_off[i] == (uint64_t)off)
			return;
		if (!site->code_len[i]) {
			site->code_off[i] = (uint64_t)off;
			site->code_len[i] = (uint32_t)f->size;
			return;
		}
	}
}

/*
 * Where a raw::poll instance's polls run (struct tokio_site's code): the
 * instance, the poll layers it calls or jumps to (Harness::poll), and
 * theirs, two deep. Layers several instances share are dropped after.
 */
static void find_code(const struct elf_image *im, struct tokio_site *site, const struct elf_func *f)
{
	const struct elf_func *layer[1 + TOKIO_LAYERS] = { f };
	size_t nr = 1;
	struct search s = { .im = im };

	add_code(im, site, f);
	if (!im->is_x86_64 || cs_open(CS_ARCH_X86, CS_MODE_64, &s.cs) != CS_ERR_OK)
		return;
	cs_option(s.cs, CS_OPT_DETAIL, CS_OPT_ON);
	s.insn = cs_malloc(s.cs);
	for (size_t k = 0; s.insn && k < nr && k < 2; k++) {
		uint64_t size = layer[k]->size < NAME_SEARCH_BYTES ? layer[k]->size : NAME_SEARCH_BYTES;
		const uint8_t *code = size ? elf_image__bytes(im, layer[k]->addr, size) : NULL;
		uint64_t pc = layer[k]->addr;
		size_t left = code ? size : 0;

		while (left && nr < 1 + TOKIO_LAYERS &&
		       cs_disasm_iter(s.cs, &code, &left, &pc, s.insn)) {
			const cs_x86 *x = &s.insn->detail->x86;
			const struct elf_func *callee;

			if ((s.insn->id != X86_INS_CALL && s.insn->id != X86_INS_JMP) ||
			    x->op_count != 1)
				continue;
			callee = elf_image__func_at(im, branch_target(&s, x), false);
			if (!callee || callee == layer[k] ||
			    !is_poll_layer(elf_image__name(im, callee)))
				continue;
			layer[nr++] = callee;
			add_code(im, site, callee);
		}
	}
	if (s.insn)
		cs_free(s.insn, 1);
	cs_close(&s.cs);
}

/* A layer two instances reach is neither's: a stack in it names no task. */
static void unshare_code(struct tokio_runtime *rt)
{
	struct u64map seen;

	u64map__init(&seen);
	for (int pass = 0; pass < 2; pass++)
		for (size_t i = 0; i < rt->nr; i++) {
			struct tokio_site *site = &rt->sites[i];

			for (int k = 1; k < 1 + TOKIO_LAYERS; k++) {
				uintptr_t n;

				if (!site->code_len[k])
					continue;
				n = (uintptr_t)u64map__get(&seen, site->code_off[k]);
				if (!pass)
					u64map__set(&seen, site->code_off[k], (void *)(n + 1));
				else if (n > 1)
					site->code_len[k] = 0;
			}
		}
	u64map__clear(&seen);
}

static int classify(void *ctx, const struct elf_func *f)
{
	struct detect *d = ctx;
	const char *name = elf_image__name(d->im, f);
	struct tokio_site site = { .addr = f->addr, .place = { .arg_reg = -1 } };
	char path[512];
	int64_t off;
	size_t m;

	uint64_t kinds = (uintptr_t)u64map__get(&d->kinds_at, f->addr);

	tokio__strip_generics(name, path, sizeof(path));
	for (m = 0; m < sizeof(matchers) / sizeof(matchers[0]); m++)
		if (matches(path, m))
			break;
	if (m == sizeof(matchers) / sizeof(matchers[0]) || (kinds >> matchers[m].kind & 1))
		return 0;
	off = elf_image__offset(d->im, f->addr);
	if (off < 0)
		return 0;
	site.kind = matchers[m].kind;
	site.offset = (uint64_t)off;
	if (d->im->is_x86_64 && f->size) {
		const uint8_t *code = elf_image__bytes(d->im, f->addr, f->size);

		if (code)
			placement__entry(code, f->size, f->addr, &needs[site.kind], d->rules,
					 &site.place);
	}
	if (site.kind == TOKIO_POLL) {
		if (strstr(name, "raw::poll::<"))
			d->rt->v0 = true;
		bool worker_loop = false, ambiguous = false;

		site.future = tokio__future_of(name);
		if (!site.future)
			site.future = future_from_code(d->im, f->addr, &worker_loop, &ambiguous);
		d->rt->ambiguous += ambiguous;
		if (site.future)
			tidy(site.future);
		site.internal = worker_loop || is_internal(site.future);
		if (!site.internal)
			find_code(d->im, &site, f);
	}
	if (d->rt->nr == d->cap) {
		size_t cap = d->cap ? d->cap * 2 : 64;
		struct tokio_site *s = realloc(d->rt->sites, cap * sizeof(*s));

		if (!s) {
			free(site.future);
			d->err = -ENOMEM;
			return 1;
		}
		d->rt->sites = s;
		d->cap = cap;
	}
	if (u64map__set(&d->kinds_at, f->addr, (void *)(uintptr_t)(kinds | 1ull << site.kind))) {
		free(site.future);
		d->err = -ENOMEM;
		return 1;
	}
	d->rt->sites[d->rt->nr++] = site;
	if (site.internal) {
		d->rt->internal++;
		return 0;
	}
	d->rt->count[site.kind]++;
	return 0;
}

static int any(void *ctx, const struct elf_func *f)
{
	(void)ctx, (void)f;
	return 1;
}

/* A probed raw::poll instance that names its future. */
static bool named_poll(const struct tokio_site *s)
{
	return s->kind == TOKIO_POLL && !s->internal && s->future;
}

static int by_future(const void *a, const void *b)
{
	const struct tokio_site *const *x = a, *const *y = b;

	return strcmp((*x)->future, (*y)->future);
}

/*
 * Every name against every instance: raw::poll<T, S> exists once per future
 * type and scheduler, so a name given to more instances than there are
 * schedulers came, for some of them, from code LLVM merged across futures
 * of the same layout. Which ones cannot be told: none of them is named.
 * The instances sorted by name, each name's run counted: not each instance
 * against all (a binary can hold a hundred thousand). 0, or -ENOMEM.
 */
static int names_checked(struct tokio_runtime *rt, const struct elf_image *im)
{
	/* tokio's schedulers: current_thread and multi_thread (and multi_thread_alt, unstable) */
	size_t schedulers = elf_image__for_each(im, "16multi_thread_alt", any, NULL) ? 3 : 2;
	struct tokio_site **named = malloc((rt->nr ? rt->nr : 1) * sizeof(*named));
	size_t n = 0;

	if (!named)
		return -ENOMEM;
	for (size_t i = 0; i < rt->nr; i++)
		if (named_poll(&rt->sites[i]))
			named[n++] = &rt->sites[i];
	qsort(named, n, sizeof(*named), by_future);
	for (size_t i = 0, j; i < n; i = j) {
		for (j = i + 1; j < n && !strcmp(named[i]->future, named[j]->future); j++)
			;
		if (j - i <= schedulers)
			continue;
		for (size_t k = i; k < j; k++) {
			free(named[k]->future);
			named[k]->future = NULL;
			rt->ambiguous++;
		}
	}
	free(named);
	for (size_t i = 0; i < rt->nr; i++)
		rt->named += named_poll(&rt->sites[i]);
	return 0;
}

int tokio__detect_image(const struct elf_image *im, const struct probe_rules *rules,
			struct tokio_runtime *rt)
{
	struct detect d = { .im = im, .rules = rules, .rt = rt };

	memset(rt, 0, sizeof(*rt));
	rt->has_symtab = im->has_symtab;
	u64map__init(&d.kinds_at);
	/* Both manglings spell identifiers with their length: "5tokio7runtime". */
	elf_image__for_each(im, "5tokio7runtime", classify, &d);
	u64map__clear(&d.kinds_at);
	if (d.err) {
		tokio__free(rt);
		return d.err;
	}
	if (!rt->count[TOKIO_POLL]) {
		bool symtab = rt->has_symtab;

		tokio__free(rt);
		rt->has_symtab = symtab;
		return -ENOENT;
	}
	if (names_checked(rt, im)) {
		tokio__free(rt);
		return -ENOMEM;
	}
	unshare_code(rt);
	rt->nr_defer = tokio__defer_sites(im, rt->defer_ret, AT_TOKIO_DEFER_SITES);
	/* sample mode's: not found is said by current.why, and fails only that mode */
	if (tokio__current(im, &rt->current) == -ENOMEM) {
		tokio__free(rt);
		return -ENOMEM;
	}
	return 0;
}

int tokio__detect(const char *path, const struct probe_rules *rules, struct tokio_runtime *rt)
{
	struct elf_image im;
	int err;

	memset(rt, 0, sizeof(*rt));
	err = elf_image__open(&im, path);
	if (err)
		return err;
	err = tokio__detect_image(&im, rules, rt);
	elf_image__close(&im);
	return err;
}

void tokio__free(struct tokio_runtime *rt)
{
	for (size_t i = 0; i < rt->nr; i++)
		free(rt->sites[i].future);
	free(rt->sites);
	memset(rt, 0, sizeof(*rt));
}
