/* SPDX-License-Identifier: MIT */
/*
 * Detectors turn the event stream into alerts. Each alert names the task,
 * the worker and thread, how long, and why.
 */
#ifndef DETECT_H
#define DETECT_H

#include <stdint.h>

#include "asynctraced.h"

struct model;

enum alert_kind {
	ALERT_LONG_POLL = 1,
};

/* Where a poll's time went: the largest of its three parts. */
enum poll_cause {
	CAUSE_CPU = 1,		/* ran on the CPU: the task burned it */
	CAUSE_BLOCKED,		/* slept in the kernel: a blocking call */
	CAUSE_PREEMPTED,	/* runnable but not running: CPU contention */
};

struct alert {
	enum alert_kind kind;
	uint64_t ts;		/* start of what is alerted on */
	uint64_t duration_ns;
	uint32_t tid;
	int32_t worker;
	uint64_t task;
	enum poll_cause cause;
	const struct at_poll *poll; /* ALERT_LONG_POLL: the poll */
};

struct detect_opts {
	uint64_t long_poll_ns;	/* 0: off */
};

#define DEFAULT_LONG_POLL_NS (10 * 1000 * 1000ull)

typedef void (*alert_fn)(void *ctx, const struct alert *a);

struct detector {
	struct detect_opts opts;
	uint64_t counts[ALERT_LONG_POLL + 1];
};

void detector__init(struct detector *d, const struct detect_opts *opts);
/* Feeds one event; calls emit for every alert it raises. */
void detector__event(struct detector *d, struct model *m, const struct at_hdr *ev,
		     alert_fn emit, void *ctx);

enum poll_cause poll_cause(const struct at_poll *p);
const char *poll_cause_str(enum poll_cause c);
const char *alert_kind_str(enum alert_kind k);

#endif
