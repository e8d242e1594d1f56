/* SPDX-License-Identifier: MIT */
/*
 * Small helpers shared by the runtime and the scenarios: clocks, CPU burning,
 * a seedable PRNG and fatal errors.
 */
#ifndef SE_UTIL_H
#define SE_UTIL_H

#include <stddef.h>
#include <stdint.h>

#define NSEC_PER_USEC 1000ULL
#define NSEC_PER_MSEC 1000000ULL
#define NSEC_PER_SEC 1000000000ULL

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* CLOCK_MONOTONIC in nanoseconds: the timebase of every deadline. */
uint64_t now_ns(void);

/*
 * Spin until the calling thread has consumed @ns of CPU time. Measuring
 * thread CPU time (not wall time) keeps the work honest when the machine is
 * oversubscribed: a preempted worker still does the full amount of work.
 */
void burn_cpu_ns(uint64_t ns);

/* Sleep the calling thread (off-CPU) for @ns, restarting after signals. */
void sleep_ns(uint64_t ns);

/* Print "sample-executor: <message>" to stderr and exit 1. Supports %m. */
__attribute__((noreturn, format(printf, 1, 2)))
void fatal(const char *fmt, ...);

/* malloc/calloc that cannot fail (out of memory is fatal). */
void *xmalloc(size_t size);
void *xcalloc(size_t n, size_t size);
void *xrealloc(void *p, size_t size);

/*
 * A tiny deterministic PRNG (splitmix64). Scenarios seed one per task from
 * the task id so every run draws the same sequence for the same task.
 */
struct prng {
	uint64_t state;
};

void prng_seed(struct prng *p, uint64_t seed);
uint64_t prng_next(struct prng *p);
/* Uniform in [lo, hi], both inclusive. */
uint64_t prng_range(struct prng *p, uint64_t lo, uint64_t hi);

#endif /* SE_UTIL_H */
