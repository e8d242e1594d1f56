// SPDX-License-Identifier: MIT
/*
 * Where tokio wakes the wakes it deferred. yield_now() (and, in later
 * versions, a task out of its coop budget) does not wake its task inside the
 * poll: it pushes a clone of the task's waker on its worker's defer list,
 * and the worker wakes it after the poll, outside any task (Defer::wake,
 * drained by the worker when it parks). Such a wake is the task's own, but
 * it looks like any wake a worker makes between polls (a timer firing, a
 * socket ready, both run by the driver on the worker thread). What tells
 * them apart is where waker::wake_by_val returns to: the indirect call
 * through the waker's vtable (`call *0x8(%reg)`: RawWakerVTable's wake) in
 * the loop that drains the defer list.
 *
 * That loop is found wherever it was inlined: in Defer::wake and the
 * multi-thread scheduler's wake_deferred_tasks when they exist, and in any
 * function that calls the drop glue of a Drain<Waker> (the loop's own
 * cleanup: only a loop draining a Vec of wakers has it). Its return
 * addresses, as file offsets, go to the wake probe (at_tokio_process).
 */
#include <string.h>

#include <capstone/capstone.h>

#include "tokio.h"

/* Functions holding the defer loop, found by name, and the Drain<Waker> drop glue's addresses. */
struct scan {
	const struct elf_image *im;
	uint64_t drains[8];
	size_t nr_drains;
	uint64_t loops[16];
	size_t nr_loops;
};

static void add(uint64_t *set, size_t *nr, size_t max, uint64_t v)
{
	for (size_t i = 0; i < *nr; i++)
		if (set[i] == v)
			return;
	if (*nr < max)
		set[(*nr)++] = v;
}

#define ADD(s, field, v) add((s)->field, &(s)->nr_##field, sizeof((s)->field) / sizeof((s)->field[0]), v)

static int named_loop(void *ctx, const struct elf_func *f)
{
	struct scan *s = ctx;
	const char *name = elf_image__name(s->im, f);

	if (strstr(name, "::Defer::wake") || strstr(name, "::wake_deferred_tasks"))
		ADD(s, loops, f->addr);
	return 0;
}

static int drain_glue(void *ctx, const struct elf_func *f)
{
	struct scan *s = ctx;
	const char *name = elf_image__name(s->im, f);

	if (strstr(name, "drop_in_place") && strstr(name, "vec::drain::Drain<core::task::wake::Waker"))
		ADD(s, drains, f->addr);
	return 0;
}

/* Calls (e8 rel32) to a Drain<Waker> glue: a byte scan first, no disassembly. */
static int calls_drain_glue(void *ctx, const struct elf_func *f)
{
	struct scan *s = ctx;
	const uint8_t *code = f->size >= 5 ? elf_image__bytes(s->im, f->addr, f->size) : NULL;

	for (uint64_t i = 0; code && i + 5 <= f->size; i++) {
		int32_t rel;

		if (code[i] != 0xe8)
			continue;
		memcpy(&rel, code + i + 1, sizeof(rel));
		for (size_t d = 0; d < s->nr_drains; d++)
			if (f->addr + i + 5 + (uint64_t)(int64_t)rel == s->drains[d]) {
				ADD(s, loops, f->addr);
				return 0;
			}
	}
	return 0;
}

/* The return addresses of `call qword ptr [reg + 8]` in the function at addr, as file offsets. */
static size_t vtable_wakes(const struct elf_image *im, csh cs, cs_insn *in, uint64_t addr,
			   uint64_t *rets, size_t nr, size_t max)
{
	const struct elf_func *f = elf_image__func_at(im, addr, false);
	const uint8_t *code = f ? elf_image__bytes(im, f->addr, f->size) : NULL;
	size_t left = f ? f->size : 0;
	uint64_t pc = addr;

	while (code && left) {
		const cs_x86_op *op = &in->detail->x86.operands[0];
		int64_t off;

		if (!cs_disasm_iter(cs, &code, &left, &pc, in)) {
			code++, left--, pc++;
			continue;
		}
		if (in->id != X86_INS_CALL || in->detail->x86.op_count != 1 ||
		    op->type != X86_OP_MEM || op->mem.disp != 8 || op->mem.index != X86_REG_INVALID ||
		    op->mem.base == X86_REG_INVALID || op->mem.base == X86_REG_RIP)
			continue;
		off = elf_image__offset(im, in->address + in->size);
		if (off > 0)
			add(rets, &nr, max, (uint64_t)off);
	}
	return nr;
}

size_t tokio__defer_sites(const struct elf_image *im, uint64_t *rets, size_t max)
{
	struct scan s = { .im = im };
	size_t nr = 0;
	cs_insn *in;
	csh cs;

	if (!im->is_x86_64)
		return 0;
	/* Both manglings spell identifiers with their length. */
	elf_image__for_each(im, "5Defer4wake", named_loop, &s);
	elf_image__for_each(im, "19wake_deferred_tasks", named_loop, &s);
	elf_image__for_each(im, "Drain", drain_glue, &s);
	if (s.nr_drains)
		elf_image__for_each(im, NULL, calls_drain_glue, &s);
	if (!s.nr_loops || cs_open(CS_ARCH_X86, CS_MODE_64, &cs) != CS_ERR_OK)
		return 0;
	cs_option(cs, CS_OPT_DETAIL, CS_OPT_ON);
	in = cs_malloc(cs);
	for (size_t i = 0; in && i < s.nr_loops; i++)
		nr = vtable_wakes(im, cs, in, s.loops[i], rets, nr, max);
	if (in)
		cs_free(in, 1);
	cs_close(&cs);
	return nr;
}
