// SPDX-License-Identifier: MIT
#include "stacks/func_index.h"

#include <dwarf.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "lib/util.h"

static int add_range(struct func_index *ix, Dwarf_Addr lo, Dwarf_Addr hi, Dwarf_Off die)
{
	if (ix->nr == ix->cap) {
		size_t cap = ix->cap ? ix->cap * 2 : 1024;
		struct func_range *r;

		if (ix->cap >= FUNC_INDEX_MAX_RANGES)
			return -ENOMEM;
		r = realloc(ix->r, cap * sizeof(*r));
		if (!r)
			return -ENOMEM;
		ix->r = r;
		ix->cap = cap;
	}
	ix->r[ix->nr++] = (struct func_range){ .lo = lo, .hi = hi, .die = die };
	return 0;
}

/*
 * The functions with code below parent, in its namespaces and modules too,
 * depth of them deep so far: no deeper than FUNC_INDEX_MAX_SCOPES, which
 * no program nests its names and a crafted DWARF can (thousands deep in a
 * few KiB, each level a frame of this recursion).
 */
static int add_funcs(struct func_index *ix, Dwarf_Die *parent, int depth)
{
	Dwarf_Addr base, lo, hi;
	ptrdiff_t off;
	Dwarf_Die c;

	if (depth >= FUNC_INDEX_MAX_SCOPES || dwarf_child(parent, &c) != 0)
		return 0;
	do {
		switch (dwarf_tag(&c)) {
		case DW_TAG_namespace:
		case DW_TAG_module:
			if (add_funcs(ix, &c, depth + 1))
				return -ENOMEM;
			break;
		case DW_TAG_subprogram:
			off = 0;
			while ((off = dwarf_ranges(&c, off, &base, &lo, &hi)) > 0)
				if (lo < hi && add_range(ix, lo, hi, dwarf_dieoffset(&c)))
					return -ENOMEM;
			break;
		}
	} while (dwarf_siblingof(&c, &c) == 0);
	return 0;
}

static int by_lo(const void *a, const void *b)
{
	const struct func_range *x = a, *y = b;

	return x->lo < y->lo ? -1 : x->lo > y->lo;
}

int func_index__build(struct func_index *ix, Dwfl_Module *mod)
{
	Dwarf_Die *cu = NULL;
	Dwarf_Addr bias;
	int err = 0;

	memset(ix, 0, sizeof(*ix));
	ix->dwarf = dwfl_module_getdwarf(mod, &ix->bias);
	while (!err && ix->dwarf && (cu = dwfl_module_nextcu(mod, cu, &bias)))
		err = add_funcs(ix, cu, 0);
	/* no ranges: r is NULL, which qsort() must not be given even for 0 */
	if (ix->nr)
		qsort(ix->r, ix->nr, sizeof(*ix->r), by_lo);
	return err;
}

void func_index__free(struct func_index *ix)
{
	free(ix->r);
	memset(ix, 0, sizeof(*ix));
}

/*
 * The DIEs inside a function whose code holds pc, from out[n] on, outermost
 * first: the calls inlined into it and their blocks. How many there are then.
 */
static int scopes_at(Dwarf_Die *parent, Dwarf_Addr pc, Dwarf_Die *out, int n)
{
	Dwarf_Die c;

	if (n >= FUNC_INDEX_MAX_SCOPES || dwarf_child(parent, &c) != 0)
		return n;
	do {
		int tag = dwarf_tag(&c);

		if ((tag == DW_TAG_inlined_subroutine || tag == DW_TAG_lexical_block) &&
		    dwarf_haspc(&c, pc) == 1) {
			out[n] = c;
			return scopes_at(&c, pc, out, n + 1);
		}
	} while (dwarf_siblingof(&c, &c) == 0);
	return n;
}

int func_index__scopes(const struct func_index *ix, Dwarf_Addr pc, Dwarf_Die *out, Dwarf_Die *cu)
{
	/* one past the last range beginning at or below pc */
	size_t lo = upper_bound_u64(ix->r, ix->nr, sizeof(*ix->r), pc);

	if (!lo || pc >= ix->r[lo - 1].hi || !dwarf_offdie(ix->dwarf, ix->r[lo - 1].die, &out[0]) ||
	    !dwarf_diecu(&out[0], cu, NULL, NULL))
		return 0;
	return scopes_at(&out[0], pc, out, 1);
}

const char *func_index__call_file(Dwarf_Die *cu, Dwarf_Die *inlined, int *line)
{
	Dwarf_Attribute attr;
	Dwarf_Word idx = 0, l = 0;
	Dwarf_Files *files;
	size_t n;

	*line = 0;
	if (dwarf_formudata(dwarf_attr(inlined, DW_AT_call_line, &attr), &l) == 0)
		*line = (int)l;
	if (dwarf_formudata(dwarf_attr(inlined, DW_AT_call_file, &attr), &idx) ||
	    dwarf_getsrcfiles(cu, &files, &n) || idx >= n)
		return NULL;
	return dwarf_filesrc(files, idx, NULL, NULL);
}
