/* SPDX-License-Identifier: MIT */
#include "util.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static uint64_t clock_ns(clockid_t clk)
{
	struct timespec ts;

	clock_gettime(clk, &ts);
	return (uint64_t)ts.tv_sec * NSEC_PER_SEC + (uint64_t)ts.tv_nsec;
}

uint64_t now_ns(void)
{
	return clock_ns(CLOCK_MONOTONIC);
}

void burn_cpu_ns(uint64_t ns)
{
	uint64_t end = clock_ns(CLOCK_THREAD_CPUTIME_ID) + ns;
	volatile uint64_t sink = 0;

	/*
	 * Reading the thread CPU clock is a system call, so do about a
	 * microsecond of arithmetic between reads to keep most of the burn in
	 * user space.
	 */
	do {
		for (int i = 0; i < 512; i++)
			sink = sink * 6364136223846793005ULL + 1;
	} while (clock_ns(CLOCK_THREAD_CPUTIME_ID) < end);
}

void sleep_ns(uint64_t ns)
{
	struct timespec ts = {
		.tv_sec = (time_t)(ns / NSEC_PER_SEC),
		.tv_nsec = (long)(ns % NSEC_PER_SEC),
	};

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

void fatal(const char *fmt, ...)
{
	int saved_errno = errno;
	va_list ap;

	fputs("sample-executor: ", stderr);
	errno = saved_errno; /* for %m */
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

void *xmalloc(size_t size)
{
	void *p = malloc(size);

	if (!p)
		fatal("out of memory");
	return p;
}

void *xcalloc(size_t n, size_t size)
{
	void *p = calloc(n, size);

	if (!p)
		fatal("out of memory");
	return p;
}

void *xrealloc(void *p, size_t size)
{
	p = realloc(p, size);
	if (!p)
		fatal("out of memory");
	return p;
}

void prng_seed(struct prng *p, uint64_t seed)
{
	p->state = seed;
}

uint64_t prng_next(struct prng *p)
{
	uint64_t z = (p->state += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

uint64_t prng_range(struct prng *p, uint64_t lo, uint64_t hi)
{
	/* The modulo bias is irrelevant for picking sleep lengths. */
	return lo + prng_next(p) % (hi - lo + 1);
}
