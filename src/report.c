// SPDX-License-Identifier: MIT
#include "report.h"

#include <stdlib.h>
#include <string.h>

#include "alerts.h"
#include "outbuf.h"

#define REPORT_TOP_TASKS 10
#define REPORT_JSON_TASKS 50

static const char *const kind_name[AT_EV_KIND_MAX] = {
	[AT_EV_SPAWN] = "spawn",
	[AT_EV_POLL] = "poll",
	[AT_EV_WAKE] = "wake",
	[AT_EV_STEAL] = "steal",
	[AT_EV_PARK] = "park",
	[AT_EV_WORKER_SAMPLE] = "worker-sample",
	[AT_EV_TASK_SAMPLE] = "task-sample",
};

uint64_t report__dropped(const struct run_info *run)
{
	uint64_t n = 0;

	for (int k = 1; k < AT_EV_KIND_MAX; k++)
		n += run->stats[AT_STAT_DROP_BASE + k];
	return n;
}

/* "0xc8, 0x80ff": the unknown kinds the model remembered. */
void report__unknown_kinds(char *buf, size_t len, const struct model *m)
{
	size_t n = 0;

	buf[0] = '\0';
	for (int i = 0; i < MODEL_UNKNOWN_KINDS && m->n.unknown_kinds[i] && n < len; i++)
		n += (size_t)snprintf(buf + n, len - n, "%s0x%x", i ? ", " : "",
				      m->n.unknown_kinds[i]);
	if (n < len && m->n.more_unknown_kinds)
		snprintf(buf + n, len - n, ", ...");
}

static double per_sec(uint64_t n, double s)
{
	return s > 0 ? (double)n / s : 0;
}

/* The tasks with the most poll time, at most max of them (sorted copy). */
static struct task_entry *top_tasks(const struct stats *st, size_t max, size_t *nr)
{
	struct task_entry *t = malloc((st->nr_tasks + 1) * sizeof(*t));

	*nr = 0;
	if (!t)
		return NULL;
	if (st->nr_tasks) {
		memcpy(t, st->tasks, st->nr_tasks * sizeof(*t));
		qsort(t, st->nr_tasks, sizeof(*t), task_entry__by_poll_ns);
	}
	*nr = st->nr_tasks < max ? st->nr_tasks : max;
	return t;
}

/* p50, p99 and p100 of h; with the exact maximum known, none above it. */
static void pct3(char out[3][16], const struct at_hist *h, uint64_t max)
{
	fmt_ns(out[0], 16, hist_percentile_max(h, 50, max));
	fmt_ns(out[1], 16, hist_percentile_max(h, 99, max));
	fmt_ns(out[2], 16, hist_percentile_max(h, 100, max));
}

static void text_counts(FILE *out, const struct model *m, const struct detector *d,
			const struct stats *st, const struct run_info *run)
{
	struct stats_totals t;
	uint64_t dropped = report__dropped(run);

	stats__totals(st, &t);
	fprintf(out, "asynctraced: summary for pid %u (%s): %.2f s, %s\n", m->pid, m->comm,
		run->seconds, run->end_reason);
	if (run->no_snapshot)
		fprintf(out, "  note     the capture lacks its final snapshot of the maps: the counts "
			     "are those of the %llu records read%s; the top tasks, drops and misses "
			     "are not known\n",
			(unsigned long long)(m->n.events + m->n.samples),
			run->maps_only ? " (polls, steals and the workers' wakes as of their last "
					 "samples)"
				       : "");
	fprintf(out, "  tasks    %llu spawned, %llu completed\n",
		(unsigned long long)st->rt.spawns, (unsigned long long)st->rt.completed);
	fprintf(out, "  polls    %llu (%.0f/s)\n", (unsigned long long)t.polls,
		per_sec(t.polls, run->seconds));
	fprintf(out, "  wakes    %llu (%llu self-wakes)\n", (unsigned long long)st->rt.wakes,
		(unsigned long long)st->rt.self_wakes);
	fprintf(out, "  steals   %llu (%llu tasks moved)\n", (unsigned long long)t.steals,
		(unsigned long long)t.stolen);
	fprintf(out, "  parks    %llu\n", (unsigned long long)t.parks);
	fprintf(out, "  workers  %u\n", st->nr_workers);
	fprintf(out, "  events   %llu (%.0f/s)%s\n", (unsigned long long)m->n.events,
		per_sec(m->n.events, run->seconds),
		run->maps_only ? ", maps-only: long and late polls only" : "");
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
	if (m->n.malformed)
		fprintf(out, "  malformed %llu records skipped\n",
			(unsigned long long)m->n.malformed);
	if (m->n.unknown) {
		char kinds[64];

		report__unknown_kinds(kinds, sizeof(kinds), m);
		fprintf(out, "  unknown  %llu records of kinds this asynctraced does not know (%s) "
			     "skipped: written by a newer version\n",
			(unsigned long long)m->n.unknown, kinds);
	}
	if (run->stats[AT_STAT_ORPHAN_POLL_END])
		fprintf(out, "  untracked %llu poll ends without a begin (running at attach, or "
			     "containers of other polls)\n",
			(unsigned long long)run->stats[AT_STAT_ORPHAN_POLL_END]);
	if (run->stats[AT_STAT_THREADS_FULL])
		fprintf(out, "  untracked %llu polls: thread table full\n",
			(unsigned long long)run->stats[AT_STAT_THREADS_FULL]);
	if (run->stats[AT_STAT_MISSED_SWITCH_IN])
		fprintf(out, "  note     %llu times a thread in a poll ran again without sched_switch "
			     "showing it (this kernel hides some switches): that time is counted as "
			     "on-CPU after a preemption, blocked after a sleep\n",
			(unsigned long long)run->stats[AT_STAT_MISSED_SWITCH_IN]);
	if (run->stats[AT_STAT_THREAD_SELF_WRONG])
		fprintf(out, "  note     this kernel gave two threads' probes the same registers: "
			     "thread ids are asked of the kernel on every probe hit\n");
	if (st->rt.unknown_workers)
		fprintf(out, "  untracked %llu events of workers beyond %d\n",
			(unsigned long long)st->rt.unknown_workers, AT_MAX_WORKERS);
	{
		uint64_t total = 0;

		for (int k = 1; k < ALERT_KIND_MAX; k++)
			total += d->begun[k];
		fprintf(out, "  alerts   %llu episodes:", (unsigned long long)total);
		for (int k = 1; k < ALERT_KIND_MAX; k++)
			fprintf(out, " %s %llu%s", alert_kind_str(k), (unsigned long long)d->begun[k],
				k + 1 < ALERT_KIND_MAX ? "," : "\n");
	}
}

static void text_workers(FILE *out, const struct stats *st, double seconds)
{
	fprintf(out, "\nworkers (percentiles are log2 bucket bounds: the value lies between half "
		     "the bound and the bound)\n");
	fprintf(out, " worker     polls   busy  queue peak  avg  steals  stolen   poll p50     p99"
		     "     max  on-CPU p99  delay p50     p99     max\n");
	for (uint32_t i = 0; i < st->nr_workers; i++) {
		const struct at_worker_stats *w = &st->workers[i];
		char poll[3][16], oncpu[3][16], delay[3][16], max[16];
		double avg = 0;

		if (seconds > 0)
			avg = (double)w->queue.area / (seconds * 1e9);
		pct3(poll, &w->poll, w->max_poll_ns);
		pct3(oncpu, &w->oncpu, w->max_poll_ns);
		pct3(delay, &w->delay, 0);
		fmt_ns(max, sizeof(max), w->max_poll_ns);
		fprintf(out, " %6u %9llu %5.1f%% %11u %4.1f %7llu %7llu %10s %7s %7s %11s %10s %7s %7s\n",
			i, (unsigned long long)w->polls,
			seconds > 0 ? 100.0 * (double)w->busy_ns / (seconds * 1e9) : 0.0,
			w->queue.peak, avg, (unsigned long long)w->steals,
			(unsigned long long)w->stolen, poll[0], poll[1], max, oncpu[1], delay[0],
			delay[1], delay[2]);
	}
}

static void text_tasks(FILE *out, struct model *m, const struct stats *st)
{
	size_t nr;
	struct task_entry *top = top_tasks(st, REPORT_TOP_TASKS, &nr);

	fprintf(out, "\ntop tasks by poll time\n");
	fprintf(out, " %-44s %9s %9s %8s %8s %8s %7s %9s %9s\n", "task", "polls", "total", "p50",
		"p99", "max", "on-CPU", "wakes", "self");
	for (size_t i = 0; i < nr; i++) {
		const struct at_task_stats *s = &top[i].s;
		char label[AT_TASK_NAME_LEN + 24], name[AT_TASK_NAME_LEN], total[16], max[16];
		char poll[3][16];

		model__task_name(m, top[i].id, s->name_addr, name, sizeof(name));
		snprintf(label, sizeof(label), "%s #%llu", name, (unsigned long long)top[i].id);
		fmt_ns(total, sizeof(total), s->poll_ns);
		fmt_ns(max, sizeof(max), s->max_poll_ns);
		struct at_hist h;

		hist_widen(&h, &s->poll);
		pct3(poll, &h, s->max_poll_ns);
		fprintf(out, " %-44.44s %9llu %9s %8s %8s %8s %6.0f%% %9llu %9llu\n", label,
			(unsigned long long)s->polls, total, poll[0], poll[1], max,
			s->poll_ns ? 100.0 * (double)s->oncpu_ns / (double)s->poll_ns : 0.0,
			(unsigned long long)s->wakes, (unsigned long long)s->self_wakes);
	}
	free(top);
}

static uint64_t steal_tasks(const struct stats *st, uint32_t thief, uint32_t victim)
{
	for (size_t i = 0; i < st->nr_steals; i++)
		if (st->steals[i].key.thief == thief && st->steals[i].key.victim == victim)
			return st->steals[i].s.tasks;
	return 0;
}

static void text_steals(FILE *out, const struct stats *st)
{
	uint32_t n = st->nr_workers;

	fprintf(out, "\nsteal matrix: tasks moved (row: thief, column: victim)\n      ");
	for (uint32_t v = 0; v < n; v++)
		fprintf(out, " %8s%u", "w", v);
	fputc('\n', out);
	for (uint32_t t = 0; t < n; t++) {
		fprintf(out, "  w%-3u", t);
		for (uint32_t v = 0; v < n; v++) {
			if (t == v)
				fprintf(out, " %9s", "-");
			else
				fprintf(out, " %9llu", (unsigned long long)steal_tasks(st, t, v));
		}
		fputc('\n', out);
	}
}

static void text_alerts(FILE *out, const struct model *m, const struct detector *d)
{
	char line[512];

	fprintf(out, "\nalerts (%zu raised)\n", d->nr_log);
	for (size_t i = 0; i < d->nr_log; i++) {
		const struct alert *a = &d->log[i];

		alert__format(line, sizeof(line), m, a);
		fprintf(out, "  %8.3f s  #%-4llu %-5s %s\n",
			(double)model__rel(m, a->ts) / 1e9,
			(unsigned long long)a->episode, a->state == ALERT_END ? "end" : "begin",
			line);
	}
	if (d->dropped_log)
		fprintf(out, "  ... and %zu more not kept\n", d->dropped_log);
}

void report__text(FILE *out, struct model *m, const struct detector *d, const struct stats *st,
		  const struct run_info *run, bool full)
{
	text_counts(out, m, d, st, run);
	if (!full)
		return;
	text_workers(out, st, run->seconds);
	text_tasks(out, m, st);
	text_steals(out, st);
	text_alerts(out, m, d);
	fflush(out);
}

/* ---- JSON ------------------------------------------------------------- */

static void j_hist(struct outbuf *ob, const char *key, const struct at_hist *h)
{
	ob_puts(ob, key);
	ob_key_u64(ob, "{\"count\":", hist_count(h));
	ob_key_u64(ob, ",\"p50_ns\":", hist_percentile(h, 50));
	ob_key_u64(ob, ",\"p90_ns\":", hist_percentile(h, 90));
	ob_key_u64(ob, ",\"p99_ns\":", hist_percentile(h, 99));
	ob_key_u64(ob, ",\"p100_ns\":", hist_percentile(h, 100));
	ob_puts(ob, ",\"slots\":[");
	for (int i = 0; i < AT_HIST_SLOTS; i++) {
		if (i)
			ob_putc(ob, ',');
		ob_u64(ob, h->slot[i]);
	}
	ob_puts(ob, "]}");
}

void report__json(struct outbuf *ob, struct model *m, const struct detector *d,
		  const struct stats *st, const struct run_info *run)
{
	struct stats_totals t;
	struct task_entry *top;
	char num[64];
	size_t nr;

	stats__totals(st, &t);
	ob_puts(ob, "{\"schema\":\"asynctraced.summary/1\"");
	ob_key_u64(ob, ",\"pid\":", m->pid);
	ob_puts(ob, ",\"comm\":");
	ob_json_str(ob, m->comm);
	snprintf(num, sizeof(num), ",\"seconds\":%.3f", run->seconds);
	ob_puts(ob, num);
	ob_puts(ob, ",\"end_reason\":");
	ob_json_str(ob, run->end_reason);
	ob_puts(ob, run->maps_only ? ",\"mode\":\"maps\"" : ",\"mode\":\"trace\"");
	ob_puts(ob, run->no_snapshot ? ",\"counts_from\":\"records\"" : ",\"counts_from\":\"maps\"");

	ob_key_u64(ob, ",\"counts\":{\"tasks_spawned\":", st->rt.spawns);
	ob_key_u64(ob, ",\"tasks_completed\":", st->rt.completed);
	ob_key_u64(ob, ",\"polls\":", t.polls);
	ob_key_u64(ob, ",\"wakes\":", st->rt.wakes);
	ob_key_u64(ob, ",\"self_wakes\":", st->rt.self_wakes);
	ob_key_u64(ob, ",\"outside_wakes\":", st->rt.outside_wakes);
	ob_key_u64(ob, ",\"steals\":", t.steals);
	ob_key_u64(ob, ",\"stolen\":", t.stolen);
	ob_key_u64(ob, ",\"parks\":", t.parks);
	ob_key_u64(ob, ",\"workers\":", st->nr_workers);
	ob_key_u64(ob, ",\"inject_peak\":", st->rt.inject.peak);
	ob_key_u64(ob, "},\"events\":{\"received\":", m->n.events);
	ob_key_u64(ob, ",\"samples\":", m->n.samples);
	ob_key_u64(ob, ",\"malformed\":", m->n.malformed);
	ob_key_u64(ob, ",\"unknown\":", m->n.unknown);
	ob_puts(ob, ",\"unknown_kinds\":[");
	for (int i = 0; i < MODEL_UNKNOWN_KINDS && m->n.unknown_kinds[i]; i++) {
		if (i)
			ob_putc(ob, ',');
		ob_u64(ob, m->n.unknown_kinds[i]);
	}
	ob_putc(ob, ']');
	ob_key_u64(ob, ",\"dropped\":", report__dropped(run));
	ob_puts(ob, ",\"by_kind\":{");
	for (int k = 1; k < AT_EV_KIND_MAX; k++) {
		ob_puts(ob, k > 1 ? ",\"" : "\"");
		ob_puts(ob, kind_name[k]);
		ob_key_u64(ob, "\":", m->n.by_kind[k]);
	}
	ob_puts(ob, "},\"dropped_by_kind\":{");
	for (int k = 1; k < AT_EV_KIND_MAX; k++) {
		ob_puts(ob, k > 1 ? ",\"" : "\"");
		ob_puts(ob, kind_name[k]);
		ob_key_u64(ob, "\":", run->stats[AT_STAT_DROP_BASE + k]);
	}
	ob_key_u64(ob, "},\"untracked_polls\":", run->stats[AT_STAT_ORPHAN_POLL_END]);
	ob_puts(ob, "}");

	ob_puts(ob, ",\"workers\":[");
	for (uint32_t i = 0; i < st->nr_workers; i++) {
		const struct at_worker_stats *w = &st->workers[i];

		ob_key_u64(ob, i ? ",{\"worker\":" : "{\"worker\":", i);
		ob_key_u64(ob, ",\"tid\":", w->tid);
		ob_key_u64(ob, ",\"polls\":", w->polls);
		ob_key_u64(ob, ",\"busy_ns\":", w->busy_ns);
		ob_key_u64(ob, ",\"on_cpu_ns\":", w->oncpu_ns);
		ob_key_u64(ob, ",\"max_poll_ns\":", w->max_poll_ns);
		ob_key_u64(ob, ",\"wakes\":", w->wakes);
		ob_key_u64(ob, ",\"self_wakes\":", w->self_wakes);
		ob_key_u64(ob, ",\"steals\":", w->steals);
		ob_key_u64(ob, ",\"stolen\":", w->stolen);
		ob_key_u64(ob, ",\"parks\":", w->parks);
		ob_key_u64(ob, ",\"park_ns\":", w->park_ns);
		ob_key_u64(ob, ",\"queue_peak\":", w->queue.peak);
		ob_key_u64(ob, ",\"queue_area\":", w->queue.area);
		j_hist(ob, ",\"poll\":", &w->poll);
		j_hist(ob, ",\"on_cpu\":", &w->oncpu);
		j_hist(ob, ",\"delay\":", &w->delay);
		ob_putc(ob, '}');
	}
	ob_puts(ob, "]");

	ob_puts(ob, ",\"tasks\":[");
	top = top_tasks(st, REPORT_JSON_TASKS, &nr);
	for (size_t i = 0; i < nr; i++) {
		const struct at_task_stats *s = &top[i].s;
		char name[AT_TASK_NAME_LEN];

		model__task_name(m, top[i].id, s->name_addr, name, sizeof(name));
		ob_key_u64(ob, i ? ",{\"id\":" : "{\"id\":", top[i].id);
		ob_puts(ob, ",\"name\":");
		ob_json_str(ob, name);
		ob_key_u64(ob, ",\"polls\":", s->polls);
		ob_key_u64(ob, ",\"poll_ns\":", s->poll_ns);
		ob_key_u64(ob, ",\"on_cpu_ns\":", s->oncpu_ns);
		ob_key_u64(ob, ",\"max_poll_ns\":", s->max_poll_ns);
		ob_key_u64(ob, ",\"wakes\":", s->wakes);
		ob_key_u64(ob, ",\"self_wakes\":", s->self_wakes);
		ob_puts(ob, s->done ? ",\"done\":true" : ",\"done\":false");
		struct at_hist h;

		hist_widen(&h, &s->poll);
		j_hist(ob, ",\"poll\":", &h);
		hist_widen(&h, &s->delay);
		j_hist(ob, ",\"delay\":", &h);
		ob_putc(ob, '}');
	}
	free(top);
	ob_puts(ob, "]");

	ob_puts(ob, ",\"steals\":[");
	for (size_t i = 0; i < st->nr_steals; i++) {
		ob_key_u64(ob, i ? ",{\"thief\":" : "{\"thief\":", st->steals[i].key.thief);
		ob_key_u64(ob, ",\"victim\":", st->steals[i].key.victim);
		ob_key_u64(ob, ",\"ops\":", st->steals[i].s.ops);
		ob_key_u64(ob, ",\"tasks\":", st->steals[i].s.tasks);
		ob_putc(ob, '}');
	}
	ob_puts(ob, "]");

	ob_puts(ob, ",\"alerts\":{\"episodes\":{");
	for (int k = 1; k < ALERT_KIND_MAX; k++) {
		ob_puts(ob, k > 1 ? ",\"" : "\"");
		ob_puts(ob, alert_kind_str(k));
		ob_key_u64(ob, "\":", d->begun[k]);
	}
	ob_puts(ob, "},\"log\":[\n");
	for (size_t i = 0; i < d->nr_log; i++) {
		if (i)
			ob_puts(ob, ",");
		alert__json(ob, m, &d->log[i]);
	}
	ob_puts(ob, "]}}\n");
}
