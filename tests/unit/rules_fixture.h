/* SPDX-License-Identifier: MIT */
/*
 * The uprobe rules `asynctraced probe-rules` learnt on Linux 6.18
 * (tests/data/uprobe-rules-6.18), for the tests of placement. When the forms
 * of src/targets/probe_rules.c change, learn them again on a 6.18 machine,
 * and give the file's `kernel` line FIXTURE_KERNEL's text.
 */
#ifndef RULES_FIXTURE_H
#define RULES_FIXTURE_H

#include <stdio.h>

#include "targets/probe_rules.h"

#define RULES_FIXTURE "tests/data/uprobe-rules-6.18"
#define FIXTURE_KERNEL "6.18.44 (learnt here; the fixture of tests/unit/test_placement.c)"

/* 0, or -errno: a missing file, or rules of another forms table (learn them again). */
static inline int rules_fixture(struct probe_rules *r)
{
	char text[16384];
	FILE *f = fopen(RULES_FIXTURE, "re");
	size_t n;

	if (!f)
		return -2;
	n = fread(text, 1, sizeof(text) - 1, f);
	fclose(f);
	text[n] = '\0';
	return probe_rules__parse(r, FIXTURE_KERNEL, text);
}

#endif
