// SPDX-License-Identifier: MIT
#include "console.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "alerts.h"

#define LIVE_TOP_TASKS 5
#define LIVE_OPEN_ALERTS 4
#define LIVE_MAX 8192

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
	char line[512];

	track_open(c, a);
	if (!c->o.print_alerts)
		return;
	erase(c);
	alert__format(line, sizeof(line), m, a);
	fprintf(c->o.out, "asynctraced: %s: %s\n", a->state == ALERT_END ? "alert end" : "alert",
		line);
	fflush(c->o.out);
}

static const struct at_worker_stats *prev_worker(const struct console *c, uint32_t i)
{
	return i < c->prev.nr_workers ? &c->prev.workers[i] : NULL;
}

/* Renders the view into buf; returns the number of lines. */
static int render(struct console *c, struct model *m, const struct stats *st, char *buf,
		  size_t size)
{
	double dt = c->prev.ts && st->ts > c->prev.ts ? (double)(st->ts - c->prev.ts) / 1e9 : 0;
	struct stats_totals now, before = { 0 };
	struct task_entry top[LIVE_TOP_TASKS];
	size_t off = 0, nr_top = 0;
	int lines = 0;

#define OUT(...)                                                                              \
	do {                                                                                  \
		int n_ = snprintf(buf + off, off < size ? size - off : 0, __VA_ARGS__);       \
		if (n_ > 0)                                                                   \
			off += (size_t)n_;                                                    \
	} while (0)
#define LINE(...)                                                                             \
	do {                                                                                  \
		OUT(__VA_ARGS__);                                                             \
		OUT("\033[K\n");                                                              \
		lines++;                                                                      \
	} while (0)

	if (dt <= 0)
		return 0;
	stats__totals(st, &now);
	if (c->prev.nr_workers)
		stats__totals(&c->prev, &before);
	LINE("asynctraced: pid %u (%s)  polls %.0f/s  wakes %.0f/s  steals %.0f/s  events "
	     "%.0f/s  dropped %llu",
	     m->pid, m->comm, (double)(now.polls - before.polls) / dt,
	     (double)(st->rt.wakes - c->prev.rt.wakes) / dt,
	     (double)(now.steals - before.steals) / dt,
	     (double)(m->n.events - c->prev_events) / dt, (unsigned long long)st->dropped);
	LINE(" worker  busy  queue now/peak  polls/s  steals/s   poll p50    p99    max  delay "
	     "p50    p99    max");
	for (uint32_t i = 0; i < st->nr_workers; i++) {
		const struct at_worker_stats *w = &st->workers[i], *p = prev_worker(c, i);
		struct at_worker_stats zero = { 0 };
		struct at_hist poll, delay;
		char p50[16], p99[16], pmax[16], d50[16], d99[16], dmax[16];

		if (!p)
			p = &zero;
		hist_delta(&poll, &w->poll, &p->poll);
		hist_delta(&delay, &w->delay, &p->delay);
		fmt_ns(p50, sizeof(p50), hist_percentile(&poll, 50));
		fmt_ns(p99, sizeof(p99), hist_percentile(&poll, 99));
		fmt_ns(pmax, sizeof(pmax), hist_percentile(&poll, 100));
		fmt_ns(d50, sizeof(d50), hist_percentile(&delay, 50));
		fmt_ns(d99, sizeof(d99), hist_percentile(&delay, 99));
		fmt_ns(dmax, sizeof(dmax), hist_percentile(&delay, 100));
		LINE(" %6u  %3.0f%%  %6u / %-5u  %7.0f  %8.0f  %7s %7s %7s  %7s %7s %7s", i,
		     100.0 * (double)(w->busy_ns - p->busy_ns) / (dt * 1e9), w->queue.depth,
		     w->queue.peak, (double)(w->polls - p->polls) / dt,
		     (double)(w->steals - p->steals) / dt, p50, p99, pmax, d50, d99, dmax);
	}

	/* Top tasks by poll time in the last second. */
	{
		struct u64map before_tasks;

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
	}
	LINE(" top tasks by poll time in the last second:");
	for (size_t i = 0; i < nr_top; i++) {
		char total[16], name[AT_TASK_NAME_LEN];

		model__task_name(m, top[i].id, top[i].s.name_addr, name, sizeof(name));
		fmt_ns(total, sizeof(total), top[i].s.poll_ns);
		LINE("   %7s  %6llu polls  %s #%llu", total, (unsigned long long)top[i].s.polls,
		     name, (unsigned long long)top[i].id);
	}
	if (c->nr_open) {
		OUT(" open alerts:");
		for (int i = 0; i < c->nr_open; i++)
			OUT(" %s%s%s", alert_kind_str(c->open[i].kind),
			    c->open[i].task ? " " : "", c->open[i].task ? c->open[i].task_name : "");
		if (c->more_open)
			OUT(" and %llu more", (unsigned long long)c->more_open);
		LINE("%s", "");
	}
	return lines;
#undef LINE
#undef OUT
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

static void con_stats(struct sink *s, struct model *m, const struct stats *st)
{
	struct console *c = con_of(s);
	static char buf[LIVE_MAX];
	int lines;

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
