// SPDX-License-Identifier: MIT
#include "pipeline/pipeline.h"

#include <errno.h>
#include <string.h>

static void broadcast_alert(void *ctx, const struct alert *a);

int pipeline__init(struct pipeline *p, uint32_t pid, const char *comm, uint64_t t0,
		   const struct detect_config *opts)
{
	memset(p, 0, sizeof(*p));
	detector__init(&p->detector, opts, broadcast_alert, p);
	return model__init(&p->model, pid, comm, t0);
}

int pipeline__add_sink(struct pipeline *p, struct sink *s)
{
	if (p->nr_sinks == PIPELINE_MAX_SINKS)
		return -E2BIG;
	p->sinks[p->nr_sinks++] = s;
	return 0;
}

static void broadcast_alert(void *ctx, const struct alert *a)
{
	struct pipeline *p = ctx;
	struct alert copy;

	if (p->on_alert) {
		copy = *a;
		p->on_alert(p->on_alert_ctx, &copy);
		a = &copy;
	}
	for (int i = 0; i < p->nr_sinks; i++)
		if (p->sinks[i]->ops->alert)
			p->sinks[i]->ops->alert(p->sinks[i], &p->model, a);
}

int pipeline__push(struct pipeline *p, const void *rec, size_t size)
{
	const struct at_hdr *ev = rec;
	int kind = model__validate(rec, size);

	if (kind < 0) {
		p->model.n.malformed++;
		return -EINVAL;
	}
	if (kind == 0) {
		model__unknown(&p->model, ev->kind);
		return 0;
	}
	model__apply(&p->model, ev);
	detector__event(&p->detector, &p->model, ev);
	for (int i = 0; i < p->nr_sinks; i++)
		if (p->sinks[i]->ops->event)
			p->sinks[i]->ops->event(p->sinks[i], &p->model, ev);
	model__retire(&p->model, ev);
	if (kind == AT_EV_POLL && size >= sizeof(struct at_poll_self_wake)) {
		/*
		 * The wake the task made of itself in this poll: after the poll,
		 * which answers the wake before it (the wake then waits for the
		 * next poll, which answers it).
		 */
		const struct at_poll_self_wake *pw = rec;
		struct at_hdr wh;

		memcpy(&wh, &pw->wake.hdr, sizeof(wh));
		if (wh.kind == AT_EV_WAKE && wh.size == sizeof(pw->wake))
			pipeline__push(p, &pw->wake, sizeof(pw->wake));
		else
			p->model.n.malformed++;
	}
	return 0;
}

void pipeline__tick(struct pipeline *p, uint64_t now)
{
	detector__tick(&p->detector, &p->model, now);
	for (int i = 0; i < p->nr_sinks; i++)
		if (p->sinks[i]->ops->tick)
			p->sinks[i]->ops->tick(p->sinks[i], &p->model);
}

void pipeline__stats(struct pipeline *p, const struct stats *st)
{
	for (int i = 0; i < p->nr_sinks; i++)
		if (p->sinks[i]->ops->stats)
			p->sinks[i]->ops->stats(p->sinks[i], &p->model, st);
}

int pipeline__finish(struct pipeline *p, uint64_t now)
{
	int err = 0;

	p->model.end_ts = now > p->model.last_ts ? now : p->model.last_ts;
	detector__finish(&p->detector, &p->model, now);
	for (int i = 0; i < p->nr_sinks; i++) {
		int e = p->sinks[i]->ops->finish ? p->sinks[i]->ops->finish(p->sinks[i], &p->model)
						 : 0;

		if (e && !err)
			err = e;
	}
	return err;
}

void pipeline__free(struct pipeline *p)
{
	for (int i = 0; i < p->nr_sinks; i++)
		p->sinks[i]->ops->free(p->sinks[i]);
	p->nr_sinks = 0;
	detector__free(&p->detector);
	model__free(&p->model);
}
