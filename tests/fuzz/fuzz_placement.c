// SPDX-License-Identifier: MIT
/*
 * libFuzzer target: any bytes as a function's code, disassembled by
 * placement__entry (src/targets/placement.c, over capstone) to place its entry
 * probe. The input is the function's link-time address (8 bytes, little
 * endian) and then its code. Whatever the bytes: no crash, hang, leak or UB,
 * a place inside the function (the entry, or a cheap instruction that starts
 * within the code), and the same place wherever the function is linked: its
 * branches are relative, so where they land inside it does not depend on
 * its address (an ELF file may put a function anywhere, even at the top of
 * the address space). The address's low four bits also say what the probe
 * needs kept: bits 0-2 the argument it reads (less one: 0 none), bit 3 a
 * return probe at the same place. Each input is placed under two rule sets: the
 * kernel's as learnt on 6.18 (tests/data/uprobe-rules-6.18), and one where
 * every form is emulated; either way the place chosen is one the rules say
 * the kernel emulates or optimizes.
 *
 *   build/fuzz/fuzz_placement -runs=0 tests/fuzz/placement   replay the corpus
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "../unit/rules_fixture.h"
#include "targets/placement.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* An address far from both ends, where no branch of a function wraps around. */
#define ELSEWHERE 0x400000000000ull

static struct probe_rules kernel_rules, all_emulated;

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc, (void)argv;
	if (rules_fixture(&kernel_rules)) {
		fprintf(stderr, "fuzz_placement: cannot read %s (run from the top of the tree)\n",
			RULES_FIXTURE);
		abort();
	}
	all_emulated.learnt = true;
	memset(all_emulated.verdict, PROBE_EMULATED, sizeof(all_emulated.verdict));
	return 0;
}

/* The instruction at the place chosen is one the rules let a probe sit on cheaply. */
static void check_rules(const uint8_t *data, size_t size, const struct placement *p,
			const struct probe_rules *rules)
{
	size_t len;

	if (!p->cheap)
		return;
	CHECK(p->verdict == PROBE_EMULATED || p->verdict == PROBE_OPTIMIZED);
	/* some form's length from there matches, with the verdict said */
	for (len = 1; len <= PROBE_FORM_MAX_LEN && p->skip + len <= size; len++)
		if (probe_rules__lookup(rules, data + p->skip, len, NULL) == p->verdict)
			return;
	CHECK(!"the place matches no form with its verdict");
}

static void place(const uint8_t *data, size_t size, uint64_t addr,
		  const struct placement_need *need, const struct probe_rules *rules);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct placement_need need;
	uint64_t addr;

	if (size < sizeof(addr))
		return 0;
	memcpy(&addr, data, sizeof(addr));
	data += sizeof(addr);
	size -= sizeof(addr);
	need.arg = (int)(addr & 7) - 1;
	need.ret = addr & 8;
	need.spills = false;
	place(data, size, addr, &need, &kernel_rules);
	place(data, size, addr, &need, &all_emulated);
	return 0;
}

static void place(const uint8_t *data, size_t size, uint64_t addr,
		  const struct placement_need *need, const struct probe_rules *rules)
{
	struct placement p, q;

	if (placement__entry(data, size, addr, need, rules, &p))
		return;
	check_rules(data, size, &p, rules);
	CHECK(strnlen(p.entry, sizeof(p.entry)) < sizeof(p.entry));
	CHECK(strnlen(p.at, sizeof(p.at)) < sizeof(p.at));
	if (p.cheap)
		CHECK(p.skip < size);
	else
		CHECK(p.skip == 0);
	/* an argument moved only by moving the probe, to a register of struct pt_regs */
	CHECK(p.arg_reg == -1 || (p.skip && need->arg >= 0 && p.arg_reg % 8 == 0 &&
				   p.arg_reg <= 152));
	CHECK(!p.cheap == !!p.why[0]);
	/* a frame only with no return probe, in whole words a cookie can say */
	CHECK(p.frame == 0 || (p.skip && !need->ret && p.frame % 8 == 0 && p.frame <= 255 * 8));
	if (addr != ELSEWHERE && !placement__entry(data, size, ELSEWHERE, need, rules, &q)) {
		CHECK(p.skip == q.skip && p.cheap == q.cheap && p.arg_reg == q.arg_reg &&
		      p.frame == q.frame);
		CHECK(!strcmp(p.entry, q.entry) && !strcmp(p.at, q.at));
	}
}
