/* SPDX-License-Identifier: MIT */
/* Small helpers: clocks and parsing of command-line values. */
#ifndef UTIL_H
#define UTIL_H

#include <stdint.h>
#include <stdio.h>

/* The elements of an array (not a pointer). */
#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/*
 * Our messages on stderr, "asynctraced: " first. When stderr is the systemd
 * journal (JOURNAL_STREAM names it: see log_init), each message starts with
 * its syslog priority, <3> an error, <4> a warning, <6> information, which
 * journald takes as its level; anywhere else, nothing changes.
 */
void log_init(void);
/* "<N>" under the journal, "" elsewhere: for lines written another way (alerts). */
const char *log_prefix(int prio);
void log_msg(int prio, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#define err_msg(...) log_msg(3, __VA_ARGS__)
#define warn_msg(...) log_msg(4, __VA_ARGS__)
#define info_msg(...) log_msg(6, __VA_ARGS__)

uint64_t now_ns(void);
/* A string's FNV-1a hash, never 0 (a u64map key). */
uint64_t hash_str(const char *s);
/* The soft limit of open files raised to the hard one; and put back as it was (for a child). */
void nofile_raise(void);
void nofile_restore(void); /* CLOCK_MONOTONIC: the clock BPF's ktime uses */

/*
 * "20ms", "500us", "1.5s", "250000ns"; a bare number is in default_unit_ns.
 * 0 or -EINVAL.
 */
int parse_duration(const char *s, uint64_t default_unit_ns, uint64_t *ns);
/* "16M", "512K", "1G", "4096"; 0 or -EINVAL. */
int parse_size(const char *s, uint64_t *bytes);
/* A positive decimal integer that fits in an int; 0 or -EINVAL. */
int parse_int(const char *s, int min, int max, int *out);
/*
 * Of nr entries stride bytes apart, each beginning with a uint64_t they are
 * sorted by (an address), how many begin at or below key: the one before
 * that index is the last at or below key, the one at it the first above.
 */
size_t upper_bound_u64(const void *base, size_t nr, size_t stride, uint64_t key);

#endif
