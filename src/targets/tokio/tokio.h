/* SPDX-License-Identifier: MIT */
/*
 * Finding tokio inside an unmodified binary: the functions to probe (from
 * the symbol table, both Rust manglings) and, for each instance of
 * tokio::runtime::task::raw::poll::<T, S>, the future type T that names the
 * tasks it polls. With v0 mangling T is in the symbol; with the default
 * legacy mangling it is recovered from the instance's code: what it calls
 * (Harness::poll, the future's own poll, the drop glue of its Stage<T>).
 */
#ifndef TOKIO_H
#define TOKIO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "asynctraced.h"
#include "targets/elf_image.h"
#include "targets/placement.h"

enum tokio_kind {
	TOKIO_POLL,		/* raw::poll::<T, S>: entry and return */
	TOKIO_WAKE,		/* waker::wake_by_val, waker::wake_by_ref */
	TOKIO_SCHEDULE,		/* raw::schedule::<S> */
	TOKIO_BIND,		/* OwnedTasks::bind (< 1.49): return */
	TOKIO_BIND_INNER,	/* OwnedTasks::bind_inner (>= 1.49): entry */
	TOKIO_REMOVE,		/* OwnedTasks::remove */
	TOKIO_STEAL,		/* Steal::steal_into: return */
	TOKIO_KIND_MAX,
};

/* The functions a raw::poll instance alone calls through (Harness::poll, Core::poll): at most. */
#define TOKIO_LAYERS 4

struct tokio_site {
	enum tokio_kind kind;
	uint64_t addr;		/* link-time address */
	uint64_t offset;	/* file offset of the function */
	struct placement place;	/* the uprobe goes at offset + place.skip */
	char *future;		/* TOKIO_POLL: the future type; NULL if not found */
	bool internal;		/* the runtime's own loop, not a task: not probed */
	/*
	 * TOKIO_POLL: the code a stack of its polls runs in, as file offsets and
	 * lengths: the instance itself, then the poll layers only it reaches
	 * (Harness<T, S>::poll, Core<T, S>::poll), where a release build's
	 * stacks show it (raw::poll tail-calls Harness::poll). 0 lengths: none.
	 */
	uint64_t code_off[1 + TOKIO_LAYERS];
	uint32_t code_len[1 + TOKIO_LAYERS];
};

/*
 * Where sample mode reads which task a thread polls (tokio_current.c): tokio's
 * thread-local CONTEXT, from the thread pointer, and two of its fields.
 */
struct tokio_current {
	int64_t tpoff;		/* CONTEXT's offset from the thread pointer (< 0) */
	uint32_t size;		/* its bytes */
	int32_t task_id;	/* current_task_id, Option<Id>: a u64 tag (1: Some), the id; -1 */
	int32_t budget;		/* the coop budget, Option<u8>: a tag byte (1: Some); -1 */
	char why[128];		/* not found: why ("": found) */
};

struct tokio_runtime {
	struct tokio_site *sites;
	size_t nr;
	size_t count[TOKIO_KIND_MAX];	/* sites probed, per kind */
	size_t named;			/* poll instances whose future was found */
	size_t ambiguous;		/* ... not found: code shared by several futures */
	size_t internal;		/* poll instances left alone */
	bool v0;			/* v0 mangling: types are in the symbols */
	/* where deferred wakes (yield_now) return to, as file offsets (tokio_defer.c) */
	uint64_t defer_ret[AT_TOKIO_DEFER_SITES];
	size_t nr_defer;
	bool has_symtab;
	struct tokio_current current;	/* sample mode's; current.why says if not found */
};

/*
 * Looks for tokio in the ELF file at path. 0 with rt->nr > 0 when found;
 * -ENOENT when not (rt->has_symtab says whether it could have been seen);
 * other -errno when the file cannot be read.
 */
int tokio__detect(const char *path, const struct probe_rules *rules, struct tokio_runtime *rt);
/*
 * The same in an image already read (the sites' futures are copies: it may
 * be closed). rules: where the kernel lets each probe go (placement.h).
 */
int tokio__detect_image(const struct elf_image *im, const struct probe_rules *rules,
			struct tokio_runtime *rt);
void tokio__free(struct tokio_runtime *rt);
/*
 * Where waker::wake_by_val returns to when tokio wakes what a task deferred
 * (yield_now): file offsets, at most max into rets; how many (tokio_defer.c).
 */
size_t tokio__defer_sites(const struct elf_image *im, uint64_t *rets, size_t max);
const char *tokio_kind_str(enum tokio_kind k);
/*
 * Where im (a process's executable) keeps tokio's CONTEXT and, in it, the
 * current task's id and the coop budget: 0, or -ENOENT with c->why said.
 */
int tokio__current(const struct elf_image *im, struct tokio_current *c);
/* Only where CONTEXT lies from the thread pointer, by its symbol: 0, or -ENOENT. */
int tokio__context_tpoff(const struct elf_image *im, int64_t *tpoff);

/* Helpers, exposed for unit tests. */
/* A demangled path without its generic arguments: what identifies the function. */
void tokio__strip_generics(const char *demangled, char *out, size_t size);
/*
 * The future type in a symbol that names it: "raw::poll::<T, S>" (v0),
 * drop_in_place of "Stage<T>" or "Cell<T, S>"; NULL if none (malloc'd).
 */
char *tokio__future_of(const char *demangled);

#endif
