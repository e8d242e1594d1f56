// SPDX-License-Identifier: MIT
/*
 * libFuzzer target: any string as a USDT probe's argument operands ("8@%rdi
 * -4@8(%rbp) 4@$42"), through usdt__parse_args, whose result the BPF
 * programs trust as a fixed spec. Whatever the string: no crash, hang or UB,
 * and a spec either refused (all zero) or one the BPF side can use: at most
 * AT_USDT_MAX_ARGS arguments, each of a known kind, a register of struct
 * pt_regs and a size of 1, 2, 4 or 8 bytes.
 *
 *   build/fuzz/fuzz_usdt_args -runs=0 tests/fuzz/usdt_args   replay the corpus
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "targets/usdt/usdt_notes.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The last register of struct pt_regs the parser names (rsp). */
#define MAX_REG_OFF 152

static void check_spec(const struct at_usdt_spec *spec)
{
	CHECK(spec->known == 1);
	CHECK(spec->nr_args <= AT_USDT_MAX_ARGS);
	for (uint32_t i = 0; i < spec->nr_args; i++) {
		const struct at_usdt_arg *a = &spec->args[i];

		CHECK(a->kind == AT_USDT_ARG_CONST || a->kind == AT_USDT_ARG_REG ||
		      a->kind == AT_USDT_ARG_DEREF);
		CHECK(a->shift == 0 || a->shift == 32 || a->shift == 48 || a->shift == 56);
		CHECK(a->is_signed <= 1);
		if (a->kind != AT_USDT_ARG_CONST)
			CHECK(a->reg_off <= MAX_REG_OFF && a->reg_off % 8 == 0);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const struct at_usdt_spec zero;
	struct at_usdt_spec spec;
	/* a string of exactly its length: a read past its NUL is caught */
	char *args = malloc(size + 1);

	if (!args)
		return 0;
	memcpy(args, data, size);
	args[size] = '\0';
	if (!usdt__parse_args(args, &spec))
		check_spec(&spec);
	else
		CHECK(!memcmp(&spec, &zero, sizeof(spec)));
	free(args);
	return 0;
}
