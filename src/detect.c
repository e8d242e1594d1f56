// SPDX-License-Identifier: MIT
#include "detect.h"

#include <string.h>

#include "model.h"

void detector__init(struct detector *d, const struct detect_opts *opts)
{
	memset(d, 0, sizeof(*d));
	d->opts = *opts;
}

enum poll_cause poll_cause(const struct at_poll *p)
{
	if (p->oncpu_ns >= p->blocked_ns && p->oncpu_ns >= p->runnable_ns)
		return CAUSE_CPU;
	return p->blocked_ns >= p->runnable_ns ? CAUSE_BLOCKED : CAUSE_PREEMPTED;
}

const char *poll_cause_str(enum poll_cause c)
{
	switch (c) {
	case CAUSE_CPU:
		return "cpu-bound";
	case CAUSE_BLOCKED:
		return "blocked";
	case CAUSE_PREEMPTED:
		return "preempted";
	}
	return "unknown";
}

const char *alert_kind_str(enum alert_kind k)
{
	switch (k) {
	case ALERT_LONG_POLL:
		return "long-poll";
	}
	return "unknown";
}

static void detect_long_poll(struct detector *d, const struct at_poll *p, alert_fn emit,
			     void *ctx)
{
	struct alert a;

	if (!d->opts.long_poll_ns || p->duration_ns < d->opts.long_poll_ns)
		return;
	memset(&a, 0, sizeof(a));
	a.kind = ALERT_LONG_POLL;
	a.ts = p->hdr.ts;
	a.duration_ns = p->duration_ns;
	a.tid = p->hdr.tid;
	a.worker = (int32_t)p->worker;
	a.task = p->task;
	a.cause = poll_cause(p);
	a.poll = p;
	d->counts[ALERT_LONG_POLL]++;
	emit(ctx, &a);
}

void detector__event(struct detector *d, struct model *m, const struct at_hdr *ev,
		     alert_fn emit, void *ctx)
{
	(void)m;
	if (ev->kind == AT_EV_POLL)
		detect_long_poll(d, (const struct at_poll *)ev, emit, ctx);
}
