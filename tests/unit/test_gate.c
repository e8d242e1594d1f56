// SPDX-License-Identifier: MIT
/*
 * The CI gate's judgement (src/gate/gate.c) on summaries written here in
 * the schema --summary json writes: limits, alert kinds, a baseline (read
 * from a file, among other lines), percentiles interpolated in their log2
 * slot, the verdicts, and what is refused.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "gate/gate.h"

/*
 * A summary: one worker per entry of polls_in_slot (that many polls, all in
 * slot `slot`, and as many delays in slot dslot), these counts and alerts.
 */
static char *summary(const char *comm, int nworkers, int polls, int slot, int dslot,
		     double seconds, int long_polls)
{
	char *buf = NULL, slots[512], dslots[512];
	size_t size = 0;
	FILE *f = open_memstream(&buf, &size);
	size_t n = 0, dn = 0;

	for (int i = 0; i < 40; i++) {
		n += (size_t)snprintf(slots + n, sizeof(slots) - n, "%s%d", i ? "," : "",
				      i == slot ? polls : 0);
		dn += (size_t)snprintf(dslots + dn, sizeof(dslots) - dn, "%s%d", i ? "," : "",
				       i == dslot ? polls : 0);
	}
	fprintf(f, "{\"schema\":\"asynctraced.summary/1\",\"pid\":42,\"comm\":\"%s\","
		   "\"seconds\":%.3f,\"counts\":{\"polls\":%d,\"wakes\":%d,\"steals\":0},"
		   "\"events\":{\"dropped\":0},\"workers\":[", comm, seconds, polls * nworkers,
		polls * nworkers);
	for (int w = 0; w < nworkers; w++)
		fprintf(f, "%s{\"worker\":%d,\"polls\":%d,\"max_poll_ns\":%d,"
			   "\"poll\":{\"count\":%d,\"slots\":[%s]},"
			   "\"on_cpu\":{\"count\":%d,\"slots\":[%s]},"
			   "\"delay\":{\"count\":%d,\"slots\":[%s]}}",
			w ? "," : "", w, polls, 3 << slot, polls, slots, polls, slots, polls, dslots);
	fprintf(f, "],\"alerts\":{\"episodes\":{\"long-poll\":%d,\"scheduling-delay\":0,"
		   "\"starvation\":0,\"waker-thrash\":0,\"lost-waker\":0},\"log\":[", long_polls);
	for (int i = 0; i < long_polls; i++)
		fprintf(f, "%s{\"kind\":\"long-poll\",\"state\":\"begin\",\"message\":\"begun\"},"
			   "{\"kind\":\"long-poll\",\"state\":\"end\",\"message\":\"long poll: task "
			   "'hog' #%d held its worker\"}", i ? "," : "", 5 + i);
	fprintf(f, "]}}");
	fclose(f);
	return buf;
}

static const struct gate_result *find(const struct gate *g, const char *name)
{
	for (size_t i = 0; i < g->nr; i++)
		if (!strcmp(g->res[i].name, name))
			return &g->res[i];
	fail_msg("no gate '%s'", name);
	return NULL;
}

static void parsing(void **state)
{
	struct gate_opts o = { 0 };
	char why[1024];

	(void)state;
	assert_int_equal(gate__parse_fail_on(&o, "long-poll,lost-waker", why, sizeof(why)), 0);
	assert_int_equal(o.fail_on, (1u << 1) | (1u << 5));
	assert_int_equal(gate__parse_fail_on(&o, "all", why, sizeof(why)), 0);
	assert_int_equal(o.fail_on, 0x3e);
	assert_int_equal(gate__parse_fail_on(&o, "long-pole", why, sizeof(why)), -EINVAL);
	assert_non_null(strstr(why, "unknown alert kind 'long-pole'"));

	assert_int_equal(gate__parse_max(&o, "poll.p99=5ms,dropped=0", why, sizeof(why)), 0);
	assert_int_equal(o.nr_max, 2);
	assert_true(o.max[0].value == 5e6 && o.max[1].value == 0);
	assert_string_equal(o.max[0].text, "5ms");
	assert_int_equal(gate__parse_max(&o, "poll.p98=5ms", why, sizeof(why)), -EINVAL);
	assert_non_null(strstr(why, "unknown metric 'poll.p98'; known: poll.p50, "));
	assert_non_null(strstr(why, "steals_per_s"));
	assert_int_equal(gate__parse_max(&o, "poll.p99=fast", why, sizeof(why)), -EINVAL);
	assert_int_equal(gate__parse_max(&o, "dropped=-1", why, sizeof(why)), -EINVAL);
	assert_int_equal(gate__parse_max(&o, "dropped", why, sizeof(why)), -EINVAL);
	assert_true(o.given);
}

/*
 * 1000 polls in slot 10 ([1024, 2048) ns): the median interpolates to 1536,
 * where the report would say 2048; the longest is max_poll_ns itself.
 */
static void limits_on_interpolated_percentiles(void **state)
{
	struct gate_opts o = { 0 };
	struct gate g;
	char why[256], *s = summary("app", 1, 1000, 10, 12, 1.0, 0);

	(void)state;
	assert_int_equal(gate__parse_max(&o, "poll.p50=1540ns,poll.p90=1900ns,poll.max=3000ns,"
					     "delay.p50=7us,polls_per_s=999", why, sizeof(why)), 0);
	assert_int_equal(gate__init(&g, &o, why, sizeof(why)), 0);
	assert_int_equal(gate__judge(&g, s, false), 0);
	assert_int_equal(find(&g, "poll.p50")->verdict, GATE_PASS);   /* 1536 */
	assert_int_equal(find(&g, "poll.p90")->verdict, GATE_FAIL);   /* 1946 */
	assert_int_equal(find(&g, "poll.max")->verdict, GATE_FAIL);   /* 3072 */
	assert_int_equal(find(&g, "delay.p50")->verdict, GATE_PASS);  /* 6144 */
	assert_int_equal(find(&g, "polls_per_s")->verdict, GATE_FAIL); /* 1000/s */
	assert_int_equal(gate__verdict(&g), GATE_FAIL);
	gate__free(&g);
	free(s);
}

static void alert_kinds_name_their_tasks(void **state)
{
	struct gate_opts o = { 0 };
	struct gate g;
	char why[256], *bad = summary("app", 2, 500, 10, 10, 1.0, 2),
		       *good = summary("app", 2, 500, 10, 10, 1.0, 0);
	const struct gate_result *r;

	(void)state;
	assert_int_equal(gate__parse_fail_on(&o, "long-poll,starvation", why, sizeof(why)), 0);
	assert_int_equal(gate__init(&g, &o, why, sizeof(why)), 0);
	gate__judge(&g, bad, true);
	r = find(&g, "pid 42 (app): fail-on long-poll");
	assert_int_equal(r->verdict, GATE_FAIL);
	assert_string_equal(r->now, "2 episodes");
	assert_string_equal(r->detail, "long poll: task 'hog' #5 held its worker\n"
				       "long poll: task 'hog' #6 held its worker");
	assert_int_equal(find(&g, "pid 42 (app): fail-on starvation")->verdict, GATE_PASS);
	gate__free(&g);

	assert_int_equal(gate__init(&g, &o, why, sizeof(why)), 0);
	gate__judge(&g, good, false);
	assert_int_equal(gate__verdict(&g), GATE_PASS);
	gate__free(&g);
	free(bad);
	free(good);
}

static char *baseline_file(const char *text)
{
	static char path[] = "/tmp/test_gate_XXXXXX";
	int fd;

	strcpy(path, "/tmp/test_gate_XXXXXX");
	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	return path;
}

/*
 * The baseline as --summary json leaves it on a standard output shared with
 * the command: its lines among others. Slower polls fail past the tolerance
 * and the slack; a worker with too few polls is not compared; rates fail
 * only when they fall.
 */
static void against_a_baseline(void **state)
{
	char *base = summary("app", 2, 1000, 14, 14, 1.0, 0), *text, *path, why[256];
	char *same = summary("app", 2, 1000, 14, 14, 1.0, 0);
	char *slow = summary("app", 2, 1000, 21, 14, 2.0, 0); /* 2-4 ms polls, half the rate */
	char *faster = summary("app", 2, 1000, 14, 14, 0.5, 0);
	char *sparse = summary("app", 2, 50, 21, 14, 0.05, 0);
	struct gate_opts o = { .baseline = NULL };
	struct gate g;

	(void)state;
	assert_int_not_equal(asprintf(&text, "app: starting\n%s\napp: done\n", base), -1);
	path = baseline_file(text);
	o.baseline = path;
	assert_int_equal(gate__init(&g, &o, why, sizeof(why)), 0);
	assert_true(g.o.tolerance_pct == GATE_DEFAULT_TOLERANCE);
	gate__judge(&g, same, false);
	assert_int_equal(gate__verdict(&g), GATE_PASS);
	assert_non_null(find(&g, "baseline poll.p99 worker 1"));
	gate__free(&g);

	assert_int_equal(gate__init(&g, &o, why, sizeof(why)), 0);
	gate__judge(&g, slow, false);
	assert_int_equal(find(&g, "baseline poll.p50")->verdict, GATE_FAIL);
	assert_int_equal(find(&g, "baseline poll.p50 worker 0")->verdict, GATE_FAIL);
	assert_int_equal(find(&g, "baseline delay.p50")->verdict, GATE_PASS);
	assert_int_equal(find(&g, "baseline polls_per_s")->verdict, GATE_FAIL);
	gate__free(&g);

	/* faster: a rate that rises is no regression */
	assert_int_equal(gate__init(&g, &o, why, sizeof(why)), 0);
	gate__judge(&g, faster, false);
	assert_int_equal(gate__verdict(&g), GATE_PASS);
	gate__free(&g);

	/* --tolerance 0 is a tolerance too: what is worse by more than the slack fails */
	o.tolerance_set = true;
	o.tolerance_pct = 0;
	assert_int_equal(gate__init(&g, &o, why, sizeof(why)), 0);
	assert_true(g.o.tolerance_pct == 0);
	gate__judge(&g, same, false);
	assert_int_equal(gate__verdict(&g), GATE_PASS);
	gate__free(&g);
	o.tolerance_set = false;

	/* 50 polls a worker: the totals only */
	assert_int_equal(gate__init(&g, &o, why, sizeof(why)), 0);
	gate__judge(&g, sparse, false);
	for (size_t i = 0; i < g.nr; i++)
		assert_null(strstr(g.res[i].name, "worker"));
	assert_int_equal(find(&g, "baseline poll.p99")->verdict, GATE_FAIL);
	gate__free(&g);
	unlink(path);
	free(text);
	free(base);
	free(same);
	free(slow);
	free(faster);
	free(sparse);
}

/* Replaces the first worker's longest poll in summary s with ns. */
static void set_max_poll(char *s, const char *ns)
{
	char *at = strstr(s, "\"max_poll_ns\":") + strlen("\"max_poll_ns\":");
	size_t old = strspn(at, "0123456789");

	assert_true(strlen(ns) <= old + 8);
	memmove(at + strlen(ns), at + old, strlen(at + old) + 1);
	memcpy(at, ns, strlen(ns));
}

/*
 * A build that now and then blocks its worker for 20 ms: one long-poll
 * episode, one long poll, no percentile moved. The baseline fails it by
 * what it saw: an alert kind with more episodes than the baseline had, and
 * a longest poll beyond the tolerance and the slack (10 ms).
 */
static void a_new_blocking_call_fails_a_baseline(void **state)
{
	char *base = summary("app", 2, 1000, 14, 14, 1.0, 0), *path, why[256];
	char *blocked = summary("app", 2, 1000, 14, 14, 1.0, 1);
	char *stretched = summary("app", 2, 1000, 14, 14, 1.0, 0);
	struct gate_opts o = { .baseline = NULL };
	const struct gate_result *r;
	struct gate g;

	(void)state;
	set_max_poll(blocked, "20000000");
	set_max_poll(stretched, "5049152"); /* a preemption's 5 ms more: within the slack */
	o.baseline = path = baseline_file(base);
	assert_int_equal(gate__init(&g, &o, why, sizeof(why)), 0);
	gate__judge(&g, blocked, false);
	r = find(&g, "baseline long-poll episodes");
	assert_int_equal(r->verdict, GATE_FAIL);
	assert_string_equal(r->limit, "0");
	assert_string_equal(r->now, "1");
	assert_string_equal(r->detail, "long poll: task 'hog' #5 held its worker");
	assert_int_equal(find(&g, "baseline poll.max")->verdict, GATE_FAIL);
	assert_int_equal(find(&g, "baseline poll.p99")->verdict, GATE_PASS);
	assert_int_equal(gate__verdict(&g), GATE_FAIL);
	gate__free(&g);

	assert_int_equal(gate__init(&g, &o, why, sizeof(why)), 0);
	gate__judge(&g, stretched, false);
	assert_int_equal(find(&g, "baseline poll.max")->verdict, GATE_PASS);
	assert_int_equal(find(&g, "baseline alert episodes")->verdict, GATE_PASS);
	assert_int_equal(gate__verdict(&g), GATE_PASS);
	gate__free(&g);
	unlink(path);

	/* as many episodes as the baseline had: no regression */
	o.baseline = path = baseline_file(blocked);
	assert_int_equal(gate__init(&g, &o, why, sizeof(why)), 0);
	gate__judge(&g, blocked, false);
	assert_int_equal(find(&g, "baseline long-poll episodes")->verdict, GATE_PASS);
	assert_int_equal(gate__verdict(&g), GATE_PASS);
	gate__free(&g);
	unlink(path);
	free(base);
	free(blocked);
	free(stretched);
}

static void refused_baselines(void **state)
{
	struct gate_opts o = { 0 };
	struct gate g;
	char why[512], *path, *v2, *base = summary("app", 1, 10, 1, 1, 1, 0);

	(void)state;
	o.baseline = path = baseline_file("{\"hello\": 1}\n");
	assert_int_equal(gate__init(&g, &o, why, sizeof(why)), -EINVAL);
	assert_non_null(strstr(why, "is not a summary of asynctraced"));
	unlink(path);
	o.baseline = path = baseline_file("not json at all\n");
	assert_int_equal(gate__init(&g, &o, why, sizeof(why)), -EINVAL);
	assert_non_null(strstr(why, "is not JSON"));
	unlink(path);
	v2 = strdup(base);
	memcpy(strstr(v2, "summary/1") + 8, "2", 1);
	o.baseline = path = baseline_file(v2);
	assert_int_equal(gate__init(&g, &o, why, sizeof(why)), -EINVAL);
	assert_non_null(strstr(why, "has schema 'asynctraced.summary/2'"));
	unlink(path);
	o.baseline = path = baseline_file("");
	assert_int_equal(gate__init(&g, &o, why, sizeof(why)), -EINVAL);
	unlink(path);
	o.baseline = "/nonexistent/baseline.json";
	assert_int_equal(gate__init(&g, &o, why, sizeof(why)), -ENOENT);
	free(v2);
	free(base);
}

/* An empty trace, a text that is no summary, nothing traced: unknown, never a pass. */
static void what_cannot_be_judged(void **state)
{
	struct gate_opts o = { .fail_on = 2, .given = true };
	struct gate g;
	char why[256], *empty = summary("app", 1, 0, 1, 1, 1, 0);

	(void)state;
	assert_int_equal(gate__init(&g, &o, why, sizeof(why)), 0);
	assert_int_equal(gate__judge(&g, empty, false), 0);
	assert_int_equal(gate__verdict(&g), GATE_UNKNOWN);
	assert_string_equal(find(&g, "every gate")->detail, "the trace is empty: no poll was seen");
	gate__free(&g);
	assert_int_equal(gate__init(&g, &o, why, sizeof(why)), 0);
	assert_int_equal(gate__judge(&g, "[1,2]", false), -EINVAL);
	assert_int_equal(gate__verdict(&g), GATE_UNKNOWN);
	gate__free(&g);
	assert_int_equal(gate__init(&g, &o, why, sizeof(why)), 0);
	gate__nothing(&g, "no runtime");
	assert_int_equal(gate__verdict(&g), GATE_UNKNOWN);
	gate__free(&g);
	free(empty);
}

/* JUnit: a testcase per gate, failures and errors counted, names escaped. */
static void junit_and_annotations(void **state)
{
	struct gate_opts o = { 0 };
	struct gate g;
	char why[256], *xml = NULL, *ann = NULL, *bad = summary("a<b", 1, 500, 10, 10, 1, 1);
	size_t size = 0;
	FILE *f;

	(void)state;
	assert_int_equal(gate__parse_fail_on(&o, "long-poll", why, sizeof(why)), 0);
	assert_int_equal(gate__parse_max(&o, "dropped=0", why, sizeof(why)), 0);
	assert_int_equal(gate__init(&g, &o, why, sizeof(why)), 0);
	gate__judge(&g, bad, true);
	gate__nothing(&g, "100% lost");
	f = open_memstream(&xml, &size);
	assert_int_equal(gate__junit(&g, f, 1.5), 0);
	fclose(f);
	assert_non_null(strstr(xml, "tests=\"3\" failures=\"1\" errors=\"1\""));
	assert_non_null(strstr(xml, "name=\"pid 42 (a&lt;b): fail-on long-poll\""));
	assert_non_null(strstr(xml, "<failure message=\"1 episode, limit none\">long poll: task "
				    "'hog' #5 held its worker</failure>"));
	assert_non_null(strstr(xml, "<error message=\"could not be evaluated\">100% lost</error>"));
	f = open_memstream(&ann, &size);
	gate__annotate(&g, f);
	fclose(f);
	assert_string_equal(ann, "::error title=asynctraced gate::pid 42 (a<b): fail-on long-poll "
				 "failed: 1 episode, limit none%0Along poll: task 'hog' #5 held its "
				 "worker\n"
				 "::error title=asynctraced gate::every gate could not be evaluated"
				 "%0A100%25 lost\n");
	gate__free(&g);
	free(xml);
	free(ann);
	free(bad);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(parsing),
		cmocka_unit_test(limits_on_interpolated_percentiles),
		cmocka_unit_test(alert_kinds_name_their_tasks),
		cmocka_unit_test(against_a_baseline),
		cmocka_unit_test(a_new_blocking_call_fails_a_baseline),
		cmocka_unit_test(refused_baselines),
		cmocka_unit_test(what_cannot_be_judged),
		cmocka_unit_test(junit_and_annotations),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
