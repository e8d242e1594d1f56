/* SPDX-License-Identifier: MIT */
/*
 * The CI gate (asynctraced run, issue 18): a traced run's summaries (the
 * same JSON --summary json prints, schema asynctraced.summary/1) judged
 * against alert kinds that fail it (--fail-on), limits (--max METRIC=VALUE)
 * and a summary saved from an earlier run (--baseline, --tolerance). Each
 * check is a gate with a verdict; the verdicts are printed as a table and,
 * for CI systems, written as JUnit XML and GitHub Actions annotations.
 */
#ifndef GATE_H
#define GATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define GATE_MAX_LIMITS 32
#define GATE_DEFAULT_TOLERANCE 25.0
/* a percentile this close to its baseline never fails, whatever the ratio */
#define GATE_SLACK_NS 500000ull
/* ... nor the longest poll, within the long-poll detector's default threshold */
#define GATE_MAX_SLACK_NS 10000000ull

struct gate_limit {
	int metric;		/* index in the metric table (gate__metric_name) */
	double value;		/* nanoseconds for a time, else a count or a rate */
	char text[32];		/* as given: "5ms" */
};

struct gate_opts {
	uint32_t fail_on;	/* bits (1 << enum alert_kind) */
	struct gate_limit max[GATE_MAX_LIMITS];
	size_t nr_max;
	const char *baseline;	/* a summary file, or NULL */
	double tolerance_pct;
	bool tolerance_set;	/* --tolerance given (0 is a tolerance too) */
	bool given;		/* any gate asked for */
};

enum gate_verdict {
	GATE_PASS,
	GATE_FAIL,
	GATE_UNKNOWN,		/* could not be evaluated: fails, with its own message */
};

struct gate_result {
	char name[96];		/* "poll.p99", "baseline poll.p99 worker 1", "fail-on long-poll" */
	char limit[48];		/* "<= 5.0ms", "1.2ms +25%", "none" */
	char now[48];
	enum gate_verdict verdict;
	char *detail;		/* why (the tasks behind a failing alert kind), or NULL */
};

struct gate {
	struct gate_opts o;
	void *baseline;		/* the baseline's summaries: a json-c array */
	struct gate_result *res;
	size_t nr, cap;
	bool oom;		/* a gate could not be kept: the verdict is unknown */
};

/* --fail-on KIND[,KIND...]|all into o. 0, or -EINVAL after saying why in why. */
int gate__parse_fail_on(struct gate_opts *o, const char *arg, char *why, size_t len);
/* --max METRIC=VALUE[,...] into o. 0, or -EINVAL (why lists the known metrics). */
int gate__parse_max(struct gate_opts *o, const char *arg, char *why, size_t len);
/* The metrics --max knows, comma-separated, for messages. */
const char *gate__metrics(void);

/* Reads the baseline if o names one. 0, or -errno after saying why in why. */
int gate__init(struct gate *g, const struct gate_opts *o, char *why, size_t len);
/*
 * Judges one process's summary (its JSON text, NUL-terminated); named: its
 * gates are named by its process ("pid 42 (server): ..."), for when several
 * processes were traced. 0, or -EINVAL when the text is not a summary (then
 * every gate is unknown).
 */
int gate__judge(struct gate *g, const char *json, bool named);
/* No summary at all (no process ran a known runtime): every gate unknown, saying why. */
void gate__nothing(struct gate *g, const char *why);
/* The worst verdict of all: GATE_PASS when every gate passed. */
enum gate_verdict gate__verdict(const struct gate *g);
/* The table: gate, limit or baseline, now, verdict; and the tasks behind failures. */
void gate__print(const struct gate *g, FILE *out);
/* One ::error:: line per failed gate (GitHub Actions' annotations). */
void gate__annotate(const struct gate *g, FILE *out);
/* JUnit XML, one testcase per gate, to f. 0, or -errno. */
int gate__junit(const struct gate *g, FILE *f, double seconds);
void gate__free(struct gate *g);

#endif
