// SPDX-License-Identifier: MIT
/*
 * Each detector fed synthetic records: one alert per episode, its END when it
 * went quiet, and the explanations that keep one problem from raising two.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <setjmp.h>
#include <cmocka.h>

#include "pipeline/detect.h"
#include "pipeline/model.h"

#define T0 1000000000ull
#define MS 1000000ull
#define S 1000000000ull

struct fixture {
	struct model m;
	struct detector d;
	struct alert got[32];
	int nr;
};

static void collect(void *ctx, const struct alert *a)
{
	struct fixture *f = ctx;

	assert_true(f->nr < 32);
	f->got[f->nr++] = *a;
}

static const struct detect_config opts = {
	.long_poll_ns = 10 * MS,
	.sched_delay_ns = 20 * MS,
	.starve_depth = 16,
	.starve_ns = 200 * MS,
	.thrash_rate = 1000,
	.lost_waker_ns = 1 * S,
	.episode_gap_ns = 1 * S,
};

static int setup(void **state)
{
	static struct fixture f;

	memset(&f, 0, sizeof(f));
	model__init(&f.m, 42, "test", T0);
	detector__init(&f.d, &opts, collect, &f);
	*state = &f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	detector__free(&f->d);
	model__free(&f->m);
	return 0;
}

static void poll(struct fixture *f, uint32_t worker, uint64_t task, uint64_t ts, uint64_t dur,
		 uint64_t wake_ts, int32_t queued_on, uint32_t queued_depth, uint64_t holder)
{
	struct at_poll p = {
		.hdr = { .kind = AT_EV_POLL, .size = sizeof(p), .tid = 100 + worker, .ts = ts },
		.task = task,
		.duration_ns = dur,
		.oncpu_ns = dur,
		.wake_ts = wake_ts,
		.worker = worker,
		.requeue = AT_QUEUE_NONE,
		.queued_on = queued_on,
		.queued_depth = queued_depth,
		.holder_begin = holder,
	};

	detector__event(&f->d, &f->m, &p.hdr);
}

static void long_poll_episodes(void **state)
{
	struct fixture *f = *state;

	/* three 20 ms polls 250 ms apart: one episode */
	for (int i = 0; i < 3; i++)
		poll(f, 0, 7, T0 + i * 250 * MS, 20 * MS + i * MS, 0, AT_QUEUE_NONE, 0, 0);
	assert_int_equal(f->nr, 1);
	assert_int_equal(f->got[0].kind, ALERT_LONG_POLL);
	assert_int_equal(f->got[0].state, ALERT_BEGIN);
	assert_int_equal(f->got[0].value_ns, 20 * MS);
	assert_int_equal(f->got[0].cause, CAUSE_CPU);
	/* a short poll changes nothing; a quiet second ends the episode */
	poll(f, 0, 7, T0 + 800 * MS, 1 * MS, 0, AT_QUEUE_NONE, 0, 0);
	detector__tick(&f->d, &f->m, T0 + 1200 * MS);
	assert_int_equal(f->nr, 1);
	detector__tick(&f->d, &f->m, T0 + 1600 * MS);
	assert_int_equal(f->nr, 2);
	assert_int_equal(f->got[1].state, ALERT_END);
	assert_int_equal(f->got[1].episode, f->got[0].episode);
	assert_int_equal(f->got[1].count, 3);
	assert_int_equal(f->got[1].worst_ns, 22 * MS);
	assert_false(f->got[1].ongoing);
	/* it comes back: a new episode */
	poll(f, 0, 7, T0 + 5 * S, 30 * MS, 0, AT_QUEUE_NONE, 0, 0);
	assert_int_equal(f->nr, 3);
	assert_int_not_equal(f->got[2].episode, f->got[0].episode);
	detector__finish(&f->d, &f->m, T0 + 6 * S);
	assert_int_equal(f->nr, 4);
	assert_true(f->got[3].ongoing);
	assert_int_equal(f->d.begun[ALERT_LONG_POLL], 2);
}

/*
 * The tasks a long poll kept waiting in its worker's queue, named at the
 * episode's end: the longest waits first, a task once (its longest), the
 * part of each wait the hold covered; a wait in another queue, or after
 * the hold, is none.
 */
static void long_poll_victims(void **state)
{
	struct fixture *f = *state;

	poll(f, 0, 7, T0, 30 * MS, 0, AT_QUEUE_NONE, 0, 0);
	poll(f, 0, 8, T0 + 30 * MS, 1 * MS, T0 + 5 * MS, 0, 1, 0);	/* 25 ms behind it */
	poll(f, 1, 9, T0 + 31 * MS, 1 * MS, T0 + 1 * MS, 0, 2, 0);	/* 29 ms (stolen late) */
	poll(f, 1, 10, T0 + 31 * MS, 1 * MS, T0 + 25 * MS, 1, 1, 0);	/* another queue */
	poll(f, 0, 11, T0 + 40 * MS, 1 * MS, T0 + 31 * MS, 0, 1, 0);	/* after the hold */
	/* queued before the hold began: not woken by it; all 30 ms of the hold */
	poll(f, 0, 12, T0 + 31 * MS, 1 * MS, T0 - 2 * MS, 0, 2, 0);
	/* the episode's next long poll: task 8 waits 28 ms behind it */
	poll(f, 0, 7, T0 + 250 * MS, 30 * MS, 0, AT_QUEUE_NONE, 0, 0);
	poll(f, 0, 8, T0 + 280 * MS, 1 * MS, T0 + 252 * MS, 0, 1, 0);
	assert_int_equal(f->nr, 1);
	assert_int_equal(f->got[0].nr_victims, 0); /* BEGIN: none known yet */
	detector__finish(&f->d, &f->m, T0 + 400 * MS);
	assert_int_equal(f->nr, 2);
	assert_int_equal(f->got[1].state, ALERT_END);
	assert_int_equal(f->got[1].waits_behind, 4);
	assert_int_equal(f->got[1].nr_victims, 3);
	assert_int_equal(f->got[1].victims[0].task, 12);
	assert_int_equal(f->got[1].victims[0].waited_ns, 30 * MS);
	assert_false(f->got[1].victims[0].woken_by_holder);
	assert_int_equal(f->got[1].victims[1].task, 9);
	assert_int_equal(f->got[1].victims[1].waited_ns, 29 * MS);
	/* woken during the hold onto the held worker's queue: by the long poll */
	assert_true(f->got[1].victims[1].woken_by_holder);
	assert_int_equal(f->got[1].victims[2].task, 8);
	assert_int_equal(f->got[1].victims[2].waited_ns, 28 * MS);
	/* no idle share measured (at_poll.spare 0): unknown, not 0% */
	assert_int_equal(f->got[1].victims[2].idle_pct, -1);
}

static void sched_delay_only_when_unexplained(void **state)
{
	struct fixture *f = *state;

	/* a backlog of 40 ahead of it: starvation's business, not ours */
	poll(f, 1, 8, T0 + 100 * MS, MS, T0 + 60 * MS, 0, 40, 0);
	/* taken from worker 0 while worker 0 had been in one poll for 35 ms */
	poll(f, 1, 9, T0 + 200 * MS, MS, T0 + 160 * MS, 0, 1, T0 + 165 * MS);
	/* waited in worker 0's queue while a long poll ran there */
	poll(f, 0, 5, T0 + 300 * MS, 25 * MS, 0, AT_QUEUE_NONE, 0, 0);
	assert_int_equal(f->nr, 1); /* the long poll */
	poll(f, 0, 10, T0 + 330 * MS, MS, T0 + 290 * MS, 0, 2, 0);
	assert_int_equal(f->nr, 1);
	/* 30 ms in the injection queue, nothing holding anyone up: that is one */
	poll(f, 1, 11, T0 + 500 * MS, MS, T0 + 470 * MS, AT_QUEUE_INJECT, 3, 0);
	assert_int_equal(f->nr, 2);
	assert_int_equal(f->got[1].kind, ALERT_SCHED_DELAY);
	assert_int_equal(f->got[1].value_ns, 30 * MS);
	assert_int_equal(f->got[1].queued_on, AT_QUEUE_INJECT);
	assert_int_equal(f->got[1].task, 11);
	/* more of them: the same episode; below the threshold: nothing */
	poll(f, 0, 12, T0 + 600 * MS, MS, T0 + 550 * MS, AT_QUEUE_INJECT, 1, 0);
	poll(f, 0, 13, T0 + 700 * MS, MS, T0 + 690 * MS, AT_QUEUE_INJECT, 1, 0);
	assert_int_equal(f->nr, 2);
	detector__tick(&f->d, &f->m, T0 + 3 * S);
	assert_int_equal(f->nr, 4); /* both episodes over */
	for (int i = 2; i < 4; i++) {
		if (f->got[i].kind != ALERT_SCHED_DELAY)
			continue;
		assert_int_equal(f->got[i].state, ALERT_END);
		assert_int_equal(f->got[i].count, 2);
		assert_int_equal(f->got[i].worst_ns, 50 * MS);
	}
}

/*
 * Taken from the injection queue by the worker a long poll held during the
 * wait (the one its wake notified, for all we know): the long poll explains
 * it. The same wait with that worker free is a scheduling delay.
 */
static void sched_delay_behind_the_worker_that_took_it(void **state)
{
	struct fixture *f = *state;

	poll(f, 0, 5, T0 + 100 * MS, 25 * MS, 0, AT_QUEUE_NONE, 0, 0);
	assert_int_equal(f->nr, 1); /* the long poll */
	poll(f, 0, 11, T0 + 126 * MS, MS, T0 + 98 * MS, AT_QUEUE_INJECT, 0, 0);
	assert_int_equal(f->nr, 1);
	/* worker 1 took it, worker 0's hold notwithstanding: unexplained */
	poll(f, 1, 12, T0 + 128 * MS, MS, T0 + 98 * MS, AT_QUEUE_INJECT, 0, 0);
	assert_int_equal(f->nr, 2);
	assert_int_equal(f->got[1].kind, ALERT_SCHED_DELAY);
	assert_int_equal(f->got[1].task, 12);
}

/* A worker that polled busy and waited cpu_wait for a CPU since T0, and slept the rest. */
static void worker_sample_waiting(struct fixture *f, uint32_t worker, uint64_t ts,
				  uint64_t area, uint64_t busy, uint64_t cpu_wait)
{
	struct at_worker_sample s = {
		.hdr = { .kind = AT_EV_WORKER_SAMPLE, .size = sizeof(s), .tid = 100 + worker,
			 .ts = ts },
		.worker = worker,
		.depth_area = area,
		.busy_ns = busy,
		.asleep_ns = ts - T0 - busy - cpu_wait,
		.cpu_wait_ns = cpu_wait,
	};

	detector__event(&f->d, &f->m, &s.hdr);
}

static void worker_sample(struct fixture *f, uint32_t worker, uint64_t ts, uint64_t area,
			  uint64_t busy)
{
	worker_sample_waiting(f, worker, ts, area, busy, 0);
}

static void starvation(void **state)
{
	struct fixture *f = *state;
	uint64_t area = 0;

	/* worker 0 holds 50 tasks on average and is busy; worker 1 idles */
	for (int i = 0; i <= 5; i++) {
		uint64_t ts = T0 + i * 100 * MS;

		worker_sample(f, 1, ts, 0, 0);
		worker_sample(f, 0, ts, area, i * 100 * MS);
		area += 50 * 100 * MS;
		if (i <= 1) /* starved since T0, but not for 200 ms yet */
			assert_int_equal(f->nr, 0);
	}
	assert_int_equal(f->nr, 1);
	assert_int_equal(f->got[0].kind, ALERT_STARVATION);
	assert_int_equal(f->got[0].worker, 0);
	assert_int_equal(f->got[0].idle_worker, 1);
	assert_true(f->got[0].depth_avg > 49.9 && f->got[0].depth_avg < 50.1);
	assert_true(f->got[0].idle_pct > 99.9);
	/* still deep until 600 ms, then the queue drains: over */
	worker_sample(f, 1, T0 + 600 * MS, 0, 0);
	worker_sample(f, 0, T0 + 600 * MS, area, 600 * MS);
	assert_int_equal(f->nr, 1);
	worker_sample(f, 1, T0 + 700 * MS, 0, 0);
	worker_sample(f, 0, T0 + 700 * MS, area, 700 * MS);
	assert_int_equal(f->nr, 2);
	assert_int_equal(f->got[1].state, ALERT_END);
	assert_int_equal(f->got[1].count, 5);
	/* deep but nobody idle: busy, not starved */
	for (int i = 8; i < 13; i++) {
		uint64_t ts = T0 + i * 100 * MS;

		area += 50 * 100 * MS;
		worker_sample(f, 1, ts, 0, i * 100 * MS);
		worker_sample(f, 0, ts, area, i * 100 * MS);
	}
	assert_int_equal(f->nr, 2);
}

static void task_sample(struct fixture *f, uint64_t task, uint64_t ts, uint64_t polls,
			uint64_t wakes, uint64_t self, uint64_t idle_since)
{
	struct at_task_sample s = {
		.hdr = { .kind = AT_EV_TASK_SAMPLE, .size = sizeof(s), .ts = ts },
		.task = task,
		.polls = polls,
		.wakes = wakes,
		.self_wakes = self,
		.idle_since = idle_since,
	};

	detector__event(&f->d, &f->m, &s.hdr);
}

static void waker_thrash(void **state)
{
	struct fixture *f = *state;

	task_sample(f, 3, T0, 100, 100, 100, 0);
	task_sample(f, 3, T0 + S, 6100, 6100, 6050, 0); /* 6000 polls/s, its own wakes */
	assert_int_equal(f->nr, 1);
	assert_int_equal(f->got[0].kind, ALERT_THRASH);
	assert_int_equal(f->got[0].reason, THRASH_SELF_WAKE);
	assert_true(f->got[0].self_wakes_per_s > 5900);
	task_sample(f, 3, T0 + 2 * S, 12000, 12000, 11900, 0); /* still at it */
	assert_int_equal(f->nr, 1);
	task_sample(f, 3, T0 + 3 * S, 12010, 12010, 11900, 0); /* calmed down */
	assert_int_equal(f->nr, 2);
	assert_int_equal(f->got[1].state, ALERT_END);
	assert_int_equal(f->got[1].count, 2);

	/* a wake storm: woken 20 times per poll */
	task_sample(f, 4, T0, 0, 0, 0, 0);
	task_sample(f, 4, T0 + S, 100, 2000, 0, 0);
	assert_int_equal(f->nr, 3);
	assert_int_equal(f->got[2].reason, THRASH_WAKE_STORM);
	/* busy and healthy: many polls, each answering someone else's wake */
	task_sample(f, 5, T0, 0, 0, 0, 0);
	task_sample(f, 5, T0 + S, 5000, 5000, 10, 0);
	assert_int_equal(f->nr, 3);
}

static void lost_waker(void **state)
{
	struct fixture *f = *state;
	uint64_t idle = T0 + 100 * MS;

	task_sample(f, 6, T0 + 1000 * MS, 2, 2, 0, idle); /* 0.9 s: not yet */
	assert_int_equal(f->nr, 0);
	task_sample(f, 6, T0 + 2000 * MS, 2, 2, 0, idle);
	assert_int_equal(f->nr, 1);
	assert_int_equal(f->got[0].kind, ALERT_LOST_WAKER);
	assert_int_equal(f->got[0].begin_ts, idle);
	assert_int_equal(f->got[0].value_ns, 1900 * MS);
	task_sample(f, 6, T0 + 3000 * MS, 2, 2, 0, idle); /* still: no new alert */
	assert_int_equal(f->nr, 1);
	task_sample(f, 6, T0 + 4000 * MS, 3, 3, 0, 0); /* woken at last */
	assert_int_equal(f->nr, 2);
	assert_int_equal(f->got[1].state, ALERT_END);
	assert_false(f->got[1].ongoing);
	/* one that never wakes is still lost when tracing stops */
	task_sample(f, 7, T0 + 4000 * MS, 1, 1, 0, T0 + 500 * MS);
	detector__finish(&f->d, &f->m, T0 + 5 * S);
	assert_int_equal(f->nr, 4);
	assert_int_equal(f->got[3].task, 7);
	assert_true(f->got[3].ongoing);
}

/*
 * A poll the runtime says nothing can wake after (AT_POLL_UNWAKEABLE): lost
 * at its end, not after the threshold; samples that show it unchanged keep
 * the episode, one that shows it polled again ends it.
 */
static void unwakeable_at_once(void **state)
{
	struct fixture *f = *state;
	struct at_poll p = {
		.hdr = { .kind = AT_EV_POLL, .size = sizeof(p), .tid = 101, .ts = T0 },
		.task = 9,
		.duration_ns = 50000,
		.oncpu_ns = 50000,
		.worker = 1,
		.requeue = AT_QUEUE_NONE,
		.queued_on = AT_QUEUE_NONE,
		.flags = AT_POLL_UNWAKEABLE,
	};

	detector__event(&f->d, &f->m, &p.hdr);
	assert_int_equal(f->nr, 1);
	assert_int_equal(f->got[0].kind, ALERT_LOST_WAKER);
	assert_true(f->got[0].unwakeable);
	assert_int_equal(f->got[0].begin_ts, T0 + 50000);
	assert_int_equal(f->got[0].worker, 1);
	/* the same record again (a capture replayed twice): no second alert */
	detector__event(&f->d, &f->m, &p.hdr);
	assert_int_equal(f->nr, 1);
	/* idle as long as the threshold: still the one episode */
	task_sample(f, 9, T0 + 500 * MS, 4, 3, 0, T0 + 50000);
	task_sample(f, 9, T0 + 2 * S, 4, 3, 0, T0 + 50000);
	assert_int_equal(f->nr, 1);
	/* polled again after all (cancelled): over */
	task_sample(f, 9, T0 + 3 * S, 5, 3, 0, 0);
	assert_int_equal(f->nr, 2);
	assert_int_equal(f->got[1].state, ALERT_END);
	assert_true(f->got[1].unwakeable);
	/* a Ready poll says nothing, whatever its flags */
	p.task = 10;
	p.ready = 1;
	detector__event(&f->d, &f->m, &p.hdr);
	assert_int_equal(f->nr, 2);
	/* a later poll of a lost task ends its episode at once */
	p.task = 11;
	p.ready = 0;
	detector__event(&f->d, &f->m, &p.hdr);
	assert_int_equal(f->nr, 3);
	p.hdr.ts = T0 + 1 * S;
	p.flags = 0;
	detector__event(&f->d, &f->m, &p.hdr);
	assert_int_equal(f->nr, 4);
	assert_int_equal(f->got[3].state, ALERT_END);
	assert_int_equal(f->got[3].task, 11);
}

/*
 * A short poll stretched by a busy host (runnable, no CPU) is not the task's
 * long poll; it still held its worker, which explains a wait there.
 */
static void preemption_alone_makes_no_long_poll(void **state)
{
	struct fixture *f = *state;
	struct at_poll p = {
		.hdr = { .kind = AT_EV_POLL, .size = sizeof(p), .tid = 100, .ts = T0 + 100 * MS },
		.task = 7,
		.duration_ns = 30 * MS,
		.oncpu_ns = 2 * MS,
		.blocked_ns = 1 * MS,
		.runnable_ns = 27 * MS,
		.requeue = AT_QUEUE_NONE,
		.queued_on = AT_QUEUE_NONE,
	};

	detector__event(&f->d, &f->m, &p.hdr);
	assert_int_equal(f->nr, 0);
	/* waited in worker 0's queue behind it */
	poll(f, 0, 8, T0 + 131 * MS, MS, T0 + 105 * MS, 0, 1, 0);
	assert_int_equal(f->nr, 0);
	/* 8 ms of its own and 8 ms asleep: 16 ms the task's doing */
	p.hdr.ts = T0 + 200 * MS;
	p.oncpu_ns = 8 * MS;
	p.blocked_ns = 8 * MS;
	p.runnable_ns = 14 * MS;
	detector__event(&f->d, &f->m, &p.hdr);
	assert_int_equal(f->nr, 1);
	assert_int_equal(f->got[0].kind, ALERT_LONG_POLL);
	assert_int_equal(f->got[0].value_ns, 30 * MS);
}

/*
 * A poll its runtime preempted for running too long (Go's sysmon) is a long
 * poll from 10 ms whatever the threshold; the same poll not preempted is
 * none under it, and one preempted under 10 ms none either.
 */
static void runtime_preemption_makes_a_long_poll(void **state)
{
	struct fixture *f = *state;
	struct at_poll p = {
		.hdr = { .kind = AT_EV_POLL, .size = sizeof(p), .tid = 100, .ts = T0 + 100 * MS },
		.task = 7,
		.duration_ns = 12 * MS,
		.oncpu_ns = 12 * MS,
		.requeue = AT_QUEUE_INJECT,
		.queued_on = AT_QUEUE_NONE,
	};

	f->d.config.long_poll_ns = 50 * MS;
	detector__event(&f->d, &f->m, &p.hdr);
	assert_int_equal(f->nr, 0);
	p.hdr.ts = T0 + 200 * MS;
	p.duration_ns = p.oncpu_ns = 9 * MS;
	p.flags = AT_POLL_PREEMPTED; /* (the BPF side sets it from 10 ms only; the detector too) */
	detector__event(&f->d, &f->m, &p.hdr);
	assert_int_equal(f->nr, 0);
	p.hdr.ts = T0 + 300 * MS;
	p.duration_ns = p.oncpu_ns = 12 * MS;
	detector__event(&f->d, &f->m, &p.hdr);
	assert_int_equal(f->nr, 1);
	assert_int_equal(f->got[0].kind, ALERT_LONG_POLL);
	assert_int_equal(f->got[0].cause, CAUSE_CPU);
	assert_true(f->got[0].runtime_preempted);
	/* the runtime's own goroutines (a GC worker) are never alerted on */
	f->d.runtime_tasks = "runtime.";
	model__name(&f->m, 0x4000, "runtime.gcBgMarkWorker");
	p.task = 9;
	p.name_addr = 0x4000;
	p.hdr.ts = T0 + 400 * MS;
	p.duration_ns = p.oncpu_ns = 60 * MS;
	detector__event(&f->d, &f->m, &p.hdr);
	assert_int_equal(f->nr, 1);
}

/*
 * Time on the CPU that the kernel did not charge the thread for (a host that
 * paused the virtual CPU while the thread ran, on a guest that reports no
 * steal time) is not the task computing: 15 ms nominally on the CPU, of
 * which 8 ms charged, is no long poll; 15 ms charged is. A record from
 * before cpu_ns (a version 2 capture) is judged by its time on the CPU.
 */
static void uncharged_cpu_time_is_no_long_poll(void **state)
{
	struct fixture *f = *state;
	struct at_poll p = {
		.hdr = { .kind = AT_EV_POLL, .size = sizeof(p), .tid = 100, .ts = T0 + 100 * MS },
		.task = 7,
		.duration_ns = 15 * MS,
		.oncpu_ns = 15 * MS,
		.requeue = AT_QUEUE_NONE,
		.queued_on = AT_QUEUE_NONE,
		.flags = AT_POLL_CPU_CHARGED,
		.cpu_ns = 8 * MS,
	};

	assert_int_equal(poll_cpu_ns(&p), 8 * MS);
	detector__event(&f->d, &f->m, &p.hdr);
	assert_int_equal(f->nr, 0);
	p.hdr.ts = T0 + 200 * MS;
	p.cpu_ns = 15 * MS;
	detector__event(&f->d, &f->m, &p.hdr);
	assert_int_equal(f->nr, 1);
	assert_int_equal(f->got[0].kind, ALERT_LONG_POLL);
	assert_int_equal(f->got[0].cause, CAUSE_CPU);
	/* the first version of the record: all its time on the CPU counts */
	p.hdr.size = AT_POLL_MIN_SIZE;
	p.cpu_ns = 8 * MS;
	assert_int_equal(poll_cpu_ns(&p), 15 * MS);
}

/*
 * A task that waits while every worker is busy polling others waits for
 * lack of workers, not for a scheduling fault: only a wait while some
 * worker had room to spare is a scheduling delay. Which the samples that
 * cover the wait tell, so the verdict waits for them (100 ms at most).
 */
static void sched_delay_needs_a_spare_worker(void **state)
{
	struct fixture *f = *state;

	worker_sample(f, 0, T0, 0, 0);
	worker_sample(f, 1, T0, 0, 0);
	/* a 30 ms wait: nothing covers it yet */
	poll(f, 1, 11, T0 + 60 * MS, MS, T0 + 30 * MS, AT_QUEUE_INJECT, 3, 0);
	assert_int_equal(f->d.nr_pending, 1);
	/* both workers 90% busy over it */
	worker_sample(f, 0, T0 + 100 * MS, 0, 90 * MS);
	worker_sample(f, 1, T0 + 100 * MS, 0, 90 * MS);
	assert_int_equal(f->d.nr_pending, 0);
	assert_int_equal(f->nr, 0);
	/* worker 1 mostly idle in the next interval: a wait then is a delay */
	poll(f, 0, 12, T0 + 160 * MS, MS, T0 + 130 * MS, AT_QUEUE_INJECT, 3, 0);
	assert_int_equal(f->nr, 0);
	worker_sample(f, 0, T0 + 200 * MS, 0, 190 * MS);
	worker_sample(f, 1, T0 + 200 * MS, 0, 100 * MS);
	assert_int_equal(f->nr, 1);
	assert_int_equal(f->got[0].kind, ALERT_SCHED_DELAY);
	assert_int_equal(f->got[0].task, 12);
	/* the end of the stream judges what still waits, on what is known */
	poll(f, 0, 13, T0 + 260 * MS, MS, T0 + 230 * MS, AT_QUEUE_INJECT, 3, 0);
	assert_int_equal(f->nr, 1);
	detector__finish(&f->d, &f->m, T0 + 300 * MS);
	assert_int_equal(f->got[0].kind, ALERT_SCHED_DELAY);
	assert_int_equal(f->got[1].state, ALERT_END);
	assert_int_equal(f->got[1].count, 2);
}

/*
 * A worker that neither polls nor parks because the host gives it no CPU
 * (preempted between polls by other processes, slow to run once woken) has
 * no room to spare: a wait then is the host's CPU contention, not a
 * scheduling fault.
 */
static void host_contention_is_no_spare_worker(void **state)
{
	struct fixture *f = *state;
	struct at_worker_sample old = {
		.hdr = { .kind = AT_EV_WORKER_SAMPLE, .size = AT_WORKER_SAMPLE_MIN_SIZE,
			 .tid = 101, .ts = T0 + 200 * MS },
		.worker = 1,
		.busy_ns = 40 * MS,
		.cpu_wait_ns = 1000 * MS, /* past the record's size: never read */
	};

	worker_sample(f, 0, T0, 0, 0);
	worker_sample(f, 1, T0, 0, 0);
	/* worker 0 busy; worker 1 polled 20 ms and waited 60 ms for a CPU */
	poll(f, 1, 11, T0 + 60 * MS, MS, T0 + 30 * MS, AT_QUEUE_INJECT, 0, 0);
	worker_sample(f, 0, T0 + 100 * MS, 0, 95 * MS);
	worker_sample_waiting(f, 1, T0 + 100 * MS, 0, 20 * MS, 60 * MS);
	assert_int_equal(f->nr, 0);
	/* a record from before cpu_wait_ns was appended: worker 1 was idle then */
	assert_int_equal(model__validate(&old, AT_WORKER_SAMPLE_MIN_SIZE), AT_EV_WORKER_SAMPLE);
	poll(f, 1, 12, T0 + 160 * MS, MS, T0 + 130 * MS, AT_QUEUE_INJECT, 0, 0);
	worker_sample(f, 0, T0 + 200 * MS, 0, 195 * MS);
	detector__event(&f->d, &f->m, &old.hdr);
	assert_int_equal(f->nr, 1);
	assert_int_equal(f->got[0].task, 12);
}

/* A late poll that says whether a worker slept through its wait is judged at once. */
static void spare_measured_by_the_poll(void **state)
{
	struct fixture *f = *state;
	struct at_poll p = {
		.hdr = { .kind = AT_EV_POLL, .size = sizeof(p), .tid = 100, .ts = T0 + 60 * MS },
		.task = 11,
		.duration_ns = MS,
		.oncpu_ns = MS,
		.wake_ts = T0 + 30 * MS,
		.requeue = AT_QUEUE_NONE,
		.queued_on = AT_QUEUE_INJECT,
		.spare = AT_SPARE_KNOWN | 10,
	};

	/* no worker slept much of it: the runtime was busy */
	detector__event(&f->d, &f->m, &p.hdr);
	assert_int_equal(f->nr, 0);
	assert_int_equal(f->d.nr_pending, 0);
	/* one slept through 80% of it: a delay, whatever the samples say later */
	p.task = 12;
	p.hdr.ts += 100 * MS;
	p.wake_ts += 100 * MS;
	p.spare = AT_SPARE_KNOWN | 80;
	detector__event(&f->d, &f->m, &p.hdr);
	assert_int_equal(f->nr, 1);
	assert_int_equal(f->got[0].task, 12);
	assert_int_equal(f->d.nr_pending, 0);
}

static void causes(void **state)
{
	struct at_poll p = { .oncpu_ns = 10, .blocked_ns = 5, .runnable_ns = 1 };

	assert_int_equal(poll_cause(&p, 0), CAUSE_CPU);
	p.blocked_ns = 20;
	assert_int_equal(poll_cause(&p, 0), CAUSE_BLOCKED);
	p.runnable_ns = 30;
	assert_int_equal(poll_cause(&p, 0), CAUSE_PREEMPTED);
	/* a 20 ms burn preempted for 25 ms on a busy machine is still a burn */
	p = (struct at_poll){ .oncpu_ns = 20 * MS, .runnable_ns = 25 * MS };
	assert_int_equal(poll_cause(&p, 10 * MS), CAUSE_CPU);
	p = (struct at_poll){ .oncpu_ns = 1 * MS, .blocked_ns = 20 * MS, .runnable_ns = 25 * MS };
	assert_int_equal(poll_cause(&p, 10 * MS), CAUSE_BLOCKED);
	/* a short poll stretched by preemption alone */
	p = (struct at_poll){ .oncpu_ns = 1 * MS, .runnable_ns = 15 * MS };
	assert_int_equal(poll_cause(&p, 10 * MS), CAUSE_PREEMPTED);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(long_poll_episodes, setup, teardown),
		cmocka_unit_test_setup_teardown(long_poll_victims, setup, teardown),
		cmocka_unit_test_setup_teardown(sched_delay_only_when_unexplained, setup, teardown),
		cmocka_unit_test_setup_teardown(sched_delay_behind_the_worker_that_took_it, setup,
						teardown),
		cmocka_unit_test_setup_teardown(starvation, setup, teardown),
		cmocka_unit_test_setup_teardown(waker_thrash, setup, teardown),
		cmocka_unit_test_setup_teardown(lost_waker, setup, teardown),
		cmocka_unit_test_setup_teardown(unwakeable_at_once, setup, teardown),
		cmocka_unit_test_setup_teardown(preemption_alone_makes_no_long_poll, setup,
						teardown),
		cmocka_unit_test_setup_teardown(sched_delay_needs_a_spare_worker, setup, teardown),
		cmocka_unit_test_setup_teardown(runtime_preemption_makes_a_long_poll, setup, teardown),
		cmocka_unit_test_setup_teardown(uncharged_cpu_time_is_no_long_poll, setup, teardown),
		cmocka_unit_test_setup_teardown(host_contention_is_no_spare_worker, setup, teardown),
		cmocka_unit_test_setup_teardown(spare_measured_by_the_poll, setup, teardown),
		cmocka_unit_test(causes),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
