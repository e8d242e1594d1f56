// SPDX-License-Identifier: MIT
#include "targets/placement.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <capstone/capstone.h>

/* Leading instructions looked past at most. */
#define MAX_SKIP_INSNS 12
/* Below the stack pointer, the bytes a leaf function may use without moving it (SysV ABI). */
#define RED_ZONE 128
/* The largest frame a probe moves past (its cookie says it in 8-byte words, one byte). */
#define MAX_FRAME (255 * 8)

/* The general registers, by every name (64, 32, 16, 8 bits, high 8), and where pt_regs keeps them. */
static const struct gpr {
	x86_reg names[5];
	int pt_regs;
} gprs[] = {
	{ { X86_REG_RAX, X86_REG_EAX, X86_REG_AX, X86_REG_AL, X86_REG_AH }, 80 },
	{ { X86_REG_RCX, X86_REG_ECX, X86_REG_CX, X86_REG_CL, X86_REG_CH }, 88 },
	{ { X86_REG_RDX, X86_REG_EDX, X86_REG_DX, X86_REG_DL, X86_REG_DH }, 96 },
	{ { X86_REG_RBX, X86_REG_EBX, X86_REG_BX, X86_REG_BL, X86_REG_BH }, 40 },
	{ { X86_REG_RSP, X86_REG_ESP, X86_REG_SP, X86_REG_SPL }, 152 },
	{ { X86_REG_RBP, X86_REG_EBP, X86_REG_BP, X86_REG_BPL }, 32 },
	{ { X86_REG_RSI, X86_REG_ESI, X86_REG_SI, X86_REG_SIL }, 104 },
	{ { X86_REG_RDI, X86_REG_EDI, X86_REG_DI, X86_REG_DIL }, 112 },
	{ { X86_REG_R8, X86_REG_R8D, X86_REG_R8W, X86_REG_R8B }, 72 },
	{ { X86_REG_R9, X86_REG_R9D, X86_REG_R9W, X86_REG_R9B }, 64 },
	{ { X86_REG_R10, X86_REG_R10D, X86_REG_R10W, X86_REG_R10B }, 56 },
	{ { X86_REG_R11, X86_REG_R11D, X86_REG_R11W, X86_REG_R11B }, 48 },
	{ { X86_REG_R12, X86_REG_R12D, X86_REG_R12W, X86_REG_R12B }, 24 },
	{ { X86_REG_R13, X86_REG_R13D, X86_REG_R13W, X86_REG_R13B }, 16 },
	{ { X86_REG_R14, X86_REG_R14D, X86_REG_R14W, X86_REG_R14B }, 8 },
	{ { X86_REG_R15, X86_REG_R15D, X86_REG_R15W, X86_REG_R15B }, 0 },
};
#define NR_GPRS ((int)(sizeof(gprs) / sizeof(gprs[0])))
#define GPR_RSP 4

/* The arguments' registers, in ABI order: rdi, rsi, rdx, rcx, r8, r9. */
static const int abi_args[] = { 7, 6, 2, 1, 8, 9 };
#define NR_ABI_ARGS ((int)(sizeof(abi_args) / sizeof(abi_args[0])))

/* Which general register r is part of (-1: none); *full: r is its 64-bit name. */
static int gpr_of(x86_reg r, bool *full)
{
	if (r == X86_REG_INVALID)
		return -1;
	for (int g = 0; g < NR_GPRS; g++)
		for (int w = 0; w < 5; w++)
			if (gprs[g].names[w] == r) {
				*full = w == 0;
				return g;
			}
	return -1;
}

/* What the instructions looked past have done, as far as a probe can tell. */
struct regs {
	int holds[NR_GPRS];	/* which register's value at the entry each now holds; -1: another */
	int64_t frame;		/* bytes the stack pointer moved down (a frame made) */
	int64_t deepest;	/* the lowest byte stored to, from the entry's stack pointer */
};

/* Register moves and arithmetic with a general register as destination. */
static bool alu(unsigned id)
{
	switch (id) {
	case X86_INS_MOV:
	case X86_INS_MOVZX:
	case X86_INS_MOVSX:
	case X86_INS_MOVSXD:
	case X86_INS_LEA:
	case X86_INS_ADD:
	case X86_INS_SUB:
	case X86_INS_AND:
	case X86_INS_OR:
	case X86_INS_XOR:
		return true;
	default:
		return false;
	}
}

/* Go's spill slots above the return address: 9 integer argument registers. */
#define SPILL_AREA (9 * 8)

/* Moves of a register to memory (the stores allowed into the frame), and of vectors. */
static bool vector_or_store(unsigned id)
{
	switch (id) {
	case X86_INS_MOV:
	case X86_INS_MOVQ:
	case X86_INS_MOVD:
	case X86_INS_MOVUPS:
	case X86_INS_MOVAPS:
	case X86_INS_MOVDQU:
	case X86_INS_MOVDQA:
		return true;
	default:
		return false;
	}
}

/* A vector register, which no probe reads. */
static bool vector(x86_reg r)
{
	return (r >= X86_REG_XMM0 && r <= X86_REG_XMM31) || (r >= X86_REG_YMM0 && r <= X86_REG_YMM31);
}

/*
 * May a probe move past this instruction? Only past those known to write
 * nothing but registers, the flags and the frame the function made: an
 * allowlist, not capstone's access flags (capstone 4 reports some stores,
 * movups or fstp, as reads, and enter as touching nothing). Follows the
 * registers in r; false with why said otherwise.
 */
static bool harmless(const cs_insn *in, const struct placement_need *need, struct regs *r,
		     char *why, size_t why_len)
{
	const cs_x86 *x = &in->detail->x86;
	const cs_x86_op *dst = &x->operands[0], *src = &x->operands[1];
	bool full, src_full;
	int g, s;

	if (in->id == X86_INS_ENDBR64)
		return true;
	if (x->prefix[0] == X86_PREFIX_LOCK || x->prefix[0] == X86_PREFIX_REP ||
	    x->prefix[0] == X86_PREFIX_REPNE)
		goto side_effect;
	if (in->id == X86_INS_NOP)
		return true; /* padding the kernel will not probe, or would single-step */
	if (in->id == X86_INS_CMP || in->id == X86_INS_TEST || in->id == X86_INS_BT)
		return true; /* flags only */
	if (x->op_count != 2)
		goto side_effect;
	if (dst->type == X86_OP_MEM) {
		/* a store into the frame made, or the red zone below it: no probe reads those */
		if (!vector_or_store(in->id) || dst->mem.base != X86_REG_RSP ||
		    dst->mem.index != X86_REG_INVALID || dst->mem.segment != X86_REG_INVALID ||
		    dst->mem.disp < -RED_ZONE ||
		    dst->mem.disp + dst->size > r->frame + (need->spills ? 8 + SPILL_AREA : 0))
			goto side_effect;
		if (dst->mem.disp - r->frame < r->deepest)
			r->deepest = dst->mem.disp - r->frame;
		return true;
	}
	if (dst->type != X86_OP_REG)
		goto side_effect;
	if (vector(dst->reg))
		return vector_or_store(in->id) || in->id == X86_INS_XORPS || in->id == X86_INS_PXOR;
	g = gpr_of(dst->reg, &full);
	if (g < 0 || !alu(in->id))
		goto side_effect;
	if (g == GPR_RSP) {
		/* sub $N,%rsp (or add $-N): a frame, unless a return probe reads the stack top */
		int64_t down = in->id == X86_INS_SUB ? src->imm : -src->imm;

		if (need->ret) {
			snprintf(why, why_len, "`%.16s %.40s` moves the stack pointer, which its return "
				 "probe reads", in->mnemonic, in->op_str);
			return false;
		}
		if (!full || src->type != X86_OP_IMM || (in->id != X86_INS_SUB && in->id != X86_INS_ADD) ||
		    down <= 0 || down % 8 || r->frame + down > MAX_FRAME)
			goto side_effect;
		r->frame += down;
		return true;
	}
	/* a 64-bit register copied whole keeps what it held; anything else, a new value */
	if (in->id == X86_INS_MOV && full && src->type == X86_OP_REG &&
	    (s = gpr_of(src->reg, &src_full)) >= 0 && src_full && s != GPR_RSP)
		r->holds[g] = r->holds[s];
	else
		r->holds[g] = -1;
	return true;
side_effect:
	snprintf(why, why_len, "`%.16s %.40s` may change what the probe reads", in->mnemonic, in->op_str);
	return false;
}

/* Where the argument the probe reads is now: a register's pt_regs offset, -1 if unmoved, -2 if lost. */
static int argument_at(const struct placement_need *need, const struct regs *r)
{
	int want;

	if (need->arg < 0 || need->arg >= NR_ABI_ARGS)
		return -1;
	want = abi_args[need->arg];
	if (r->holds[want] == want)
		return -1;
	for (int g = 0; g < NR_GPRS; g++)
		if (r->holds[g] == want)
			return gprs[g].pt_regs;
	return -2;
}

/*
 * Does any relative branch in the function land in (addr, addr + skip]? At
 * the probe's own place too: a loop back to it would hit the probe again.
 */
static bool branched_into(csh cs, cs_insn *in, const uint8_t *code, size_t len, uint64_t addr,
			  uint64_t skip)
{
	const uint8_t *p = code;
	size_t left = len;
	uint64_t pc = addr;

	while (left) {
		if (!cs_disasm_iter(cs, &p, &left, &pc, in)) {
			/* data or an unknown instruction: step a byte, keep looking */
			p++, left--, pc++;
			continue;
		}
		if ((cs_insn_group(cs, in, CS_GRP_JUMP) || cs_insn_group(cs, in, CS_GRP_CALL)) &&
		    in->detail->x86.op_count == 1 && in->detail->x86.operands[0].type == X86_OP_IMM) {
			/* as an offset into the function: addr + skip may wrap around */
			uint64_t into = (uint64_t)in->detail->x86.operands[0].imm - addr;

			if (into > 0 && into <= skip)
				return true;
		}
	}
	return false;
}

/*
 * Is the instruction a cheap place, by what the kernel was seen to do? One
 * the kernel optimizes into a trampoline call writes below the stack
 * pointer: only where nothing the function stored lives there.
 */
static enum probe_verdict cheap_at(const cs_insn *in, const struct probe_rules *rules,
				   const struct regs *r)
{
	unsigned int clobbers;
	enum probe_verdict v = probe_rules__lookup(rules, in->bytes, in->size, &clobbers);

	if (v == PROBE_OPTIMIZED && clobbers && r->deepest < -r->frame)
		return PROBE_UNKNOWN;
	return v == PROBE_EMULATED || v == PROBE_OPTIMIZED ? v : PROBE_UNKNOWN;
}

int placement__entry(const uint8_t *code, size_t len, uint64_t addr,
		     const struct placement_need *need, const struct probe_rules *rules,
		     struct placement *p)
{
	const uint8_t *c = code;
	size_t left = len;
	uint64_t pc = addr;
	struct regs r = { .frame = 0 };
	enum probe_verdict v;
	cs_insn *in;
	csh cs;
	int n = 0;

	memset(p, 0, sizeof(*p));
	p->arg_reg = -1;
	for (int g = 0; g < NR_GPRS; g++)
		r.holds[g] = g;
	if (cs_open(CS_ARCH_X86, CS_MODE_64, &cs) != CS_ERR_OK)
		return -ENOTSUP;
	cs_option(cs, CS_OPT_DETAIL, CS_OPT_ON);
	in = cs_malloc(cs);
	if (!in) {
		cs_close(&cs);
		return -ENOMEM;
	}
	if (!rules || !rules->learnt)
		snprintf(p->why, sizeof(p->why), "what this kernel emulates is not known");
	else
		snprintf(p->why, sizeof(p->why),
			 "no instruction the kernel emulates in its first %d", MAX_SKIP_INSNS);
	while (rules && rules->learnt && n++ < MAX_SKIP_INSNS) {
		if (!cs_disasm_iter(cs, &c, &left, &pc, in)) {
			snprintf(p->why, sizeof(p->why), "an instruction capstone cannot read at +%llu",
				 (unsigned long long)(pc - addr));
			break;
		}
		if (n == 1) {
			snprintf(p->entry, sizeof(p->entry), "%s", in->mnemonic);
			p->entry_verdict = probe_rules__lookup(rules, in->bytes, in->size, NULL);
		}
		v = cheap_at(in, rules, &r);
		if (v != PROBE_UNKNOWN) {
			p->skip = in->address - addr;
			p->cheap = 1;
			p->verdict = v;
			p->arg_reg = argument_at(need, &r);
			p->frame = (uint32_t)r.frame;
			snprintf(p->at, sizeof(p->at), "%s", in->mnemonic);
			break;
		}
		if (!harmless(in, need, &r, p->why, sizeof(p->why)))
			break;
		if (argument_at(need, &r) == -2) {
			snprintf(p->why, sizeof(p->why), "`%.16s %.40s` overwrites the argument it reads",
				 in->mnemonic, in->op_str);
			break;
		}
	}
	if (p->cheap && p->skip && branched_into(cs, in, code, len, addr, p->skip)) {
		p->cheap = 0;
		snprintf(p->why, sizeof(p->why),
			 "a branch lands between the entry and the first emulated instruction");
	}
	/* No cheap place before a side effect, or one a branch could skip: the entry. */
	if (!p->cheap) {
		p->skip = 0;
		p->arg_reg = -1;
		p->frame = 0;
		p->verdict = p->entry_verdict;
		snprintf(p->at, sizeof(p->at), "%s", p->entry);
	} else {
		p->why[0] = '\0';
	}
	cs_free(in, 1);
	cs_close(&cs);
	return 0;
}
