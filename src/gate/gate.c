// SPDX-License-Identifier: MIT
#include "gate/gate.h"

#include <errno.h>
#include <json-c/json.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "lib/util.h"
#include "pipeline/detect.h"
#include "pipeline/unseen.h"
#include "source/stats.h"

#define SUMMARY_SCHEMA "asynctraced.summary/1"
/* a worker with fewer polls than this has no percentile worth comparing */
#define GATE_MIN_SAMPLES 100

enum metric_kind { M_TIME, M_COUNT, M_RATE };

/*
 * What a gate can measure in a summary. A percentile is read from the
 * log2 histograms the summary carries (every worker's merged for the
 * total), interpolated within its slot: the report's pNN_ns is the slot's
 * upper bound, which moves by doubling, too coarse to compare two runs by.
 */
static const struct metric {
	const char *name;
	enum metric_kind kind;
	const char *hist;	/* the histogram ("poll", "on_cpu", "delay"), or NULL */
	double pct;		/* its percentile; 0: the largest */
	const char *count;	/* a rate's count in "counts", per second */
	const char *unseen;	/* its name in a sampled summary's "unseen", if sample mode lacks it */
} metrics[] = {
	{ "poll.p50", M_TIME, "poll", 50, NULL, NULL },
	{ "poll.p90", M_TIME, "poll", 90, NULL, NULL },
	{ "poll.p99", M_TIME, "poll", 99, NULL, NULL },
	{ "poll.p999", M_TIME, "poll", 99.9, NULL, NULL },
	{ "poll.max", M_TIME, "poll", 0, NULL, NULL },
	{ "on_cpu.p50", M_TIME, "on_cpu", 50, NULL, NULL },
	{ "on_cpu.p90", M_TIME, "on_cpu", 90, NULL, NULL },
	{ "on_cpu.p99", M_TIME, "on_cpu", 99, NULL, NULL },
	{ "on_cpu.max", M_TIME, "on_cpu", 0, NULL, NULL },
	{ "delay.p50", M_TIME, "delay", 50, NULL, "wake_delays" },
	{ "delay.p90", M_TIME, "delay", 90, NULL, "wake_delays" },
	{ "delay.p99", M_TIME, "delay", 99, NULL, "wake_delays" },
	{ "delay.max", M_TIME, "delay", 0, NULL, "wake_delays" },
	{ "dropped", M_COUNT, NULL, 0, NULL, NULL },
	{ "alerts", M_COUNT, NULL, 0, NULL, NULL },
	{ "polls_per_s", M_RATE, NULL, 0, "polls", NULL },
	{ "wakes_per_s", M_RATE, NULL, 0, "wakes", "wakes" },
	{ "steals_per_s", M_RATE, NULL, 0, "steals", "steals" },
};

#define NR_METRICS (sizeof(metrics) / sizeof(metrics[0]))

/* Compared with a baseline: these percentiles, in total and per worker; these rates, in total. */
static const char *const baseline_pcts[] = { "poll.p50", "poll.p90", "poll.p99",
					     "delay.p50", "delay.p90", "delay.p99" };
static const char *const baseline_rates[] = { "polls_per_s", "wakes_per_s" };

const char *gate__metrics(void)
{
	static char list[512];

	if (!list[0])
		for (size_t i = 0, n = 0; i < NR_METRICS && n < sizeof(list); i++)
			n += (size_t)snprintf(list + n, sizeof(list) - n, "%s%s", i ? ", " : "",
					      metrics[i].name);
	return list;
}

static int metric_index(const char *name, size_t len)
{
	for (size_t i = 0; i < NR_METRICS; i++)
		if (strlen(metrics[i].name) == len && !strncmp(metrics[i].name, name, len))
			return (int)i;
	return -1;
}

static int say(char *why, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int say(char *why, size_t len, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, len, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

int gate__parse_fail_on(struct gate_opts *o, const char *arg, char *why, size_t len)
{
	char buf[256], *save = NULL;

	if (!arg[0] || strlen(arg) >= sizeof(buf))
		return say(why, len, "--fail-on takes alert kinds, or all");
	strcpy(buf, arg);
	for (char *k = strtok_r(buf, ",", &save); k; k = strtok_r(NULL, ",", &save)) {
		int kind = 0;

		if (!strcmp(k, "all")) {
			for (int i = ALERT_LONG_POLL; i < ALERT_KIND_MAX; i++)
				o->fail_on |= 1u << i;
			continue;
		}
		for (int i = ALERT_LONG_POLL; i < ALERT_KIND_MAX; i++)
			if (!strcmp(k, alert_kind_str((enum alert_kind)i)))
				kind = i;
		if (!kind)
			return say(why, len,
				   "--fail-on: unknown alert kind '%s' (long-poll, scheduling-delay, "
				   "starvation, waker-thrash, lost-waker, or all)", k);
		o->fail_on |= 1u << kind;
	}
	o->given = true;
	return 0;
}

int gate__parse_max(struct gate_opts *o, const char *arg, char *why, size_t len)
{
	char buf[512], *save = NULL;

	if (!arg[0] || strlen(arg) >= sizeof(buf))
		return say(why, len, "--max takes METRIC=VALUE[,...]");
	strcpy(buf, arg);
	for (char *item = strtok_r(buf, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(item, '=');
		struct gate_limit *l = &o->max[o->nr_max];
		int m = eq ? metric_index(item, (size_t)(eq - item)) : -1;
		char *end;

		if (!eq)
			return say(why, len, "--max: '%s' is not METRIC=VALUE", item);
		if (m < 0)
			return say(why, len, "--max: unknown metric '%.*s'; known: %s",
				   (int)(eq - item), item, gate__metrics());
		if (o->nr_max == GATE_MAX_LIMITS)
			return say(why, len, "--max: at most %d limits", GATE_MAX_LIMITS);
		if (metrics[m].kind == M_TIME) {
			uint64_t ns;

			if (parse_duration(eq + 1, 1000000, &ns))
				return say(why, len, "--max %s: '%s' is not a time (5ms, 200us, 1s)",
					   metrics[m].name, eq + 1);
			l->value = (double)ns;
		} else {
			errno = 0;
			l->value = strtod(eq + 1, &end);
			if (errno || end == eq + 1 || *end || l->value < 0 || !isfinite(l->value))
				return say(why, len, "--max %s: '%s' is not a number", metrics[m].name,
					   eq + 1);
		}
		l->metric = m;
		snprintf(l->text, sizeof(l->text), "%s", eq + 1);
		o->nr_max++;
	}
	o->given = true;
	return 0;
}

/* ---- reading a summary ---------------------------------------------------- */

static json_object *get(json_object *o, const char *key)
{
	json_object *v = NULL;

	return o && json_object_object_get_ex(o, key, &v) ? v : NULL;
}

static double num(json_object *o, const char *key)
{
	json_object *v = get(o, key);

	return v ? json_object_get_double(v) : 0;
}

/* Adds histogram h's slots (a summary's {"slots": [...]}) into slot. */
static void add_slots(json_object *h, double *slot)
{
	json_object *s = get(h, "slots");
	size_t n = s && json_object_is_type(s, json_type_array) ? json_object_array_length(s) : 0;

	for (size_t i = 0; i < n && i < AT_HIST_SLOTS; i++)
		slot[i] += json_object_get_double(json_object_array_get_idx(s, i));
}

/*
 * The p-th percentile of a log2 histogram (slot i: [2^i, 2^(i+1)), slot 0:
 * [0, 2)), interpolated within its slot; p 0: the largest slot's bound.
 * false if it is empty.
 */
static bool slot_pct(const double *slot, double p, double *out)
{
	double total = 0, seen = 0, rank;
	int last = -1;

	for (int i = 0; i < AT_HIST_SLOTS; i++) {
		total += slot[i];
		if (slot[i] > 0)
			last = i;
	}
	if (total <= 0)
		return false;
	if (p <= 0) {
		*out = ldexp(2, last);
		return true;
	}
	rank = total * p / 100;
	for (int i = 0; i < AT_HIST_SLOTS; i++) {
		double lo = i ? ldexp(1, i) : 0, hi = ldexp(2, i);

		if (slot[i] > 0 && seen + slot[i] >= rank) {
			*out = lo + (hi - lo) * (rank - seen) / slot[i];
			return true;
		}
		seen += slot[i];
	}
	*out = ldexp(2, last);
	return true;
}

static double seconds_of(json_object *s)
{
	double t = num(s, "seconds");

	return t > 0 ? t : 0;
}

/*
 * Metric m of summary s: in total (worker < 0) or of one worker; samples:
 * how many values a percentile stands on. false when it cannot be told.
 */
/* What measured summary s: "samples" (--mode sample) or "probes" (older summaries say neither). */
static const char *measured_by(json_object *s)
{
	json_object *v = get(s, "measured_by");

	return v ? json_object_get_string(v) : "probes";
}

/* Whether summary s says its mode did not see what (its "unseen" list). */
static bool unseen_in(json_object *s, const char *what)
{
	json_object *list = get(s, "unseen");
	size_t n = list && json_object_is_type(list, json_type_array)
			   ? json_object_array_length(list) : 0;

	for (size_t i = 0; what && i < n; i++)
		if (!strcmp(json_object_get_string(json_object_array_get_idx(list, i)), what))
			return true;
	return false;
}

/* A gate on what the run's mode did not see: unknown, which fails the run, saying why. */
static void not_seen(struct gate_result *r, json_object *s, const char *what)
{
	snprintf(r->now, sizeof(r->now), "not seen");
	r->verdict = GATE_UNKNOWN;
	if (asprintf(&r->detail, "this run was measured by %s, which do not see %s "
				 "(docs/modes.md): trace it with --mode probes to gate on it",
		     measured_by(s), unseen__words(what)) < 0)
		r->detail = NULL;
}

static bool value_of(json_object *s, const struct metric *m, int worker, double *out,
		     double *samples)
{
	json_object *ws = get(s, "workers"), *eps;
	size_t nw = ws && json_object_is_type(ws, json_type_array) ? json_object_array_length(ws)
								   : 0;

	*samples = 0;
	if (unseen_in(s, m->unseen))
		return false;
	if (m->hist) {
		double slot[AT_HIST_SLOTS] = { 0 }, max_poll = 0;

		for (size_t i = 0; i < nw; i++) {
			json_object *w = json_object_array_get_idx(ws, i);

			if (worker >= 0 && (int)num(w, "worker") != worker)
				continue;
			add_slots(get(w, m->hist), slot);
			*samples += num(get(w, m->hist), "count");
			if (num(w, "max_poll_ns") > max_poll)
				max_poll = num(w, "max_poll_ns");
		}
		/* a poll's longest is known exactly */
		if (!m->pct && !strcmp(m->hist, "poll") && max_poll > 0) {
			*out = max_poll;
			return true;
		}
		return slot_pct(slot, m->pct, out);
	}
	if (m->kind == M_RATE) {
		double t = seconds_of(s);

		if (worker >= 0 || t <= 0)
			return false;
		*out = num(get(s, "counts"), m->count) / t;
		return true;
	}
	if (!strcmp(m->name, "dropped")) {
		*out = num(get(s, "events"), "dropped");
		return true;
	}
	/* alerts: episodes of every kind */
	eps = get(get(s, "alerts"), "episodes");
	if (!eps || !json_object_is_type(eps, json_type_object))
		return false;
	*out = 0;
	json_object_object_foreach(eps, k, v) {
		(void)k;
		*out += json_object_get_double(v);
	}
	return true;
}

static void fmt_value(char *buf, size_t len, enum metric_kind kind, double v)
{
	if (kind == M_TIME)
		fmt_ns(buf, len, (uint64_t)llround(v));
	else if (kind == M_RATE)
		snprintf(buf, len, "%.0f/s", v);
	else
		snprintf(buf, len, "%.0f", v);
}

/* ---- results -------------------------------------------------------------- */

static struct gate_result *result(struct gate *g, const char *label, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static struct gate_result *result(struct gate *g, const char *label, const char *fmt, ...)
{
	static struct gate_result lost; /* out of memory: written, never kept */
	struct gate_result *r;
	va_list ap;
	size_t n;

	if (g->nr == g->cap) {
		size_t cap = g->cap ? g->cap * 2 : 32;
		struct gate_result *res = realloc(g->res, cap * sizeof(*res));

		if (!res) {
			/* a gate that cannot be kept makes the whole verdict unknown */
			free(lost.detail);
			memset(&lost, 0, sizeof(lost));
			g->oom = true;
			return &lost;
		}
		g->res = res;
		g->cap = cap;
	}
	r = &g->res[g->nr++];
	memset(r, 0, sizeof(*r));
	n = label ? (size_t)snprintf(r->name, sizeof(r->name), "%s: ", label) : 0;
	if (n >= sizeof(r->name))
		n = sizeof(r->name) - 1;
	va_start(ap, fmt);
	vsnprintf(r->name + n, sizeof(r->name) - n, fmt, ap);
	va_end(ap);
	return r;
}

/* The tasks behind the alerts of one kind: each episode's last word (its end line). */
static char *alert_detail(json_object *s, const char *kind)
{
	json_object *log = get(get(s, "alerts"), "log");
	size_t n = log && json_object_is_type(log, json_type_array) ? json_object_array_length(log)
								    : 0;
	char *buf = NULL;
	size_t size = 0, shown = 0, more = 0;
	FILE *f = open_memstream(&buf, &size);

	if (!f)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		json_object *a = json_object_array_get_idx(log, i);
		json_object *k = get(a, "kind"), *st = get(a, "state"), *msg = get(a, "message");

		if (!k || !st || !msg || strcmp(json_object_get_string(k), kind) ||
		    strcmp(json_object_get_string(st), "end"))
			continue;
		if (shown == 5) {
			more++;
			continue;
		}
		fprintf(f, "%s%s", shown++ ? "\n" : "", json_object_get_string(msg));
	}
	if (more)
		fprintf(f, "\n... and %zu more", more);
	fclose(f);
	if (buf && !buf[0]) {
		free(buf);
		buf = NULL;
	}
	return buf;
}

static void judge_fail_on(struct gate *g, json_object *s, const char *label)
{
	json_object *eps = get(get(s, "alerts"), "episodes");

	for (int k = ALERT_LONG_POLL; k < ALERT_KIND_MAX; k++) {
		const char *kind = alert_kind_str((enum alert_kind)k);
		const char *unseen = unseen__alert((enum alert_kind)k);
		struct gate_result *r;
		double n;

		if (!(g->o.fail_on & (1u << k)))
			continue;
		n = num(eps, kind);
		r = result(g, label, "fail-on %s", kind);
		snprintf(r->limit, sizeof(r->limit), "none");
		if (unseen_in(s, unseen)) {
			not_seen(r, s, unseen);
			continue;
		}
		snprintf(r->now, sizeof(r->now), "%.0f episode%s", n, n == 1 ? "" : "s");
		r->verdict = n > 0 ? GATE_FAIL : GATE_PASS;
		if (n > 0)
			r->detail = alert_detail(s, kind);
	}
}

static void judge_max(struct gate *g, json_object *s, const char *label)
{
	for (size_t i = 0; i < g->o.nr_max; i++) {
		const struct gate_limit *l = &g->o.max[i];
		const struct metric *m = &metrics[l->metric];
		struct gate_result *r = result(g, label, "%s", m->name);
		double v, samples;

		snprintf(r->limit, sizeof(r->limit), "<= %s", l->text);
		if (unseen_in(s, m->unseen)) {
			not_seen(r, s, m->unseen);
			continue;
		}
		if (!value_of(s, m, -1, &v, &samples)) {
			snprintf(r->now, sizeof(r->now), "unknown");
			r->verdict = GATE_UNKNOWN;
			continue;
		}
		fmt_value(r->now, sizeof(r->now), m->kind, v);
		r->verdict = v <= l->value ? GATE_PASS : GATE_FAIL;
	}
}

/* The baseline's summary of the same program: the same comm, else the first. */
static json_object *baseline_for(const struct gate *g, json_object *s)
{
	json_object *all = g->baseline, *comm = get(s, "comm");
	size_t n = all ? json_object_array_length(all) : 0;

	for (size_t i = 0; comm && i < n; i++) {
		json_object *b = json_object_array_get_idx(all, i);

		if (get(b, "comm") && !strcmp(json_object_get_string(get(b, "comm")),
					      json_object_get_string(comm)))
			return b;
	}
	return n ? json_object_array_get_idx(all, 0) : NULL;
}

/*
 * name of s against the baseline b: in total (worker < 0) or of one worker;
 * slack: how much worse than the tolerance allows still passes (noise).
 */
static void compare(struct gate *g, json_object *b, json_object *s, const char *label,
		    const char *name, int worker, double slack)
{
	const struct metric *m = &metrics[metric_index(name, strlen(name))];
	double was, now, n_was, n_now, tol = g->o.tolerance_pct / 100;
	char where[32] = "", a[24], c[24];
	struct gate_result *r;

	if (!value_of(b, m, worker, &was, &n_was) || !value_of(s, m, worker, &now, &n_now))
		return;
	/* a worker's percentiles stand on enough polls in both runs, or are not compared */
	if (worker >= 0 && (n_was < GATE_MIN_SAMPLES || n_now < GATE_MIN_SAMPLES))
		return;
	if (worker >= 0)
		snprintf(where, sizeof(where), " worker %d", worker);
	r = result(g, label, "baseline %s%s", name, where);
	fmt_value(a, sizeof(a), m->kind, was);
	fmt_value(c, sizeof(c), m->kind, now);
	if (m->kind == M_RATE) {
		/* a rate falling is throughput lost; rising is not a regression */
		snprintf(r->limit, sizeof(r->limit), "%s -%.0f%%", a, g->o.tolerance_pct);
		r->verdict = now >= was * (1 - tol) ? GATE_PASS : GATE_FAIL;
	} else {
		snprintf(r->limit, sizeof(r->limit), "%s +%.0f%%", a, g->o.tolerance_pct);
		r->verdict = now <= was * (1 + tol) || now - was < slack ? GATE_PASS : GATE_FAIL;
	}
	if (was > 0 && now >= 10 * was)
		snprintf(r->now, sizeof(r->now), "%s (x%.0f)", c, now / was);
	else
		snprintf(r->now, sizeof(r->now), "%s (%+.0f%%)", c,
			 was > 0 ? (now / was - 1) * 100 : 0);
}

/*
 * What the baseline run saw, against what this one did: each kind of alert
 * with more episodes now than then fails, with no tolerance: a blocking
 * call new in this build is one episode, and moves no percentile.
 */
static void compare_alerts(struct gate *g, json_object *b, json_object *s, const char *label)
{
	json_object *was = get(get(b, "alerts"), "episodes"), *now = get(get(s, "alerts"), "episodes");
	bool any = false;

	for (int k = ALERT_LONG_POLL; k < ALERT_KIND_MAX; k++) {
		const char *kind = alert_kind_str((enum alert_kind)k);
		double w = num(was, kind), n = num(now, kind);
		struct gate_result *r;

		if (!w && !n)
			continue;
		any = true;
		r = result(g, label, "baseline %s episodes", kind);
		snprintf(r->limit, sizeof(r->limit), "%.0f", w);
		snprintf(r->now, sizeof(r->now), "%.0f", n);
		r->verdict = n <= w ? GATE_PASS : GATE_FAIL;
		if (n > w)
			r->detail = alert_detail(s, kind);
	}
	if (!any) {
		struct gate_result *r = result(g, label, "%s", "baseline alert episodes");

		snprintf(r->limit, sizeof(r->limit), "0");
		snprintf(r->now, sizeof(r->now), "0");
		r->verdict = GATE_PASS;
	}
}

static void judge_baseline(struct gate *g, json_object *s, const char *label)
{
	json_object *b = baseline_for(g, s), *ws = get(b, "workers");
	size_t nw = ws && json_object_is_type(ws, json_type_array) ? json_object_array_length(ws)
								   : 0;

	if (!b)
		return;
	/*
	 * Samples see runs, and more of the long ones, where probes see every
	 * poll: one mode's percentiles and rates say nothing of the other's.
	 */
	if (strcmp(measured_by(b), measured_by(s))) {
		struct gate_result *r = result(g, label, "%s", "baseline");

		snprintf(r->limit, sizeof(r->limit), "by %s", measured_by(b));
		snprintf(r->now, sizeof(r->now), "by %s", measured_by(s));
		r->verdict = GATE_UNKNOWN;
		if (asprintf(&r->detail, "the baseline was measured by %s and this run by %s: "
					 "not comparable; save a baseline in the same mode",
			     measured_by(b), measured_by(s)) < 0)
			r->detail = NULL;
		return;
	}
	for (size_t i = 0; i < sizeof(baseline_pcts) / sizeof(baseline_pcts[0]); i++)
		compare(g, b, s, label, baseline_pcts[i], -1, (double)GATE_SLACK_NS);
	/* one poll, which one preemption of a busy host stretches by milliseconds */
	compare(g, b, s, label, "poll.max", -1, (double)GATE_MAX_SLACK_NS);
	for (size_t i = 0; i < sizeof(baseline_rates) / sizeof(baseline_rates[0]); i++)
		compare(g, b, s, label, baseline_rates[i], -1, 0);
	for (size_t w = 0; w < nw; w++)
		for (size_t i = 0; i < sizeof(baseline_pcts) / sizeof(baseline_pcts[0]); i++)
			compare(g, b, s, label, baseline_pcts[i],
				(int)num(json_object_array_get_idx(ws, w), "worker"),
				(double)GATE_SLACK_NS);
	compare_alerts(g, b, s, label);
}

/* Every gate asked for, unknown: why says what kept it from being evaluated. */
static void all_unknown(struct gate *g, const char *label, const char *why)
{
	struct gate_result *r = result(g, label, "%s", "every gate");

	snprintf(r->limit, sizeof(r->limit), "-");
	snprintf(r->now, sizeof(r->now), "unknown");
	r->verdict = GATE_UNKNOWN;
	r->detail = strdup(why);
}

static bool is_summary(json_object *s, char *why, size_t len, const char *what)
{
	json_object *schema = get(s, "schema");

	if (!s || !json_object_is_type(s, json_type_object) || !schema) {
		say(why, len, "%s is not a summary of asynctraced (--summary json)", what);
		return false;
	}
	if (strcmp(json_object_get_string(schema), SUMMARY_SCHEMA)) {
		say(why, len, "%s has schema '%s'; this asynctraced reads '%s'", what,
		    json_object_get_string(schema), SUMMARY_SCHEMA);
		return false;
	}
	return true;
}

int gate__judge(struct gate *g, const char *json, bool named)
{
	json_object *s = json_tokener_parse(json), *comm = get(s, "comm");
	char why[256], name[96];
	const char *label = NULL;

	if (named) {
		snprintf(name, sizeof(name), "pid %.0f (%s)", num(s, "pid"),
			 comm ? json_object_get_string(comm) : "?");
		label = name;
	}
	if (!is_summary(s, why, sizeof(why), "the run's report")) {
		all_unknown(g, label, why);
		json_object_put(s);
		return -EINVAL;
	}
	if (num(get(s, "counts"), "polls") <= 0) {
		all_unknown(g, label, "the trace is empty: no poll was seen");
	} else {
		judge_fail_on(g, s, label);
		judge_max(g, s, label);
		judge_baseline(g, s, label);
	}
	json_object_put(s);
	return 0;
}

void gate__nothing(struct gate *g, const char *why)
{
	all_unknown(g, NULL, why);
}

/* ---- the baseline ------------------------------------------------------------ */

/*
 * The summaries among other lines: --summary json writes each on a line of
 * standard output, which `run` shares with its command. -ENOENT if none.
 */
static int summary_lines(json_object *all, const char *text, size_t size)
{
	static const char start[] = "{\"schema\":\"asynctraced.summary/";
	int found = 0;

	for (size_t at = 0; at < size;) {
		size_t n = strcspn(text + at, "\n");

		if (n > sizeof(start) && !strncmp(text + at, start, sizeof(start) - 1)) {
			char *line = strndup(text + at, n);
			json_object *s = line ? json_tokener_parse(line) : NULL;

			free(line);
			if (s && json_object_is_type(s, json_type_object)) {
				json_object_array_add(all, s);
				found++;
			} else {
				json_object_put(s);
			}
		}
		at += n + 1;
	}
	return found ? 0 : -ENOENT;
}

int gate__init(struct gate *g, const struct gate_opts *o, char *why, size_t len)
{
	json_tokener *tok;
	json_object *all;
	char *text = NULL;
	size_t size = 0, at = 0;
	FILE *f;
	int err = 0;

	char what[PATH_MAX + 32];

	memset(g, 0, sizeof(*g));
	g->o = *o;
	if (!g->o.tolerance_set)
		g->o.tolerance_pct = GATE_DEFAULT_TOLERANCE;
	if (!o->baseline)
		return 0;
	snprintf(what, sizeof(what), "the baseline '%s'", o->baseline);
	f = fopen(o->baseline, "re");
	if (!f) {
		err = -errno;
		say(why, len, "cannot read the baseline '%s': %s", o->baseline, strerror(errno));
		return err;
	}
	{
		char chunk[65536];
		size_t n;
		FILE *m = open_memstream(&text, &size);

		while (m && (n = fread(chunk, 1, sizeof(chunk), f)) > 0)
			fwrite(chunk, 1, n, m);
		if (m)
			fclose(m);
	}
	fclose(f);
	if (!text) {
		say(why, len, "cannot read the baseline '%s': out of memory", o->baseline);
		return -ENOMEM;
	}
	all = json_object_new_array();
	tok = json_tokener_new();
	if (all && tok && !summary_lines(all, text, size))
		goto parsed;
	/* one summary per traced process, a line each (or pretty-printed) */
	while (all && tok) {
		json_object *s;

		while (at < size && strchr(" \t\r\n", text[at]))
			at++;
		if (at == size)
			break;
		s = json_tokener_parse_ex(tok, text + at, (int)(size - at));
		if (!s) {
			if (!s)
				say(why, len, "the baseline '%s' is not JSON (%s): save one with "
					      "--summary json",
				    o->baseline, json_tokener_error_desc(json_tokener_get_error(tok)));
			json_object_put(s);
			err = -EINVAL;
			break;
		}
		json_object_array_add(all, s);
		at += json_tokener_get_parse_end(tok);
		json_tokener_reset(tok);
	}
parsed:
	if (!err && (!all || !tok))
		err = -ENOMEM;
	for (size_t i = 0; !err && i < json_object_array_length(all); i++)
		if (!is_summary(json_object_array_get_idx(all, i), why, len, what))
			err = -EINVAL;
	if (!err && !json_object_array_length(all)) {
		say(why, len, "the baseline '%s' is empty: save one with --summary json", o->baseline);
		err = -EINVAL;
	}
	json_tokener_free(tok);
	free(text);
	if (err == -ENOMEM)
		say(why, len, "cannot read the baseline '%s': out of memory", o->baseline);
	if (err) {
		json_object_put(all);
		return err;
	}
	g->baseline = all;
	return 0;
}

/* ---- what is said ------------------------------------------------------------ */

enum gate_verdict gate__verdict(const struct gate *g)
{
	enum gate_verdict v = g->oom ? GATE_UNKNOWN : GATE_PASS;

	for (size_t i = 0; i < g->nr; i++)
		if (g->res[i].verdict == GATE_UNKNOWN)
			v = GATE_UNKNOWN;
		else if (g->res[i].verdict == GATE_FAIL && v == GATE_PASS)
			v = GATE_FAIL;
	return v;
}

static const char *verdict_str(enum gate_verdict v)
{
	return v == GATE_PASS ? "pass" : v == GATE_FAIL ? "FAIL" : "UNKNOWN";
}

void gate__print(const struct gate *g, FILE *out)
{
	size_t w = strlen("gate"), failed = 0;

	for (size_t i = 0; i < g->nr; i++) {
		if (strlen(g->res[i].name) > w)
			w = strlen(g->res[i].name);
		failed += g->res[i].verdict != GATE_PASS;
	}
	fprintf(out, "  %-*s  %-16s  %-18s  %s\n", (int)w, "gate", "limit/baseline", "now",
		"verdict");
	for (size_t i = 0; i < g->nr; i++) {
		const struct gate_result *r = &g->res[i];

		fprintf(out, "  %-*s  %-16s  %-18s  %s\n", (int)w, r->name, r->limit, r->now,
			verdict_str(r->verdict));
		if (r->detail && r->verdict != GATE_PASS) {
			const char *line = r->detail;

			/* the tasks behind it, indented under its row */
			while (*line) {
				size_t n = strcspn(line, "\n");

				fprintf(out, "      %.*s\n", (int)n, line);
				line += n + (line[n] == '\n');
			}
		}
	}
	fprintf(out, "  %zu gate%s, %zu passed, %zu failed\n", g->nr, g->nr == 1 ? "" : "s",
		g->nr - failed, failed);
}

/* GitHub's workflow commands: % and newlines escaped in the message. */
static void annotation_text(FILE *out, const char *s)
{
	for (; *s; s++)
		if (*s == '%')
			fputs("%25", out);
		else if (*s == '\n')
			fputs("%0A", out);
		else if (*s == '\r')
			fputs("%0D", out);
		else
			fputc(*s, out);
}

void gate__annotate(const struct gate *g, FILE *out)
{
	for (size_t i = 0; i < g->nr; i++) {
		const struct gate_result *r = &g->res[i];

		if (r->verdict == GATE_PASS)
			continue;
		fputs("::error title=asynctraced gate::", out);
		annotation_text(out, r->name);
		fputs(r->verdict == GATE_UNKNOWN ? " could not be evaluated" : " failed: ", out);
		if (r->verdict == GATE_FAIL) {
			annotation_text(out, r->now);
			fputs(", limit ", out);
			annotation_text(out, r->limit);
		}
		if (r->detail) {
			fputs("%0A", out);
			annotation_text(out, r->detail);
		}
		fputc('\n', out);
	}
}

static void xml_text(FILE *f, const char *s)
{
	for (; s && *s; s++)
		switch (*s) {
		case '&':
			fputs("&amp;", f);
			break;
		case '<':
			fputs("&lt;", f);
			break;
		case '>':
			fputs("&gt;", f);
			break;
		case '"':
			fputs("&quot;", f);
			break;
		default:
			/* XML 1.0 has no other control characters than these */
			if ((unsigned char)*s >= 0x20 || *s == '\n' || *s == '\t')
				fputc(*s, f);
		}
}

int gate__junit(const struct gate *g, FILE *f, double seconds)
{
	size_t failures = 0, errors = 0;

	for (size_t i = 0; i < g->nr; i++) {
		failures += g->res[i].verdict == GATE_FAIL;
		errors += g->res[i].verdict == GATE_UNKNOWN;
	}
	fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
	fprintf(f, "<testsuites name=\"asynctraced\" tests=\"%zu\" failures=\"%zu\" "
		   "errors=\"%zu\" time=\"%.3f\">\n", g->nr, failures, errors, seconds);
	fprintf(f, "  <testsuite name=\"asynctraced gates\" tests=\"%zu\" failures=\"%zu\" "
		   "errors=\"%zu\" time=\"%.3f\">\n", g->nr, failures, errors, seconds);
	for (size_t i = 0; i < g->nr; i++) {
		const struct gate_result *r = &g->res[i];

		fputs("    <testcase classname=\"asynctraced.gate\" name=\"", f);
		xml_text(f, r->name);
		fputs("\" time=\"0\"", f);
		if (r->verdict == GATE_PASS) {
			fputs("/>\n", f);
			continue;
		}
		fprintf(f, ">\n      <%s message=\"", r->verdict == GATE_FAIL ? "failure" : "error");
		if (r->verdict == GATE_FAIL) {
			xml_text(f, r->now);
			fputs(", limit ", f);
			xml_text(f, r->limit);
		} else {
			fputs("could not be evaluated", f);
		}
		fputs("\">", f);
		xml_text(f, r->detail);
		fprintf(f, "</%s>\n    </testcase>\n", r->verdict == GATE_FAIL ? "failure" : "error");
	}
	fputs("  </testsuite>\n</testsuites>\n", f);
	return fflush(f) || ferror(f) ? -EIO : 0;
}

void gate__free(struct gate *g)
{
	for (size_t i = 0; i < g->nr; i++)
		free(g->res[i].detail);
	free(g->res);
	json_object_put(g->baseline);
	memset(g, 0, sizeof(*g));
}
