// SPDX-License-Identifier: MIT
/*
 * Where tasks waited between polls (src/pipeline/waits.c): the real model
 * and JSON trace writer fed synthetic polls, with a fake live process
 * (model.where) and a fake clock, so that each rule is seen to hold: a
 * read places the span it was made in only if the next poll began after
 * it ended; a task is read once a span; reads stop at the budget and the
 * next round goes on where the last stopped; a task not waiting is not
 * placed.
 */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <setjmp.h>
#include <cmocka.h>

#include "lib/outbuf.h"
#include "pipeline/pipeline.h"
#include "sinks/trace_json.h"
#include "stacks/unwind.h"

#define T0 1000000000ull
#define MS 1000000ull

static uint64_t clock_ns;	/* the fake clock */
static uint64_t read_cost;	/* each read moves it on by this */
static bool waiting = true;	/* what the fake process says of the task read */
static bool give_up;		/* ... or that it was not found in the time given */
static int reads;
static uint64_t last_read;	/* the task read last */

static uint64_t fake_clock(void)
{
	return clock_ns;
}

/* The live process: task N waits at app::waitN (src/main.rs:N). */
static int fake_where(void *ctx, uint64_t task, unsigned int bound_ms,
		      struct stack_frame *frames, int max, bool *waits)
{
	static char fn[2][32];

	(void)ctx;
	/* a read in the background is bounded: the loop waits for it */
	assert_true(bound_ms > 0);
	assert_true(max >= 2);
	reads++;
	last_read = task;
	clock_ns += read_cost;
	snprintf(fn[0], sizeof(fn[0]), "app::leaf%llu", (unsigned long long)task);
	snprintf(fn[1], sizeof(fn[1]), "app::wait%llu", (unsigned long long)task);
	frames[0] = (struct stack_frame){ .function = fn[0], .module = "" };
	frames[1] = (struct stack_frame){ .function = fn[1], .module = "", .file = "src/main.rs",
					  .line = (uint32_t)task };
	if (waits)
		*waits = waiting;
	return give_up ? -ETIMEDOUT : 2;
}

static void poll(struct pipeline *p, uint64_t ts, uint64_t task, int ready)
{
	struct at_poll e = {
		.hdr = { .kind = AT_EV_POLL, .size = sizeof(e), .tid = 101, .ts = ts },
		.task = task,
		.duration_ns = MS,
		.oncpu_ns = MS,
		.requeue = AT_QUEUE_NONE,
		.ready = (uint8_t)ready,
	};

	assert_int_equal(pipeline__push(p, &e, sizeof(e)), 0);
}

static struct pipeline *setup_pipeline(struct sink **json, struct outbuf **ob, const char *path)
{
	static struct detect_config opts = { .long_poll_ns = 100 * MS,
					      .episode_gap_ns = 1000 * MS };
	static struct pipeline p;

	assert_int_equal(pipeline__init(&p, 4242, "sample", T0, &opts), 0);
	p.model.where = fake_where;
	p.model.clock = fake_clock;
	if (json) {
		assert_int_equal(outbuf__open(ob, path), 0);
		assert_int_equal(trace_json__begin(*ob), 0);
		assert_int_equal(trace_json__new(json, *ob), 0);
		pipeline__add_sink(&p, *json);
	}
	reads = 0;
	read_cost = 0;
	waiting = true;
	give_up = false;
	return &p;
}

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	char *buf = calloc(1, 1 << 16);

	assert_non_null(f);
	assert_true(fread(buf, 1, (1 << 16) - 1, f) > 0);
	fclose(f);
	return buf;
}

/* A read inside a span places it: a slice on the task's track, and the report's tally. */
static void a_read_inside_a_span_places_it(void **state)
{
	const char *build = getenv("BUILD") ? getenv("BUILD") : "build";
	char path[512];
	struct outbuf *ob;
	struct sink *json;
	struct pipeline *p;
	uint64_t ns, total;
	uint32_t at;
	char *out;

	(void)state;
	snprintf(path, sizeof(path), "%s/tests/waits.json", build);
	p = setup_pipeline(&json, &ob, path);
	poll(p, T0 + MS, 7, 0); /* pending: idle from T0 + 2 ms */
	/* idle 5 ms only: not yet */
	clock_ns = T0 + 7 * MS;
	model__read_waits(&p->model, clock_ns, 10 * MS, 100 * MS);
	assert_int_equal(reads, 0);
	clock_ns = T0 + 50 * MS;
	model__read_waits(&p->model, clock_ns, 10 * MS, 100 * MS);
	assert_int_equal(reads, 1);
	/* once a span */
	model__read_waits(&p->model, clock_ns, 10 * MS, 100 * MS);
	assert_int_equal(reads, 1);
	at = model__idle_place(&p->model, model__task(&p->model, 7), T0 + 60 * MS);
	assert_int_not_equal(at, 0);
	/* a poll that began before the read ended: not this read's span */
	assert_int_equal(model__idle_place(&p->model, model__task(&p->model, 7), T0 + 40 * MS), 0);
	poll(p, T0 + 60 * MS, 7, 0);
	at = model__commonest_wait(&p->model, 7, T0 + 61 * MS, &ns, &total);
	assert_int_not_equal(at, 0);
	assert_int_equal(ns, 58 * MS);
	assert_int_equal(total, 58 * MS);
	/* the next span is read, and still open at the end: known to the last read seeing it */
	clock_ns = T0 + 100 * MS;
	model__read_waits(&p->model, clock_ns, 10 * MS, 100 * MS);
	assert_int_equal(reads, 2);
	model__commonest_wait(&p->model, 7, T0 + 161 * MS, &ns, &total);
	assert_int_equal(ns, 58 * MS + 39 * MS);
	/* seen there again a second on (what budget is left after the spans not read) */
	clock_ns = T0 + 1200 * MS;
	model__read_waits(&p->model, clock_ns, 10 * MS, 100 * MS);
	assert_int_equal(reads, 3);
	model__commonest_wait(&p->model, 7, T0 + 1300 * MS, &ns, &total);
	assert_int_equal(ns, 58 * MS + 1139 * MS);
	/* and at the end: to the end */
	clock_ns = T0 + 1300 * MS;
	model__confirm_waits(&p->model, false, 100 * MS);
	assert_int_equal(reads, 4);
	model__commonest_wait(&p->model, 7, T0 + 1300 * MS, &ns, &total);
	assert_int_equal(ns, 58 * MS + 1239 * MS);
	assert_int_equal(pipeline__finish(p, T0 + 1300 * MS), 0);
	pipeline__free(p);

	out = slurp(path);
	/* the span between the polls, a nanosecond inside each, and the one to the end */
	assert_non_null(strstr(out, "\"ph\":\"b\",\"cat\":\"task\",\"pid\":4242,\"ts\":2000.001,"
				    "\"name\":\"waiting at app::wait7 (src/main.rs:7) #7\""));
	assert_non_null(strstr(out, "\"ph\":\"e\",\"cat\":\"task\",\"pid\":4242,\"ts\":59999.999,"));
	assert_non_null(strstr(out, "\"ts\":61000.001,\"name\":\"waiting at app::wait7"));
	assert_non_null(strstr(out, "\"ph\":\"e\",\"cat\":\"task\",\"pid\":4242,\"ts\":1299999.999,"));
	assert_non_null(strstr(out, "\"args\":{\"waited_at\":\"app::leaf7\\u000aapp::wait7 "
				    "(src/main.rs:7)\"}"));
	free(out);
}

/* The read ended after the task's next poll began: what it saw may be a later wait. */
static void a_read_the_next_poll_overtook_places_nothing(void **state)
{
	struct pipeline *p = setup_pipeline(NULL, NULL, NULL);
	uint64_t ns, total;

	(void)state;
	poll(p, T0 + MS, 7, 0);
	clock_ns = T0 + 50 * MS;
	read_cost = 20 * MS; /* ends at T0 + 70 ms */
	model__read_waits(&p->model, clock_ns, 10 * MS, 100 * MS);
	assert_int_equal(reads, 1);
	poll(p, T0 + 60 * MS, 7, 0);
	assert_int_equal(model__commonest_wait(&p->model, 7, T0 + 61 * MS, &ns, &total), 0);
	assert_int_equal(total, 0);
	pipeline__free(p);
}

/*
 * An open span not seen there at the end is known only to the last read that
 * saw it, even if a later one sees it there again (a poll came between, its
 * record lost); a process that ended with its task waiting: to the end.
 */
static void an_open_span_lasts_as_long_as_it_was_seen(void **state)
{
	struct pipeline *p = setup_pipeline(NULL, NULL, NULL);
	uint64_t ns, total;

	(void)state;
	poll(p, T0 + MS, 7, 0);
	clock_ns = T0 + 50 * MS;
	model__read_waits(&p->model, clock_ns, 10 * MS, 100 * MS);
	assert_int_equal(reads, 1);
	/* polled since, its record not yet here: found running at the end */
	waiting = false;
	clock_ns = T0 + 900 * MS;
	model__confirm_waits(&p->model, false, 100 * MS);
	assert_int_equal(reads, 2);
	assert_int_equal(model__open_wait_end(&p->model, model__task(&p->model, 7), T0 + 900 * MS),
			 T0 + 50 * MS);
	model__commonest_wait(&p->model, 7, T0 + 900 * MS, &ns, &total);
	assert_int_equal(ns, 48 * MS);
	/* back there later: still known only to the last read before that poll, even gone */
	waiting = true;
	model__confirm_waits(&p->model, false, 100 * MS);
	model__confirm_waits(&p->model, true, 100 * MS);
	assert_int_equal(reads, 2);
	assert_int_equal(model__open_wait_end(&p->model, model__task(&p->model, 7), T0 + 900 * MS),
			 T0 + 50 * MS);
	pipeline__free(p);

	/* the process gone with its task waiting there: it waited there until it went */
	p = setup_pipeline(NULL, NULL, NULL);
	poll(p, T0 + MS, 8, 0);
	clock_ns = T0 + 50 * MS;
	model__read_waits(&p->model, clock_ns, 10 * MS, 100 * MS);
	model__confirm_waits(&p->model, true, 100 * MS);
	assert_int_equal(reads, 1);
	assert_int_equal(model__open_wait_end(&p->model, model__task(&p->model, 8), T0 + 900 * MS),
			 T0 + 900 * MS);
	pipeline__free(p);
}

/* Not found in the time given: nothing known, the span read again later. */
static void a_read_given_up_is_made_again(void **state)
{
	struct pipeline *p = setup_pipeline(NULL, NULL, NULL);

	(void)state;
	poll(p, T0 + MS, 7, 0);
	clock_ns = T0 + 50 * MS;
	give_up = true;
	model__read_waits(&p->model, clock_ns, 10 * MS, 100 * MS);
	assert_int_equal(reads, 1);
	assert_int_equal(p->model.waits_given_up, 1);
	assert_int_equal(model__idle_place(&p->model, model__task(&p->model, 7), UINT64_MAX), 0);
	give_up = false;
	clock_ns = T0 + 150 * MS;
	model__read_waits(&p->model, clock_ns, 10 * MS, 100 * MS);
	assert_int_equal(reads, 2);
	assert_int_not_equal(model__idle_place(&p->model, model__task(&p->model, 7), UINT64_MAX),
			     0);
	pipeline__free(p);
}

/* A task found not waiting (running, or a goroutine preempted anywhere) is not placed. */
static void a_task_not_waiting_is_not_placed(void **state)
{
	struct pipeline *p = setup_pipeline(NULL, NULL, NULL);

	(void)state;
	poll(p, T0 + MS, 7, 0);
	waiting = false;
	clock_ns = T0 + 50 * MS;
	model__read_waits(&p->model, clock_ns, 10 * MS, 100 * MS);
	assert_int_equal(reads, 1);
	assert_int_equal(p->model.waits_placed, 0);
	assert_int_equal(model__idle_place(&p->model, model__task(&p->model, 7), T0 + 90 * MS), 0);
	/* and not read again in that span */
	model__read_waits(&p->model, clock_ns, 10 * MS, 100 * MS);
	assert_int_equal(reads, 1);
	pipeline__free(p);
}

/* Reads stop once the budget is spent; the next round begins where the last stopped. */
static void reads_keep_to_the_budget_and_take_turns(void **state)
{
	struct pipeline *p = setup_pipeline(NULL, NULL, NULL);
	uint64_t seen[3] = { 0 }, spent;

	(void)state;
	for (uint64_t t = 1; t <= 3; t++)
		poll(p, T0 + MS, t, 0);
	clock_ns = T0 + 50 * MS;
	read_cost = 5 * MS;
	spent = model__read_waits(&p->model, clock_ns, 10 * MS, 8 * MS);
	assert_int_equal(reads, 2);
	assert_int_equal(spent, 10 * MS);
	assert_int_equal(p->model.waits_ns, 10 * MS);
	for (uint64_t t = 1; t <= 3; t++)
		seen[t - 1] = model__task(&p->model, t)->wait_span != 0;
	/* the two read have new spans to read: the next round still begins with the third */
	for (uint64_t t = 1; t <= 3; t++)
		if (seen[t - 1])
			poll(p, T0 + 20 * MS, t, 0);
	clock_ns = T0 + 100 * MS;
	spent = model__read_waits(&p->model, clock_ns, 10 * MS, 1);
	assert_int_equal(reads, 3);
	assert_int_equal(spent, 5 * MS);
	assert_false(seen[last_read - 1]);
	/* then the other two, each once */
	model__read_waits(&p->model, clock_ns, 10 * MS, 100 * MS);
	assert_int_equal(reads, 5);
	/* none left, none to see again within a second */
	assert_int_equal(model__read_waits(&p->model, clock_ns, 10 * MS, 100 * MS), 0);
	assert_int_equal(reads, 5);
	pipeline__free(p);
}

/* Records applied between reads (the rings drained): a task read may end meanwhile. */
static struct pipeline *draining;

static void end_the_task_read(void *ctx)
{
	(void)ctx;
	poll(draining, clock_ns, last_read, 1);
}

static void records_applied_between_reads(void **state)
{
	struct pipeline *p = setup_pipeline(NULL, NULL, NULL);

	(void)state;
	for (uint64_t t = 1; t <= 3; t++)
		poll(p, T0 + MS, t, 0);
	draining = p;
	p->model.after_read = end_the_task_read;
	clock_ns = T0 + 50 * MS;
	model__read_waits(&p->model, clock_ns, 10 * MS, 100 * MS);
	assert_int_equal(reads, 3);
	/* each ended as soon as it was read: gone from the model */
	for (uint64_t t = 1; t <= 3; t++)
		assert_null(model__task(&p->model, t));
	assert_int_equal(model__confirm_waits(&p->model, false, 100 * MS), 0);
	pipeline__free(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(a_read_inside_a_span_places_it),
		cmocka_unit_test(a_read_the_next_poll_overtook_places_nothing),
		cmocka_unit_test(an_open_span_lasts_as_long_as_it_was_seen),
		cmocka_unit_test(a_read_given_up_is_made_again),
		cmocka_unit_test(records_applied_between_reads),
		cmocka_unit_test(a_task_not_waiting_is_not_placed),
		cmocka_unit_test(reads_keep_to_the_budget_and_take_turns),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
