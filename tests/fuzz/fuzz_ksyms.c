// SPDX-License-Identifier: MIT
/*
 * libFuzzer target: any bytes as /proc/kallsyms, read the way --stacks reads
 * it (src/stacks/ksyms.c: ksyms__load_file), then addresses looked up as
 * the kernel frames of a stack are: each address the input spells at a
 * line's start, one below and one above it, 0 and the top of memory.
 *
 * Whatever the bytes: no crash, hang, leak or UB; a symbol found has a
 * name and a module ("[kernel]", or a module's name in brackets), each a
 * whole string; a lookup at an address at or above another's finds a
 * symbol too.
 *
 *   build/fuzz/fuzz_ksyms -runs=0 tests/fuzz/ksyms   replay the corpus
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "stacks/ksyms.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Addresses looked up, at most. */
#define LOOKUPS_MAX 256

static void look_up(const struct ksyms *k, uint64_t addr)
{
	const char *module = NULL, *name = ksyms__find(k, addr, &module);
	size_t n;

	if (!name)
		return;
	CHECK(module);
	n = strlen(module);
	CHECK(n >= 2 && module[0] == '[' && module[n - 1] == ']');
	(void)strlen(name);
	/* symbols are sorted: what covers addr covers every address above it */
	CHECK(addr == UINT64_MAX || ksyms__find(k, addr + 1, NULL));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *copy = malloc(size ? size : 1);
	struct ksyms *k;
	size_t lookups = 0;
	FILE *f;

	if (!copy)
		return 0;
	memcpy(copy, data, size);
	f = size ? fmemopen(copy, size, "r") : NULL;
	if (f && !ksyms__load_file(&k, f)) {
		look_up(k, 0);
		look_up(k, UINT64_MAX);
		for (size_t i = 0; i < size && lookups < LOOKUPS_MAX; lookups++) {
			char hex[17] = "";
			size_t n = 0;

			while (i + n < size && n < 16 && data[i + n] &&
			       strchr("0123456789abcdefABCDEF", data[i + n]))
				n++;
			memcpy(hex, data + i, n);
			if (n) {
				uint64_t a = strtoull(hex, NULL, 16);

				look_up(k, a);
				look_up(k, a - 1);
				look_up(k, a + 1);
			}
			/* the next line */
			while (i < size && data[i] != '\n')
				i++;
			i++;
		}
		ksyms__free(k);
	}
	if (f)
		fclose(f);
	free(copy);
	return 0;
}
