// SPDX-License-Identifier: MIT
#include "sinks/board.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sinks/layout.h"
#include "source/stats.h"

struct entry {
	const void *key;
	struct board_row row;
};

struct board {
	FILE *out;
	struct entry *rows;
	size_t nr, cap;
	int drawn;	/* lines on screen */
};

int board__new(struct board **bp, FILE *out)
{
	struct board *b = calloc(1, sizeof(*b));

	if (!b)
		return -ENOMEM;
	b->out = out;
	*bp = b;
	return 0;
}

void board__free(struct board *b)
{
	if (!b)
		return;
	board__erase(b);
	free(b->rows);
	free(b);
}

void board__erase(struct board *b)
{
	if (b->drawn) {
		fprintf(b->out, "\033[%dA\033[J", b->drawn);
		fflush(b->out);
	}
	b->drawn = 0;
}

static struct entry *find(struct board *b, const void *key)
{
	for (size_t i = 0; i < b->nr; i++)
		if (b->rows[i].key == key)
			return &b->rows[i];
	return NULL;
}

int board__set(struct board *b, const void *key, const struct board_row *row)
{
	struct entry *e = find(b, key);

	if (!e) {
		if (b->nr == b->cap) {
			size_t cap = b->cap ? b->cap * 2 : 16;
			struct entry *r = realloc(b->rows, cap * sizeof(*r));

			if (!r)
				return -ENOMEM;
			b->rows = r;
			b->cap = cap;
		}
		e = &b->rows[b->nr++];
		e->key = key;
	}
	e->row = *row;
	return 0;
}

void board__remove(struct board *b, const void *key)
{
	struct entry *e = find(b, key);

	if (e)
		*e = b->rows[--b->nr];
}

/* Worst first: the most open alerts, then the slowest polls of the last second. */
static int worse_first(const void *x, const void *y)
{
	const struct board_row *a = &((const struct entry *)x)->row;
	const struct board_row *b = &((const struct entry *)y)->row;

	if (a->open_alerts != b->open_alerts)
		return a->open_alerts > b->open_alerts ? -1 : 1;
	if (a->max_ns != b->max_ns)
		return a->max_ns > b->max_ns ? -1 : 1;
	return (a->pid > b->pid) - (a->pid < b->pid);
}

static const struct layout_col board_cols[] = {
	{ .head = "pid" },
	{ .head = "process", .min = 6 },
	{ .head = "polls/s", .drop = 3, .width = 7 },
	{ .head = "busy", .drop = 4, .width = 4 },
	{ .head = "p99", .group = "poll", .drop = 2, .width = 5 },
	{ .head = "max", .group = "poll", .drop = 1, .width = 6 },
	{ .head = "open alerts", .min = 6 },
};

struct screen {
	FILE *out;
	int lines;
};

static void put_line(void *ctx, const char *line)
{
	struct screen *sc = ctx;

	fprintf(sc->out, "%s\033[K\n", line);
	sc->lines++;
}

void board__draw(struct board *b)
{
	int width = layout__columns(b->out, 80), rows = layout__rows(b->out);
	size_t shown = b->nr;
	struct screen sc = { .out = b->out };
	struct layout_table *t;
	char head[96];

	board__erase(b);
	if (!b->nr)
		return;
	qsort(b->rows, b->nr, sizeof(*b->rows), worse_first);
	/* the heading, the column heads, "... more": the rest of the terminal's rows */
	if (rows && (int)shown > rows - 4)
		shown = rows > 5 ? (size_t)(rows - 4) : 1;
	if (layout_table__new(&t, board_cols, sizeof(board_cols) / sizeof(board_cols[0])))
		return;
	for (size_t i = 0; i < shown; i++) {
		const struct board_row *r = &b->rows[i].row;
		char p99[16], max[16];

		fmt_ns(p99, sizeof(p99), r->p99_ns);
		fmt_bound(max, sizeof(max), r->max_ns);
		layout_table__cell(t, "%u", r->pid);
		layout_table__cell(t, "%s", r->comm);
		layout_table__cell(t, "%.0f", r->polls_per_s);
		layout_table__cell(t, "%.0f%%", 100.0 * r->busy);
		layout_table__cell(t, "%s", r->p99_ns ? p99 : "-");
		layout_table__cell(t, "%s", r->max_ns ? max : "-");
		if (r->open_alerts > 1)
			layout_table__cell(t, "%s and %d more", r->alert, r->open_alerts - 1);
		else
			layout_table__cell(t, "%s", r->open_alerts ? r->alert : "-");
	}
	snprintf(head, sizeof(head), "asynctraced: %zu processes, the worst first", b->nr);
	put_line(&sc, head);
	layout_table__print(t, width - 1, 1, put_line, &sc);
	layout_table__free(t);
	if (shown < b->nr) {
		snprintf(head, sizeof(head), " ... %zu more: a taller terminal shows them",
			 b->nr - shown);
		put_line(&sc, head);
	}
	fflush(b->out);
	b->drawn = sc.lines;
}
