/* SPDX-License-Identifier: MIT */
/*
 * A fuzz target's own checks, beyond the sanitizers': one that fails says
 * where and aborts, which libFuzzer keeps as a crash.
 */
#ifndef FUZZ_CHECK_H
#define FUZZ_CHECK_H

#include <stdio.h>
#include <stdlib.h>

#define CHECK(cond)                                                                  \
	do {                                                                         \
		if (!(cond)) {                                                       \
			fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, #cond);  \
			abort();                                                     \
		}                                                                    \
	} while (0)

#endif
