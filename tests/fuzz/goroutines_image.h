/* SPDX-License-Identifier: MIT */
/*
 * A Go process in a few KB, for tasks/goroutines.c: its memory as one image
 * holding a .gopclntab (Go 1.20's layout: four functions, their frame
 * sizes, files and lines, an inlined call), runtime.allglen and allgptr,
 * the array of g pointers and the g's themselves (Go 1.27's layout), and
 * their stacks. Parked goroutine 7 waits (chan receive) in main.waiter
 * (main.go:42, inside an inlined main.helper at helper.go:9), called from
 * main.outer (main.go:30); goroutine 8 is dead; goroutine 9 runs.
 *
 * The fuzz input (fuzz_goroutines.c) is a struct goroutines_hdr and the
 * image; tests/unit/test_tasks.c checks what is read of it, and writes it
 * as the fuzzer's seed.
 */
#ifndef GOROUTINES_IMAGE_H
#define GOROUTINES_IMAGE_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "targets/go/golang.h"
#include "tasks/goroutines.h"

struct goroutines_hdr {
	uint64_t base;		/* where the image is in the process */
	uint64_t allglen, allgptr, gofunc, text;
	uint32_t pcl_off, pcl_len; /* .gopclntab in the image */
	uint8_t minor;		/* the layout's Go version */
	uint8_t system;
	uint8_t pad[6];
};

#define GI_BASE 0x100000u
#define GI_TEXT 0x401000u
#define GI_SIZE 0x6000u
/* where things are in the image */
#define GI_PCLN 0x0000u
#define GI_VARS 0x1800u		/* allglen, allgptr */
#define GI_INLTREE 0x1900u	/* gofunc: the image's address of this */
#define GI_ALLGS 0x2000u
#define GI_G 0x3000u		/* g's, 0x200 bytes apart */
#define GI_STACK 0x4000u	/* goroutine 7's stack */

static inline void gi_u32(uint8_t *p, uint32_t v)
{
	memcpy(p, &v, 4);
}

static inline void gi_u64(uint8_t *p, uint64_t v)
{
	memcpy(p, &v, 8);
}

/* A pc-value table of (value, until pc) steps, as the runtime encodes them (PCQuantum 1). */
static inline uint32_t gi_pcvalue(uint8_t *p, const int32_t *vals, const uint32_t *until, int n)
{
	int32_t prev = -1;
	uint32_t pc = 0, len = 0;

	for (int i = 0; i < n; i++) {
		int32_t d = vals[i] - prev;
		uint32_t uv = d < 0 ? ((uint32_t)(-d - 1) << 1) | 1 : (uint32_t)d << 1;
		uint32_t dpc = until[i] - pc;

		do {
			p[len++] = (uint8_t)((uv & 0x7f) | (uv > 0x7f ? 0x80 : 0));
			uv >>= 7;
		} while (uv);
		do {
			p[len++] = (uint8_t)((dpc & 0x7f) | (dpc > 0x7f ? 0x80 : 0));
			dpc >>= 7;
		} while (dpc);
		prev = vals[i];
		pc = until[i];
	}
	p[len++] = 0;
	return len;
}

/* The image into img (GI_SIZE bytes) and its header into h. */
static inline void goroutines_image(uint8_t *img, struct goroutines_hdr *h)
{
	/* functions: entry offsets, sizes, names; frame size; file; line */
	static const char *const names[] = { "runtime.gopark", "main.waiter", "main.outer",
					     "runtime.goexit", "main.helper" };
	static const uint32_t entry[] = { 0x00, 0x40, 0x80, 0xc0 }, end_text = 0xd0;
	static const int32_t frame[] = { 0x18, 0x28, 0x10, 0 };
	static const char *const files[] = { "proc.go", "main.go", "helper.go" };
	uint8_t *t = img + GI_PCLN;
	uint32_t at, funcnames, cutab, filetab, pctab, functab, name_off[5], file_off[3];

	memset(img, 0, GI_SIZE);
	memset(h, 0, sizeof(*h));
	/* pcHeader: magic 1.20, pads, quantum 1, pointers 8; nfunc 4, nfiles 3, textStart */
	gi_u32(t, 0xfffffff1);
	t[6] = 1;
	t[7] = 8;
	gi_u64(t + 8, 4);
	gi_u64(t + 16, 3);
	gi_u64(t + 24, GI_TEXT);
	at = 72;
	funcnames = at;
	for (int i = 0; i < 5; i++) {
		name_off[i] = at - funcnames;
		strcpy((char *)t + at, names[i]);
		at += (uint32_t)strlen(names[i]) + 1;
	}
	filetab = at;
	for (int i = 0; i < 3; i++) {
		file_off[i] = at - filetab;
		strcpy((char *)t + at, files[i]);
		at += (uint32_t)strlen(files[i]) + 1;
	}
	at = (at + 3) & ~3u;
	cutab = at;	/* one cu of three files: 0 proc.go, 1 main.go, 2 helper.go */
	for (int i = 0; i < 3; i++, at += 4)
		gi_u32(t + at, file_off[i]);
	pctab = at;
	t[at++] = 0;	/* offset 0: no table */
	functab = (at + 7) & ~7u;
	/* the table (nfunc + 1 pairs), then the _funcs, FUNC_SIZE apart, then their pc-value tables */
#define GI_FUNC(i) (functab + 5 * 8 + (uint32_t)(i) * (44 + 7 * 4))
	at = GI_FUNC(4);
	for (int i = 0; i < 4; i++) {
		uint32_t size = (i < 3 ? entry[i + 1] : end_text) - entry[i], f = GI_FUNC(i);
		int32_t sp[2] = { 0, frame[i] }, file[1] = { i == 0 ? 0 : 1 };
		int32_t line[1] = { i == 0 ? 474 : i == 2 ? 30 : 1 };
		uint32_t sp_until[2] = { 4, size }, all[1] = { size };

		gi_u32(t + functab + i * 8, entry[i]);
		gi_u32(t + functab + i * 8 + 4, f - functab);
		gi_u32(t + f, entry[i]);
		gi_u32(t + f + 4, name_off[i]);
		gi_u32(t + f + 32, 0); /* cu 0 */
		/* pcsp: 0 at the entry, the frame's size past its first 4 bytes */
		gi_u32(t + f + 16, at - pctab);
		at += gi_pcvalue(t + at, sp, sp_until, 2);
		if (i != 1) {
			gi_u32(t + f + 20, at - pctab);
			at += gi_pcvalue(t + at, file, all, 1);
			gi_u32(t + f + 24, at - pctab);
			at += gi_pcvalue(t + at, line, all, 1);
			continue;
		}
		/*
		 * main.waiter: helper.go:9 in the inlined main.helper up to
		 * 0x20 (inline tree entry 0), then main.go:42; 3 pcdata (the
		 * inline tree's is 2), 4 funcdata (its is 3, at gofunc + 0)
		 */
		int32_t f2[2] = { 2, 1 }, l2[2] = { 9, 42 }, ix[2] = { 0, -1 };
		uint32_t u2[2] = { 0x20, size };

		gi_u32(t + f + 28, 3);
		t[f + 43] = 4;
		gi_u32(t + f + 20, at - pctab);
		at += gi_pcvalue(t + at, f2, u2, 2);
		gi_u32(t + f + 24, at - pctab);
		at += gi_pcvalue(t + at, l2, u2, 2);
		gi_u32(t + f + 44 + 8, at - pctab);
		at += gi_pcvalue(t + at, ix, u2, 2);
		for (int k = 0; k < 3; k++)
			gi_u32(t + f + 44 + 12 + 4 * k, 0xffffffff);
		gi_u32(t + f + 44 + 24, 0);
	}
#undef GI_FUNC
	gi_u32(t + functab + 4 * 8, end_text);
	gi_u64(t + 32, funcnames);
	gi_u64(t + 40, cutab);
	gi_u64(t + 48, filetab);
	gi_u64(t + 56, pctab);
	gi_u64(t + 64, functab);
	/* the inline tree: main.helper inlined at main.waiter+0x30 (main.go:42) */
	img[GI_INLTREE] = 0;
	gi_u32(img + GI_INLTREE + 4, name_off[4]);
	gi_u32(img + GI_INLTREE + 8, 0x30);
	/* allglen 3, allgptr */
	gi_u64(img + GI_VARS, 3);
	gi_u64(img + GI_VARS + 8, GI_BASE + GI_ALLGS);
	for (int i = 0; i < 3; i++) {
		uint8_t *g = img + GI_G + 0x200 * i;

		gi_u64(img + GI_ALLGS + 8 * i, GI_BASE + GI_G + 0x200 * i);
		gi_u64(g + 152, 7 + (uint64_t)i);			/* goid */
		gi_u32(g + 144, i == 0 ? 4 : i == 1 ? 6 : 2);		/* waiting, dead, running */
		g[176] = 19;						/* waitreason */
		gi_u64(g + 304, GI_TEXT + entry[2]);			/* startpc: main.outer */
		gi_u64(g + 288, GI_TEXT + entry[2] + 8);		/* gopc */
		gi_u64(g + 0, GI_BASE + GI_STACK);			/* stack.lo */
		gi_u64(g + 8, GI_BASE + GI_STACK + 0x1000);		/* stack.hi */
	}
	/*
	 * goroutine 7, parked: gopark's frame (0x18) at sp, its caller
	 * main.waiter at +0x10 in its inlined helper, then main.outer, then
	 * goexit
	 */
	{
		uint8_t *g = img + GI_G;
		uint64_t sp = GI_BASE + GI_STACK + 0x100;

		gi_u64(g + 56, sp);					/* sched.sp */
		gi_u64(g + 64, GI_TEXT + entry[0] + 0x20);		/* sched.pc, in gopark */
		gi_u64(img + GI_STACK + 0x100 + 0x18, GI_TEXT + entry[1] + 0x11);
		sp += 0x20;						/* main.waiter's */
		gi_u64(img + GI_STACK + 0x120 + 0x28, GI_TEXT + entry[2] + 0x9);
		sp += 0x30;						/* main.outer's */
		gi_u64(img + GI_STACK + 0x150 + 0x10, GI_TEXT + entry[3] + 1);
	}
	h->base = GI_BASE;
	h->allglen = GI_BASE + GI_VARS;
	h->allgptr = GI_BASE + GI_VARS + 8;
	h->gofunc = GI_BASE + GI_INLTREE;
	h->text = GI_TEXT;
	h->pcl_off = GI_PCLN;
	h->pcl_len = 0x1800;
	h->minor = 27;
}

/* The image as a process's memory: at h.base, nothing else mapped. */
struct gi_mem {
	const uint8_t *img;
	size_t size;
	uint64_t base;
};

static inline int gi_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
	const struct gi_mem *m = ctx;

	if (addr < m->base || addr - m->base > m->size || len > m->size - (addr - m->base))
		return -5; /* -EIO */
	memcpy(buf, m->img + (addr - m->base), len);
	return 0;
}

/*
 * What golang.c would have read of the binary: the version's layout, the
 * lists' addresses, .gopclntab inside the image (its "file"), the wait
 * reason a parked goroutine shows. 0, or -1 for a version with no layout.
 */
static inline int goroutines_binary(const struct goroutines_hdr *h, size_t img_size,
				    struct go_binary *gb)
{
	memset(gb, 0, sizeof(*gb));
	if (golang__layout(1, h->minor, &gb->off, &gb->walk.off))
		return -1;
	gb->major = 1;
	gb->minor = h->minor;
	snprintf(gb->version, sizeof(gb->version), "go1.%u", h->minor);
	gb->walk.allglen = h->allglen;
	gb->walk.allgptr = h->allgptr;
	gb->walk.gofunc = h->gofunc;
	gb->walk.text = h->text;
	gb->walk.pclntab_off = h->pcl_off;
	gb->walk.pclntab_size = h->pcl_len;
	(void)img_size;
	strcpy(gb->walk.wait_names[19], "chan receive");
	return 0;
}

#endif
