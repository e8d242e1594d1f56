// SPDX-License-Identifier: MIT
#include "source/stats.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void stats__free(struct stats *s)
{
	free(s->workers);
	free(s->between);
	free(s->tasks);
	free(s->idle);
	free(s->steals);
	memset(s, 0, sizeof(*s));
}

int task_entry__by_poll_ns(const void *a, const void *b)
{
	const struct task_entry *x = a, *y = b;

	return x->s.poll_ns < y->s.poll_ns ? 1 : x->s.poll_ns > y->s.poll_ns ? -1 : 0;
}

void stats__totals(const struct stats *s, struct stats_totals *t)
{
	memset(t, 0, sizeof(*t));
	for (uint32_t i = 0; i < s->nr_workers; i++) {
		const struct at_worker_stats *w = &s->workers[i];

		t->polls += w->polls;
		t->busy_ns += w->busy_ns;
		t->steals += w->steals;
		t->stolen += w->stolen;
		t->parks += w->parks;
		hist_merge(&t->poll, &w->poll);
		hist_merge(&t->oncpu, &w->oncpu);
		hist_merge(&t->delay, &w->delay);
	}
}

uint64_t hist_count(const struct at_hist *h)
{
	uint64_t n = 0;

	/* saturating: slots from a hostile capture may add up past 2^64 */
	for (int i = 0; i < AT_HIST_SLOTS; i++)
		n = h->slot[i] > UINT64_MAX - n ? UINT64_MAX : n + h->slot[i];
	return n;
}

void hist_add(struct at_hist *h, uint64_t v)
{
	int slot = v ? 63 - __builtin_clzll(v) : 0;

	h->slot[slot < AT_HIST_SLOTS ? slot : AT_HIST_SLOTS - 1]++;
}

void hist_widen(struct at_hist *into, const struct at_hist32 *h)
{
	for (int i = 0; i < AT_HIST_SLOTS; i++)
		into->slot[i] = h->slot[i];
}

void hist_merge(struct at_hist *into, const struct at_hist *h)
{
	for (int i = 0; i < AT_HIST_SLOTS; i++)
		into->slot[i] += h->slot[i];
}

void hist_delta(struct at_hist *into, const struct at_hist *a, const struct at_hist *b)
{
	for (int i = 0; i < AT_HIST_SLOTS; i++)
		into->slot[i] = a->slot[i] >= b->slot[i] ? a->slot[i] - b->slot[i] : 0;
}

uint64_t hist_percentile(const struct at_hist *h, double p)
{
	uint64_t total = hist_count(h), seen = 0, rank;

	if (!total)
		return 0;
	/* the smallest value with at least p% of the samples at or below it */
	{
		double r = (double)total * p / 100.0 + 0.999999;

		rank = r >= (double)total ? total : (uint64_t)r;
	}
	if (rank < 1)
		rank = 1;
	for (int i = 0; i < AT_HIST_SLOTS; i++) {
		seen = h->slot[i] > UINT64_MAX - seen ? UINT64_MAX : seen + h->slot[i];
		if (seen >= rank)
			return 2ull << i;
	}
	return 2ull << (AT_HIST_SLOTS - 1);
}

uint64_t hist_percentile_max(const struct at_hist *h, double p, uint64_t max)
{
	uint64_t v = hist_percentile(h, p);

	return max && v > max ? max : v;
}

void fmt_ns(char *buf, size_t size, uint64_t ns)
{
	if (ns < 1000)
		snprintf(buf, size, "%lluns", (unsigned long long)ns);
	else if (ns < 1000000)
		snprintf(buf, size, "%.*fus", ns < 10000 ? 1 : 0, (double)ns / 1e3);
	else if (ns < 1000000000)
		snprintf(buf, size, "%.*fms", ns < 10000000 ? 1 : 0, (double)ns / 1e6);
	else
		snprintf(buf, size, "%.2fs", (double)ns / 1e9);
}

void fmt_bound(char *buf, size_t size, uint64_t ns)
{
	char v[16];

	fmt_ns(v, sizeof(v), ns);
	snprintf(buf, size, "\u2264%s", v);
}
