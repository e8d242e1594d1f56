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
 * multi-thread scheduler's wake_deferred_tasks when they exist; in any
 * function that calls the drop of a Drain<Waker> (the loop's own cleanup:
 * only a loop draining a Vec of wakers has it), which legacy mangling names
 * only as `<Drain<T,A> as Drop>::drop`: the instance for wakers is the one
 * that drops what is left through RawWakerVTable's drop (`call *0x18(%reg)`)
 * or calls its DropGuard<Waker>'s glue; and where panic=abort and fat LTO
 * inline even that, in the scheduler functions that wake the deferred
 * tasks (the multi-thread worker's park_timeout and run, current_thread's
 * park and park_yield). Its return addresses, as file offsets, go to the
 * wake probe (at_tokio_process).
 */
#include <string.h>

#include <capstone/capstone.h>

#include "targets/tokio/tokio.h"

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

/* The functions that hold the loop, or inline it (wake_deferred_tasks, in the schedulers' parks) */
static const char *const loop_names[] = {
	"::Defer::wake",
	"::wake_deferred_tasks",
	"::multi_thread::worker::Context::park_timeout",
	"::multi_thread::worker::run",
	"::current_thread::Context::park",	/* and park_yield */
};

static int named_loop(void *ctx, const struct elf_func *f)
{
	struct scan *s = ctx;
	const char *name = elf_image__name(s->im, f);

	for (size_t i = 0; i < sizeof(loop_names) / sizeof(loop_names[0]); i++)
		if (strstr(name, loop_names[i]))
			ADD(s, loops, f->addr);
	return 0;
}

/* Does f drop wakers: RawWakerVTable's drop (`call *0x18(%reg)`), or a DropGuard<Waker>? */
static bool drops_wakers(const struct scan *s, csh cs, cs_insn *in, const struct elf_func *f)
{
	const uint8_t *code = elf_image__bytes(s->im, f->addr, f->size);
	size_t left = code ? f->size : 0;
	uint64_t pc = f->addr;

	while (left) {
		const cs_x86_op *op = &in->detail->x86.operands[0];
		const struct elf_func *callee;

		if (!cs_disasm_iter(cs, &code, &left, &pc, in)) {
			code++, left--, pc++;
			continue;
		}
		if (in->id != X86_INS_CALL || in->detail->x86.op_count != 1)
			continue;
		if (op->type == X86_OP_MEM && op->mem.disp == 0x18 && op->mem.index == X86_REG_INVALID &&
		    op->mem.base != X86_REG_INVALID && op->mem.base != X86_REG_RIP)
			return true;
		callee = op->type == X86_OP_IMM ? elf_image__func_at(s->im, (uint64_t)op->imm, false)
						: NULL;
		if (callee && strstr(elf_image__name(s->im, callee), "DropGuard<core::task::wake::Waker"))
			return true;
	}
	return false;
}

struct drains {
	struct scan *s;
	csh cs;
	cs_insn *in;
};

/* A Drain of wakers' drop: by its name (v0, or older rustc's glue), or by what it drops. */
static int drain_glue(void *ctx, const struct elf_func *f)
{
	struct drains *d = ctx;
	const char *name = elf_image__name(d->s->im, f);

	if (strstr(name, "vec::drain::Drain<core::task::wake::Waker") ||
	    (strstr(name, "vec::drain::Drain<T,A> as core::ops::drop::Drop>::drop") &&
	     !strstr(name, "drop_in_place") && drops_wakers(d->s, d->cs, d->in, f)))
		ADD(d->s, drains, f->addr);
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
	struct drains d = { .s = &s };
	size_t nr = 0;

	if (!im->is_x86_64 || cs_open(CS_ARCH_X86, CS_MODE_64, &d.cs) != CS_ERR_OK)
		return 0;
	cs_option(d.cs, CS_OPT_DETAIL, CS_OPT_ON);
	d.in = cs_malloc(d.cs);
	if (!d.in) {
		cs_close(&d.cs);
		return 0;
	}
	/* Both manglings spell identifiers with their length. */
	elf_image__for_each(im, "5Defer4wake", named_loop, &s);
	elf_image__for_each(im, "19wake_deferred_tasks", named_loop, &s);
	elf_image__for_each(im, "12park_timeout", named_loop, &s);
	elf_image__for_each(im, "6worker3run", named_loop, &s);
	elf_image__for_each(im, "14current_thread7Context", named_loop, &s);
	elf_image__for_each(im, "Drain", drain_glue, &d);
	if (s.nr_drains)
		elf_image__for_each(im, NULL, calls_drain_glue, &s);
	for (size_t i = 0; i < s.nr_loops; i++)
		nr = vtable_wakes(im, d.cs, d.in, s.loops[i], rets, nr, max);
	cs_free(d.in, 1);
	cs_close(&d.cs);
	return nr;
}
