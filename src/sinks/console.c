// SPDX-License-Identifier: MIT
#include "sinks/console.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/util.h"
#include "sinks/alerts.h"
#include "sinks/board.h"
#include "sinks/layout.h"
#include "source/stats.h"

#define LIVE_TOP_TASKS 5
#define LIVE_OPEN_ALERTS 4
/* An alert line that a terminal is too narrow for goes on under its text. */
#define ALERT_INDENT 4
#define LIVE_LINE_MAX 1024
#define LIVE_MAX (LIVE_LINE_MAX * (AT_MAX_WORKERS + 16))

struct console {
	struct sink sink;
	struct console_opts o;
	int drawn;			/* lines of the live view on screen */
	struct stats prev;		/* the snapshot a second ago */
	uint64_t prev_events;
	struct alert open[LIVE_OPEN_ALERTS];
	int nr_open;
	uint64_t more_open;		/* beyond what is listed */
};

static struct console *con_of(struct sink *s)
{
	return (struct console *)s;
}

/* Takes the live view off the screen, so that other lines can be printed. */
static void erase(struct console *c)
{
	if (c->o.board)
		board__erase(c->o.board);
	if (c->drawn)
		fprintf(c->o.out, "\033[%dA\033[J", c->drawn);
	c->drawn = 0;
}

static void track_open(struct console *c, const struct alert *a)
{
	if (a->state == ALERT_BEGIN) {
		if (c->nr_open < LIVE_OPEN_ALERTS)
			c->open[c->nr_open++] = *a;
		else
			c->more_open++;
		return;
	}
	for (int i = 0; i < c->nr_open; i++) {
		if (c->open[i].episode == a->episode) {
			c->open[i] = c->open[--c->nr_open];
			return;
		}
	}
	if (c->more_open)
		c->more_open--;
}

static void con_alert(struct sink *s, struct model *m, const struct alert *a)
{
	struct console *c = con_of(s);
	char msg[1024], line[1100], shown[3300];
	int fd = fileno(c->o.out);

	track_open(c, a);
	if (!c->o.print_alerts)
		return;
	erase(c);
	alert__format(msg, sizeof(msg), m, a);
	/* under the journal: a warning as it begins, a notice as it ends */
	if (c->o.name_process && *c->o.name_process)
		snprintf(line, sizeof(line), "%sasynctraced: %s: pid %u (%s): %s",
			 log_prefix(a->state == ALERT_END ? 5 : 4),
			 a->state == ALERT_END ? "alert end" : "alert", m->pid, m->comm, msg);
	else
		snprintf(line, sizeof(line), "%sasynctraced: %s: %s",
			 log_prefix(a->state == ALERT_END ? 5 : 4),
			 a->state == ALERT_END ? "alert end" : "alert", msg);
	/* a task's name comes from the target: no escape sequence of its own
	 * reaches root's terminal, or a log that is read on one */
	layout__fit(shown, sizeof(shown), line, (int)sizeof(shown));
	if (fd >= 0 && isatty(fd))
		layout__wrap(layout__puts, c->o.out, shown, layout__columns(c->o.out, 80),
			     ALERT_INDENT);
	else
		layout__puts(c->o.out, shown); /* one line each, for grep */
	fflush(c->o.out);
}

static const struct at_worker_stats *prev_worker(const struct console *c, uint32_t i)
{
	return i < c->prev.nr_workers ? &c->prev.workers[i] : NULL;
}

/*
 * The longest poll of the last second. A worker keeps its longest poll
 * since tracing began: when that grew in the last second, the poll that grew
 * it is the longest of the second, exactly. Otherwise all the histogram
 * knows is its log2 bucket: its upper bound (no more than the longest since
 * the start), marked as a bound.
 */
static void fmt_last_max(char *buf, size_t size, const struct at_worker_stats *w,
			 const struct at_worker_stats *p, const struct at_hist *poll)
{
	if (w->max_poll_ns > p->max_poll_ns)
		fmt_ns(buf, size, w->max_poll_ns);
	else if (hist_count(poll))
		fmt_bound(buf, size, hist_percentile_max(poll, 100, w->max_poll_ns));
	else
		snprintf(buf, size, "-");
}

/* The view, as it is drawn: each line cut to the width, and the count. */
struct view {
	char *buf;
	size_t size, off;
	int lines, cols;
	int rows;	/* of the terminal; 0: not one, or it does not say */
};

static void view_line(void *ctx, const char *line)
{
	struct view *v = ctx;
	char fit[LIVE_LINE_MAX];
	int n;

	/* never as wide as the terminal: a line that reaches its last column
	 * leaves the cursor past it, where erasing the line's end may wrap */
	layout__fit(fit, sizeof(fit), line, v->cols - 1);
	n = snprintf(v->buf + v->off, v->off < v->size ? v->size - v->off : 0, "%s\033[K\n", fit);
	if (n > 0)
		v->off += (size_t)n;
	v->lines++;
}

static void __attribute__((format(printf, 2, 3))) view_printf(struct view *v, const char *fmt, ...)
{
	char line[LIVE_LINE_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	view_line(v, line);
}

/* Rates of the whole runtime, as many as fit after its name. */
static void render_rates(struct console *c, struct model *m, const struct stats *st, double dt,
			 struct view *v)
{
	struct stats_totals now, before = { 0 };
	struct layout_field f[6] = { 0 };
	char line[LIVE_LINE_MAX];

	stats__totals(st, &now);
	if (c->prev.nr_workers)
		stats__totals(&c->prev, &before);
	snprintf(f[0].text, sizeof(f[0].text), "asynctraced: pid %u (%s)", m->pid, m->comm);
	snprintf(f[1].text, sizeof(f[1].text), "  polls %.0f/s",
		 (double)(now.polls - before.polls) / dt);
	f[1].drop = 1;
	if (c->o.sample_hz) /* sample mode: no wake or steal seen, its rate instead */
		snprintf(f[2].text, sizeof(f[2].text), "  sampled at %u Hz", c->o.sample_hz);
	else
		snprintf(f[2].text, sizeof(f[2].text), "  wakes %.0f/s",
			 (double)(st->rt.wakes - c->prev.rt.wakes) / dt);
	f[2].drop = 3;
	if (c->o.sample_hz)
		snprintf(f[3].text, sizeof(f[3].text), "  steals -");
	else
		snprintf(f[3].text, sizeof(f[3].text), "  steals %.0f/s",
			 (double)(now.steals - before.steals) / dt);
	f[3].drop = 4;
	snprintf(f[4].text, sizeof(f[4].text), "  events %.0f/s",
		 (double)(m->n.events - c->prev_events) / dt);
	f[4].drop = 5;
	snprintf(f[5].text, sizeof(f[5].text), "  dropped %llu", (unsigned long long)st->dropped);
	f[5].drop = 2;
	layout__fields(line, sizeof(line), f, 6, v->cols - 1);
	view_line(v, line);
}

/* Dropped first: the bounds only, then what says least about a stall. */
static const struct layout_col worker_cols[] = {
	{ .head = "worker" },
	{ .head = "busy", .drop = 5, .width = 4 },
	{ .head = "queue", .drop = 6, .width = 5 },
	{ .head = "peak", .drop = 9, .width = 4 },
	{ .head = "polls/s", .drop = 3, .width = 7 },
	{ .head = "steals/s", .drop = 8, .width = 8 },
	{ .head = "p50", .group = "poll", .drop = 7, .width = 5 },
	{ .head = "p99", .group = "poll", .drop = 2, .width = 5 },
	{ .head = "max", .group = "poll", .drop = 1, .width = 6 },
	{ .head = "p50", .group = "delay", .drop = 10, .width = 5 },
	{ .head = "p99", .group = "delay", .drop = 4, .width = 5 },
	{ .head = "max", .group = "delay", .drop = 11, .width = 6 },
};

/*
 * The workers a terminal has rows for. The view is redrawn by moving the
 * cursor up over it, which cannot go above the top of the screen: a view
 * taller than the terminal would scroll and be drawn again below itself.
 */
static uint32_t workers_shown(const struct view *v, const struct stats *st, int other_lines)
{
	int room = v->rows - 1 - other_lines - 1; /* the last row; "... more workers" */

	if (!v->rows || (int64_t)st->nr_workers <= room + 1)
		return st->nr_workers;
	return room > 1 ? (uint32_t)room : 1;
}

static void render_workers(struct console *c, const struct stats *st, double dt, struct view *v,
			   int other_lines)
{
	uint32_t shown = workers_shown(v, st, other_lines);
	struct layout_table *t;
	char more[96];

	if (layout_table__new(&t, worker_cols, sizeof(worker_cols) / sizeof(*worker_cols)))
		return;
	for (uint32_t i = 0; i < shown; i++) {
		const struct at_worker_stats *w = &st->workers[i], *p = prev_worker(c, i);
		struct at_worker_stats zero = { 0 };
		struct at_hist poll, delay;
		char buf[16];

		if (!p)
			p = &zero;
		hist_delta(&poll, &w->poll, &p->poll);
		hist_delta(&delay, &w->delay, &p->delay);
		layout_table__cell(t, "%u", i);
		layout_table__cell(t, "%.0f%%", 100.0 * (double)(w->busy_ns - p->busy_ns) / (dt * 1e9));
		if (c->o.queues_unseen) {
			layout_table__cell(t, "-");
			layout_table__cell(t, "-");
		} else {
			layout_table__cell(t, "%u", w->queue.depth);
			layout_table__cell(t, "%u", w->queue.peak);
		}
		layout_table__cell(t, "%.0f", (double)(w->polls - p->polls) / dt);
		if (c->o.sample_hz)
			layout_table__cell(t, "-");
		else
			layout_table__cell(t, "%.0f", (double)(w->steals - p->steals) / dt);
		fmt_ns(buf, sizeof(buf), hist_percentile_max(&poll, 50, w->max_poll_ns));
		layout_table__cell(t, "%s", hist_count(&poll) ? buf : "-");
		fmt_ns(buf, sizeof(buf), hist_percentile_max(&poll, 99, w->max_poll_ns));
		layout_table__cell(t, "%s", hist_count(&poll) ? buf : "-");
		fmt_last_max(buf, sizeof(buf), w, p, &poll);
		layout_table__cell(t, "%s", buf);
		fmt_ns(buf, sizeof(buf), hist_percentile(&delay, 50));
		layout_table__cell(t, "%s", hist_count(&delay) ? buf : "-");
		fmt_ns(buf, sizeof(buf), hist_percentile(&delay, 99));
		layout_table__cell(t, "%s", hist_count(&delay) ? buf : "-");
		fmt_bound(buf, sizeof(buf), hist_percentile(&delay, 100));
		layout_table__cell(t, "%s", hist_count(&delay) ? buf : "-");
	}
	layout_table__print(t, v->cols - 1, 1, view_line, v);
	layout_table__free(t);
	if (shown < st->nr_workers) {
		snprintf(more, sizeof(more), " ... %u more workers: a taller terminal shows them",
			 st->nr_workers - shown);
		view_line(v, more);
	}
}

/* The tasks with the most poll time in the last second; how many. */
static size_t last_top(const struct console *c, const struct stats *st, struct task_entry *top)
{
	struct u64map before_tasks;
	size_t nr_top = 0;

	u64map__init(&before_tasks);
	for (size_t i = 0; i < c->prev.nr_tasks; i++)
		u64map__set(&before_tasks, c->prev.tasks[i].id, &c->prev.tasks[i].s);
	for (size_t i = 0; i < st->nr_tasks; i++) {
		const struct at_task_stats *b = u64map__get(&before_tasks, st->tasks[i].id);
		struct task_entry e = st->tasks[i];

		if (b) {
			e.s.poll_ns -= b->poll_ns <= e.s.poll_ns ? b->poll_ns : e.s.poll_ns;
			e.s.polls -= b->polls <= e.s.polls ? b->polls : e.s.polls;
		}
		if (!e.s.polls)
			continue;
		if (nr_top < LIVE_TOP_TASKS) {
			top[nr_top++] = e;
		} else if (e.s.poll_ns > top[LIVE_TOP_TASKS - 1].s.poll_ns) {
			top[LIVE_TOP_TASKS - 1] = e;
		} else {
			continue;
		}
		qsort(top, nr_top, sizeof(top[0]), task_entry__by_poll_ns);
	}
	u64map__clear(&before_tasks);
	return nr_top;
}

static void render_tasks(struct model *m, const struct task_entry *top, size_t nr_top,
			 struct view *v)
{
	char names[LIVE_TOP_TASKS][AT_TASK_NAME_LEN];

	view_line(v, " top tasks by poll time in the last second:");
	/* paths shortened, as far as the names stay apart */
	for (size_t i = 0; i < nr_top; i++)
		model__task_name(m, top[i].id, top[i].s.name_addr, names[i], sizeof(names[i]));
	layout__short_names(names[0], sizeof(names[0]), nr_top);
	for (size_t i = 0; i < nr_top; i++) {
		char total[16], fit[AT_TASK_NAME_LEN * 2], head[64], id[32];
		const char *name = names[i];
		int room;

		fmt_ns(total, sizeof(total), top[i].s.poll_ns);
		snprintf(head, sizeof(head), "   %7s  %6llu polls  ", total,
			 (unsigned long long)top[i].s.polls);
		snprintf(id, sizeof(id), " #%llu", (unsigned long long)top[i].id);
		/* the name gives way, not the id that tells two tasks of one name apart */
		room = v->cols - 1 - layout__width(head) - layout__width(id);
		layout__fit(fit, sizeof(fit), name, room > 1 ? room : 1);
		view_printf(v, "%s%s%s", head, fit, id);
	}
}

/* The open alerts that fit, and how many more there are. */
static void render_open_alerts(struct console *c, struct view *v)
{
	char line[LIVE_LINE_MAX], item[AT_TASK_NAME_LEN * 2 + 40], more[48];
	size_t off;
	int w, i;

	if (!c->nr_open)
		return;
	off = (size_t)snprintf(line, sizeof(line), " open alerts:");
	w = layout__width(line);
	for (i = 0; i < c->nr_open; i++) {
		const struct alert *a = &c->open[i];
		uint64_t rest = (uint64_t)(c->nr_open - i - 1) + c->more_open;
		/* a scheduling delay is the runtime's, whichever task was late first */
		bool named = a->task && a->kind != ALERT_SCHED_DELAY;
		int n;

		n = snprintf(item, sizeof(item), " %s%s%s", alert_kind_str(a->kind), named ? " " : "",
			     named ? a->task_name : "");
		snprintf(more, sizeof(more), " and %llu more", (unsigned long long)rest);
		/* room for this one, and to say how many are left after it */
		if (w + layout__width(item) + (rest ? layout__width(more) : 0) > v->cols - 1 ||
		    off + (size_t)n >= sizeof(line))
			break;
		memcpy(line + off, item, (size_t)n + 1);
		off += (size_t)n;
		w += layout__width(item);
	}
	if (i < c->nr_open || c->more_open)
		snprintf(line + off, sizeof(line) - off, " and %llu more",
			 (unsigned long long)((uint64_t)(c->nr_open - i) + c->more_open));
	view_line(v, line);
}

/* Renders the view into buf; returns the number of lines. */
static int render(struct console *c, struct model *m, const struct stats *st, char *buf,
		  size_t size)
{
	double dt = c->prev.ts && st->ts > c->prev.ts ? (double)(st->ts - c->prev.ts) / 1e9 : 0;
	struct view v = { .buf = buf, .size = size, .cols = layout__columns(c->o.out, 80),
			  .rows = layout__rows(c->o.out) };
	struct task_entry top[LIVE_TOP_TASKS];
	size_t nr_top;

	if (dt <= 0)
		return 0;
	buf[0] = '\0';
	nr_top = last_top(c, st, top);
	render_rates(c, m, st, dt, &v);
	/* the rates, the heading; the top tasks and their heading; open alerts */
	render_workers(c, st, dt, &v, 2 + 1 + (int)nr_top + (c->nr_open ? 1 : 0));
	render_tasks(m, top, nr_top, &v);
	render_open_alerts(c, &v);
	return v.lines;
}

static void copy_stats(struct stats *to, const struct stats *from)
{
	stats__free(to);
	*to = *from;
	to->workers = malloc(from->nr_workers * sizeof(*to->workers) + 1);
	to->tasks = malloc(from->nr_tasks * sizeof(*to->tasks) + 1);
	to->between = NULL; /* what the view compares are the workers and the tasks */
	to->idle = NULL;
	to->nr_idle = 0;
	to->steals = NULL;
	to->nr_steals = 0;
	if (!to->workers || !to->tasks) {
		stats__free(to);
		return;
	}
	memcpy(to->workers, from->workers, from->nr_workers * sizeof(*to->workers));
	memcpy(to->tasks, from->tasks, from->nr_tasks * sizeof(*to->tasks));
}

/* Several processes traced: this one's line of the board (board.h). */
static void board_row(struct console *c, struct model *m, const struct stats *st)
{
	double dt = c->prev.ts && st->ts > c->prev.ts ? (double)(st->ts - c->prev.ts) / 1e9 : 0;
	struct stats_totals now, before = { 0 };
	struct board_row r = { .pid = m->pid, .open_alerts = c->nr_open + (int)c->more_open };
	struct at_hist poll;

	if (dt <= 0)
		return;
	stats__totals(st, &now);
	if (c->prev.nr_workers)
		stats__totals(&c->prev, &before);
	snprintf(r.comm, sizeof(r.comm), "%s", m->comm);
	hist_delta(&poll, &now.poll, &before.poll);
	r.polls_per_s = (double)(now.polls - before.polls) / dt;
	if (st->nr_workers)
		r.busy = (double)(now.busy_ns - before.busy_ns) / (dt * 1e9 * st->nr_workers);
	if (hist_count(&poll)) {
		r.p99_ns = hist_percentile(&poll, 99);
		r.max_ns = hist_percentile(&poll, 100);
	}
	if (c->nr_open) {
		const struct alert *a = &c->open[0];
		bool named = a->task && a->kind != ALERT_SCHED_DELAY;

		/* cut short: the board has a column for it, not a line */
		snprintf(r.alert, sizeof(r.alert), "%s%s%.*s", alert_kind_str(a->kind),
			 named ? " " : "", (int)sizeof(r.alert) - 24, named ? a->task_name : "");
	}
	board__set(c->o.board, c, &r);
}

static void con_stats(struct sink *s, struct model *m, const struct stats *st)
{
	struct console *c = con_of(s);
	static char buf[LIVE_MAX];
	int lines;

	if (c->o.board) {
		board_row(c, m, st);
		copy_stats(&c->prev, st);
		return;
	}
	if (!c->o.live)
		return;
	lines = render(c, m, st, buf, sizeof(buf));
	copy_stats(&c->prev, st);
	c->prev_events = m->n.events;
	if (!lines)
		return;
	erase(c);
	fputs(buf, c->o.out);
	fflush(c->o.out);
	c->drawn = lines;
}

static int con_finish(struct sink *s, struct model *m)
{
	erase(con_of(s));
	return 0;
}

static void con_free(struct sink *s)
{
	struct console *c = con_of(s);

	if (c->o.board)
		board__remove(c->o.board, c);
	stats__free(&c->prev);
	free(c);
}

static const struct sink_ops console_ops = {
	.name = "console",
	.alert = con_alert,
	.stats = con_stats,
	.finish = con_finish,
	.free = con_free,
};

int console__new(struct sink **s, const struct console_opts *o)
{
	struct console *c = calloc(1, sizeof(*c));

	if (!c)
		return -ENOMEM;
	c->sink.ops = &console_ops;
	c->o = *o;
	*s = &c->sink;
	return 0;
}
