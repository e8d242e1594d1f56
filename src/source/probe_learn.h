/* SPDX-License-Identifier: MIT */
/*
 * The rules of probe placement (src/targets/probe_rules.h), learnt from the
 * running kernel: every form, on a private code page, probed in a process of
 * its own, which then tells what the kernel did.
 */
#ifndef PROBE_LEARN_H
#define PROBE_LEARN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "targets/probe_rules.h"

/* Where the rules of the running kernel are kept between runs (a tmpfs: gone at reboot). */
#define PROBE_RULES_DIR "/run/asynctraced"
#define PROBE_RULES_FILE "uprobe-rules"

/* This kernel: its release, version and boot id (a new boot may run another kernel). */
int probe_learn__kernel(char *buf, size_t size);

/* Learns r from the kernel (root: BPF and uprobes). 0, or -errno with why said. */
int probe_learn(struct probe_rules *r, char *why, size_t why_len);

/*
 * The rules from dir's cache if they are this kernel's, else learnt and
 * cached (fresh: learnt whatever the cache holds). dir NULL: no cache.
 */
int probe_learn__get(struct probe_rules *r, const char *dir, bool fresh, char *why,
		     size_t why_len);

/* asynctraced probe-rules: learnt afresh, cached, and printed to out. 0, or -errno after a message. */
int probe_learn__print(FILE *out);

#endif
