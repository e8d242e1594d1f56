/* SPDX-License-Identifier: MIT */
/*
 * Where an image's functions are, by address, from its DWARF: each function
 * with code (inside namespaces and modules too, where Rust and C++ nest
 * them, and libdw's dwarf_getscopes() does not look), its address ranges
 * sorted, found once per image, so that a pc's function is a binary search
 * and not a walk of its compile unit; then what is inlined into it at a pc.
 * The DWARF is the traced program's, as hostile as its owner: nesting and
 * size are bounded.
 */
#ifndef FUNC_INDEX_H
#define FUNC_INDEX_H

#include <elfutils/libdwfl.h>
#include <stddef.h>

/* Functions, inlined calls and blocks nested deeper than this are not looked into. */
#define FUNC_INDEX_MAX_SCOPES 64
/* Ranges kept at most (96 MiB): a large program has a million functions. */
#define FUNC_INDEX_MAX_RANGES ((size_t)1 << 22)

struct func_index {
	Dwarf *dwarf;		/* NULL: the image has no DWARF */
	Dwarf_Addr bias;
	struct func_range {
		Dwarf_Addr lo, hi;	/* [lo, hi), in DWARF addresses */
		Dwarf_Off die;
	} *r;			/* sorted by lo */
	size_t nr, cap;
};

/* The functions of mod's DWARF into ix (zeroed first): 0, or -ENOMEM (ix as far as it got). */
int func_index__build(struct func_index *ix, Dwfl_Module *mod);
void func_index__free(struct func_index *ix);
/*
 * The function whose code holds pc (a DWARF address) and what is inlined
 * into it there, outermost first, into out (FUNC_INDEX_MAX_SCOPES of them);
 * their compile unit into cu. How many: 0, none.
 */
int func_index__scopes(const struct func_index *ix, Dwarf_Addr pc, Dwarf_Die *out, Dwarf_Die *cu);
/* The source file and line an inlined call was made from (of its DIE, in cu); NULL if none. */
const char *func_index__call_file(Dwarf_Die *cu, Dwarf_Die *inlined, int *line);

#endif
