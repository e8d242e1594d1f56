/* SPDX-License-Identifier: MIT */
/*
 * The kernel's function symbols (/proc/kallsyms), to name the kernel frames
 * of a poll that went to sleep: which wait it was (a futex, a nanosleep, a
 * read). Read once, while the tracer still has the right to see kernel
 * addresses (CAP_SYSLOG; docs/security.md).
 */
#ifndef KSYMS_H
#define KSYMS_H

#include <stdint.h>
#include <stdio.h>

struct ksyms;

/* Reads path (NULL: /proc/kallsyms): 0, or -errno (-EPERM: addresses hidden). */
int ksyms__load(struct ksyms **k, const char *path);
/* The same from an open file (the fuzzer's: tests/fuzz/fuzz_ksyms.c). */
int ksyms__load_file(struct ksyms **k, FILE *f);
/*
 * The function containing addr, NULL when none does; *module gets its
 * module's name in brackets: "[ext4]", "[kernel]" for the kernel image.
 */
const char *ksyms__find(const struct ksyms *k, uint64_t addr, const char **module);
void ksyms__free(struct ksyms *k);

#endif
