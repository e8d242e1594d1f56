/* SPDX-License-Identifier: MIT */
/*
 * Where an entry uprobe costs least. The kernel emulates a few instructions
 * at a probe (some nops, push of a register, relative jumps and calls),
 * single-steps most others out of line, several times dearer, and refuses
 * some (probe_rules.h: which is which is learnt from the running kernel). A
 * function that starts with endbr64 (CET builds), a mov or a sub from the
 * stack pointer has its entry single-stepped; the first emulated
 * instruction after it gives the same probe at a fraction of the cost,
 * provided nothing before it changes what the probe reads.
 *
 * So an entry probe moves past leading instructions (read with capstone,
 * not matched as bytes) while each of them transfers no control and writes
 * only registers, flags, or the stack frame the function has just made
 * below its return address. Registers are followed: a probe that reads an
 * argument reads it where it is at the new place (a thunk's `mov %rdi,%rsi`
 * before its tail jump moves the argument, not the probe), and the probe
 * stays at the entry if the argument is overwritten everywhere. A return
 * probe finds the return address at the top of the stack: with one at the
 * same place the stack pointer must not move. No branch anywhere in the
 * function may land between the entry and the new place, nor on it. A
 * probe the kernel turns into a trampoline call (a 5-byte nop on 6.18)
 * writes below the stack pointer: it is placed only where the function
 * keeps nothing there. Only instructions the kernel was seen to emulate
 * are chosen; without its rules every probe stays at the entry. x86-64
 * only; other machines keep the entry.
 */
#ifndef PLACEMENT_H
#define PLACEMENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "targets/probe_rules.h"

/* What a probe at a function's entry needs kept. */
struct placement_need {
	int arg;	/* the argument it reads (0: the first, ABI order), -1 if none */
	bool ret;	/* a return probe goes at the same place */
	/*
	 * Go's register ABI: the function spills its register arguments into
	 * the slots its caller keeps above the return address, which the probe
	 * does not read (it reads registers): stores there are allowed too.
	 */
	bool spills;
};

struct placement {
	uint64_t skip;		/* bytes past the entry where the probe goes (0: the entry) */
	char entry[32];		/* the entry instruction's mnemonic */
	char at[32];		/* the instruction probed */
	int cheap;		/* that one is emulated (or optimized), not single-stepped */
	enum probe_verdict verdict;	  /* what the kernel does with a probe on it */
	enum probe_verdict entry_verdict; /* ... and on the entry's instruction */
	/*
	 * Where the argument the probe reads is there: its register's offset
	 * in struct pt_regs (x86-64), or -1 for where the ABI puts it.
	 */
	int arg_reg;
	/* how far the stack pointer moved down before it (the return address is that far up) */
	uint32_t frame;
	char why[128];		/* not cheap: why the probe stays on a single-stepped entry */
};

/*
 * code: the whole function (len bytes, at link-time address addr), so that
 * branches into its first instructions are seen; rules: the running
 * kernel's (NULL or not learnt: the entry). Fills p; 0, or -errno if the
 * disassembler cannot be used.
 */
int placement__entry(const uint8_t *code, size_t len, uint64_t addr,
		     const struct placement_need *need, const struct probe_rules *rules,
		     struct placement *p);

#endif
