// SPDX-License-Identifier: MIT
#include "lib/util.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static int journal; /* stderr is the journal */

void log_init(void)
{
	const char *js = getenv("JOURNAL_STREAM");
	unsigned long long dev, ino;
	struct stat st;

	/* "DEV:INO" of the journal's stream: ours only if stderr is still that file */
	journal = js && sscanf(js, "%llu:%llu", &dev, &ino) == 2 && !fstat(2, &st) &&
		  (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
}

const char *log_prefix(int prio)
{
	static const char *const prefixes[] = { "<0>", "<1>", "<2>", "<3>",
						"<4>", "<5>", "<6>", "<7>" };

	return journal && prio >= 0 && prio < 8 ? prefixes[prio] : "";
}

void log_msg(int prio, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%sasynctraced: ", log_prefix(prio));
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
}

uint64_t hash_str(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (; *s; s++)
		h = (h ^ (uint8_t)*s) * 0x100000001b3ull;
	return h ? h : 1;
}

uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int parse_duration(const char *s, uint64_t default_unit_ns, uint64_t *ns)
{
	static const struct {
		const char *suffix;
		double ns;
	} units[] = {
		{ "ns", 1 }, { "us", 1e3 }, { "ms", 1e6 }, { "s", 1e9 }, { "m", 60e9 },
	};
	char *end;
	double v, unit = (double)default_unit_ns;

	if (!s || !*s)
		return -EINVAL;
	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || !isfinite(v) || v < 0)
		return -EINVAL;
	if (*end) {
		size_t i;

		for (i = 0; i < sizeof(units) / sizeof(units[0]); i++)
			if (!strcmp(end, units[i].suffix))
				break;
		if (i == sizeof(units) / sizeof(units[0]))
			return -EINVAL;
		unit = units[i].ns;
	}
	v *= unit;
	if (v >= 1.8e19)
		return -EINVAL;
	*ns = (uint64_t)llround(v);
	return 0;
}

int parse_size(const char *s, uint64_t *bytes)
{
	char *end;
	unsigned long long v;
	int shift = 0;

	if (!s || *s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno)
		return -EINVAL;
	switch (*end) {
	case 'k': case 'K': shift = 10; end++; break;
	case 'm': case 'M': shift = 20; end++; break;
	case 'g': case 'G': shift = 30; end++; break;
	}
	if (*end == 'i' || *end == 'B')
		end += *end == 'i' && end[1] == 'B' ? 2 : 1;
	if (*end || v > (ULLONG_MAX >> shift))
		return -EINVAL;
	*bytes = (uint64_t)v << shift;
	return 0;
}

int parse_int(const char *s, int min, int max, int *out)
{
	char *end;
	long v;

	if (!s || !*s)
		return -EINVAL;
	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || *end || end == s || v < min || v > max)
		return -EINVAL;
	*out = (int)v;
	return 0;
}

size_t upper_bound_u64(const void *base, size_t nr, size_t stride, uint64_t key)
{
	size_t lo = 0, hi = nr;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (*(const uint64_t *)((const char *)base + mid * stride) <= key)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static struct rlimit nofile_was;
static bool nofile_raised;

void nofile_raise(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) || rl.rlim_cur >= rl.rlim_max)
		return;
	nofile_was = rl;
	rl.rlim_cur = rl.rlim_max;
	nofile_raised = !setrlimit(RLIMIT_NOFILE, &rl);
}

void nofile_restore(void)
{
	if (nofile_raised)
		setrlimit(RLIMIT_NOFILE, &nofile_was);
}
