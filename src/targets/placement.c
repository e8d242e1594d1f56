// SPDX-License-Identifier: MIT
#include "placement.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include <capstone/capstone.h>

/* Leading instructions looked past at most. */
#define MAX_SKIP_INSNS 8

/* The kernel emulates these at a probe: no single step. */
static bool emulated(csh cs, const cs_insn *in)
{
	const cs_x86 *x = &in->detail->x86;

	switch (in->id) {
	case X86_INS_NOP:
		return true;
	case X86_INS_PUSH:
		return x->op_count == 1 && x->operands[0].type == X86_OP_REG;
	case X86_INS_JMP:
	case X86_INS_CALL:
		return x->op_count == 1 && x->operands[0].type == X86_OP_IMM;
	default:
		/* conditional jumps: relative, one immediate operand */
		return cs_insn_group(cs, in, CS_GRP_JUMP) && x->op_count == 1 &&
		       x->operands[0].type == X86_OP_IMM;
	}
}

/* A register an entry probe may read, or the stack pointer, in any width. */
static bool guarded(x86_reg r)
{
	switch (r) {
	case X86_REG_RDI: case X86_REG_EDI: case X86_REG_DI: case X86_REG_DIL:
	case X86_REG_RSI: case X86_REG_ESI: case X86_REG_SI: case X86_REG_SIL:
	case X86_REG_RDX: case X86_REG_EDX: case X86_REG_DX: case X86_REG_DL: case X86_REG_DH:
	case X86_REG_RCX: case X86_REG_ECX: case X86_REG_CX: case X86_REG_CL: case X86_REG_CH:
	case X86_REG_R8: case X86_REG_R8D: case X86_REG_R8W: case X86_REG_R8B:
	case X86_REG_R9: case X86_REG_R9D: case X86_REG_R9W: case X86_REG_R9B:
	case X86_REG_RSP: case X86_REG_ESP: case X86_REG_SP: case X86_REG_SPL:
	case X86_REG_RIP:
		return true;
	default:
		return false;
	}
}

/* Segment registers: never a destination a probe moves past. */
static bool segment(x86_reg r)
{
	return r == X86_REG_CS || r == X86_REG_DS || r == X86_REG_ES || r == X86_REG_FS ||
	       r == X86_REG_GS || r == X86_REG_SS;
}

/*
 * May a probe move past this instruction? Only past instructions known to
 * write nothing but a general register and the flags: endbr64, and moves,
 * address arithmetic, compares and ALU operations whose destination is a
 * register (memory, if any, only read) that is neither an argument nor the
 * stack pointer. An allowlist, not capstone's access flags: capstone 4
 * reports some stores (movups, fstp, ...) as reads, and enter as touching
 * nothing.
 */
static bool harmless(csh cs, const cs_insn *in)
{
	const cs_x86 *x = &in->detail->x86;

	(void)cs;
	if (in->id == X86_INS_ENDBR64)
		return true;
	if (x->prefix[0] == X86_PREFIX_LOCK || x->prefix[0] == X86_PREFIX_REP ||
	    x->prefix[0] == X86_PREFIX_REPNE)
		return false;
	switch (in->id) {
	case X86_INS_CMP:
	case X86_INS_TEST:
		return true; /* flags only */
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
		return x->op_count == 2 && x->operands[0].type == X86_OP_REG &&
		       !guarded(x->operands[0].reg) &&
		       !segment(x->operands[0].reg);
	default:
		return false;
	}
}

/* Does any relative branch in the function land strictly inside (addr, addr + skip)? */
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

			if (into > 0 && into < skip)
				return true;
		}
	}
	return false;
}

int placement__entry(const uint8_t *code, size_t len, uint64_t addr, struct placement *p)
{
	const uint8_t *c = code;
	size_t left = len;
	uint64_t pc = addr;
	cs_insn *in;
	csh cs;
	int n = 0;

	memset(p, 0, sizeof(*p));
	if (cs_open(CS_ARCH_X86, CS_MODE_64, &cs) != CS_ERR_OK)
		return -ENOTSUP;
	cs_option(cs, CS_OPT_DETAIL, CS_OPT_ON);
	in = cs_malloc(cs);
	if (!in) {
		cs_close(&cs);
		return -ENOMEM;
	}
	while (n++ < MAX_SKIP_INSNS && cs_disasm_iter(cs, &c, &left, &pc, in)) {
		if (n == 1)
			snprintf(p->entry, sizeof(p->entry), "%s", in->mnemonic);
		if (emulated(cs, in)) {
			p->skip = in->address - addr;
			p->cheap = 1;
			snprintf(p->at, sizeof(p->at), "%s", in->mnemonic);
			break;
		}
		if (!harmless(cs, in))
			break;
	}
	/* No cheap place before a side effect, or one a branch could skip: the entry. */
	if (!p->cheap || (p->skip && branched_into(cs, in, code, len, addr, p->skip))) {
		p->skip = 0;
		p->cheap = 0;
		snprintf(p->at, sizeof(p->at), "%s", p->entry);
	}
	cs_free(in, 1);
	cs_close(&cs);
	return 0;
}
