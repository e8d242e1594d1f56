// SPDX-License-Identifier: MIT
/* Text laid out to a width: names cut, tables that drop columns, wrapped lines. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <setjmp.h>
#include <cmocka.h>

#include "sinks/layout.h"

struct lines {
	char text[64][256];
	int nr;
};

static void collect(void *ctx, const char *line)
{
	struct lines *l = ctx;

	assert_true(l->nr < 64);
	snprintf(l->text[l->nr++], sizeof(l->text[0]), "%s", line);
}

static void columns_from_the_environment(void **state)
{
	FILE *f = tmpfile(); /* not a terminal */

	assert_non_null(f);
	unsetenv("COLUMNS");
	assert_int_equal(layout__columns(f, 80), 80);
	assert_int_equal(layout__columns(f, 100), 100);
	setenv("COLUMNS", "132", 1);
	assert_int_equal(layout__columns(f, 80), 132);
	setenv("COLUMNS", "12", 1); /* too narrow to lay anything out */
	assert_int_equal(layout__columns(f, 80), LAYOUT_MIN_COLUMNS);
	setenv("COLUMNS", "wide", 1);
	assert_int_equal(layout__columns(f, 80), 80);
	unsetenv("COLUMNS");
	fclose(f);
}

static void fit(void **state)
{
	char buf[64];

	assert_int_equal(layout__width("noisy"), 5);
	assert_int_equal(layout__width("\xe2\x89\xa4" "16ms"), 5); /* ≤16ms */
	assert_int_equal(layout__fit(buf, sizeof(buf), "noisy", 5), 5);
	assert_string_equal(buf, "noisy");
	assert_int_equal(layout__fit(buf, sizeof(buf), "tokio_app::workload", 8), 8);
	assert_string_equal(buf, "tokio_a\xe2\x80\xa6");
	assert_int_equal(layout__fit(buf, sizeof(buf), "\xe2\x89\xa4\xe2\x89\xa4\xe2\x89\xa4", 2),
			 2);
	assert_string_equal(buf, "\xe2\x89\xa4\xe2\x80\xa6");
	/* escape sequences from a target's memory never reach the terminal */
	layout__fit(buf, sizeof(buf), "a\033[2Jb\x9b" "c\xc2\x9b" "d\x7f", 40);
	assert_string_equal(buf, "a?[2Jb?c?d?"); /* C1's CSI too, raw or as UTF-8 */
	assert_int_equal(layout__width("a\033[2Jb\x9b" "c\xc2\x9b" "d\x7f"), 11);
	/* a short buffer cuts too, and says so */
	assert_int_equal(layout__fit(buf, 8, "abcdefghij", 40), 5);
	assert_string_equal(buf, "abcd\xe2\x80\xa6");
	assert_int_equal(layout__fit(buf, sizeof(buf), "abc", 0), 0);
	assert_string_equal(buf, "");
}

static void wrap(void **state)
{
	static const char text[] =
		"  note     3 times a thread in a poll ran again without sched_switch showing "
		"it (this kernel hides some switches): averyveryveryverylongwordthatdoesnotfit "
		"at all";
	struct lines l = { 0 };
	char joined[512] = "";

	layout__wrap(collect, &l, text, 40, 11);
	assert_true(l.nr > 2);
	for (int i = 0; i < l.nr; i++) {
		assert_true(layout__width(l.text[i]) <= 40);
		assert_true(l.text[i][strlen(l.text[i]) - 1] != ' ');
		if (i)
			assert_int_equal(strspn(l.text[i], " "), 11);
		strcat(joined, l.text[i] + (i ? 11 : 0));
		strcat(joined, i + 1 < l.nr ? " " : "");
	}
	/* the text's own indentation stays; nothing else is lost */
	assert_memory_equal(l.text[0], "  note     3 times", 18);
	assert_non_null(strstr(joined, "averyveryveryverylongwordth"));
	assert_non_null(strstr(joined, "hides some switches): "));
	assert_non_null(strstr(joined, "at all"));

	/* what fits stays one line */
	l.nr = 0;
	layout__wrap(collect, &l, "  parks    13798", 40, 11);
	assert_int_equal(l.nr, 1);
	assert_string_equal(l.text[0], "  parks    13798");
}

static void fields(void **state)
{
	struct layout_field f[4] = {
		{ "asynctraced: pid 4242 (server)", 0 },
		{ "  polls 9000/s", 1 },
		{ "  events 25000/s", 3 },
		{ "  dropped 0", 2 },
	};
	char buf[256];

	layout__fields(buf, sizeof(buf), f, 4, 200);
	assert_string_equal(buf, "asynctraced: pid 4242 (server)  polls 9000/s  events 25000/s"
				 "  dropped 0");
	layout__fields(buf, sizeof(buf), f, 4, 60);
	assert_string_equal(buf, "asynctraced: pid 4242 (server)  polls 9000/s  dropped 0");
	layout__fields(buf, sizeof(buf), f, 4, 10); /* what is never dropped stays */
	assert_string_equal(buf, "asynctraced: pid 4242 (server)");
}

static const struct layout_col cols[] = {
	{ .head = "task", .min = 8 },
	{ .head = "polls", .drop = 2 },
	{ .head = "p50", .group = "poll", .drop = 3 },
	{ .head = "max", .group = "poll", .drop = 1 },
	{ .head = "self", .drop = 4 },
};

static struct layout_table *table(void)
{
	struct layout_table *t;

	assert_int_equal(layout_table__new(&t, cols, 5), 0);
	layout_table__cell(t, "%s", "tokio_app::workload::burn_cpu #12");
	layout_table__cell(t, "%d", 12345);
	layout_table__cell(t, "%s", "16us");
	layout_table__cell(t, "%s", "37ms");
	layout_table__cell(t, "%d", 0);
	layout_table__cell(t, "%s", "echo #1");
	layout_table__cell(t, "%d", 7);
	layout_table__cell(t, "%s", "\xe2\x89\xa4" "8ms");
	layout_table__cell(t, "%s", "1.5ms");
	layout_table__cell(t, "%d", 3);
	return t;
}

static void tables(void **state)
{
	struct layout_table *t = table();
	struct lines l = { 0 };

	/* everything fits: the group's word heads its first column */
	assert_int_equal(layout_table__print(t, 200, 1, collect, &l), 3);
	assert_string_equal(l.text[0],
			    " task                               polls  poll p50    max  self");
	assert_string_equal(l.text[1],
			    " tokio_app::workload::burn_cpu #12  12345      16us   37ms     0");
	assert_string_equal(l.text[2],
			    " echo #1                                7      \xe2\x89\xa4" "8ms"
			    "  1.5ms     3");
	/* narrower: the name gives way first, down to its least */
	l.nr = 0;
	layout_table__print(t, 50, 1, collect, &l);
	assert_string_equal(l.text[0], " task                 polls  poll p50    max  self");
	assert_string_equal(l.text[1], " tokio_app::workloa\xe2\x80\xa6  12345      16us   37ms     0");
	l.nr = 0;
	layout_table__print(t, 40, 1, collect, &l);
	assert_string_equal(l.text[1], " tokio_ap\xe2\x80\xa6  12345      16us   37ms     0");
	/* then the columns, the highest drop first; the group's word moves on */
	l.nr = 0;
	layout_table__print(t, 30, 1, collect, &l);
	assert_string_equal(l.text[0], " task          polls  poll max");
	assert_string_equal(l.text[2], " echo #1           7     1.5ms");
	for (int width = 1; width < 80; width++) {
		l.nr = 0;
		layout_table__print(t, width, 1, collect, &l);
		for (int i = 0; i < l.nr; i++)
			assert_true(layout__width(l.text[i]) <= (width < 9 ? 9 : width));
	}
	layout_table__free(t);
}

/* Names made short: each path to its last segment, a closure with its function's. */
static void short_names(void **state)
{
	char buf[256], names[4][96] = {
		"tokio_app::counted::Counted<tokio_app::workload::burn_cpu::{{closure}}>",
		"tokio_app::counted::Counted<tokio_app::workload::blocking_call::{{closure}}>",
		"a::handler::{{closure}}",
		"b::handler::{{closure}}",
	};

	layout__short_path(buf, sizeof(buf), names[0], 1);
	assert_string_equal(buf, "Counted<burn_cpu::{{closure}}>");
	layout__short_path(buf, sizeof(buf), "noisy", 1);
	assert_string_equal(buf, "noisy");
	layout__short_path(buf, sizeof(buf), "<T as core::future::Future>::poll", 1);
	assert_string_equal(buf, "<T as Future>::poll");
	layout__short_path(buf, sizeof(buf), "app::serve::{closure#0}", 1); /* v0 */
	assert_string_equal(buf, "serve::{closure#0}");
	layout__short_path(buf, 8, names[0], 1); /* cut, still a string */
	assert_int_equal(strlen(buf), 7);

	/* the fewest segments that keep different names apart */
	layout__short_names(names[0], sizeof(names[0]), 4);
	assert_string_equal(names[0], "counted::Counted<workload::burn_cpu::{{closure}}>");
	assert_string_equal(names[1], "counted::Counted<workload::blocking_call::{{closure}}>");
	assert_string_equal(names[2], "a::handler::{{closure}}");
	assert_string_equal(names[3], "b::handler::{{closure}}");
	/* the same name twice is one task type: it may stay short */
	strcpy(names[0], "x::f::{{closure}}");
	strcpy(names[1], "x::f::{{closure}}");
	layout__short_names(names[0], sizeof(names[0]), 2);
	assert_string_equal(names[1], "f::{{closure}}");
}

/* Cut in the middle: the end (the distinguishing tail and the id) stays. */
static void fit_tail(void **state)
{
	char buf[128];
	const char *s = "tokio_app::counted::Counted<burn_cpu::{{closure}}> #3";

	assert_int_equal(layout__fit_tail(buf, sizeof(buf), s, 30, 14), 30);
	assert_string_equal(buf, "tokio_app::coun…{closure}}> #3");
	assert_int_equal(layout__fit_tail(buf, sizeof(buf), "short #1", 30, 14), 8);
	assert_string_equal(buf, "short #1");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(columns_from_the_environment),
		cmocka_unit_test(fit),
		cmocka_unit_test(wrap),
		cmocka_unit_test(fields),
		cmocka_unit_test(tables),
		cmocka_unit_test(short_names),
		cmocka_unit_test(fit_tail),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
