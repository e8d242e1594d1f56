/* SPDX-License-Identifier: MIT */
/*
 * Where an entry uprobe costs least. The kernel emulates a few instructions
 * at a probe (nops, push of a register, relative jumps and calls) and
 * single-steps all others out of line, about ten times dearer
 * (../shared/reference/probes.md). A function that starts with endbr64 (CET
 * builds) or a mov has its entry single-stepped; the first emulated
 * instruction after it gives the same probe, the same arguments, at a tenth
 * of the cost, provided nothing before it has any effect a probe could see.
 *
 * So an entry probe moves past leading instructions only if each of them
 * (read with capstone, not matched as bytes): transfers no control, writes
 * no memory, writes no argument register (rdi, rsi, rdx, rcx, r8, r9, in
 * any width) and not the stack pointer (a return probe finds the return
 * address at the top of the stack), and no branch anywhere in the function
 * lands between the entry and the new place. Otherwise it stays at the
 * entry. x86-64 only; other machines keep the entry.
 */
#ifndef PLACEMENT_H
#define PLACEMENT_H

#include <stddef.h>
#include <stdint.h>

struct placement {
	uint64_t skip;		/* bytes past the entry where the probe goes (0: the entry) */
	char entry[32];		/* the entry instruction's mnemonic */
	char at[32];		/* the instruction probed */
	int cheap;		/* that one is emulated, not single-stepped */
};

/*
 * code: the whole function (len bytes, at link-time address addr), so that
 * branches into its first instructions are seen. Fills p; 0, or -errno if
 * the disassembler cannot be used.
 */
int placement__entry(const uint8_t *code, size_t len, uint64_t addr, struct placement *p);

#endif
