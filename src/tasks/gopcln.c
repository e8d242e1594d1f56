// SPDX-License-Identifier: MIT
/*
 * .gopclntab's header (pcHeader): magic, two pads, the instruction size
 * quantum (1 on x86-64), the pointer size, then nfunc, nfiles, textStart,
 * and the offsets of funcnametab, cutab, filetab, pctab and the function
 * table, each from the header. The function table: nfunc+1 pairs {entry
 * offset from the text, _func offset from the table}, the last one's entry
 * the text's end. A pc-value table: pairs of varints, a value delta
 * (zig-zag) and a pc delta, the first value delta from -1 (runtime.step).
 */
#include "tasks/gopcln.h"

#include <errno.h>
#include <string.h>

static uint64_t u64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
	return v;
}

static uint32_t u32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return v;
}

int gopcln__init(struct gopcln *p, const uint8_t *tab, size_t size, uint64_t text)
{
	uint32_t magic;

	memset(p, 0, sizeof(*p));
	if (!tab || size < 8 + 8 * 8)
		return -ENOTSUP;
	magic = u32(tab);
	if ((magic != 0xfffffff0 && magic != 0xfffffff1) || tab[6] != 1 || tab[7] != 8)
		return -ENOTSUP;
	p->tab = tab;
	p->size = size;
	p->go120 = magic == 0xfffffff1;
	p->nfunc = u64(tab + 8);
	p->text = u64(tab + 24) ? u64(tab + 24) : text;
	p->funcnames = u64(tab + 32);
	p->cutab = u64(tab + 40);
	p->filetab = u64(tab + 48);
	p->pctab = u64(tab + 56);
	p->functab = u64(tab + 64);
	if (p->funcnames > size || p->cutab > size || p->filetab > size || p->pctab > size ||
	    p->functab > size || p->nfunc >= (size - p->functab) / 8)
		return -ENOTSUP;
	return 0;
}

/* The size of a _func before its pcdata. */
static uint64_t func_header(const struct gopcln *p)
{
	return p->go120 ? 44 : 40;
}

bool gopcln__find(const struct gopcln *p, uint64_t pc, struct gofunc *f)
{
	const uint8_t *ft = p->tab + p->functab;
	uint64_t lo = 0, hi = p->nfunc, rel, off, h;
	uint32_t end;

	if (!p->tab || !p->nfunc || pc < p->text || pc - p->text > UINT32_MAX)
		return false;
	rel = pc - p->text;
	end = u32(ft + p->nfunc * 8);
	if (rel >= end || rel < u32(ft))
		return false;
	/* the last entry at or below rel */
	while (hi - lo > 1) {
		uint64_t mid = lo + (hi - lo) / 2;

		if (u32(ft + mid * 8) <= rel)
			lo = mid;
		else
			hi = mid;
	}
	off = u32(ft + lo * 8 + 4);
	h = func_header(p);
	if (off > p->size - p->functab || p->size - p->functab - off < h)
		return false;
	off += p->functab;
	*f = (struct gofunc){
		.entry = p->text + u32(ft + lo * 8),
		.end = p->text + u32(ft + lo * 8 + 8),
		.off = off,
		.name = (int32_t)u32(p->tab + off + 4),
		.pcsp = u32(p->tab + off + 16),
		.pcfile = u32(p->tab + off + 20),
		.pcln = u32(p->tab + off + 24),
		.npcdata = u32(p->tab + off + 28),
		.cu = u32(p->tab + off + 32),
		.nfuncdata = p->tab[off + h - 1],
	};
	return f->end > f->entry && pc < f->end;
}

/* A varint at *at in tab (not past end); false past it, or longer than 5 bytes. */
static bool uvarint(const struct gopcln *p, uint64_t *at, uint64_t end, uint32_t *v)
{
	uint32_t x = 0;

	for (int shift = 0; shift < 35; shift += 7) {
		uint8_t b;

		if (*at >= end)
			return false;
		b = p->tab[(*at)++];
		x |= (uint32_t)(b & 0x7f) << shift;
		if (!(b & 0x80)) {
			*v = x;
			return true;
		}
	}
	return false;
}

int32_t gopcln__value(const struct gopcln *p, const struct gofunc *f, uint32_t off, uint64_t pc)
{
	uint64_t at, cur = f->entry;
	uint32_t val = (uint32_t)-1; /* wraps as the runtime's int32 does, without UB */
	bool first = true;

	if (!off || off >= p->size - p->pctab)
		return -1;
	at = p->pctab + off;
	/* each step takes two bytes at least: the table's end bounds the walk */
	while (cur < f->end) {
		uint32_t uv, dpc;

		if (!uvarint(p, &at, p->size, &uv) || (!uv && !first))
			return -1;
		/* zig-zag: the low bit the sign */
		val += uv & 1 ? ~(uv >> 1) : uv >> 1;
		if (!uvarint(p, &at, p->size, &dpc))
			return -1;
		cur += dpc;
		first = false;
		if (pc < cur)
			return (int32_t)val;
	}
	return -1;
}

const char *gopcln__name(const struct gopcln *p, int64_t off)
{
	const char *s;

	if (off < 0 || (uint64_t)off >= p->size - p->funcnames)
		return NULL;
	s = (const char *)p->tab + p->funcnames + off;
	return memchr(s, 0, p->size - p->funcnames - (uint64_t)off) ? s : NULL;
}

const char *gopcln__file(const struct gopcln *p, const struct gofunc *f, uint64_t pc)
{
	int32_t fileno = gopcln__value(p, f, f->pcfile, pc);
	uint64_t cu, fo;
	const char *s;

	if (fileno < 0)
		return NULL;
	cu = ((uint64_t)f->cu + (uint64_t)fileno) * 4;
	if (cu >= p->size - p->cutab || p->size - p->cutab - cu < 4)
		return NULL;
	fo = u32(p->tab + p->cutab + cu);
	if (fo == UINT32_MAX || fo >= p->size - p->filetab)
		return NULL;
	s = (const char *)p->tab + p->filetab + fo;
	return memchr(s, 0, p->size - p->filetab - fo) ? s : NULL;
}

/* Where word i after f's header is, within the table; 0 if it is not. */
static uint64_t after_header(const struct gopcln *p, const struct gofunc *f, uint64_t i)
{
	uint64_t at = f->off + func_header(p) + i * 4;

	return i < (uint64_t)f->npcdata + f->nfuncdata && at < p->size && p->size - at >= 4
		       ? at
		       : 0;
}

uint32_t gopcln__pcdata(const struct gopcln *p, const struct gofunc *f, uint32_t i)
{
	uint64_t at = i < f->npcdata ? after_header(p, f, i) : 0;

	return at ? u32(p->tab + at) : 0;
}

uint32_t gopcln__funcdata(const struct gopcln *p, const struct gofunc *f, uint32_t i)
{
	uint64_t at = i < f->nfuncdata ? after_header(p, f, (uint64_t)f->npcdata + i) : 0;

	return at ? u32(p->tab + at) : UINT32_MAX;
}

size_t gopcln__inline_size(const struct gopcln *p)
{
	return p->go120 ? 16 : 20;
}

void gopcln__inline(const struct gopcln *p, const uint8_t *e, struct goinline *out)
{
	/* 1.20: funcID, pad, nameOff, parentPc, startLine; 1.18: parent, funcID, pad, file, line, nameOff, parentPc */
	if (p->go120)
		*out = (struct goinline){ .name = (int32_t)u32(e + 4), .parent_pc = (int32_t)u32(e + 8) };
	else
		*out = (struct goinline){ .name = (int32_t)u32(e + 12),
					  .parent_pc = (int32_t)u32(e + 16) };
}
