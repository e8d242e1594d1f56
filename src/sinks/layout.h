/* SPDX-License-Identifier: MIT */
/*
 * Text laid out to a width, for the live view and the report: how wide the
 * terminal is, names cut to fit, tables that drop their least important
 * columns rather than wrap a row, and paragraphs wrapped at spaces.
 */
#ifndef LAYOUT_H
#define LAYOUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* Below this, text is laid out as if it had this many columns. */
#define LAYOUT_MIN_COLUMNS 40

/*
 * The columns f shows: its terminal's width when it is one, else $COLUMNS,
 * else fallback; never less than LAYOUT_MIN_COLUMNS.
 */
int layout__columns(FILE *f, int fallback);
/* The rows of f's terminal, or 0 when it is none (or does not say). */
int layout__rows(FILE *f);

/* The columns a UTF-8 string takes: one for each code point. */
int layout__width(const char *s);

/*
 * s in at most cols columns, into buf: cut with "…" when longer. Control
 * characters (a name read from the target's memory may hold an escape
 * sequence) are shown as '?'. Returns the columns taken.
 */
int layout__fit(char *buf, size_t size, const char *s, int cols);

/*
 * s fitted into cols columns as layout__fit does, but cut in the middle: its
 * last tail columns stay ("tokio_app::co…burn_cpu::{{closure}}> #3").
 */
int layout__fit_tail(char *buf, size_t size, const char *s, int cols, int tail);

/*
 * A Rust or C++ type or function name made short: each path keeps its last
 * segment ("tokio_app::counted::Counted<tokio_app::workload::burn_cpu::
 * {{closure}}>" -> "Counted<burn_cpu::{{closure}}>"), a closure its
 * function's name too; keep more segments with keep > 1.
 */
void layout__short_path(char *buf, size_t size, const char *s, int keep);

/*
 * nr names, each in a buffer of stride bytes, made short in place: as
 * short as layout__short_path makes them with the fewest segments that
 * keep names that differ apart (left whole if none does).
 */
void layout__short_names(char *names, size_t stride, size_t nr);

/* Where laid-out lines go, one at a time, without their newline. */
typedef void (*layout_line_fn)(void *ctx, const char *line);
/* A layout_line_fn printing to the FILE * ctx, each line and a newline. */
void layout__puts(void *ctx, const char *line);

/*
 * text in lines of at most cols columns, broken at spaces (a word longer
 * than a line is broken where the line ends); lines after the first start
 * with indent spaces.
 */
void layout__wrap(layout_line_fn fn, void *ctx, const char *text, int cols, int indent);

/* One part of a line that may be left out when the line is too long. */
struct layout_field {
	char text[96];	/* with its leading separator: "  polls 8946/s" */
	int drop;	/* the highest goes first; 0: always kept */
};

/* The fields that fit in cols, in their order, into buf. */
void layout__fields(char *buf, size_t size, const struct layout_field *f, int nr, int cols);

struct layout_col {
	const char *head;
	/* NULL, or a word that heads a group of columns: shown before the head
	 * of the first of them shown ("poll p50", then "p99", "max") */
	const char *group;
	int drop;	/* when too wide, the column with the highest goes first; 0: kept */
	int width;	/* at least this wide, so that a redrawn table keeps still */
	int min;	/* a left-aligned column that may be cut down to min columns
			 * ("…") before any is dropped; 0: right-aligned, never cut */
	int keep_tail;	/* cut in the middle: its last keep_tail columns stay */
};

struct layout_table;

int layout_table__new(struct layout_table **t, const struct layout_col *cols, int nr_cols);
/* The next cell, row by row: a new row begins every nr_cols cells. */
void layout_table__cell(struct layout_table *t, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/*
 * The heading and the rows, each line at most cols columns (unless the
 * columns that are never dropped are wider), indent spaces first, two
 * between columns. Returns the number of lines.
 */
int layout_table__print(struct layout_table *t, int cols, int indent, layout_line_fn fn,
			void *ctx);
void layout_table__free(struct layout_table *t);

#endif
