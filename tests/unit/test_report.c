// SPDX-License-Identifier: MIT
/*
 * What a person reads: the alert lines, the report and the live view. Each
 * says what it counts, in words that agree with themselves and with the
 * manual (docs/cli.md), and fits the width it is given.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <setjmp.h>
#include <cmocka.h>

#include "pipeline/pipeline.h"
#include "sinks/alerts.h"
#include "sinks/console.h"
#include "sinks/layout.h"
#include "sinks/report.h"

#define T0 1000000000ull
#define MS 1000000ull
#define US 1000ull
#define LE "\xe2\x89\xa4" /* ≤ */

static struct alert alert_of(enum alert_kind kind, enum alert_state state, bool ongoing)
{
	struct alert a = {
		.kind = kind,
		.state = state,
		.ongoing = ongoing,
		.episode = 1,
		.begin_ts = T0,
		.ts = T0 + 2520 * MS,
		.count = 11,
		.value_ns = 20 * MS,
		.worst_ns = 21400 * US,
		.task = 5,
		.worker = 1,
		.depth_avg = 40.2,
	};

	snprintf(a.task_name, sizeof(a.task_name), "noisy");
	return a;
}

static const char *say(const struct model *m, const struct alert *a)
{
	static char line[512];

	alert__format(line, sizeof(line), m, a);
	return line;
}

/* An episode that tracing stopped is still going, not over. */
static void alert_wording(void **state)
{
	struct detect_config opts = { 0 };
	struct pipeline p;
	struct alert a;
	char title[128];

	assert_int_equal(pipeline__init(&p, 4242, "sample", T0, &opts), 0);
	a = alert_of(ALERT_LONG_POLL, ALERT_END, true);
	assert_string_equal(say(&p.model, &a),
			    "long poll: task 'noisy' #5 still going when tracing stopped: 11 long "
			    "polls in 2.52 s, the longest 21.40 ms");
	alert__title(title, sizeof(title), &a);
	assert_string_equal(title, "long-poll still going: noisy #5");
	a = alert_of(ALERT_LONG_POLL, ALERT_END, false);
	a.count = 1;
	assert_string_equal(say(&p.model, &a), "long poll over: task 'noisy' #5: 1 long poll in "
					       "2.52 s, the longest 21.40 ms");
	alert__title(title, sizeof(title), &a);
	assert_string_equal(title, "long-poll over: noisy #5");

	a = alert_of(ALERT_SCHED_DELAY, ALERT_END, false);
	assert_string_equal(say(&p.model, &a), "scheduling delay over: 11 late polls in 2.52 s, "
					       "the longest wait 21.40 ms");
	a.ongoing = true;
	a.count = 1;
	assert_string_equal(say(&p.model, &a),
			    "scheduling delay still going when tracing stopped: 1 late poll in "
			    "2.52 s, the longest wait 21.40 ms");

	a = alert_of(ALERT_STARVATION, ALERT_END, false);
	assert_string_equal(say(&p.model, &a), "starvation over: worker 1 starved for 2.52 s, at "
					       "worst 40.2 tasks queued on average");
	a.ongoing = true;
	assert_string_equal(say(&p.model, &a),
			    "starvation: worker 1 still starving when tracing stopped, starved for "
			    "2.52 s, at worst 40.2 tasks queued on average");

	a = alert_of(ALERT_THRASH, ALERT_END, false);
	assert_string_equal(say(&p.model, &a),
			    "waker thrash over: task 'noisy' #5 thrashed for 2.52 s");
	a.ongoing = true;
	assert_string_equal(say(&p.model, &a), "waker thrash: task 'noisy' #5 still thrashing "
					       "when tracing stopped, thrashed for 2.52 s");

	a = alert_of(ALERT_LOST_WAKER, ALERT_END, false);
	assert_string_equal(say(&p.model, &a),
			    "lost waker over: task 'noisy' #5 was woken after 2.52 s");
	a.ongoing = true;
	assert_string_equal(say(&p.model, &a),
			    "lost waker: task 'noisy' #5 still not woken when tracing stopped, "
			    "2.52 s after it returned Pending");

	/* a scheduling delay's episode is the runtime's, not its first late task's */
	a = alert_of(ALERT_SCHED_DELAY, ALERT_BEGIN, false);
	alert__title(title, sizeof(title), &a);
	assert_string_equal(title, "scheduling-delay: noisy #5");
	a.state = ALERT_END;
	alert__title(title, sizeof(title), &a);
	assert_string_equal(title, "scheduling-delay over");

	/* no episode that tracing stopped is called over, whatever its kind */
	for (int k = 1; k < ALERT_KIND_MAX; k++) {
		a = alert_of(k, ALERT_END, true);
		assert_null(strstr(say(&p.model, &a), "over"));
		assert_non_null(strstr(say(&p.model, &a), "when tracing stopped"));
	}
	pipeline__free(&p);
}

static void push_spawn(struct pipeline *p, uint64_t ts, uint64_t task, const char *name)
{
	struct at_spawn e = {
		.hdr = { .kind = AT_EV_SPAWN, .size = sizeof(e), .tid = 200, .ts = ts },
		.task = task,
		.queue = AT_QUEUE_INJECT,
		.depth = 1,
	};

	snprintf(e.name, sizeof(e.name), "%s", name);
	assert_int_equal(pipeline__push(p, &e, sizeof(e)), 0);
}

static void push_long_poll(struct pipeline *p, uint64_t ts, uint64_t task, uint32_t worker)
{
	struct at_poll e = {
		.hdr = { .kind = AT_EV_POLL, .size = sizeof(e), .tid = 101 + worker, .ts = ts },
		.task = task,
		.duration_ns = 20 * MS,
		.oncpu_ns = 20 * MS,
		.worker = worker,
		.requeue = AT_QUEUE_NONE,
	};

	assert_int_equal(pipeline__push(p, &e, sizeof(e)), 0);
}

/* The report, into a string, laid out for cols columns (0: no COLUMNS). */
static char *report_text(struct pipeline *p, const struct stats *st, int cols, bool full)
{
	struct run_info run = { .seconds = 3.0, .end_reason = "target exited" };
	char *buf = NULL, num[16];
	size_t size = 0;
	FILE *f = open_memstream(&buf, &size);

	assert_non_null(f);
	snprintf(num, sizeof(num), "%d", cols);
	if (cols)
		setenv("COLUMNS", num, 1);
	else
		unsetenv("COLUMNS");
	report__text(f, &p->model, &p->detector, st, &run, full);
	fclose(f);
	unsetenv("COLUMNS");
	return buf;
}

static int widest(const char *text)
{
	int w = 0;

	for (const char *l = text; *l;) {
		const char *nl = strchr(l, '\n');
		size_t n = nl ? (size_t)(nl - l) : strlen(l);
		char line[4096];
		int lw;

		snprintf(line, sizeof(line), "%.*s", (int)n, l);
		lw = layout__width(line);
		if (lw > w)
			w = lw;
		l += n + (nl ? 1 : 0);
	}
	return w;
}

/* "alerts 1 episodes" next to "alerts (2 raised)" no more: episodes, counted alike. */
static void report_counts_episodes(void **state)
{
	struct detect_config opts = { .long_poll_ns = 10 * MS, .episode_gap_ns = 1000 * MS };
	struct stats st = { 0 };
	struct pipeline p;
	char *out;

	assert_int_equal(pipeline__init(&p, 4242, "sample", T0, &opts), 0);
	out = report_text(&p, &st, 300, true);
	assert_non_null(strstr(out, "  alerts   0 episodes: long-poll 0, scheduling-delay 0, "));
	assert_non_null(strstr(out, "\nalert log: none\n"));
	free(out);
	push_spawn(&p, T0, 1, "noisy");
	push_spawn(&p, T0, 2, "blocking");
	push_long_poll(&p, T0 + 10 * MS, 1, 0);
	out = report_text(&p, &st, 300, true);
	assert_non_null(strstr(out, "  alerts   1 episode: long-poll 1, scheduling-delay 0, "));
	assert_non_null(strstr(out, "\nalert log: 1 episode, still open (a begin line, no end "
				    "yet)\n"));
	free(out);

	push_long_poll(&p, T0 + 500 * MS, 2, 1);
	pipeline__tick(&p, T0 + 1500 * MS); /* 1 quiet past the gap: over */
	assert_int_equal(pipeline__finish(&p, T0 + 2000 * MS), 0); /* 2 still going */
	out = report_text(&p, &st, 300, true);
	/* in time order: 1 ended (at its last long poll) before 2 began */
	assert_true(strstr(out, "end   long poll over: task 'noisy'") <
		    strstr(out, "begin long poll: task 'blocking'"));
	assert_non_null(strstr(out, "  alerts   2 episodes: long-poll 2, scheduling-delay 0, "));
	assert_non_null(strstr(out, "\nalert log: 2 episodes, each a begin and an end line\n"));
	assert_non_null(strstr(out, " end   long poll over: task 'noisy' #1: 1 long poll in "));
	assert_non_null(strstr(out, " end   long poll: task 'blocking' #2 still going when "
				    "tracing stopped: 1 long poll in "));
	assert_null(strstr(out, "raised"));
	free(out);
	pipeline__free(&p);
}

#define WORKERS 12
#define TASKS 10

/* A snapshot of a runtime with many workers and tasks with long names. */
static void busy_stats(struct pipeline *p, struct stats *st, uint64_t ts, int second)
{
	memset(st, 0, sizeof(*st));
	st->ts = ts;
	st->nr_workers = WORKERS;
	st->workers = calloc(WORKERS, sizeof(*st->workers));
	st->tasks = calloc(TASKS, sizeof(*st->tasks));
	st->steals = calloc(WORKERS * WORKERS, sizeof(*st->steals));
	assert_non_null(st->workers);
	assert_non_null(st->tasks);
	assert_non_null(st->steals);
	st->rt.wakes = 123456ull * (uint64_t)second;
	for (uint32_t i = 0; i < WORKERS; i++) {
		struct at_worker_stats *w = &st->workers[i];

		w->polls = 1234567ull * (uint64_t)second;
		w->busy_ns = 400 * MS * (uint64_t)second;
		w->steals = w->stolen = 4321ull * (uint64_t)second;
		w->queue.depth = 3;
		w->queue.peak = 1234;
		w->queue.area = 12345 * MS;
		/* worker 0's longest poll grows in the second second; the others' stay */
		w->max_poll_ns = i == 0 && second == 2 ? 37 * MS : 5 * MS;
		w->poll.slot[13] = w->oncpu.slot[13] = 1000ull * (uint64_t)second;
		w->poll.slot[22] = 10ull * (uint64_t)second;
		w->delay.slot[14] = 1000ull * (uint64_t)second;
		w->delay.slot[24] = 3ull * (uint64_t)second;
		for (uint32_t v = 0; v < WORKERS; v++) {
			struct steal_entry *e = &st->steals[st->nr_steals++];

			e->key.thief = i;
			e->key.victim = v;
			e->s.ops = e->s.tasks = 98765ull * (uint64_t)second;
		}
	}
	for (uint64_t t = 0; t < TASKS; t++) {
		struct task_entry *e = &st->tasks[st->nr_tasks++];
		char name[AT_TASK_NAME_LEN];

		snprintf(name, sizeof(name), "%s<tokio_app::workload::burn_cpu::{{closure}}>%llu",
			 t == 9 ? "\033[2J\033]0;owned\007" : "hyper::proto::h1::dispatch::Server",
			 (unsigned long long)t);
		e->id = 1000000 + t;
		e->s.name_addr = 0x1000 + t;
		model__name(&p->model, e->s.name_addr, name);
		e->s.polls = 100000 * (t + 1) * (uint64_t)second;
		e->s.poll_ns = e->s.polls * 20 * US;
		e->s.oncpu_ns = e->s.poll_ns / 2;
		e->s.max_poll_ns = 37 * MS;
		e->s.wakes = e->s.self_wakes = e->s.polls;
		e->s.poll.slot[14] = (uint32_t)e->s.polls;
	}
}

static void free_stats(struct stats *st)
{
	free(st->workers);
	free(st->tasks);
	free(st->steals);
}

static void report_fits_the_width(void **state)
{
	struct detect_config opts = { .long_poll_ns = 10 * MS, .episode_gap_ns = 1000 * MS };
	struct stats st;
	struct pipeline p;
	char *out;

	assert_int_equal(pipeline__init(&p, 4242, "sample-executor", T0, &opts), 0);
	busy_stats(&p, &st, T0 + 1000 * MS, 1);
	push_spawn(&p, T0, 3, "\033[2J\033]0;owned\007hyper::proto::h1::dispatch::Server");
	push_long_poll(&p, T0 + 10 * MS, 3, 0);
	assert_int_equal(pipeline__finish(&p, T0 + 20 * MS), 0);
	for (int cols = LAYOUT_MIN_COLUMNS; cols <= 240; cols += 7) {
		out = report_text(&p, &st, cols, true);
		if (widest(out) > cols) {
			fprintf(stderr, "%s", out);
			fail_msg("%d columns: a line of %d", cols, widest(out));
		}
		assert_null(strchr(out, '\033')); /* a task's name is no escape sequence */
		assert_non_null(strstr(out, "steal matrix"));
		assert_non_null(strstr(out, " w11")); /* every victim, in blocks if need be */
		free(out);
	}
	/* not a terminal, no COLUMNS: at most 100 */
	out = report_text(&p, &st, 0, true);
	assert_true(widest(out) <= 100);
	free(out);
	/* wide enough for every column: the max of a poll is exact, a delay's a bound */
	out = report_text(&p, &st, 240, true);
	assert_non_null(strstr(out, "on-CPU p99  delay p50   p99    max\n"));
	assert_non_null(strstr(out, "  37ms  ")); /* the tasks' longest polls */
	assert_non_null(strstr(out, "  5.0ms  ")); /* the workers' */
	assert_non_null(strstr(out, "  " LE "34ms\n")); /* delays up to 2^25 ns */
	free(out);
	free_stats(&st);
	pipeline__free(&p);
}

/* The live view as drawn for cols columns, after two snapshots a second apart,
 * with nr_open alerts begun before them. */
static char *live_view_open(struct pipeline *p, int cols, int nr_open)
{
	struct console_opts o = { .live = true, .print_alerts = true };
	struct stats a, b;
	struct sink *s;
	char *buf = NULL, num[16];
	size_t size = 0;

	o.out = open_memstream(&buf, &size);
	assert_non_null(o.out);
	snprintf(num, sizeof(num), "%d", cols);
	setenv("COLUMNS", num, 1);
	assert_int_equal(console__new(&s, &o), 0);
	o.print_alerts = false;
	for (int i = 0; i < nr_open; i++) {
		struct alert al = alert_of(i % 2 ? ALERT_SCHED_DELAY : ALERT_LONG_POLL, ALERT_BEGIN,
					   false);

		al.episode = (uint64_t)i + 1;
		s->ops->alert(s, &p->model, &al);
	}
	busy_stats(p, &a, T0 + 1000 * MS, 1);
	busy_stats(p, &b, T0 + 2000 * MS, 2);
	s->ops->stats(s, &p->model, &a);
	s->ops->stats(s, &p->model, &b);
	s->ops->free(s);
	fclose(o.out);
	unsetenv("COLUMNS");
	free_stats(&a);
	free_stats(&b);
	return buf;
}

static char *live_view(struct pipeline *p, int cols)
{
	return live_view_open(p, cols, 0);
}

/* Each line of the view, without the escape sequences that draw it. */
static void view_lines(const char *view, char lines[][1024], int *nr)
{
	*nr = 0;
	for (const char *l = view; *l && *nr < 64;) {
		const char *nl = strchr(l, '\n');
		size_t n = nl ? (size_t)(nl - l) : strlen(l);
		char *out = lines[(*nr)++];
		size_t o = 0;

		for (size_t i = 0; i < n && o < 1023; i++) {
			if (l[i] == '\033') { /* CSI: up to its final letter */
				while (i < n && !(l[i] >= '@' && l[i] <= '~' && l[i] != '['))
					i++;
				continue;
			}
			out[o++] = l[i];
		}
		out[o] = '\0';
		l += n + (nl ? 1 : 0);
	}
}

static void live_view_fits_the_width(void **state)
{
	struct detect_config opts = { 0 };
	char lines[64][1024];
	struct pipeline p;
	int nr;

	assert_int_equal(pipeline__init(&p, 4242, "sample-executor", T0, &opts), 0);
	for (int cols = LAYOUT_MIN_COLUMNS; cols <= 240; cols += 7) {
		char *view = live_view(&p, cols);

		view_lines(view, lines, &nr);
		assert_int_equal(nr, 1 + 1 + WORKERS + 1 + 5);
		for (int i = 0; i < nr; i++)
			if (layout__width(lines[i]) > cols - 1)
				fail_msg("%d columns: '%s'", cols, lines[i]);
		assert_null(strchr(view, '\a')); /* nor a name's escape sequence */
		assert_non_null(strstr(lines[nr - 5], " #1000009")); /* the id outlives the name */
		free(view);
	}
	{
		/* worker 0's longest poll since the start came in this second: exact;
		 * the others' only by the bucket of this second's longest */
		char *view = live_view(&p, 200);

		view_lines(view, lines, &nr);
		assert_string_equal(lines[1], " worker  busy  queue  peak  polls/s  steals/s  poll p50"
					      "    p99     max  delay p50    p99     max");
		assert_non_null(strstr(lines[2], "  37ms  "));
		assert_non_null(strstr(lines[3], "  " LE "5.0ms  "));
		assert_non_null(strstr(lines[3], "  " LE "34ms"));
		free(view);
	}
	pipeline__free(&p);
}

/* The open alerts, as many as fit, and how many more. */
static void live_view_open_alerts(void **state)
{
	struct detect_config opts = { 0 };
	char lines[64][1024], *view, *last;
	struct pipeline p;
	int nr;

	assert_int_equal(pipeline__init(&p, 4242, "sample-executor", T0, &opts), 0);
	view = live_view_open(&p, 120, 2);
	view_lines(view, lines, &nr);
	/* a scheduling delay is the runtime's: no task named */
	assert_string_equal(lines[nr - 1], " open alerts: long-poll noisy scheduling-delay");
	free(view);
	for (int cols = LAYOUT_MIN_COLUMNS; cols <= 120; cols++) {
		view = live_view_open(&p, cols, 7); /* 4 listed at most, 3 more */
		view_lines(view, lines, &nr);
		last = lines[nr - 1];
		assert_true(layout__width(last) <= cols - 1);
		if (cols - 1 >= 13 + 16 + 11)
			assert_memory_equal(last, " open alerts: long-poll noisy", 29);
		else
			assert_string_equal(last, " open alerts: and 7 more");
		assert_non_null(strstr(last, " more"));
		free(view);
	}
	view = live_view_open(&p, 200, 7);
	view_lines(view, lines, &nr);
	assert_string_equal(lines[nr - 1], " open alerts: long-poll noisy scheduling-delay long-poll "
					   "noisy scheduling-delay and 3 more");
	free(view);
	pipeline__free(&p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(alert_wording),
		cmocka_unit_test(report_counts_episodes),
		cmocka_unit_test(report_fits_the_width),
		cmocka_unit_test(live_view_fits_the_width),
		cmocka_unit_test(live_view_open_alerts),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
