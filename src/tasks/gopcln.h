/* SPDX-License-Identifier: MIT */
/*
 * Go's .gopclntab, which every Go binary keeps (stripped too: the runtime
 * prints its own tracebacks with it), read the way the runtime reads it
 * (Go 1.18 on: magic 0xfffffff0, and 0xfffffff1 from 1.20): the function
 * covering a pc, its name, and the pc-value tables that say, for each pc of
 * a function, its frame's size (pcsp), its source file (pcfile) and line
 * (pcln), and which inlined call it is in (the inline tree). Nothing read
 * here is trusted: every offset is checked against the table's size.
 */
#ifndef GOPCLN_H
#define GOPCLN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct gopcln {
	const uint8_t *tab;
	size_t size;
	uint64_t text;		/* where the entries count from (link-time) */
	bool go120;		/* the 1.20 layout: a _func is 44 bytes, an inlined call 16 */
	uint64_t nfunc;
	/* each table's offset in tab */
	uint64_t funcnames, cutab, filetab, pctab, functab;
};

/* A function, as its _func says. */
struct gofunc {
	uint64_t entry;		/* link-time */
	uint64_t end;		/* the next function's entry */
	uint64_t off;		/* of its _func in tab */
	int32_t name;		/* in funcnames */
	uint32_t pcsp, pcfile, pcln, npcdata, cu;
	uint8_t nfuncdata;
};

/* The funcdata and pcdata of an inline tree (the runtime's own numbers). */
#define GO_FUNCDATA_INLTREE 3
#define GO_PCDATA_INLTREE 2

/* 0, or -ENOTSUP for a table not of these layouts. */
int gopcln__init(struct gopcln *p, const uint8_t *tab, size_t size, uint64_t text);
/* The function whose code holds pc (link-time): true with *f. */
bool gopcln__find(const struct gopcln *p, uint64_t pc, struct gofunc *f);
/* The value of pc-value table at off (in pctab) at pc, as the runtime finds it; -1: none. */
int32_t gopcln__value(const struct gopcln *p, const struct gofunc *f, uint32_t off, uint64_t pc);
/* A name in funcnames, NUL-ended within the table; NULL if not. */
const char *gopcln__name(const struct gopcln *p, int64_t off);
/* The source file of pc in f; NULL unknown. */
const char *gopcln__file(const struct gopcln *p, const struct gofunc *f, uint64_t pc);
/* f's pcdata table i (an offset in pctab), 0 if none. */
uint32_t gopcln__pcdata(const struct gopcln *p, const struct gofunc *f, uint32_t i);
/* f's funcdata i (an offset from moduledata.gofunc); UINT32_MAX if none. */
uint32_t gopcln__funcdata(const struct gopcln *p, const struct gofunc *f, uint32_t i);

/* One inlined call of the inline tree: who was inlined, and where its caller is. */
struct goinline {
	int32_t name;		/* in funcnames */
	int32_t parent_pc;	/* the call's pc, from the function's entry */
};
/* The size of an inline tree's entry, and an entry read from its bytes. */
size_t gopcln__inline_size(const struct gopcln *p);
void gopcln__inline(const struct gopcln *p, const uint8_t *entry, struct goinline *out);

#endif
