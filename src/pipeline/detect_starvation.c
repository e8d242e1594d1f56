// SPDX-License-Identifier: MIT
/*
 * Starvation: a worker's queue deep while another worker idles, for
 * --starve-time; and each worker's samples kept, for the late polls to be
 * judged by (detect_sched_delay.c).
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline/detect_priv.h"
#include "pipeline/model.h"

/* The worker with the most idle time in its latest interval, other than self. */
static int32_t idlest_other(const struct detector *d, uint32_t self)
{
	int32_t best = -1;

	for (uint32_t i = 0; i < d->nr_workers; i++) {
		const struct worker_watch *w = &d->workers[i];

		if (i == self || !w->sampled)
			continue;
		if (best < 0 || w->idle_share > d->workers[best].idle_share)
			best = (int32_t)i;
	}
	return best;
}

/*
 * Starvation: a worker's queue stays deep (its average depth over each
 * sampling interval) while another worker is idle, for longer than
 * starve_ns. Stealing should have evened them out.
 */
static void remember(struct worker_watch *w, uint64_t ts, uint64_t idle_ns)
{
	w->hist[w->hist_next] = (struct worker_mark){ .ts = ts, .idle_ns = idle_ns };
	w->hist_next = (w->hist_next + 1) % WORKER_HISTORY;
	if (w->nr_hist < WORKER_HISTORY)
		w->nr_hist++;
}

/*
 * A worker's idle time up to its sample: asleep between polls. A record from
 * before that was sampled (asleep_ns appended since) only knows its time
 * polling: the rest counts as idle, as it then did.
 */
static uint64_t sample_idle_ns(const struct at_worker_sample *s)
{
	if (s->hdr.size >= offsetof(struct at_worker_sample, asleep_ns) + sizeof(s->asleep_ns))
		return s->asleep_ns;
	return s->hdr.ts > s->busy_ns ? s->hdr.ts - s->busy_ns : 0;
}

void starvation__on_sample(struct detector *d, struct model *m,
			   const struct at_worker_sample *s)
{
	struct worker_watch *w = detect__watch_worker(d, s->worker);
	uint64_t idle_ns = sample_idle_ns(s), dt;
	struct worker_mark last;
	int32_t idle;
	bool starved;
	struct alert a;

	if (!w)
		return;
	remember(w, s->hdr.ts, idle_ns);
	sched_delay__judge_pending(d, m, false);
	if (!w->ts || s->hdr.ts <= w->ts) {
		w->ts = s->hdr.ts;
		w->idle_ns = idle_ns;
		w->area = s->depth_area;
		return;
	}
	dt = s->hdr.ts - w->ts;
	/*
	 * The BPF side updates a queue's area and timestamp without a lock: a
	 * sample can land between the two and see less than the last one did.
	 */
	w->depth_avg = s->depth_area > w->area ? (double)(s->depth_area - w->area) / (double)dt : 0;
	last = (struct worker_mark){ .ts = w->ts, .idle_ns = w->idle_ns };
	w->idle_share = detect__idle_between(&last, &(struct worker_mark){ s->hdr.ts, idle_ns });
	w->sampled = true;
	w->ts = s->hdr.ts;
	if (idle_ns > w->idle_ns)
		w->idle_ns = idle_ns;
	if (s->depth_area > w->area)
		w->area = s->depth_area;
	if (!d->config.starve_depth)
		return;

	idle = idlest_other(d, s->worker);
	starved = w->depth_avg >= d->config.starve_depth && idle >= 0 &&
		  d->workers[idle].idle_share >= STARVE_IDLE_SHARE;
	if (!starved) {
		w->starved_since = 0;
		detect__end(d, w->ep, s->hdr.ts, false);
		w->ep = NULL;
		return;
	}
	if (!w->starved_since)
		w->starved_since = s->hdr.ts - dt;
	if (w->ep) {
		detect__recur(w->ep, s->hdr.ts, s->hdr.ts - w->starved_since);
		if (w->depth_avg > w->ep->a.depth_avg)
			w->ep->a.depth_avg = w->depth_avg;
		return;
	}
	if (s->hdr.ts - w->starved_since < d->config.starve_ns)
		return;
	detect__alert_init(&a, ALERT_STARVATION, s->hdr.ts);
	a.begin_ts = w->starved_since;
	a.value_ns = s->hdr.ts - w->starved_since;
	a.worker = (int32_t)s->worker;
	a.tid = s->hdr.tid;
	a.depth_avg = w->depth_avg;
	a.idle_worker = idle;
	a.idle_pct = 100.0 * d->workers[idle].idle_share;
	w->ep = detect__begin(d, &a);
}
