/* SPDX-License-Identifier: MIT */
/*
 * The analyser's answers to --stacks' requests (wire.h: PRIME, UNWIND,
 * FORGET: the analyser reads its pid), each from its header on. 0, or -errno when the socket cannot go
 * on (the analyser then ends).
 */
#ifndef UNWINDING_H
#define UNWINDING_H

#include "analyser/wire.h"

int unwinding__prime(const struct wire_hdr *h);
int unwinding__unwind(const struct wire_hdr *h);
/* Process pid gone (FORGET): what was read of it goes. */
void unwinding__forget(int32_t pid);
/* What it holds of every process, freed at its end. */
void unwinding__end(void);

#endif
