// SPDX-License-Identifier: MIT
#include "report.h"

static const char *const kind_name[AT_EV_KIND_MAX] = {
	[AT_EV_SPAWN] = "spawn", [AT_EV_POLL] = "poll", [AT_EV_WAKE] = "wake",
	[AT_EV_STEAL] = "steal", [AT_EV_PARK] = "park",
};

uint64_t report__dropped(const struct run_info *run)
{
	uint64_t n = 0;

	for (int k = 1; k < AT_EV_KIND_MAX; k++)
		n += run->stats[AT_STAT_DROP_BASE + k];
	return n;
}

static double per_sec(uint64_t n, double s)
{
	return s > 0 ? (double)n / s : 0;
}

void report__summary(FILE *out, const struct model *m, const struct detector *d,
		     const struct run_info *run)
{
	const struct model_counts *n = &m->n;
	uint64_t dropped = report__dropped(run);

	fprintf(out, "asynctraced: summary for pid %u (%s): %.2f s, %s\n", m->pid, m->comm,
		run->seconds, run->end_reason);
	fprintf(out, "  tasks    %llu spawned, %llu completed\n",
		(unsigned long long)n->tasks_spawned, (unsigned long long)n->tasks_done);
	fprintf(out, "  polls    %llu (%.0f/s)\n", (unsigned long long)n->polls,
		per_sec(n->polls, run->seconds));
	fprintf(out, "  wakes    %llu\n", (unsigned long long)n->wakes);
	fprintf(out, "  steals   %llu (%llu tasks moved)\n", (unsigned long long)n->steals,
		(unsigned long long)n->stolen);
	fprintf(out, "  parks    %llu\n", (unsigned long long)n->parks);
	fprintf(out, "  workers  %u\n", m->nr_workers);
	fprintf(out, "  events   %llu (%.0f/s)\n", (unsigned long long)n->events,
		per_sec(n->events, run->seconds));
	fprintf(out, "  dropped  %llu", (unsigned long long)dropped);
	if (dropped) {
		const char *sep = " (";

		for (int k = 1; k < AT_EV_KIND_MAX; k++) {
			uint64_t v = run->stats[AT_STAT_DROP_BASE + k];

			if (v) {
				fprintf(out, "%s%s %llu", sep, kind_name[k], (unsigned long long)v);
				sep = ", ";
			}
		}
		fprintf(out, "): the ring buffer was full, raise --ringbuf-size");
	}
	fputc('\n', out);
	if (n->malformed)
		fprintf(out, "  malformed %llu records skipped\n", (unsigned long long)n->malformed);
	if (run->stats[AT_STAT_ORPHAN_POLL_END])
		fprintf(out, "  untracked %llu polls already running at attach\n",
			(unsigned long long)run->stats[AT_STAT_ORPHAN_POLL_END]);
	if (run->stats[AT_STAT_THREADS_FULL])
		fprintf(out, "  untracked %llu polls: thread table full\n",
			(unsigned long long)run->stats[AT_STAT_THREADS_FULL]);
	fprintf(out, "  alerts   %llu long polls\n",
		(unsigned long long)d->counts[ALERT_LONG_POLL]);
}
