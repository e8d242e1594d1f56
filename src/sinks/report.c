// SPDX-License-Identifier: MIT
#include "sinks/report.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "lib/outbuf.h"
#include "pipeline/unseen.h"
#include "sinks/alerts.h"
#include "sinks/layout.h"

#define REPORT_TOP_TASKS 10
#define REPORT_JSON_TASKS 50

/* Not a terminal: a log or a pipe, where wider lines still read well. */
#define REPORT_COLUMNS 100
/* Continuation lines of the counts start under their values. */
#define COUNTS_INDENT 11
/* The least room an alert's text is continued in, under itself. */
#define ALERT_TEXT_MIN 40

static const char *const kind_name[AT_EV_KIND_MAX] = {
	[AT_EV_SPAWN] = "spawn",
	[AT_EV_POLL] = "poll",
	[AT_EV_WAKE] = "wake",
	[AT_EV_STEAL] = "steal",
	[AT_EV_PARK] = "park",
	[AT_EV_WORKER_SAMPLE] = "worker-sample",
	[AT_EV_TASK_SAMPLE] = "task-sample",
	[AT_EV_STACK] = "stack",
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

struct text {
	FILE *out;
	int cols;
};

static void __attribute__((format(printf, 3, 4)))
say(const struct text *t, int indent, const char *fmt, ...)
{
	char line[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	layout__wrap(layout__puts, t->out, line, t->cols, indent);
}

/*
 * What sample mode does not see, as the mode line says it: "spawns, ...,
 * wakes (wake-to-poll delays, ...), steals, ..." (each item under the one
 * it comes from).
 */
static const char *unseen_text(char *buf, size_t size, const char *runtime)
{
	const struct unseen *u, *prev = NULL;
	size_t len = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < nr_unseen_by_samples && len < size; i++) {
		const struct unseen *next = NULL;
		bool opens, closes;

		u = &unseen_by_samples[i];
		if (!unseen__applies(u, runtime))
			continue;
		for (size_t j = i + 1; j < nr_unseen_by_samples && !next; j++)
			if (unseen__applies(&unseen_by_samples[j], runtime))
				next = &unseen_by_samples[j];
		opens = u->under && prev && !prev->under;
		closes = u->under && (!next || !next->under);
		len += (size_t)snprintf(buf + len, size - len, "%s%s%s",
					opens ? " (" : prev ? ", " : "", u->words, closes ? ")" : "");
		prev = u;
	}
	return buf;
}

/* Sample mode, and the workers' queue depths are not seen (tokio's). */
static bool queues_unseen(const struct run_info *run)
{
	return run->sample_hz && unseen__for("queue_depths", run->runtime);
}

static const char *plural(uint64_t n, const char *one, const char *many)
{
	return n == 1 ? one : many;
}

static void text_counts(const struct text *tx, const struct model *m, const struct detector *d,
			const struct stats *st, const struct run_info *run)
{
	struct stats_totals t;
	uint64_t dropped = report__dropped(run), v;
	char line[512];
	size_t off;

	stats__totals(st, &t);
	say(tx, 2, "asynctraced: summary for pid %u (%s): %.2f s, %s", m->pid, m->comm,
	    run->seconds, run->end_reason);
	if (run->no_snapshot)
		say(tx, COUNTS_INDENT, "  note     the capture lacks its final snapshot of the maps: the "
				       "counts are those of the %llu records read%s; the top tasks, "
				       "drops and misses are not known",
		    (unsigned long long)(m->n.events + m->n.samples),
		    run->maps_only ? " (polls, steals and the workers' wakes as of their last samples)"
				   : "");
	if (run->sample_hz) {
		char unseen[256];

		say(tx, COUNTS_INDENT,
		    "  mode     sample, %u Hz of each thread's CPU time: no probe; not seen: %s",
		    run->sample_hz, unseen_text(unseen, sizeof(unseen), run->runtime));
		say(tx, COUNTS_INDENT, "  polls    %llu runs seen by the samples (%.0f/s)",
		    (unsigned long long)t.polls, per_sec(t.polls, run->seconds));
		say(tx, COUNTS_INDENT, "  workers  %u", st->nr_workers);
	} else {
		say(tx, COUNTS_INDENT, "  tasks    %llu spawned, %llu completed",
		    (unsigned long long)st->rt.spawns, (unsigned long long)st->rt.completed);
		say(tx, COUNTS_INDENT, "  polls    %llu (%.0f/s)", (unsigned long long)t.polls,
		    per_sec(t.polls, run->seconds));
		say(tx, COUNTS_INDENT, "  wakes    %llu (%llu %s)", (unsigned long long)st->rt.wakes,
		    (unsigned long long)st->rt.self_wakes,
		    plural(st->rt.self_wakes, "self-wake", "self-wakes"));
		say(tx, COUNTS_INDENT, "  steals   %llu (%llu %s moved)", (unsigned long long)t.steals,
		    (unsigned long long)t.stolen, plural(t.stolen, "task", "tasks"));
		say(tx, COUNTS_INDENT, "  parks    %llu", (unsigned long long)t.parks);
		say(tx, COUNTS_INDENT, "  workers  %u", st->nr_workers);
	}
	say(tx, COUNTS_INDENT, "  events   %llu (%.0f/s)%s", (unsigned long long)m->n.events,
	    per_sec(m->n.events, run->seconds),
	    run->maps_only ? ", maps-only: long and late polls only" : "");
	off = (size_t)snprintf(line, sizeof(line), "  dropped  %llu", (unsigned long long)dropped);
	if (dropped) {
		const char *sep = " (";

		for (int k = 1; k < AT_EV_KIND_MAX && off < sizeof(line); k++) {
			v = run->stats[AT_STAT_DROP_BASE + k];
			if (v) {
				off += (size_t)snprintf(line + off, sizeof(line) - off, "%s%s %llu", sep,
							kind_name[k], (unsigned long long)v);
				sep = ", ";
			}
		}
		if (off < sizeof(line))
			snprintf(line + off, sizeof(line) - off,
				 "): the ring buffer was full, raise --ringbuf-size");
	}
	say(tx, COUNTS_INDENT, "%s", line);
	if (m->n.malformed)
		say(tx, COUNTS_INDENT, "  malformed %llu %s skipped", (unsigned long long)m->n.malformed,
		    plural(m->n.malformed, "record", "records"));
	if (m->n.unknown) {
		char kinds[64];

		report__unknown_kinds(kinds, sizeof(kinds), m);
		say(tx, COUNTS_INDENT, "  unknown  %llu %s of kinds this asynctraced does not know "
				       "(%s) skipped: written by a newer version",
		    (unsigned long long)m->n.unknown, plural(m->n.unknown, "record", "records"),
		    kinds);
	}
	v = run->stats[AT_STAT_ORPHAN_POLL_END];
	if (v)
		say(tx, COUNTS_INDENT, "  untracked %llu poll %s without a begin (running at attach, "
				       "or containers of other polls)",
		    (unsigned long long)v, plural(v, "end", "ends"));
	v = run->stats[AT_STAT_THREADS_FULL];
	if (v)
		say(tx, COUNTS_INDENT, "  untracked %llu %s: thread table full", (unsigned long long)v,
		    plural(v, "poll", "polls"));
	v = run->stats[AT_STAT_MISSED_SWITCH_IN];
	if (v)
		say(tx, COUNTS_INDENT, "  note     %llu %s a thread in a poll ran again without "
				       "sched_switch showing it (this kernel hides some switches): "
				       "that time is counted as on-CPU after a preemption, blocked "
				       "after a sleep",
		    (unsigned long long)v, plural(v, "time", "times"));
	if (run->stats[AT_STAT_THREAD_SELF_WRONG])
		say(tx, COUNTS_INDENT, "  note     this kernel gave two threads' probes the same "
				       "registers: thread ids are asked of the kernel on every probe "
				       "hit");
	if (st->rt.unknown_workers)
		say(tx, COUNTS_INDENT, "  untracked %llu %s of workers beyond %d",
		    (unsigned long long)st->rt.unknown_workers,
		    plural(st->rt.unknown_workers, "event", "events"), AT_MAX_WORKERS);
	v = 0;
	for (int k = 1; k < ALERT_KIND_MAX; k++)
		v += d->begun[k];
	off = (size_t)snprintf(line, sizeof(line), "  alerts   %llu %s:", (unsigned long long)v,
			       plural(v, "episode", "episodes"));
	for (int k = 1; k < ALERT_KIND_MAX && off < sizeof(line); k++)
		off += (size_t)snprintf(line + off, sizeof(line) - off, " %s %llu%s",
					alert_kind_str(k), (unsigned long long)d->begun[k],
					k + 1 < ALERT_KIND_MAX ? "," : "");
	say(tx, COUNTS_INDENT, "%s", line);
}

/*
 * Dropped first when the table is too wide: what the other columns already
 * say (stolen: steals; on-CPU: the report per task), the delay's bound.
 */
static const struct layout_col report_worker_cols[] = {
	{ .head = "worker" },
	{ .head = "polls", .drop = 3 },
	{ .head = "busy", .drop = 2 },
	{ .head = "peak", .group = "queue", .drop = 8 },
	{ .head = "avg", .group = "queue", .drop = 9 },
	{ .head = "steals", .drop = 7 },
	{ .head = "stolen", .drop = 12 },
	{ .head = "p50", .group = "poll", .drop = 6 },
	{ .head = "p99", .group = "poll", .drop = 4 },
	{ .head = "max", .group = "poll", .drop = 1 },
	{ .head = "p99", .group = "on-CPU", .drop = 10 },
	{ .head = "p50", .group = "delay", .drop = 11 },
	{ .head = "p99", .group = "delay", .drop = 5 },
	{ .head = "max", .group = "delay", .drop = 13 },
};

/* Two counts' cells, or "-" in each where sample mode does not see them (unseen). */
static void count_cells(struct layout_table *t, uint64_t a, uint64_t b, bool unseen)
{
	if (unseen) {
		layout_table__cell(t, "-");
		layout_table__cell(t, "-");
	} else {
		layout_table__cell(t, "%llu", (unsigned long long)a);
		layout_table__cell(t, "%llu", (unsigned long long)b);
	}
}

/* unseen: sample mode, which sees no steal; queues: nor, in tokio, queue depths */
static void text_workers(const struct text *tx, const struct stats *st, double seconds,
			 bool unseen, bool queues)
{
	struct layout_table *t;

	fputc('\n', tx->out);
	say(tx, 1, "workers (percentiles are log2 bucket bounds: the value lies between half "
		   "the bound and the bound; a max is exact, \u2264 marks a bound)");
	if (layout_table__new(&t, report_worker_cols,
			      sizeof(report_worker_cols) / sizeof(*report_worker_cols)))
		return;
	for (uint32_t i = 0; i < st->nr_workers; i++) {
		const struct at_worker_stats *w = &st->workers[i];
		char poll[3][16], oncpu[3][16], delay[3][16], max[16], dmax[16];
		double avg = 0;

		if (seconds > 0)
			avg = (double)w->queue.area / (seconds * 1e9);
		pct3(poll, &w->poll, w->max_poll_ns);
		pct3(oncpu, &w->oncpu, w->max_poll_ns);
		pct3(delay, &w->delay, 0);
		fmt_ns(max, sizeof(max), w->max_poll_ns);
		fmt_bound(dmax, sizeof(dmax), hist_percentile(&w->delay, 100));
		layout_table__cell(t, "%u", i);
		layout_table__cell(t, "%llu", (unsigned long long)w->polls);
		layout_table__cell(t, "%.1f%%",
				   seconds > 0 ? 100.0 * (double)w->busy_ns / (seconds * 1e9) : 0.0);
		if (queues) {
			layout_table__cell(t, "-");
			layout_table__cell(t, "-");
		} else {
			layout_table__cell(t, "%u", w->queue.peak);
			layout_table__cell(t, "%.1f", avg);
		}
		count_cells(t, w->steals, w->stolen, unseen);
		layout_table__cell(t, "%s", w->polls ? poll[0] : "-");
		layout_table__cell(t, "%s", w->polls ? poll[1] : "-");
		layout_table__cell(t, "%s", w->polls ? max : "-");
		layout_table__cell(t, "%s", w->polls ? oncpu[1] : "-");
		layout_table__cell(t, "%s", hist_count(&w->delay) ? delay[0] : "-");
		layout_table__cell(t, "%s", hist_count(&w->delay) ? delay[1] : "-");
		layout_table__cell(t, "%s", hist_count(&w->delay) ? dmax : "-");
	}
	layout_table__print(t, tx->cols, 1, layout__puts, tx->out);
	layout_table__free(t);
}

/*
 * The name is cut (down to 20 columns, in its middle: its end and the id
 * tell tasks apart) before a column is dropped.
 */
static const struct layout_col report_task_cols[] = {
	{ .head = "task", .min = 20, .keep_tail = 14 },
	{ .head = "polls", .drop = 4 },
	{ .head = "total" },
	{ .head = "p50", .drop = 5 },
	{ .head = "p99", .drop = 3 },
	{ .head = "max", .drop = 1 },
	{ .head = "on-CPU", .drop = 2 },
	{ .head = "wakes", .drop = 6 },
	{ .head = "self", .drop = 7 },
};

/* unseen: sample mode, which sees no wake */
static void text_tasks(const struct text *tx, struct model *m, const struct stats *st, bool unseen)
{
	size_t nr;
	struct task_entry *top = top_tasks(st, REPORT_TOP_TASKS, &nr);
	char (*names)[AT_TASK_NAME_LEN] = calloc(nr + 1, sizeof(*names));
	struct layout_table *t;

	fputc('\n', tx->out);
	say(tx, 1, "top tasks by poll time");
	if (!names || layout_table__new(&t, report_task_cols,
					sizeof(report_task_cols) / sizeof(*report_task_cols))) {
		free(names);
		free(top);
		return;
	}
	/* paths shortened, as far as the names stay apart */
	for (size_t i = 0; i < nr; i++)
		model__task_name(m, top[i].id, top[i].s.name_addr, names[i], sizeof(names[i]));
	layout__short_names(names[0], sizeof(names[0]), nr);
	for (size_t i = 0; i < nr; i++) {
		const struct at_task_stats *s = &top[i].s;
		const char *name = names[i];
		char total[16], max[16];
		char poll[3][16];
		struct at_hist h;

		fmt_ns(total, sizeof(total), s->poll_ns);
		fmt_ns(max, sizeof(max), s->max_poll_ns);
		hist_widen(&h, &s->poll);
		pct3(poll, &h, s->max_poll_ns);
		layout_table__cell(t, "%s #%llu", name, (unsigned long long)top[i].id);
		layout_table__cell(t, "%llu", (unsigned long long)s->polls);
		layout_table__cell(t, "%s", total);
		layout_table__cell(t, "%s", poll[0]);
		layout_table__cell(t, "%s", poll[1]);
		layout_table__cell(t, "%s", max);
		layout_table__cell(t, "%.0f%%",
				   s->poll_ns ? 100.0 * (double)s->oncpu_ns / (double)s->poll_ns : 0.0);
		count_cells(t, s->wakes, s->self_wakes, unseen);
	}
	layout_table__print(t, tx->cols, 1, layout__puts, tx->out);
	layout_table__free(t);
	free(names);
	free(top);
}

/* Frames of a hottest stack the text report shows, innermost first. */
#define REPORT_STACK_FRAMES 8

/*
 * --stacks: where each top task spent the time its stacks were taken in
 * (CPU samples, sleeps inside polls): the stack it spent the most in.
 */
static void text_stacks(const struct text *tx, struct model *m, const struct stats *st)
{
	size_t nr;
	struct task_entry *top = top_tasks(st, REPORT_TOP_TASKS, &nr);
	bool any = false;

	for (size_t i = 0; i < nr; i++) {
		const struct task_stack *hot = model__hottest_stack(m, top[i].id);
		const struct callstack *cs = hot ? callstacks__get(&m->stacks, hot->id) : NULL;
		char name[AT_TASK_NAME_LEN], where[512], t[16];
		uint32_t shown = 0;

		if (!cs)
			continue;
		if (!any) {
			fputc('\n', tx->out);
			say(tx, 1, "hottest stacks of the top tasks (--stacks)");
			any = true;
		}
		model__task_name(m, top[i].id, top[i].s.name_addr, name, sizeof(name));
		callstacks__where(&m->stacks, hot->id, hot->asleep, where, sizeof(where));
		fmt_ns(t, sizeof(t), hot->ns);
		say(tx, 6, "  %s #%llu: %s %s%s (%u %s)", name, (unsigned long long)top[i].id, t,
		    hot->asleep ? "asleep" : "on the CPU", where, hot->samples,
		    hot->asleep ? plural(hot->samples, "sleep", "sleeps")
				: plural(hot->samples, "sample", "samples"));
		for (uint32_t j = 0; j < cs->nr && shown < REPORT_STACK_FRAMES; j++) {
			const struct cs_frame *f = callstacks__frame(&m->stacks, cs->frames[j]);
			char at[160] = "";

			if (f->kernel && !hot->asleep)
				continue;
			if (f->file[0])
				snprintf(at, sizeof(at), " %s:%u", f->file, f->line);
			say(tx, 8, "      %s%s (%s%s)", f->inlined ? "[inlined] " : "",
			    f->function[0] ? f->function : "?", f->module, at);
			shown++;
		}
	}
	if (m->stacks_lost && !any) {
		fputc('\n', tx->out);
		say(tx, 1, "hottest stacks of the top tasks (--stacks)");
	}
	if (m->stacks_lost)
		say(tx, 4, "  %llu of %llu stacks could not be unwound or kept",
		    (unsigned long long)m->stacks_lost,
		    (unsigned long long)(m->stacks_lost + m->stacks_unwound));
	free(top);
}

/* Where the places of idle spans are counted up to: the stream's end, or its newest record. */
static uint64_t waits_until(const struct model *m)
{
	return m->end_ts ? m->end_ts : m->last_ts;
}

/*
 * Where each top task waited the most of its idle time that a read of the
 * live target placed (docs/tasks.md): Go and tokio, traced live.
 */
static void text_waits(const struct text *tx, struct model *m, const struct stats *st)
{
	size_t nr;
	struct task_entry *top = top_tasks(st, REPORT_TOP_TASKS, &nr);
	bool any = false;

	for (size_t i = 0; i < nr; i++) {
		char name[AT_TASK_NAME_LEN], where[512], t[16], of[16];
		uint64_t ns, total;
		uint32_t id = model__commonest_wait(m, top[i].id, waits_until(m), &ns, &total);

		if (!id)
			continue;
		if (!any) {
			fputc('\n', tx->out);
			say(tx, 1, "where the top tasks waited most (of their idle time placed)");
			any = true;
		}
		model__task_name(m, top[i].id, top[i].s.name_addr, name, sizeof(name));
		callstacks__waiting(&m->places, id, "at", where, sizeof(where));
		fmt_ns(t, sizeof(t), ns);
		fmt_ns(of, sizeof(of), total);
		say(tx, 6, "  %s #%llu: %s, %s of %s", name, (unsigned long long)top[i].id, where, t,
		    of);
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

static int digits(uint64_t v)
{
	int n = 1;

	while (v >= 10) {
		v /= 10;
		n++;
	}
	return n;
}

/*
 * Thief by victim. Too many workers for one table: the victims in blocks,
 * each with every thief, the way wide matrices are printed.
 */
static void text_steals(const struct text *tx, const struct stats *st)
{
	uint32_t n = st->nr_workers, from = 0;
	int colw = 0, lw = 3 + digits(n ? n - 1 : 0);
	char label[16];

	fputc('\n', tx->out);
	say(tx, 1, "steal matrix: tasks moved (row: thief, column: victim)");
	for (uint32_t t = 0; t < n; t++)
		for (uint32_t v = 0; v < n; v++)
			if (digits(steal_tasks(st, t, v)) > colw)
				colw = digits(steal_tasks(st, t, v));
	if (colw < 1 + digits(n ? n - 1 : 0))
		colw = 1 + digits(n ? n - 1 : 0);
	while (from < n) {
		uint32_t to = from;
		int per_line = (tx->cols - lw) / (colw + 2);

		to = from + (uint32_t)(per_line > 1 ? per_line : 1);
		if (to > n)
			to = n;
		if (from)
			fputc('\n', tx->out);
		fprintf(tx->out, "%*s", lw, "");
		for (uint32_t v = from; v < to; v++) {
			snprintf(label, sizeof(label), "w%u", v);
			fprintf(tx->out, "  %*s", colw, label);
		}
		fputc('\n', tx->out);
		for (uint32_t t = 0; t < n; t++) {
			snprintf(label, sizeof(label), "w%u", t);
			fprintf(tx->out, "  %-*s", lw - 2, label);
			for (uint32_t v = from; v < to; v++) {
				if (t == v)
					fprintf(tx->out, "  %*s", colw, "-");
				else
					fprintf(tx->out, "  %*llu", colw,
						(unsigned long long)steal_tasks(st, t, v));
			}
			fputc('\n', tx->out);
		}
		from = to;
	}
}

/* By time, and in the order raised at the same time: an END is raised when its
 * episode has been quiet long enough, but it is dated at its last occurrence. */
static int by_time(const void *a, const void *b)
{
	const struct alert *const *x = a, *const *y = b;

	if ((*x)->ts != (*y)->ts)
		return (*x)->ts < (*y)->ts ? -1 : 1;
	return *x < *y ? -1 : *x > *y;
}

static void text_alerts(const struct text *tx, const struct model *m, const struct detector *d)
{
	const struct alert **order = malloc((d->nr_log + 1) * sizeof(*order));
	uint64_t episodes = 0, ends = 0;
	size_t lines = d->nr_log + d->dropped_log;
	char line[512], head[64];

	for (int k = 1; k < ALERT_KIND_MAX; k++)
		episodes += d->begun[k];
	for (size_t i = 0; i < d->nr_log; i++)
		ends += d->log[i].state == ALERT_END;
	fputc('\n', tx->out);
	if (d->dropped_log)
		say(tx, 1, "alert log: %llu %s, in %zu lines (the first %zu kept)",
		    (unsigned long long)episodes, plural(episodes, "episode", "episodes"), lines,
		    d->nr_log);
	else if (!episodes)
		say(tx, 1, "alert log: none");
	else if (ends == episodes)
		say(tx, 1, "alert log: %llu %s, %s",
		    (unsigned long long)episodes, plural(episodes, "episode", "episodes"),
		    plural(episodes, "a begin and an end line", "each a begin and an end line"));
	else if (episodes == 1)
		say(tx, 1, "alert log: 1 episode, still open (a begin line, no end yet)");
	else
		say(tx, 1, "alert log: %llu episodes, %llu still open (a begin line, no end yet)",
		    (unsigned long long)episodes, (unsigned long long)(episodes - ends));
	if (!order)
		return;
	for (size_t i = 0; i < d->nr_log; i++)
		order[i] = &d->log[i];
	qsort(order, d->nr_log, sizeof(*order), by_time);
	for (size_t i = 0; i < d->nr_log; i++) {
		const struct alert *a = order[i];
		int n;

		alert__format(line, sizeof(line), m, a);
		n = snprintf(head, sizeof(head), "  %8.3f s  #%-4llu %-5s ",
			     (double)model__rel(m, a->ts) / 1e9, (unsigned long long)a->episode,
			     a->state == ALERT_END ? "end" : "begin");
		/* continued under the message, unless that leaves it too little room */
		say(tx, tx->cols - n >= ALERT_TEXT_MIN ? n : 4, "%s%s", head, line);
	}
	if (d->dropped_log)
		say(tx, 4, "  ... and %zu more not kept", d->dropped_log);
	free(order);
}

void report__text(FILE *out, struct model *m, const struct detector *d, const struct stats *st,
		  const struct run_info *run, bool full)
{
	struct text tx = { .out = out, .cols = layout__columns(out, REPORT_COLUMNS) };

	text_counts(&tx, m, d, st, run);
	if (!full)
		return;
	text_workers(&tx, st, run->seconds, run->sample_hz != 0, queues_unseen(run));
	text_tasks(&tx, m, st, run->sample_hz != 0);
	text_stacks(&tx, m, st);
	text_waits(&tx, m, st);
	if (!run->sample_hz) /* sample mode sees no steal: no matrix of zeros */
		text_steals(&tx, st);
	text_alerts(&tx, m, d);
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

/* --stacks: the stack the task spent the most time in, when one was taken. */
static void j_hottest_stack(struct outbuf *ob, const struct model *m, uint64_t task)
{
	const struct task_stack *hot = model__hottest_stack(m, task);

	if (!hot)
		return;
	ob_puts(ob, hot->asleep ? ",\"hottest_stack\":{\"when\":\"asleep\""
				: ",\"hottest_stack\":{\"when\":\"on-cpu\"");
	ob_key_u64(ob, ",\"ns\":", hot->ns);
	ob_key_u64(ob, ",\"samples\":", hot->samples);
	ob_puts(ob, ",\"frames\":");
	alert__stack_json(ob, &m->stacks, hot->id);
	ob_putc(ob, '}');
}

/* The place task spent the most of its placed idle time at, when one was read. */
static void j_waits_most_at(struct outbuf *ob, const struct model *m, uint64_t task)
{
	uint64_t ns, total;
	uint32_t id = model__commonest_wait(m, task, waits_until(m), &ns, &total);

	if (!id)
		return;
	ob_key_u64(ob, ",\"waits_most_at\":{\"ns\":", ns);
	ob_key_u64(ob, ",\"placed_ns\":", total);
	ob_puts(ob, ",\"frames\":");
	alert__stack_json(ob, &m->places, id);
	ob_putc(ob, '}');
}

/* "schema", "pid", ... "counts_from": which process, for how long, and how it was counted. */
static void j_run(struct outbuf *ob, const struct model *m, const struct run_info *run)
{
	char num[64];

	ob_puts(ob, "{\"schema\":\"asynctraced.summary/1\"");
	ob_key_u64(ob, ",\"pid\":", m->pid);
	ob_puts(ob, ",\"comm\":");
	ob_json_str(ob, m->comm);
	snprintf(num, sizeof(num), ",\"seconds\":%.3f", run->seconds);
	ob_puts(ob, num);
	ob_puts(ob, ",\"end_reason\":");
	ob_json_str(ob, run->end_reason);
	ob_puts(ob, run->maps_only ? ",\"mode\":\"maps\"" : ",\"mode\":\"trace\"");
	ob_puts(ob, run->sample_hz ? ",\"measured_by\":\"samples\"" : ",\"measured_by\":\"probes\"");
	if (run->sample_hz) {
		ob_key_u64(ob, ",\"sample_hz\":", run->sample_hz);
		ob_puts(ob, ",\"unseen\":[");
		for (size_t i = 0, n = 0; i < nr_unseen_by_samples; i++) {
			if (!unseen__applies(&unseen_by_samples[i], run->runtime))
				continue;
			if (n++)
				ob_putc(ob, ',');
			ob_json_str(ob, unseen_by_samples[i].name);
		}
		ob_putc(ob, ']');
	}
	ob_puts(ob, run->no_snapshot ? ",\"counts_from\":\"records\"" : ",\"counts_from\":\"maps\"");
}

/* A count, or null where sample mode cannot see it (unseen). */
static void key_count(struct outbuf *ob, const char *key, uint64_t v, bool unseen)
{
	if (unseen) {
		ob_puts(ob, key);
		ob_puts(ob, "null");
	} else {
		ob_key_u64(ob, key, v);
	}
}

/*
 * "counts": what the runtime did, from the maps (or the records); sampled,
 * the polls are the runs seen, and what only probes see is null.
 */
static void j_counts(struct outbuf *ob, const struct stats *st, const struct run_info *run)
{
	bool un = run->sample_hz != 0;
	struct stats_totals t;

	stats__totals(st, &t);
	key_count(ob, ",\"counts\":{\"tasks_spawned\":", st->rt.spawns, un);
	key_count(ob, ",\"tasks_completed\":", st->rt.completed, un);
	ob_key_u64(ob, ",\"polls\":", t.polls);
	key_count(ob, ",\"wakes\":", st->rt.wakes, un);
	key_count(ob, ",\"self_wakes\":", st->rt.self_wakes, un);
	key_count(ob, ",\"outside_wakes\":", st->rt.outside_wakes, un);
	key_count(ob, ",\"steals\":", t.steals, un);
	key_count(ob, ",\"stolen\":", t.stolen, un);
	key_count(ob, ",\"parks\":", t.parks, un);
	ob_key_u64(ob, ",\"workers\":", st->nr_workers);
	key_count(ob, ",\"inject_peak\":", st->rt.inject.peak, un);
	ob_putc(ob, '}');
}

/* "events": what reached us, and what the rings had no room for, kind by kind. */
static void j_events(struct outbuf *ob, const struct model *m, const struct run_info *run)
{
	ob_key_u64(ob, ",\"events\":{\"received\":", m->n.events);
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
}

static void j_workers(struct outbuf *ob, const struct stats *st, bool queues)
{
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
		key_count(ob, ",\"queue_peak\":", w->queue.peak, queues);
		key_count(ob, ",\"queue_area\":", w->queue.area, queues);
		j_hist(ob, ",\"poll\":", &w->poll);
		j_hist(ob, ",\"on_cpu\":", &w->oncpu);
		j_hist(ob, ",\"delay\":", &w->delay);
		ob_putc(ob, '}');
	}
	ob_puts(ob, "]");
}

/* "tasks": the busiest, and (--stacks) how many stacks were unwound. */
static void j_tasks(struct outbuf *ob, struct model *m, const struct stats *st)
{
	struct task_entry *top;
	size_t nr;

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
		j_hottest_stack(ob, m, top[i].id);
		j_waits_most_at(ob, m, top[i].id);
		ob_putc(ob, '}');
	}
	free(top);
	ob_puts(ob, "]");
	if (m->where || m->waits_read) { /* Go and tokio, live: where idle tasks waited */
		ob_key_u64(ob, ",\"waits\":{\"read\":", m->waits_read);
		ob_key_u64(ob, ",\"placed\":", m->waits_placed);
		ob_key_u64(ob, ",\"read_ns\":", m->waits_ns);
		ob_key_u64(ob, ",\"read_max_ns\":", m->waits_max_ns);
		ob_key_u64(ob, ",\"untallied\":", m->waits_untallied);
		ob_key_u64(ob, ",\"given_up\":", m->waits_given_up);
		ob_putc(ob, '}');
	}
	if (m->unwind || m->stacks_unwound || m->stacks_lost) { /* --stacks */
		ob_key_u64(ob, ",\"stacks\":{\"unwound\":", m->stacks_unwound);
		ob_key_u64(ob, ",\"lost\":", m->stacks_lost);
		ob_key_u64(ob, ",\"by_frame_pointers\":", m->stacks_by_fp);
		ob_key_u64(ob, ",\"distinct\":", m->stacks.nr_stacks);
		ob_putc(ob, '}');
	}
}

static void j_steals(struct outbuf *ob, const struct stats *st)
{
	ob_puts(ob, ",\"steals\":[");
	for (size_t i = 0; i < st->nr_steals; i++) {
		ob_key_u64(ob, i ? ",{\"thief\":" : "{\"thief\":", st->steals[i].key.thief);
		ob_key_u64(ob, ",\"victim\":", st->steals[i].key.victim);
		ob_key_u64(ob, ",\"ops\":", st->steals[i].s.ops);
		ob_key_u64(ob, ",\"tasks\":", st->steals[i].s.tasks);
		ob_putc(ob, '}');
	}
	ob_puts(ob, "]");
}

static void j_alerts(struct outbuf *ob, struct model *m, const struct detector *d)
{
	ob_puts(ob, ",\"alerts\":{\"episodes\":{");
	for (int k = 1; k < ALERT_KIND_MAX; k++) {
		ob_puts(ob, k > 1 ? ",\"" : "\"");
		ob_puts(ob, alert_kind_str(k));
		ob_key_u64(ob, "\":", d->begun[k]);
	}
	ob_puts(ob, "},\"log\":[");
	for (size_t i = 0; i < d->nr_log; i++) {
		if (i)
			ob_puts(ob, ",");
		alert__json_object(ob, m, &d->log[i]);
	}
	ob_puts(ob, "]}}\n");
}

void report__json(struct outbuf *ob, struct model *m, const struct detector *d,
		  const struct stats *st, const struct run_info *run)
{
	j_run(ob, m, run);
	j_counts(ob, st, run);
	j_events(ob, m, run);
	j_workers(ob, st, queues_unseen(run));
	j_tasks(ob, m, st);
	j_steals(ob, st);
	j_alerts(ob, m, d);
}
