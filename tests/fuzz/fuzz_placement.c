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
 * the address space).
 *
 *   build/fuzz/fuzz_placement -runs=0 tests/fuzz/placement   replay the corpus
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "placement.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* An address far from both ends, where no branch of a function wraps around. */
#define ELSEWHERE 0x400000000000ull

#define CHECK(cond)                                                                  \
	do {                                                                         \
		if (!(cond)) {                                                       \
			fprintf(stderr, "fuzz_placement: %s:%d: %s\n", __FILE__,    \
				__LINE__, #cond);                                    \
			abort();                                                     \
		}                                                                    \
	} while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct placement p, q;
	uint64_t addr;

	if (size < sizeof(addr))
		return 0;
	memcpy(&addr, data, sizeof(addr));
	data += sizeof(addr);
	size -= sizeof(addr);
	if (placement__entry(data, size, addr, &p))
		return 0;
	CHECK(strnlen(p.entry, sizeof(p.entry)) < sizeof(p.entry));
	CHECK(strnlen(p.at, sizeof(p.at)) < sizeof(p.at));
	if (p.cheap)
		CHECK(p.skip < size);
	else
		CHECK(p.skip == 0);
	if (addr != ELSEWHERE && !placement__entry(data, size, ELSEWHERE, &q)) {
		CHECK(p.skip == q.skip && p.cheap == q.cheap);
		CHECK(!strcmp(p.entry, q.entry) && !strcmp(p.at, q.at));
	}
	return 0;
}
