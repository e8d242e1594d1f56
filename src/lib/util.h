/* SPDX-License-Identifier: MIT */
/* Small helpers: clocks and parsing of command-line values. */
#ifndef UTIL_H
#define UTIL_H

#include <stdint.h>
#include <stdio.h>

/* A message of ours on stderr. */
#define err_msg(...) fprintf(stderr, "asynctraced: " __VA_ARGS__)

uint64_t now_ns(void); /* CLOCK_MONOTONIC: the clock BPF's ktime uses */

/*
 * "20ms", "500us", "1.5s", "250000ns"; a bare number is in default_unit_ns.
 * 0 or -EINVAL.
 */
int parse_duration(const char *s, uint64_t default_unit_ns, uint64_t *ns);
/* "16M", "512K", "1G", "4096"; 0 or -EINVAL. */
int parse_size(const char *s, uint64_t *bytes);
/* A positive decimal integer that fits in an int; 0 or -EINVAL. */
int parse_int(const char *s, int min, int max, int *out);

#endif
