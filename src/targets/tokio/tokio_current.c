// SPDX-License-Identifier: MIT
/*
 * Which task a tokio thread polls, for sample mode, which reads it without a
 * probe: tokio's thread-local CONTEXT (runtime::context) holds
 *
 *   current_task_id: Cell<Option<task::Id>>   set around every poll of a task
 *                                             (TaskIdGuard), restored after;
 *   budget: Cell<coop::Budget>                Some(128) while a task runs under
 *                                             coop (a worker's run_task, a
 *                                             current_thread poll), None in the
 *                                             scheduler's loop and in blocking
 *                                             tasks.
 *
 * A multi-thread worker runs its whole loop as a blocking task, so between
 * polls its thread's current_task_id is that task's id, not None: a task's
 * poll is both set (the budget tells the loop from a task).
 *
 * CONTEXT is a symbol of the TLS image (legacy and v0 manglings, the two
 * thread_local! implementations of Debian's compilers name it differently);
 * where it lies from the thread pointer follows from the executable's
 * PT_TLS. Its layout is the compiler's, so the fields are found in the code
 * that writes them: every access to CONTEXT is followed (the thread pointer
 * loaded from %fs:0, or a constant added to it, or %fs: itself with a
 * constant base; std's lazy initialiser returns the same address; a forward
 * branch's target knows what both ways to it agree on), and
 *
 *   - current_task_id is where `Some(id)` is stored: the tag 1, then the id
 *     8 bytes on (TaskIdGuard::enter, wherever it was inlined), or, where
 *     set_current_task_id was kept whole, the pair of stores it makes;
 *   - the budget is the one field written 2 bytes at a time: Budget::initial()
 *     (`movw $0x8001`: Some, 128), or the pair of bytes, or a register.
 *
 * Each is the offset most such stores agree on; none, or two that agree
 * equally, and sample mode says it cannot read the process. Where
 * set_current_task_id or TaskIdGuard was kept a function, it must write the
 * id found (a Some(x) stored elsewhere is the runtime handle's).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <capstone/capstone.h>

#include "targets/tokio/tokio.h"

#define SAY(c, text) snprintf((c)->why, sizeof((c)->why), "%s", text)

/* No CONTEXT of more than this: a hostile symbol's size is not believed. */
#define CONTEXT_MAX 4096

enum reg_kind { R_NONE, R_TP, R_CONST };

struct reg_val {
	enum reg_kind kind;
	int64_t v;	/* R_TP: thread pointer + v; R_CONST: v */
};

struct store {
	int32_t off;	/* in CONTEXT */
	uint8_t width;
	bool imm;
	int64_t val;	/* imm */
};

/* The registers as followed where a forward branch lands. */
struct join {
	uint64_t at;
	struct reg_val regs[16];
};

#define JOINS_MAX 64
/* A call this many instructions after CONTEXT was addressed initialises it. */
#define TOUCH_NEAR 4

struct scan {
	const struct elf_image *im;
	csh cs;
	cs_insn *in;
	int64_t tpoff;
	uint32_t size;
	struct reg_val regs[16];
	struct join joins[JOINS_MAX];	/* the function's forward branches not reached yet */
	size_t nr_joins;
	struct store last[4];	/* the function's latest stores to CONTEXT */
	size_t nr_last;
	bool named;		/* the function is set_current_task_id or TaskIdGuard's */
	uint64_t count, touch;	/* instructions so far; the last one that addressed CONTEXT */
	/* votes by offset in CONTEXT; named_store: 8-byte stores of the named functions */
	uint32_t *id_imm, *id_named, *budget_imm, *budget_reg, *named_store;
	bool named_seen;	/* a named function was scanned (not all inlined) */
};

/* The general register a capstone register is part of (0-15), or -1. */
static int gpr(x86_reg r)
{
	static const x86_reg fam[16][5] = {
		{ X86_REG_RAX, X86_REG_EAX, X86_REG_AX, X86_REG_AL, X86_REG_AH },
		{ X86_REG_RCX, X86_REG_ECX, X86_REG_CX, X86_REG_CL, X86_REG_CH },
		{ X86_REG_RDX, X86_REG_EDX, X86_REG_DX, X86_REG_DL, X86_REG_DH },
		{ X86_REG_RBX, X86_REG_EBX, X86_REG_BX, X86_REG_BL, X86_REG_BH },
		{ X86_REG_RSP, X86_REG_ESP, X86_REG_SP, X86_REG_SPL, X86_REG_INVALID },
		{ X86_REG_RBP, X86_REG_EBP, X86_REG_BP, X86_REG_BPL, X86_REG_INVALID },
		{ X86_REG_RSI, X86_REG_ESI, X86_REG_SI, X86_REG_SIL, X86_REG_INVALID },
		{ X86_REG_RDI, X86_REG_EDI, X86_REG_DI, X86_REG_DIL, X86_REG_INVALID },
		{ X86_REG_R8, X86_REG_R8D, X86_REG_R8W, X86_REG_R8B, X86_REG_INVALID },
		{ X86_REG_R9, X86_REG_R9D, X86_REG_R9W, X86_REG_R9B, X86_REG_INVALID },
		{ X86_REG_R10, X86_REG_R10D, X86_REG_R10W, X86_REG_R10B, X86_REG_INVALID },
		{ X86_REG_R11, X86_REG_R11D, X86_REG_R11W, X86_REG_R11B, X86_REG_INVALID },
		{ X86_REG_R12, X86_REG_R12D, X86_REG_R12W, X86_REG_R12B, X86_REG_INVALID },
		{ X86_REG_R13, X86_REG_R13D, X86_REG_R13W, X86_REG_R13B, X86_REG_INVALID },
		{ X86_REG_R14, X86_REG_R14D, X86_REG_R14W, X86_REG_R14B, X86_REG_INVALID },
		{ X86_REG_R15, X86_REG_R15D, X86_REG_R15W, X86_REG_R15B, X86_REG_INVALID },
	};

	if (r == X86_REG_INVALID)
		return -1;
	for (int i = 0; i < 16; i++)
		for (int k = 0; k < 5; k++)
			if (fam[i][k] == r)
				return i;
	return -1;
}

/* A 64-bit register's value, as followed; R_NONE for anything else. */
static struct reg_val reg_of(const struct scan *s, x86_reg r)
{
	int i = gpr(r);
	struct reg_val none = { R_NONE, 0 };

	/* only a whole register carries an address */
	if (i < 0 || (r != X86_REG_RAX && r != X86_REG_RBX && r != X86_REG_RCX &&
		      r != X86_REG_RDX && r != X86_REG_RSI && r != X86_REG_RDI &&
		      r != X86_REG_RBP && r != X86_REG_RSP && (r < X86_REG_R8 || r > X86_REG_R15)))
		return none;
	return s->regs[i];
}

static void set_reg(struct scan *s, x86_reg r, enum reg_kind kind, int64_t v)
{
	int i = gpr(r);

	if (i >= 0)
		s->regs[i] = (struct reg_val){ kind, v };
}

/* The offset in CONTEXT a memory operand addresses; -1 if not in it, or unknown. */
static int64_t context_off(const struct scan *s, const cs_x86_op *op)
{
	struct reg_val b = { R_NONE, 0 };
	int64_t a;

	if (op->type != X86_OP_MEM || op->mem.index != X86_REG_INVALID)
		return -1;
	if (op->mem.segment == X86_REG_FS) {
		/* %fs:disp, or %fs:disp(base) with a constant base */
		if (op->mem.base != X86_REG_INVALID) {
			b = reg_of(s, op->mem.base);
			if (b.kind != R_CONST)
				return -1;
		}
		a = b.v + op->mem.disp;
	} else if (op->mem.segment == X86_REG_INVALID && op->mem.base != X86_REG_INVALID) {
		b = reg_of(s, op->mem.base);
		if (b.kind != R_TP)
			return -1;
		a = b.v + op->mem.disp;
	} else {
		return -1;
	}
	a -= s->tpoff;
	return a >= 0 && a < (int64_t)s->size ? a : -1;
}

/* What a store to CONTEXT says of where its fields are. */
static void on_store(struct scan *s, const struct store *st)
{
	if (s->named && st->width == 8)
		s->named_store[st->off]++;
	/* a pair: this 8-byte store 8 bytes past an earlier one of the function's last few */
	if (st->width == 8 && !st->imm && st->off >= 8 && st->off + 8 <= (int32_t)s->size)
		for (size_t i = 0; i < s->nr_last; i++) {
			const struct store *p = &s->last[i];

			if (p->width != 8 || p->off != st->off - 8)
				continue;
			if (p->imm && p->val == 1)
				s->id_imm[p->off]++;
			else if (!p->imm && s->named)
				s->id_named[p->off]++;
		}
	if (st->off + 2 <= (int32_t)s->size) {
		if (st->width == 2 && st->imm && st->val == 0x8001)
			s->budget_imm[st->off]++;
		else if (st->width == 2 && !st->imm)
			s->budget_reg[st->off]++;
		else if (st->width == 1 && st->imm && st->val == 0x80 && st->off >= 1)
			for (size_t i = 0; i < s->nr_last; i++)
				if (s->last[i].width == 1 && s->last[i].imm && s->last[i].val == 1 &&
				    s->last[i].off == st->off - 1)
					s->budget_imm[st->off - 1]++;
	}
	if (s->nr_last == sizeof(s->last) / sizeof(s->last[0])) {
		memmove(s->last, s->last + 1, sizeof(s->last) - sizeof(s->last[0]));
		s->nr_last--;
	}
	s->last[s->nr_last++] = *st;
}

/* A call to std's lazy initialiser of a thread-local, by its name. */
static bool calls_tls_init(const struct scan *s, const cs_x86_op *op)
{
	const struct elf_func *f;
	const char *name;

	if (op->type != X86_OP_IMM)
		return false;
	f = elf_image__func_at(s->im, (uint64_t)op->imm, false);
	name = f ? elf_image__name(s->im, f) : "";
	return !strncmp(name, "std::", 5) &&
	       (strstr(name, "thread::local") || strstr(name, "thread_local"));
}

/* Two ways to reach one place: a register is known there if both say the same. */
static void merge(struct reg_val *into, const struct reg_val *other)
{
	for (int i = 0; i < 16; i++)
		if (into[i].kind != other[i].kind || into[i].v != other[i].v)
			into[i] = (struct reg_val){ R_NONE, 0 };
}

/* A forward branch to target: the registers there are (also) these. */
static void branch_to(struct scan *s, uint64_t target)
{
	if (target <= s->in->address)
		return;
	for (size_t i = 0; i < s->nr_joins; i++)
		if (s->joins[i].at == target) {
			merge(s->joins[i].regs, s->regs);
			return;
		}
	if (s->nr_joins < JOINS_MAX) {
		s->joins[s->nr_joins].at = target;
		memcpy(s->joins[s->nr_joins++].regs, s->regs, sizeof(s->regs));
	}
}

/*
 * Arriving at address at: from the instruction before (fell, unless that
 * was a jump or a return), and from the branches to it seen so far.
 */
static void arrive(struct scan *s, uint64_t at, bool fell)
{
	bool joined = false;

	for (size_t i = 0; i < s->nr_joins;) {
		if (s->joins[i].at != at) {
			i++;
			continue;
		}
		if (fell || joined)
			merge(s->regs, s->joins[i].regs);
		else
			memcpy(s->regs, s->joins[i].regs, sizeof(s->regs));
		joined = true;
		s->joins[i] = s->joins[--s->nr_joins];
	}
	if (!fell && !joined) /* reached from elsewhere: nothing known */
		memset(s->regs, 0, sizeof(s->regs));
}

static bool is_caller_saved(int i)
{
	/* rax, rcx, rdx, rsi, rdi, r8-r11 (gpr()'s numbering) */
	return i <= 2 || i == 6 || i == 7 || (i >= 8 && i <= 11);
}

/* One instruction: the registers it sets, the stores it makes to CONTEXT. */
static void step(struct scan *s)
{
	const cs_insn *in = s->in;
	const cs_x86 *x = &in->detail->x86;
	const cs_x86_op *d = &x->operands[0], *src = &x->operands[1];
	cs_regs rd, wr;
	uint8_t nr_rd = 0, nr_wr = 0;

	s->count++;
	for (uint8_t i = 0; i < x->op_count; i++)
		if (context_off(s, &x->operands[i]) >= 0)
			s->touch = s->count;
	if (in->id == X86_INS_CALL) {
		struct reg_val arg = s->regs[7];

		for (int i = 0; i < 16; i++) {
			if (s->regs[i].kind == R_TP && s->regs[i].v == s->tpoff)
				s->touch = s->count;
			if (is_caller_saved(i))
				s->regs[i] = (struct reg_val){ R_NONE, 0 };
		}
		/*
		 * A thread-local's lazy initialiser returns the address it was
		 * given, or (std's own, called without it) the address of the
		 * thread-local just addressed.
		 */
		if (arg.kind != R_TP && calls_tls_init(s, d) && s->count - s->touch <= TOUCH_NEAR)
			arg = (struct reg_val){ R_TP, s->tpoff };
		if (arg.kind == R_TP)
			s->regs[0] = arg;
		return;
	}
	if ((in->id == X86_INS_MOV || in->id == X86_INS_MOVABS) && x->op_count == 2 &&
	    d->type == X86_OP_MEM) {
		int64_t off = context_off(s, d);

		if (off >= 0 && (d->size == 1 || d->size == 2 || d->size == 4 || d->size == 8)) {
			struct store st = { (int32_t)off, d->size, src->type == X86_OP_IMM,
					    src->type == X86_OP_IMM ? src->imm : 0 };

			/* an immediate is the operand's width: 0x8001 as a word, 1 as a qword */
			if (st.imm && d->size < 8)
				st.val &= (1ll << (8 * d->size)) - 1;
			on_store(s, &st);
		}
		return;
	}
	if (x->op_count == 2 && d->type == X86_OP_REG && d->size == 8) {
		struct reg_val v = reg_of(s, d->reg);

		switch (in->id) {
		case X86_INS_MOV:
		case X86_INS_MOVABS:
			if (src->type == X86_OP_IMM) {
				set_reg(s, d->reg, R_CONST, src->imm);
				return;
			}
			if (src->type == X86_OP_REG) {
				v = reg_of(s, src->reg);
				set_reg(s, d->reg, v.kind, v.v);
				return;
			}
			/* %fs:0: the thread pointer itself */
			if (src->type == X86_OP_MEM && src->mem.segment == X86_REG_FS &&
			    src->mem.base == X86_REG_INVALID && src->mem.index == X86_REG_INVALID &&
			    src->mem.disp == 0) {
				set_reg(s, d->reg, R_TP, 0);
				return;
			}
			break;
		case X86_INS_LEA:
			v = src->type == X86_OP_MEM && src->mem.index == X86_REG_INVALID &&
					    src->mem.segment == X86_REG_INVALID
				    ? reg_of(s, src->mem.base)
				    : (struct reg_val){ R_NONE, 0 };
			if (v.kind == R_TP) {
				set_reg(s, d->reg, R_TP, v.v + src->mem.disp);
				return;
			}
			break;
		case X86_INS_ADD:
			if (v.kind == R_TP && src->type == X86_OP_IMM) {
				set_reg(s, d->reg, R_TP, v.v + src->imm);
				return;
			}
			if (v.kind == R_CONST && src->type == X86_OP_MEM &&
			    src->mem.segment == X86_REG_FS && src->mem.base == X86_REG_INVALID &&
			    src->mem.index == X86_REG_INVALID && src->mem.disp == 0) {
				set_reg(s, d->reg, R_TP, v.v);
				return;
			}
			break;
		default:
			break;
		}
	}
	/* anything else a register is written by forgets it */
	if (!cs_regs_access(s->cs, in, rd, &nr_rd, wr, &nr_wr))
		for (uint8_t i = 0; i < nr_wr; i++)
			set_reg(s, wr[i], R_NONE, 0);
}

/* Reaches CONTEXT through the thread pointer: a %fs-prefixed instruction (0x64) at all? */
static bool uses_fs(const uint8_t *code, uint64_t size)
{
	return memchr(code, 0x64, size) != NULL;
}

static int scan_func(void *ctx, const struct elf_func *f)
{
	struct scan *s = ctx;
	const uint8_t *code = f->size ? elf_image__bytes(s->im, f->addr, f->size) : NULL;
	size_t left = code ? f->size : 0;
	uint64_t pc = f->addr;
	const char *name;
	bool fell = true;

	if (!code || !uses_fs(code, f->size))
		return 0;
	name = elf_image__name(s->im, f);
	s->named = strstr(name, "::set_current_task_id") || strstr(name, "TaskIdGuard");
	s->named_seen |= s->named;
	memset(s->regs, 0, sizeof(s->regs));
	s->nr_last = 0;
	s->nr_joins = 0;
	s->count = s->touch = 0;
	while (left) {
		const cs_x86_op *op;

		arrive(s, pc, fell);
		fell = true;
		if (!cs_disasm_iter(s->cs, &code, &left, &pc, s->in)) {
			code++, left--, pc++;
			memset(s->regs, 0, sizeof(s->regs));
			continue;
		}
		op = &s->in->detail->x86.operands[0];
		if (cs_insn_group(s->cs, s->in, CS_GRP_JUMP) && s->in->detail->x86.op_count == 1 &&
		    op->type == X86_OP_IMM)
			branch_to(s, (uint64_t)op->imm);
		step(s);
		fell = s->in->id != X86_INS_JMP && s->in->id != X86_INS_RET;
	}
	return 0;
}

/* The offset most votes agree on, -1 if none or a tie; *n its votes. */
static int32_t winner(const uint32_t *votes, uint32_t size, uint32_t *n)
{
	uint32_t best = 0, second = 0;
	int32_t at = -1;

	for (uint32_t i = 0; i < size; i++) {
		if (votes[i] > best) {
			second = best;
			best = votes[i];
			at = (int32_t)i;
		} else if (votes[i] > second) {
			second = votes[i];
		}
	}
	*n = best;
	return best && best > second ? at : -1;
}

/* Is this thread-local tokio's CONTEXT? Both manglings, both thread_local! forms. */
static bool is_context(const char *demangled)
{
	return !strncmp(demangled, "tokio", 5) &&
	       (demangled[5] == ':' || demangled[5] == '[') &&
	       strstr(demangled, "::runtime::context::CONTEXT::");
}

int tokio__context_tpoff(const struct elf_image *im, int64_t *tpoff)
{
	const struct elf_func *ctx = NULL;

	for (size_t i = 0; i < im->nr_tls; i++) {
		if (!is_context(elf_image__name(im, &im->tls[i])))
			continue;
		if (ctx)
			return -ENOENT; /* two versions of tokio */
		ctx = &im->tls[i];
	}
	if (!ctx || !ctx->size || ctx->size > CONTEXT_MAX || elf_image__tpoff(im, ctx->addr, tpoff) ||
	    *tpoff + (int64_t)ctx->size > 0)
		return -ENOENT;
	return 0;
}

int tokio__current(const struct elf_image *im, struct tokio_current *c)
{
	struct scan s = { .im = im };
	const struct elf_func *ctx = NULL;
	uint32_t n;
	int err;

	memset(c, 0, sizeof(*c));
	c->task_id = c->budget = -1;
	for (size_t i = 0; i < im->nr_tls; i++) {
		if (!is_context(elf_image__name(im, &im->tls[i])))
			continue;
		if (ctx) {
			SAY(c, "two tokio CONTEXT thread-locals (two versions of tokio)");
			return -ENOENT;
		}
		ctx = &im->tls[i];
	}
	if (!ctx) {
		SAY(c, im->has_symtab ? "no tokio CONTEXT thread-local in its symbols"
					: "it has no symbol table (stripped): tokio's CONTEXT is not named");
		return -ENOENT;
	}
	if (!ctx->size || ctx->size > CONTEXT_MAX ||
	    (err = elf_image__tpoff(im, ctx->addr, &s.tpoff)) || s.tpoff + (int64_t)ctx->size > 0) {
		SAY(c, "tokio's CONTEXT is not where a thread-local of the executable can be");
		return -ENOENT;
	}
	s.size = (uint32_t)ctx->size;
	if (!im->is_x86_64 || cs_open(CS_ARCH_X86, CS_MODE_64, &s.cs) != CS_ERR_OK) {
		SAY(c, "its code is not x86-64");
		return -ENOENT;
	}
	cs_option(s.cs, CS_OPT_DETAIL, CS_OPT_ON);
	s.in = cs_malloc(s.cs);
	s.id_imm = calloc(5 * (size_t)s.size, sizeof(uint32_t));
	err = s.in && s.id_imm ? 0 : -ENOMEM;
	if (!err) {
		s.id_named = s.id_imm + s.size;
		s.budget_imm = s.id_named + s.size;
		s.budget_reg = s.budget_imm + s.size;
		s.named_store = s.budget_reg + s.size;
		elf_image__for_each(im, NULL, scan_func, &s);
		c->task_id = winner(s.id_imm, s.size, &n);
		if (!n)
			c->task_id = winner(s.id_named, s.size, &n);
		c->budget = winner(s.budget_imm, s.size, &n);
		if (!n)
			c->budget = winner(s.budget_reg, s.size, &n);
		c->tpoff = s.tpoff;
		c->size = s.size;
		/* two fields in one place: one of them is wrong */
		if (c->task_id >= 0 && c->budget >= c->task_id && c->budget < c->task_id + 16)
			c->budget = -1;
		/*
		 * Where set_current_task_id or TaskIdGuard was kept whole, it must
		 * write the id found: a Some(x) stored elsewhere is another field
		 * (the runtime handle), and a newer tokio's ids (NonZeroU64, no
		 * tag: a single store) are not read yet.
		 */
		if (c->task_id >= 0 && s.named_seen && !s.named_store[c->task_id + 8]) {
			c->task_id = -1;
			SAY(c, "tokio's current task id takes no tag here (a newer tokio's NonZero ids), "
			       "which sample mode does not read yet");
		} else if (c->task_id < 0)
			SAY(c, "where tokio's CONTEXT keeps the current task's id was not found in "
			       "its code");
		else if (c->budget < 0)
			SAY(c, "where tokio's CONTEXT keeps the coop budget was not found in its code");
		err = c->why[0] ? -ENOENT : 0;
	}
	free(s.id_imm);
	if (s.in)
		cs_free(s.in, 1);
	cs_close(&s.cs);
	return err;
}
