// SPDX-License-Identifier: MIT
/*
 * tokio's tasks through the program's DWARF, which describes every type the
 * walk needs and lays out nothing twice alike: compilers reorder fields,
 * encode enums in niches, align futures that hold a timer to 128 bytes. So
 * nothing here knows an offset: each is the DWARF's, found by name.
 *
 * - The handle: CONTEXT (a thread-local; its offset in the TLS segment is
 *   its DWARF location's) holds tokio's Context, whose `handle` is an
 *   Option<scheduler::Handle>: CurrentThread or MultiThread, an Arc of the
 *   scheduler's handle, which owns the task list (a LinkedList's head).
 * - A task: its Header (state, vtable); the vtable's `poll` is the
 *   function raw::poll<T, S>, whose DWARF instance names T; the Cell<T, S>
 *   of the same arguments lays out the stage, whose Running variant holds
 *   the future; the list goes on through the Trailer's `next`.
 * - A future: an async fn's state machine is a struct whose variant part's
 *   discriminant is `__state` (0 unresumed, 1 returned, 2 panicked, 3 + N
 *   suspended at its Nth await: that variant's member carries the await's
 *   file and line), its `__awaitee` the future awaited; Debian's rustc
 *   1.63 wraps each in GenFuture (one member, `__0`). select! and join!
 *   await a poll_fn over a tuple of the branches (`futures`), each walked.
 */
#include "tasks/tokio_tasks.h"

#include <dwarf.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/u64map.h"
#include "lib/util.h"

/* How deep a future's awaitees are followed, and a type's members searched. */
#define FUTURE_DEPTH 24
#define SEARCH_DEPTH 10
/* Tasks walked at most: a list that does not end is not followed forever. */
#define TOKIO_TASKS_MAX (1u << 20)
/* Header.state's bits (tokio/src/runtime/task/state.rs) */
#define ST_RUNNING 1u
#define ST_COMPLETE 2u
#define ST_NOTIFIED 4u
#define ST_LIFECYCLE 0x3fu	/* below the reference count */
#define ST_REF_SHIFT 6
/* references a live task may hold, far above any seen: freed memory's pointers are above */
#define ST_REF_MAX (1ull << 32)

struct poll_inst {
	uint64_t addr;		/* raw::poll<T, S>'s entry, link-time */
	char *args;		/* "<T, S>" as its name spells them */
};

struct tokio_dwarf {
	Dwarf *dw;
	bool have_context;
	uint64_t context_tls;	/* CONTEXT's offset in the TLS segment */
	Dwarf_Off context_type;	/* its type: the variable's, else the thread_local! wrapper's */
	Dwarf_Off wrapper_type;	/* CONTEXT's type when its variable was left out */
	Dwarf_Off header, trailer, vtable; /* 0: not found */
	struct poll_inst *polls;
	size_t nr_polls, cap_polls;
	struct u64map cells;	/* hash of "<T, S>" -> Dwarf_Off of Cell<T, S> + 1 */
	struct u64map names;	/* Dwarf_Off -> char *: a type's path, made once */
	/*
	 * A namespace's type: Dwarf_Off -> its namespace's path ("a::b::", in
	 * ns_paths), so that a path is not found by reading the unit from its
	 * start (dwarf_getscopes_die), which one LTO unit makes seconds
	 */
	struct u64map parents;
	char **ns_paths;
	size_t nr_ns_paths, cap_ns_paths;
	/*
	 * What each task would look up again, found once: an enum's layout
	 * (Dwarf_Off -> struct enum_layout), a poll instance's cell
	 * (address -> struct cell_layout, or NO_CELL)
	 */
	struct u64map enums;
	struct u64map cells_by_poll;
	/*
	 * select!/join!: each closure's code, indexed once (tokio_dwarf__prepare,
	 * or when one is first met): the hash of a closure's path -> struct
	 * closure (its declarations are in each unit that uses it: one path,
	 * several DIEs), and each declaration's Dwarf_Off -> its struct closure
	 */
	bool closures_indexed;
	struct u64map closures;
	struct u64map closure_decls;
};

/* A closure: where its code is (its out-of-line copies, where it is inlined), its line. */
#define CLOSURE_INSTANCES 64	/* plenty to find a line in */
struct closure {
	char *path;		/* the hash's key, compared: two paths of one hash are not one */
	char *line_file;	/* the file the line below was looked for in; NULL not yet */
	int line;		/* the program's line there; 0 none */
	size_t nr;
	Dwarf_Off off[CLOSURE_INSTANCES];
};

/* An enum's discriminant and variants, as active_variant() reads them. */
struct enum_layout {
	bool ok;		/* false: not an enum it can read */
	int size;		/* of the discriminant, at discr_off */
	uint64_t discr_off;
	Dwarf_Off dataful;	/* the variant a niche leaves without a value's member; 0 none */
	size_t nr;
	struct {
		uint64_t value;
		Dwarf_Off member;	/* the variant's first member */
	} v[];
};

/* A task cell's places, by its poll instance. */
struct cell_layout {
	Dwarf_Off cell;
	bool have_id, have_stage;
	uint64_t id_off, stage_off;
	Dwarf_Off stage;
};

#define NO_CELL ((void *)(uintptr_t)-1)

/* ---- DWARF, a little at a time ---- */

static bool offdie(const struct tokio_dwarf *td, Dwarf_Off off, Dwarf_Die *out)
{
	return off && dwarf_offdie(td->dw, off, out) != NULL;
}

/* What a DIE's DW_AT_type names, past typedefs and qualifiers. */
static bool type_of(Dwarf_Die *die, Dwarf_Die *out)
{
	Dwarf_Attribute attr;
	Dwarf_Die cur = *die;

	for (int i = 0; i < 8; i++) {
		int tag;

		if (!dwarf_attr_integrate(&cur, DW_AT_type, &attr) || !dwarf_formref_die(&attr, out))
			return false;
		tag = dwarf_tag(out);
		if (tag != DW_TAG_typedef && tag != DW_TAG_const_type && tag != DW_TAG_volatile_type)
			return true;
		cur = *out;
	}
	return false;
}

static uint64_t member_off(Dwarf_Die *m)
{
	Dwarf_Attribute attr;
	Dwarf_Word off;

	return dwarf_formudata(dwarf_attr(m, DW_AT_data_member_location, &attr), &off) ? 0 : off;
}

static bool named(Dwarf_Die *die, const char *name)
{
	const char *n = dwarf_diename(die);

	return n && !strcmp(n, name);
}

static bool name_starts(Dwarf_Die *die, const char *prefix)
{
	const char *n = dwarf_diename(die);

	return n && !strncmp(n, prefix, strlen(prefix));
}

/* The member of struct s named name: true with it. */
static bool member_named(Dwarf_Die *s, const char *name, Dwarf_Die *out)
{
	if (dwarf_child(s, out) != 0)
		return false;
	do {
		if (dwarf_tag(out) == DW_TAG_member && named(out, name))
			return true;
	} while (dwarf_siblingof(out, out) == 0);
	return false;
}

static bool is_aggregate(Dwarf_Die *t)
{
	int tag = dwarf_tag(t);

	return tag == DW_TAG_structure_type || tag == DW_TAG_union_type;
}

/* What a search looks for: a member (by its name) or a type (by its name's start). */
struct want {
	const char *member;	/* a member of this name; or */
	const char *type;	/* a member whose type's name starts so */
	bool pointer;		/* a member that is a pointer */
};

static bool wanted(const struct want *w, Dwarf_Die *m, Dwarf_Die *t)
{
	if (w->member)
		return named(m, w->member);
	if (w->pointer)
		return dwarf_tag(t) == DW_TAG_pointer_type;
	return name_starts(t, w->type);
}

/*
 * Where inside aggregate s what w wants is, through its members, unions and
 * enum variants (their first occurrence, depth first): the offset from s,
 * the member and its type. Pointers are not followed.
 */
static bool find_in(Dwarf_Die *s, const struct want *w, int depth, uint64_t *off,
		    Dwarf_Die *member, Dwarf_Die *type, unsigned int *budget)
{
	Dwarf_Die c;

	if (depth > SEARCH_DEPTH || dwarf_child(s, &c) != 0)
		return false;
	do {
		int tag = dwarf_tag(&c);
		Dwarf_Die t, inner;

		/* types that hold themselves, or a million members: a search has its bound */
		if (!*budget || !--*budget)
			return false;
		if (tag == DW_TAG_variant_part || tag == DW_TAG_variant) {
			if (find_in(&c, w, depth + 1, off, member, type, budget))
				return true;
			continue;
		}
		if (tag != DW_TAG_member || !type_of(&c, &t))
			continue;
		if (wanted(w, &c, &t)) {
			*off = member_off(&c);
			*member = c;
			*type = t;
			return true;
		}
		if (is_aggregate(&t) && find_in(&t, w, depth + 1, off, member, &inner, budget)) {
			*off += member_off(&c);
			*type = inner;
			return true;
		}
	} while (dwarf_siblingof(&c, &c) == 0);
	return false;
}

/* Members looked at by one search at most. */
#define SEARCH_BUDGET 100000

static bool find(Dwarf_Die *s, const struct want *w, int depth, uint64_t *off, Dwarf_Die *member,
		 Dwarf_Die *type)
{
	unsigned int budget = SEARCH_BUDGET;

	return find_in(s, w, depth, off, member, type, &budget);
}

static bool find_member(Dwarf_Die *s, const char *name, uint64_t *off, Dwarf_Die *type)
{
	Dwarf_Die m;

	return find(s, &(struct want){ .member = name }, 0, off, &m, type);
}

static bool find_type(Dwarf_Die *s, const char *prefix, uint64_t *off, Dwarf_Die *type)
{
	Dwarf_Die m;

	return find(s, &(struct want){ .type = prefix }, 0, off, &m, type);
}

/* ---- the index ---- */

struct walk_ns {
	const char *path[16];
	int depth;
};

static bool in_ns(const struct walk_ns *ns, const char *const *want, int n)
{
	if (ns->depth < n)
		return false;
	for (int i = 0; i < n; i++)
		if (!ns->path[i] || strcmp(ns->path[i], want[i]))
			return false;
	return true;
}

/* A TLS variable's offset in its module's block: DW_OP_const*u X, DW_OP_*_tls_address. */
static bool tls_offset(Dwarf_Die *var, uint64_t *off)
{
	Dwarf_Attribute attr;
	Dwarf_Op *ops;
	size_t n;

	if (!dwarf_attr(var, DW_AT_location, &attr) || dwarf_getlocation(&attr, &ops, &n) || n != 2)
		return false;
	if (ops[1].atom != DW_OP_GNU_push_tls_address && ops[1].atom != DW_OP_form_tls_address)
		return false;
	if (ops[0].atom != DW_OP_const8u && ops[0].atom != DW_OP_const4u &&
	    ops[0].atom != DW_OP_constu)
		return false;
	*off = ops[0].number;
	return true;
}

static int add_poll(struct tokio_dwarf *td, Dwarf_Die *sp)
{
	const char *name = dwarf_diename(sp);
	Dwarf_Addr lo;

	if (dwarf_lowpc(sp, &lo) || !name)
		return 0;
	if (td->nr_polls == td->cap_polls) {
		size_t cap = td->cap_polls ? td->cap_polls * 2 : 256;
		struct poll_inst *more = realloc(td->polls, cap * sizeof(*more));

		if (!more)
			return -ENOMEM;
		td->polls = more;
		td->cap_polls = cap;
	}
	td->polls[td->nr_polls].addr = lo;
	td->polls[td->nr_polls].args = strdup(name + 4); /* past "poll" */
	if (!td->polls[td->nr_polls].args)
		return -ENOMEM;
	td->nr_polls++;
	return 0;
}

/* A namespace's path, kept (the index's to free); NULL when memory runs out. */
static const char *ns_path(struct tokio_dwarf *td, const char *prefix, const char *name)
{
	size_t n = strlen(prefix) + strlen(name) + 3;
	char *p;

	if (td->nr_ns_paths == td->cap_ns_paths) {
		size_t cap = td->cap_ns_paths ? 2 * td->cap_ns_paths : 256;
		char **more = realloc(td->ns_paths, cap * sizeof(*more));

		if (!more)
			return NULL;
		td->ns_paths = more;
		td->cap_ns_paths = cap;
	}
	p = malloc(n);
	if (!p)
		return NULL;
	snprintf(p, n, "%s%s::", prefix, name);
	td->ns_paths[td->nr_ns_paths++] = p;
	return p;
}

static void index_die(struct tokio_dwarf *td, Dwarf_Die *die, struct walk_ns *ns,
		      const char *prefix)
{
	static const char *const context_ns[] = { "tokio", "runtime", "context", "CONTEXT" };
	static const char *const core_ns[] = { "tokio", "runtime", "task", "core" };
	static const char *const raw_ns[] = { "tokio", "runtime", "task", "raw" };
	Dwarf_Die c;

	if (dwarf_child(die, &c) != 0)
		return;
	do {
		int tag = dwarf_tag(&c);
		Dwarf_Die t;

		if (prefix && prefix[0] && dwarf_diename(&c) &&
		    (tag == DW_TAG_structure_type || tag == DW_TAG_union_type ||
		     tag == DW_TAG_enumeration_type))
			u64map__set(&td->parents, dwarf_dieoffset(&c), (void *)prefix);
		if (tag == DW_TAG_namespace && ns->depth < 16) {
			const char *name = dwarf_diename(&c);

			ns->path[ns->depth++] = name;
			index_die(td, &c, ns, prefix && name ? ns_path(td, prefix, name) : NULL);
			ns->depth--;
		} else if (tag == DW_TAG_variable && !td->have_context && in_ns(ns, context_ns, 4) &&
			   tls_offset(&c, &td->context_tls) && type_of(&c, &t)) {
			td->have_context = true;
			td->context_type = dwarf_dieoffset(&t);
		} else if (tag == DW_TAG_structure_type && !dwarf_hasattr(&c, DW_AT_declaration)) {
			/*
			 * LTO may leave CONTEXT's variable out of the DWARF but
			 * not its type: std's thread_local! wrapper of Context
			 * (Key<Context> in rustc 1.63, Storage<Context, ()> later)
			 */
			if (!td->context_type &&
			    (name_starts(&c, "Key<tokio::runtime::context::Context>") ||
			     name_starts(&c, "Storage<tokio::runtime::context::Context,")))
				td->wrapper_type = dwarf_dieoffset(&c);
			if (in_ns(ns, core_ns, 4) && ns->depth == 4) {
				if (!td->header && named(&c, "Header"))
					td->header = dwarf_dieoffset(&c);
				else if (!td->trailer && named(&c, "Trailer"))
					td->trailer = dwarf_dieoffset(&c);
				else if (name_starts(&c, "Cell<"))
					u64map__set(&td->cells, hash_str(dwarf_diename(&c) + 4),
						    (void *)(uintptr_t)(dwarf_dieoffset(&c) + 1));
			} else if (!td->vtable && in_ns(ns, raw_ns, 4) && ns->depth == 4 &&
				   named(&c, "Vtable")) {
				td->vtable = dwarf_dieoffset(&c);
			}
		} else if (tag == DW_TAG_subprogram && in_ns(ns, raw_ns, 4) && ns->depth == 4 &&
			   name_starts(&c, "poll<")) {
			add_poll(td, &c);
		}
	} while (dwarf_siblingof(&c, &c) == 0);
}

static int by_addr(const void *a, const void *b)
{
	const struct poll_inst *x = a, *y = b;

	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

int tokio_dwarf__index(Dwarf *dw, struct tokio_dwarf **out, const char **why)
{
	struct tokio_dwarf *td = calloc(1, sizeof(*td));
	Dwarf_Off off = 0, next;
	size_t hsize;

	*out = NULL;
	*why = NULL;
	if (!td)
		return -ENOMEM;
	td->dw = dw;
	u64map__init(&td->cells);
	u64map__init(&td->names);
	u64map__init(&td->parents);
	u64map__init(&td->enums);
	u64map__init(&td->cells_by_poll);
	u64map__init(&td->closures);
	u64map__init(&td->closure_decls);
	while (dwarf_nextcu(dw, off, &next, &hsize, NULL, NULL, NULL) == 0) {
		struct walk_ns ns = { .depth = 0 };
		Dwarf_Die cu;

		if (dwarf_offdie(dw, off + hsize, &cu))
			index_die(td, &cu, &ns, "");
		off = next;
	}
	if (!td->header || !td->trailer || !td->vtable || !td->cells.len || !td->nr_polls) {
		*why = "its DWARF has no tokio task types: tokio's tasks need type debug info "
		       "(debug = 2, \"full\", in Cargo.toml's profile; \"line-tables-only\" and "
		       "debug = 1 have none), in the executable or a debug file found by its build id "
		       "or debug link";
		tokio_dwarf__free(td);
		return -ENOENT;
	}
	qsort(td->polls, td->nr_polls, sizeof(*td->polls), by_addr);
	if (!td->context_type)
		td->context_type = td->wrapper_type;
	*out = td;
	return 0;
}

void tokio_dwarf__free(struct tokio_dwarf *td)
{
	uint64_t key;
	void *val;

	if (!td)
		return;
	for (size_t i = 0; i < td->nr_polls; i++)
		free(td->polls[i].args);
	free(td->polls);
	u64map__clear(&td->cells);
	for (size_t i = 0; u64map__next(&td->names, &i, &key, &val);)
		free(val);
	u64map__clear(&td->names);
	u64map__clear(&td->parents);
	u64map__clear_free(&td->enums);
	for (size_t i = 0; u64map__next(&td->cells_by_poll, &i, &key, &val);)
		if (val != NO_CELL)
			free(val);
	u64map__clear(&td->cells_by_poll);
	for (size_t i = 0; i < td->nr_ns_paths; i++)
		free(td->ns_paths[i]);
	free(td->ns_paths);
	for (size_t i = 0; u64map__next(&td->closures, &i, &key, &val);) {
		struct closure *c = val;

		free(c->path);
		free(c->line_file);
		free(c);
	}
	u64map__clear(&td->closures);
	u64map__clear(&td->closure_decls);
	free(td);
}

bool tokio_dwarf__context(const struct tokio_dwarf *td, uint64_t *tls_offset)
{
	*tls_offset = td->context_tls;
	return td->have_context;
}

/* ---- reading ---- */

struct reader {
	const struct tokio_dwarf *td;
	const struct task_mem *m;
	struct task_list *l;
	struct u64map *found;	/* id -> Header, of tasks met (tokio_tasks__read); NULL none */
	uint64_t bias;
	int frames;		/* of the task being read */
};

static bool read_u(const struct reader *r, uint64_t addr, int size, uint64_t *v)
{
	*v = 0;
	if (size != 1 && size != 2 && size != 4 && size != 8)
		return false;
	return !r->m->read(r->m->ctx, addr, v, (size_t)size);
}

static bool read_ptr(const struct reader *r, uint64_t addr, uint64_t *v)
{
	return read_u(r, addr, 8, v);
}

/* The layout of enum e (a struct with a variant part), read from its DWARF. */
static struct enum_layout *enum_layout_of(Dwarf_Die *e)
{
	Dwarf_Die vp, dm, dt, v, first;
	Dwarf_Attribute attr;
	struct enum_layout *el = calloc(1, sizeof(*el)), *more;
	size_t cap = 0;

	if (!el || dwarf_child(e, &vp) != 0)
		return el;
	while (dwarf_tag(&vp) != DW_TAG_variant_part)
		if (dwarf_siblingof(&vp, &vp) != 0)
			return el;
	if (!dwarf_attr(&vp, DW_AT_discr, &attr) || !dwarf_formref_die(&attr, &dm) ||
	    !type_of(&dm, &dt) || (el->size = dwarf_bytesize(&dt)) <= 0 ||
	    (el->size != 1 && el->size != 2 && el->size != 4 && el->size != 8) ||
	    dwarf_child(&vp, &v) != 0)
		return el;
	el->discr_off = member_off(&dm);
	do {
		Dwarf_Word value;

		Dwarf_Off member = 0;

		if (dwarf_tag(&v) != DW_TAG_variant)
			continue;
		/* a variant without a member: taken, it reads as nothing (0) */
		if (dwarf_child(&v, &first) == 0) {
			while (dwarf_tag(&first) != DW_TAG_member)
				if (dwarf_siblingof(&first, &first) != 0)
					break;
			if (dwarf_tag(&first) == DW_TAG_member)
				member = dwarf_dieoffset(&first);
		}
		if (!dwarf_attr(&v, DW_AT_discr_value, &attr)) {
			if (!el->dataful)
				el->dataful = member;
			continue;
		}
		if (dwarf_formudata(&attr, &value) != 0)
			continue;
		if (el->nr == cap) {
			cap = cap ? 2 * cap : 4;
			/* an enum of more variants than that is not read: a part would mislead */
			if (cap > 4096 || !(more = realloc(el, sizeof(*el) + cap * sizeof(el->v[0]))))
				return el;
			el = more;
		}
		el->v[el->nr].value = el->size == 8 ? value : value & ((1ull << (8 * el->size)) - 1);
		el->v[el->nr++].member = member;
	} while (dwarf_siblingof(&v, &v) == 0);
	el->ok = true;
	return el;
}

/*
 * The active variant of the enum (a struct with a variant part) e at addr:
 * the variant's member (its name, type, offset) and its discriminant. Each
 * enum's layout is read from the DWARF once.
 */
static bool active_variant(const struct reader *r, Dwarf_Die *e, uint64_t addr, Dwarf_Die *member,
			   uint64_t *discr)
{
	struct tokio_dwarf *td = (struct tokio_dwarf *)r->td;
	Dwarf_Off key = dwarf_dieoffset(e);
	struct enum_layout *el = u64map__get(&td->enums, key);

	if (!el) {
		el = enum_layout_of(e);
		if (!el)
			return false;
		if (u64map__set(&td->enums, key, el)) {
			free(el);
			return false;
		}
	}
	if (!el->ok || !read_u(r, addr + el->discr_off, el->size, discr))
		return false;
	for (size_t i = 0; i < el->nr; i++)
		if (el->v[i].value == *discr)
			return offdie(r->td, el->v[i].member, member);
	/* the dataful variant a niche leaves without a value */
	return offdie(r->td, el->dataful, member);
}

/* A variant's payload: its struct's `__0` (its type, its address). */
static bool payload(Dwarf_Die *variant_member, uint64_t addr, Dwarf_Die *type, uint64_t *at)
{
	Dwarf_Die vt, p;

	if (!type_of(variant_member, &vt) || !member_named(&vt, "__0", &p) || !type_of(&p, type))
		return false;
	*at = addr + member_off(variant_member) + member_off(&p);
	return true;
}

/* The first pointer inside aggregate t at addr, followed: its target and the type pointed to. */
static bool follow(const struct reader *r, Dwarf_Die *t, uint64_t addr, Dwarf_Die *pointee,
		   uint64_t *to)
{
	Dwarf_Die m, pt;
	uint64_t off;

	if (dwarf_tag(t) == DW_TAG_pointer_type) {
		pt = *t;
		off = 0;
	} else if (!find(t, &(struct want){ .pointer = true }, 0, &off, &m, &pt)) {
		return false;
	}
	return type_of(&pt, pointee) && read_ptr(r, addr + off, to) && *to;
}

/*
 * Where the task list's head is (the field, which lives as long as the
 * scheduler) of the scheduler whose handle is in CONTEXT at ctx_addr.
 */
static bool list_head(const struct reader *r, uint64_t ctx_addr, uint64_t *head_at)
{
	Dwarf_Die t, ctx, opt, some, handle, arc, inner, list, h, owned;
	uint64_t ctx_off, opt_off, d, at, at2, to, list_off, head_off, owned_off;

	if (!offdie(r->td, r->td->context_type, &t) ||
	    !find_type(&t, "Context", &ctx_off, &ctx) ||
	    !find_type(&ctx, "Option<tokio::runtime::scheduler::Handle", &opt_off, &opt) ||
	    !active_variant(r, &opt, ctx_addr + ctx_off + opt_off, &some, &d) ||
	    !payload(&some, ctx_addr + ctx_off + opt_off, &handle, &at) ||
	    !active_variant(r, &handle, at, &arc, &d) || !payload(&arc, at, &inner, &at2) ||
	    !follow(r, &inner, at2, &inner, &to))
		return false;
	/* the scheduler's owned tasks (its `owned`), not another list it keeps */
	if (find_member(&inner, "owned", &owned_off, &owned)) {
		if (!find_type(&owned, "LinkedList<", &list_off, &list))
			return false;
		list_off += owned_off;
	} else if (!find_type(&inner, "LinkedList<", &list_off, &list)) {
		return false;
	}
	if (!find_member(&list, "head", &head_off, &h) ||
	    !read_ptr(r, to + list_off + head_off, &d))
		return false;
	*head_at = to + list_off + head_off;
	return true;
}

/*
 * A name made of a DIE, kept under key (the list keeps strings by where
 * they are: a name made again must be the same pointer); fallback when
 * memory runs out.
 */
static const char *keep_name(const struct reader *r, uint64_t key, const char *made,
			     const char *fallback)
{
	struct u64map *names = (struct u64map *)&r->td->names;
	char *known = strdup(made);

	if (known && u64map__set(names, key, known)) {
		free(known);
		return fallback;
	}
	return known ? known : fallback;
}

static const char *kept_name(const struct reader *r, uint64_t key)
{
	return u64map__get(&r->td->names, key);
}

/* A DIE's path: its namespaces and its name ("tokio_parked::park_notify::{async_fn_env#0}"). */
static const char *path_of(const struct reader *r, Dwarf_Die *die)
{
	uint64_t key = dwarf_dieoffset(die) + 1;
	const char *known = kept_name(r, key);
	char buf[1024] = "";
	Dwarf_Die *scopes = NULL;
	size_t len = 0;
	int n;

	if (known)
		return known;
	/* a namespace's type: its namespace's path, indexed */
	known = u64map__get(&r->td->parents, dwarf_dieoffset(die));
	if (known) {
		snprintf(buf, sizeof(buf), "%s%s", known,
			 dwarf_diename(die) ? dwarf_diename(die) : "?");
		return keep_name(r, key, buf, "?");
	}
	n = dwarf_getscopes_die(die, &scopes);
	for (int i = n - 1; i >= 1; i--) {
		int tag = dwarf_tag(&scopes[i]);
		const char *name = dwarf_diename(&scopes[i]);

		if (name && (tag == DW_TAG_namespace || tag == DW_TAG_structure_type) &&
		    len < sizeof(buf))
			len += (size_t)snprintf(buf + len, sizeof(buf) - len, "%s::", name);
	}
	free(scopes);
	if (len < sizeof(buf))
		snprintf(buf + len, sizeof(buf) - len, "%s",
			 dwarf_diename(die) ? dwarf_diename(die) : "?");
	return keep_name(r, key, buf, "?");
}

/*
 * The function an async fn's state machine env is of: its path without the
 * env's name ("tokio_parked::park_notify"; an async block's, its namespace's
 * "tokio_parked::main::{async_block#0}"), made once and kept (the list keeps
 * strings by where they are).
 */
static const char *function_of(const struct reader *r, Dwarf_Die *env)
{
	uint64_t key = (dwarf_dieoffset(env) | (1ull << 63)) + 1;
	const char *known = kept_name(r, key), *path, *name;
	size_t plen, nlen;
	char buf[1024];

	if (known)
		return known;
	path = path_of(r, env);
	name = dwarf_diename(env);
	plen = strlen(path);
	nlen = name ? strlen(name) : 0;
	if (nlen + 2 <= plen)
		snprintf(buf, sizeof(buf), "%.*s", (int)(plen - nlen - 2), path);
	else
		snprintf(buf, sizeof(buf), "%s", path);
	return keep_name(r, key, buf, path);
}

static void frame(struct reader *r, const char *function, const char *file, int line, int depth)
{
	struct task_frame f = { .depth = (uint8_t)(depth < 255 ? depth : 255), .line = line };

	if (r->frames >= TOKIO_FRAMES_MAX)
		return;
	f.function = task_list__str(r->l, function, 4096);
	f.file = file ? task_list__str(r->l, file, 4096) : 0;
	if (!task_list__frame(r->l, &f))
		r->frames++;
}

/* ---- a select!'s or join!'s line ---- */

/* The closure of path (its declaration at decl), made once; NULL: another path of its hash. */
static struct closure *closure_at(struct tokio_dwarf *td, const char *path, bool make)
{
	uint64_t key = hash_str(path);
	struct closure *c = u64map__get(&td->closures, key);

	if (c || !make)
		return c && !strcmp(c->path, path) ? c : NULL;
	c = calloc(1, sizeof(*c));
	if (c && !(c->path = strdup(path))) {
		free(c);
		c = NULL;
	}
	if (c && u64map__set(&td->closures, key, c)) {
		free(c->path);
		free(c);
		c = NULL;
	}
	return c;
}

/* The closures' instances seen before their declarations' paths were: kept for a second look. */
struct pending {
	Dwarf_Off *origin, *instance;
	size_t nr, cap;
};

static void add_pending(struct pending *p, Dwarf_Off origin, Dwarf_Off instance)
{
	if (p->nr == p->cap && p->nr < ((size_t)1 << 20)) {
		size_t cap = p->cap ? 2 * p->cap : 256;
		Dwarf_Off *o = realloc(p->origin, cap * sizeof(*o));
		Dwarf_Off *in = o ? realloc(p->instance, cap * sizeof(*in)) : NULL;

		if (o)
			p->origin = o;
		if (in)
			p->instance = in;
		if (o && in)
			p->cap = cap;
	}
	if (p->nr < p->cap) {
		p->origin[p->nr] = origin;
		p->instance[p->nr++] = instance;
	}
}

/*
 * Under die (its path so far in path, len bytes), each closure declared
 * (its struct closure, by its DIE) and each subprogram or inlined call
 * whose origin is a closure's (budget: DIEs looked at).
 */
static void index_closures(struct tokio_dwarf *td, Dwarf_Die *die, char *path, size_t len,
			   int depth, struct pending *p, size_t *budget)
{
	Dwarf_Die c;

	if (depth > 64 || dwarf_child(die, &c) != 0)
		return;
	do {
		int tag = dwarf_tag(&c);
		const char *name = dwarf_diename(&c);
		size_t n = name ? strlen(name) : 0;
		Dwarf_Attribute attr;
		Dwarf_Die origin;

		if (!*budget || !--*budget)
			return;
		if (tag == DW_TAG_subprogram && name && !strncmp(name, "{closure#", 9) &&
		    len + n < 4096) {
			struct closure *cl;

			memcpy(path + len, name, n + 1);
			cl = closure_at(td, path, true);
			if (cl)
				u64map__set(&td->closure_decls, dwarf_dieoffset(&c), cl);
			path[len] = 0;
		}
		if ((tag == DW_TAG_subprogram || tag == DW_TAG_inlined_subroutine) &&
		    (dwarf_attr(&c, DW_AT_abstract_origin, &attr) ||
		     dwarf_attr(&c, DW_AT_specification, &attr)) &&
		    dwarf_formref_die(&attr, &origin) && name_starts(&origin, "{closure#"))
			add_pending(p, dwarf_dieoffset(&origin), dwarf_dieoffset(&c));
		if (tag == DW_TAG_namespace || tag == DW_TAG_structure_type) {
			if (name && len + n + 2 < 4096) {
				memcpy(path + len, name, n);
				memcpy(path + len + n, "::", 3);
				index_closures(td, &c, path, len + n + 2, depth + 1, p, budget);
				path[len] = 0;
			}
		} else if (tag == DW_TAG_subprogram || tag == DW_TAG_inlined_subroutine ||
			   tag == DW_TAG_lexical_block) {
			index_closures(td, &c, path, len, depth + 1, p, budget);
		}
	} while (dwarf_siblingof(&c, &c) == 0);
}

/* DIEs looked at by the closures' index at most: a few times the largest program's. */
#define CLOSURE_INDEX_BUDGET ((size_t)200 << 20)

static void closures_index(struct tokio_dwarf *td)
{
	Dwarf_Off off = 0, next;
	size_t hsize, budget = CLOSURE_INDEX_BUDGET;
	struct pending p = { 0 };
	char path[4096];

	td->closures_indexed = true;
	while (dwarf_nextcu(td->dw, off, &next, &hsize, NULL, NULL, NULL) == 0) {
		Dwarf_Die cu;

		path[0] = 0;
		if (dwarf_offdie(td->dw, off + hsize, &cu))
			index_closures(td, &cu, path, 0, 0, &p, &budget);
		off = next;
	}
	/* each instance with its closure */
	for (size_t i = 0; i < p.nr; i++) {
		struct closure *c = u64map__get(&td->closure_decls, p.origin[i]);

		if (c && c->nr < CLOSURE_INSTANCES)
			c->off[c->nr++] = p.instance[i];
	}
	free(p.origin);
	free(p.instance);
}

void tokio_dwarf__forget_layouts(struct tokio_dwarf *td)
{
	uint64_t key;
	void *val;

	u64map__clear_free(&td->enums);
	for (size_t i = 0; u64map__next(&td->cells_by_poll, &i, &key, &val);)
		if (val != NO_CELL)
			free(val);
	u64map__clear(&td->cells_by_poll);
}

void tokio_dwarf__prepare(struct tokio_dwarf *td)
{
	if (!td->closures_indexed)
		closures_index(td);
}

/* Address ranges, at most RANGES_MAX: past that, full (and not to be trusted as whole). */
#define RANGES_MAX 256
struct ranges {
	Dwarf_Addr lo[RANGES_MAX], hi[RANGES_MAX];
	int nr;
	bool full;
};

static void add_ranges(Dwarf_Die *die, struct ranges *out)
{
	Dwarf_Addr base, lo, hi;
	ptrdiff_t at = 0;

	while ((at = dwarf_ranges(die, at, &base, &lo, &hi)) > 0) {
		if (out->nr == RANGES_MAX) {
			out->full = true;
			return;
		}
		out->lo[out->nr] = lo;
		out->hi[out->nr++] = hi;
	}
}

static bool in_ranges(const struct ranges *r, Dwarf_Addr a)
{
	for (int i = 0; i < r->nr; i++)
		if (a >= r->lo[i] && a < r->hi[i])
			return true;
	return false;
}

/* The lines in file of a closure's code and of the calls it makes inline. */
struct lines_in {
	const char *file;
	Dwarf_Files *files;	/* its unit's, for the calls' files */
	int line;		/* the least found; 0 none */
	bool lost;		/* a call too deep to follow: its code not told from the closure's */
	struct ranges inlined;	/* the code of those calls: not the closure's own */
};

static void take_line(struct lines_in *li, const char *file, int line)
{
	if (line > 0 && file && !strcmp(file, li->file) && (!li->line || line < li->line))
		li->line = line;
}

/* Under die (the closure's code), the calls made inline: their call lines, and their code. */
static void inlined_calls(Dwarf_Die *die, struct lines_in *li, int depth)
{
	Dwarf_Die c;

	if (dwarf_child(die, &c) != 0)
		return;
	if (depth > 16) {
		li->lost = true;
		return;
	}
	do {
		int tag = dwarf_tag(&c);
		Dwarf_Attribute attr;
		Dwarf_Word file, line;

		if (tag == DW_TAG_lexical_block) {
			inlined_calls(&c, li, depth + 1);
		} else if (tag == DW_TAG_inlined_subroutine) {
			add_ranges(&c, &li->inlined);
			if (li->files &&
			    !dwarf_formudata(dwarf_attr(&c, DW_AT_call_file, &attr), &file) &&
			    !dwarf_formudata(dwarf_attr(&c, DW_AT_call_line, &attr), &line) &&
			    line < INT32_MAX)
				take_line(li, dwarf_filesrc(li->files, file, NULL, NULL), (int)line);
		}
	} while (dwarf_siblingof(&c, &c) == 0);
}

/* The first of a unit's rows (sorted by address) at or after addr. */
static size_t first_row(Dwarf_Lines *lines, size_t nr, Dwarf_Addr addr)
{
	size_t lo = 0, hi = nr;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		Dwarf_Line *ln = dwarf_onesrcline(lines, mid);
		Dwarf_Addr a = 0;

		if (ln && !dwarf_lineaddr(ln, &a) && a < addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* The least line of file in the closure's code at inst (0: none, or not to be trusted). */
static int instance_line(Dwarf_Die *inst, const char *file)
{
	struct lines_in li = { .file = file };
	struct ranges own = { .nr = 0 };
	Dwarf_Die cu;
	Dwarf_Lines *lines;
	size_t nr;

	if (!dwarf_diecu(inst, &cu, NULL, NULL))
		return 0;
	add_ranges(inst, &own);
	if (dwarf_getsrcfiles(&cu, &li.files, &nr))
		li.files = NULL;
	inlined_calls(inst, &li, 0);
	/* code not told for sure from the calls': another function's lines could be taken */
	if (own.full || li.inlined.full || li.lost || dwarf_getsrclines(&cu, &lines, &nr))
		return 0;
	for (int i = 0; i < own.nr; i++)
		for (size_t k = first_row(lines, nr, own.lo[i]); k < nr; k++) {
			Dwarf_Line *ln = dwarf_onesrcline(lines, k);
			Dwarf_Addr a;
			bool end;
			int line;

			if (!ln || dwarf_lineaddr(ln, &a) || a >= own.hi[i])
				break;
			if (!dwarf_lineendsequence(ln, &end) && !end && !in_ranges(&li.inlined, a) &&
			    !dwarf_lineno(ln, &line))
				take_line(&li, dwarf_linesrc(ln, NULL, NULL), line);
		}
	return li.line;
}

/*
 * The line of the program's own file (file) in a closure's code (each of
 * its instances). select! and join! poll their branches in a closure their
 * expansion makes, whose code is at the macro's own lines but for what the
 * compiler places at the macro's invocation (an unbiased select!'s pick of
 * the branch to poll first is) or at a token of the program's (a branch's
 * pattern, on a later line). The least line of file among the closure's
 * own rows and the calls it makes inline is the invocation's where that
 * appears. 0: no row is the program's (join! and biased select! in the
 * builds tested), and nothing is guessed.
 */
static int closure_line(struct tokio_dwarf *td, struct closure *c, const char *file)
{
	int best = 0;

	if (c->line_file && !strcmp(c->line_file, file))
		return c->line;
	for (size_t i = 0; i < c->nr; i++) {
		Dwarf_Die inst;
		int line = dwarf_offdie(td->dw, c->off[i], &inst) ? instance_line(&inst, file) : 0;

		if (line && (!best || line < best))
			best = line;
	}
	free(c->line_file);
	c->line_file = strdup(file);
	c->line = best;
	return best;
}

/*
 * The program's line of a select! or join! awaited at suspend (the
 * variant's member) of env, from the closure its awaitee polls: the
 * program's file is where the function is (its unresumed variant's).
 */
static int macro_line(const struct reader *r, Dwarf_Die *env, Dwarf_Die *suspend_type,
		      const char **in_file)
{
	struct tokio_dwarf *td = (struct tokio_dwarf *)r->td;
	Dwarf_Die aw, awt, f, closure, vp, v, m;
	const char *file = NULL, *env_path, *last;
	struct closure *c;
	char path[4096];

	/* the awaitee: PollFn<{closure_env#N}>, its `f` the closure's env */
	if (!member_named(suspend_type, "__awaitee", &aw) || !type_of(&aw, &awt) ||
	    !member_named(&awt, "f", &f) || !type_of(&f, &closure) ||
	    !name_starts(&closure, "{closure_env#"))
		return 0;
	/* the closure's path: its env's, "{closure_env#N}" made "{closure#N}" */
	env_path = path_of(r, &closure);
	last = strrchr(env_path, '{');
	if (!last || strncmp(last, "{closure_env#", 13) ||
	    snprintf(path, sizeof(path), "%.*s{closure#%s", (int)(last - env_path), env_path,
		     last + 13) >= (int)sizeof(path))
		return 0;
	/* the function's own file: its unresumed variant's (discriminant 0) */
	if (dwarf_child(env, &vp) == 0)
		do {
			if (dwarf_tag(&vp) != DW_TAG_variant_part || dwarf_child(&vp, &v) != 0)
				continue;
			do {
				Dwarf_Attribute attr;
				Dwarf_Word value;

				if (dwarf_tag(&v) == DW_TAG_variant &&
				    !dwarf_formudata(dwarf_attr(&v, DW_AT_discr_value, &attr), &value) &&
				    value == 0 && dwarf_child(&v, &m) == 0)
					file = dwarf_decl_file(&m);
			} while (!file && dwarf_siblingof(&v, &v) == 0);
		} while (!file && dwarf_siblingof(&vp, &vp) == 0);
	*in_file = file;
	tokio_dwarf__prepare(td);
	c = file ? closure_at(td, path, false) : NULL;
	return c ? closure_line(td, c, file) : 0;
}

/* Whether t is an async fn's (or block's) state machine: by its own name. */
static bool is_env(Dwarf_Die *t)
{
	return name_starts(t, "{async_fn_env#") || name_starts(t, "{async_block_env#");
}

/*
 * The future of type t at addr, and what it awaits, as frames from depth on
 * (hops: futures followed so far, wrappers included, which a type that
 * holds itself cannot make endless).
 */
static void future(struct reader *r, Dwarf_Die *t, uint64_t addr, int depth, int hops)
{
	const char *path;
	Dwarf_Die m, mt, awaitee, aw_t, futures, ft;
	uint64_t discr, off;

	if (depth > FUTURE_DEPTH || hops > 2 * FUTURE_DEPTH || r->frames >= TOKIO_FRAMES_MAX ||
	    !is_aggregate(t))
		return;
	path = path_of(r, t);
	if (is_env(t)) {
		const char *fn = function_of(r, t), *file;
		int line = 0;

		if (!r->l->tasks[r->l->nr_tasks - 1].name)
			r->l->tasks[r->l->nr_tasks - 1].name = task_list__str(r->l, fn, 4096);
		if (!active_variant(r, t, addr, &m, &discr)) {
			frame(r, fn, NULL, 0, depth);
			return;
		}
		file = dwarf_decl_file(&m);
		if (discr >= 3)
			dwarf_decl_line(&m, &line);
		if (discr < 3 || !type_of(&m, &mt)) {
			/* unresumed, returned, panicked: where it is not awaiting */
			frame(r, fn, discr >= 3 ? file : NULL, discr >= 3 ? line : 0, depth);
			return;
		}
		/*
		 * select!, join!: awaited at the macro's own line; the
		 * program's, where found, instead (else the macro's, never a
		 * guess); then each branch's future and what it awaits
		 */
		if (member_named(&mt, "futures", &futures) && type_of(&futures, &ft) &&
		    file && (strstr(file, "macros/select.rs") || strstr(file, "macros/join.rs"))) {
			const char *own = NULL;
			int at = macro_line(r, t, &mt, &own);
			Dwarf_Die b;

			frame(r, fn, at > 0 ? own : file, at > 0 ? at : line, depth);
			if (dwarf_child(&ft, &b) == 0)
				do {
					Dwarf_Die bt;

					if (dwarf_tag(&b) == DW_TAG_member && type_of(&b, &bt))
						future(r, &bt,
						       addr + member_off(&m) + member_off(&futures) +
							       member_off(&b),
						       depth + 1, hops + 1);
				} while (dwarf_siblingof(&b, &b) == 0);
			return;
		}
		frame(r, fn, file, line, depth);
		if (member_named(&mt, "__awaitee", &awaitee) && type_of(&awaitee, &aw_t))
			future(r, &aw_t, addr + member_off(&m) + member_off(&awaitee), depth + 1,
			       hops + 1);
		return;
	}
	/* GenFuture<T> (rustc 1.63), MaybeDone's Future(F): the future inside */
	if (name_starts(t, "GenFuture<") && member_named(t, "__0", &m) && type_of(&m, &mt)) {
		future(r, &mt, addr + member_off(&m), depth, hops + 1);
		return;
	}
	if (name_starts(t, "MaybeDone<") && active_variant(r, t, addr, &m, &discr)) {
		if (named(&m, "Future") && payload(&m, addr, &mt, &off))
			future(r, &mt, off, depth, hops + 1);
		else
			frame(r, named(&m, "Done") ? "(done)" : path, NULL, 0, depth);
		return;
	}
	/* a leaf: what it waits on, by its type */
	frame(r, path, NULL, 0, depth);
}

/*
 * The cell of the tasks whose vtable's poll is at poll (link-time): the
 * Cell<T, S> of the poll instance's arguments, where its task id and its
 * stage (Stage<T>) are; found once a poll instance. NULL: none.
 */
static const struct cell_layout *cell_of(const struct reader *r, uint64_t poll)
{
	struct tokio_dwarf *td = (struct tokio_dwarf *)r->td;
	struct cell_layout *cl = u64map__get(&td->cells_by_poll, poll);
	/* the instance whose entry is poll: the last one at or below it (addr leads poll_inst) */
	size_t i;
	Dwarf_Die cell, core, t;
	uint64_t core_off = 0;
	void *v;

	if (cl)
		return cl == NO_CELL ? NULL : cl;
	/* not a poll instance's entry (what a torn or hostile read gives): nothing kept */
	i = upper_bound_u64(td->polls, td->nr_polls, sizeof(*td->polls), poll);
	if (!i || td->polls[i - 1].addr != poll)
		return NULL;
	v = u64map__get(&td->cells, hash_str(td->polls[i - 1].args));
	if (v && offdie(td, (Dwarf_Off)(uintptr_t)v - 1, &cell) && (cl = calloc(1, sizeof(*cl)))) {
		cl->cell = dwarf_dieoffset(&cell);
		cl->have_id = find_member(&cell, "core", &core_off, &core) &&
			      find_member(&core, "task_id", &cl->id_off, &t);
		cl->id_off += core_off;
		cl->have_stage = find_type(&cell, "Stage<", &cl->stage_off, &t);
		cl->stage = cl->have_stage ? dwarf_dieoffset(&t) : 0;
	}
	/* a program's poll instances are few: each is kept, with a cell or without */
	if (u64map__set(&td->cells_by_poll, poll, cl ? (void *)cl : NO_CELL)) {
		free(cl);
		return NULL;
	}
	return cl;
}

/* The task at hdr's id (tokio's own, in its Cell's core), else its Header's address. */
static uint64_t task_id(const struct reader *r, const struct cell_layout *cl, uint64_t hdr)
{
	uint64_t id;

	if (cl->have_id && read_u(r, hdr + cl->id_off, 8, &id) && id)
		return id;
	return hdr;
}

/* The future of the task at hdr (its Cell's stage, when Running), as frames. */
static void task_future(struct reader *r, const struct cell_layout *cl, uint64_t hdr)
{
	Dwarf_Die stage, running, fut;
	uint64_t d, at;
	struct task_info *t;

	if (!cl->have_stage || !offdie(r->td, cl->stage, &stage) ||
	    !active_variant(r, &stage, hdr + cl->stage_off, &running, &d))
		return;
	if (!named(&running, "Running")) {
		frame(r, "(finished)", NULL, 0, 0);
		return;
	}
	if (!payload(&running, hdr + cl->stage_off, &fut, &at))
		return;
	future(r, &fut, at, 0, 0);
	/* named by its outermost async fn (set by future()), else by its future's type */
	t = &r->l->tasks[r->l->nr_tasks - 1];
	if (!t->name)
		t->name = task_list__str(r->l, path_of(r, &fut), 4096);
}

struct list_layout {
	uint64_t state, vtable, poll, trailer_offset, next;
	bool have_trailer_offset;
};

static bool layout(const struct tokio_dwarf *td, struct list_layout *ly)
{
	Dwarf_Die h, v, tr, t;

	if (!offdie(td, td->header, &h) || !offdie(td, td->vtable, &v) ||
	    !offdie(td, td->trailer, &tr) || !find_member(&h, "state", &ly->state, &t) ||
	    !find_member(&h, "vtable", &ly->vtable, &t) || !find_member(&v, "poll", &ly->poll, &t) ||
	    !find_member(&tr, "next", &ly->next, &t))
		return false;
	ly->have_trailer_offset = find_member(&v, "trailer_offset", &ly->trailer_offset, &t);
	return true;
}

/*
 * One task, its header at hdr: 0 read, 1 not the one asked for (only),
 * -EAGAIN when it changed as it was read.
 */
static int read_task(struct reader *r, const struct list_layout *ly, uint64_t hdr, uint64_t state,
		     uint64_t only, bool last_try)
{
	uint64_t vt, poll, again, id = hdr;
	size_t first = r->l->nr_frames;
	struct task_info *t;
	const struct cell_layout *cl = read_ptr(r, hdr + ly->vtable, &vt) &&
						       read_ptr(r, vt + ly->poll, &poll)
					       ? cell_of(r, poll - r->bias)
					       : NULL;

	if (cl)
		id = task_id(r, cl, hdr);
	if (r->found && cl && id != hdr) {
		/* full: begun again, with what is met from now on */
		if (r->found->len >= TOKIO_FOUND_MAX && !u64map__get(r->found, id))
			u64map__clear(r->found);
		u64map__set(r->found, id, (void *)(uintptr_t)hdr);
	}
	if (only && id != only && hdr != only)
		return 1;
	t = task_list__add(r->l);
	if (!t)
		return -ENOMEM;
	r->frames = 0;
	t->id = id;
	t->state = state & ST_RUNNING ? TASK_RUNNING : state & ST_NOTIFIED ? TASK_RUNNABLE
									: TASK_WAITING;
	if (state & ST_COMPLETE)
		t->state = TASK_OTHER;
	if (cl && t->state != TASK_RUNNING)
		task_future(r, cl, hdr);
	/* what was read holds together if the state did not move */
	/* its lifecycle bits: a waker cloned or dropped meanwhile changes only the count */
	if (t->state != TASK_RUNNING && read_u(r, hdr + ly->state, 8, &again) &&
	    (again & ST_LIFECYCLE) != (state & ST_LIFECYCLE)) {
		r->l->nr_frames = first;
		t->nr_frames = 0;
		if (!last_try) {
			r->l->nr_tasks--;
			return -EAGAIN;
		}
		t->flags |= TASK_TORN;
		r->l->nr_torn++;
	}
	return 0;
}

int tokio_tasks__head_at(const struct tokio_dwarf *td, const uint64_t *context_at,
			 size_t nr_threads, const struct task_mem *m, uint64_t *head_at)
{
	struct reader r = { .td = td, .m = m };

	/* the first thread whose CONTEXT holds a scheduler: every worker's is the same */
	for (size_t i = 0; i < nr_threads; i++)
		if (context_at[i] && list_head(&r, context_at[i], head_at))
			return 0;
	return -ENOENT;
}

/* The task at hdr, read again while it changes under the reader: read_task()'s answer. */
static int read_again(struct reader *r, const struct list_layout *ly, uint64_t hdr, uint64_t only)
{
	uint64_t state;
	int err = -EAGAIN;

	for (int k = 0; err == -EAGAIN && k < 4; k++)
		err = read_u(r, hdr + ly->state, 8, &state) ? read_task(r, ly, hdr, state, only, k == 3)
							    : -EIO;
	return err;
}

/*
 * Whether the Header at hdr is a live task's: a count of references a task
 * may hold (a freed one's state word is the allocator's: a pointer), and a
 * vtable whose poll is one of the program's futures'.
 */
static bool alive(const struct reader *r, const struct list_layout *ly, uint64_t hdr)
{
	uint64_t state, refs, vt, poll;

	if (!read_u(r, hdr + ly->state, 8, &state))
		return false;
	refs = state >> ST_REF_SHIFT;
	return refs && refs <= ST_REF_MAX && read_ptr(r, hdr + ly->vtable, &vt) &&
	       read_ptr(r, vt + ly->poll, &poll) && cell_of(r, poll - r->bias);
}

/*
 * Task only, read where it was met before (found): 0 read, 1 not there (not
 * met, or that Header is another's now, or freed: forgotten), -errno.
 */
static int read_found(struct reader *r, const struct list_layout *ly, uint64_t only)
{
	uint64_t hdr = r->found ? (uint64_t)(uintptr_t)u64map__get(r->found, only) : 0;
	struct u64map *found = r->found;
	int err;

	if (!hdr)
		return 1;
	/* a freed Header may still hold its vtable and id, not a count of references */
	if (!alive(r, ly, hdr)) {
		u64map__del(found, only);
		return 1;
	}
	/* what is read there must not be taken as where the ids are */
	r->found = NULL;
	err = read_again(r, ly, hdr, only);
	r->found = found;
	if (err == 1 || err == -EIO)
		u64map__del(found, only);
	return err == -EIO ? 1 : err;
}

int tokio_tasks__read(const struct tokio_dwarf *td, uint64_t bias, uint64_t head_at,
		      const struct tokio_read_opts *o, const struct task_mem *m,
		      struct task_list *l)
{
	struct reader r = { .td = td, .m = m, .l = l, .found = o->found, .bias = bias };
	uint64_t only = o->only;
	size_t walked = 0;
	struct list_layout ly;
	struct u64map seen;
	uint64_t head = 0, hdr, start;
	bool wrapped = false, resume_set = false;

	snprintf(l->runtime, sizeof(l->runtime), "tokio");
	if (!layout(td, &ly)) {
		snprintf(l->note, sizeof(l->note), "tokio's Header, Vtable or Trailer lacks a field "
			 "read (a tokio version not known)");
		return -ENOTSUP;
	}
	if (only) {
		int err = read_found(&r, &ly, only);

		if (err <= 0)
			return err;
	}
	if (!read_ptr(&r, head_at, &head))
		return -EIO;
	/* one looked for goes on from where the last given up stopped, round to it */
	start = only && o->resume && *o->resume && alive(&r, &ly, *o->resume) ? *o->resume : head;
	u64map__init(&seen);
	for (hdr = start;;) {
		uint64_t vtable, trailer, next;
		int err;

		if (!hdr && start != head && !wrapped) {
			wrapped = true;
			hdr = head;
		}
		if (!hdr || (wrapped && hdr == start))
			break;

		/* a task seen again: a list changed under the reader, or made to loop */
		if (seen.len >= TOKIO_TASKS_MAX || u64map__get(&seen, hdr) ||
		    u64map__set(&seen, hdr, (void *)1)) {
			snprintf(l->note, sizeof(l->note), "the task list did not end where it should "
				 "(it changed while read): the tasks after are left out");
			break;
		}
		/* one looked for within a bound (a wait read's): given up, said */
		if (only && o->deadline_ns && ++walked % 64 == 0 && now_ns() > o->deadline_ns) {
			snprintf(l->note, sizeof(l->note), "%s, after %zu tasks", TASKS_NOTE_GAVE_UP,
				 walked);
			if (o->resume)
				*o->resume = hdr;
			resume_set = true;
			break;
		}
		err = read_again(&r, &ly, hdr, only);
		if (err == -ENOMEM) {
			snprintf(l->note, sizeof(l->note), "out of memory after %zu tasks: the tasks "
				 "after are left out", (size_t)l->nr_tasks);
			break;
		}
		if (only && !err) {
			/* the next look begins here, past what this one met */
			if (o->resume)
				*o->resume = hdr;
			resume_set = true;
			break;
		}
		/* the next task: through its Trailer, whose place the vtable says */
		if (!ly.have_trailer_offset) {
			snprintf(l->note, sizeof(l->note), "tokio's Vtable has no trailer_offset "
				 "(a tokio version not known): the tasks after the first are "
				 "left out");
			break;
		}
		if (err == -EIO || !read_ptr(&r, hdr + ly.vtable, &vtable) ||
		    !read_ptr(&r, vtable + ly.trailer_offset, &trailer) ||
		    !read_ptr(&r, hdr + trailer + ly.next, &next)) {
			/* never a list cut short unsaid */
			snprintf(l->note, sizeof(l->note), "its memory could not be read past "
				 "%zu tasks (the process exited, or the list changed as it was "
				 "read): the tasks after are left out", (size_t)l->nr_tasks);
			break;
		}
		hdr = next;
	}
	/* ended otherwise (the list's end, or where it changed): the next begins at the head */
	if (only && o->resume && !resume_set)
		*o->resume = 0;
	u64map__clear(&seen);
	return 0;
}
