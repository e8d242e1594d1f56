// SPDX-License-Identifier: MIT
/*
 * A synthetic event stream through the real pipeline: model, detector, alert
 * sink and both trace writers. The traces it writes ($BUILD/tests/synthetic.json
 * and .pftrace) are then checked against Perfetto's import rules by
 * `make test-unit`.
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
#include "sinks/pftrace_file.h"
#include "sinks/trace_json.h"
#include "sinks/trace_proto.h"

#define T0 1000000000ull
#define MS 1000000ull
#define US 1000ull

struct collector {
	struct sink sink;
	struct alert alerts[8];
	int nr;
};

static void collect_alert(struct sink *s, struct model *m, const struct alert *a)
{
	struct collector *c = (struct collector *)s;

	assert_true(c->nr < 8);
	c->alerts[c->nr++] = *a;
}

static void collector_free(struct sink *s)
{
}

static const struct sink_ops collector_ops = {
	.name = "collector",
	.alert = collect_alert,
	.free = collector_free,
};

static int thread_comm(void *ctx, uint32_t tid, char *comm, size_t len)
{
	snprintf(comm, len, tid == 200 ? "reactor" : "worker-%u", tid - 101);
	return 0;
}

static void push_spawn(struct pipeline *p, uint32_t tid, uint64_t ts, uint64_t task,
		       const char *name, uint64_t wake_id)
{
	struct at_spawn e = {
		.hdr = { .kind = AT_EV_SPAWN, .size = sizeof(e), .tid = tid, .ts = ts },
		.task = task,
		.wake_id = wake_id,
		.queue = AT_QUEUE_INJECT,
		.depth = 1,
	};

	snprintf(e.name, sizeof(e.name), "%s", name);
	assert_int_equal(pipeline__push(p, &e, sizeof(e)), 0);
}

static void push_poll(struct pipeline *p, uint32_t tid, uint32_t worker, uint64_t ts,
		      uint64_t task, uint64_t oncpu, uint64_t blocked, uint64_t runnable,
		      uint64_t wake_id, uint64_t wake_ts, int ready)
{
	struct at_poll e = {
		.hdr = { .kind = AT_EV_POLL, .size = sizeof(e), .tid = tid, .ts = ts },
		.task = task,
		.duration_ns = oncpu + blocked + runnable,
		.oncpu_ns = oncpu,
		.blocked_ns = blocked,
		.runnable_ns = runnable,
		.wake_id = wake_id,
		.wake_ts = wake_ts,
		.worker = worker,
		.requeue = AT_QUEUE_NONE,
		.ready = (uint8_t)ready,
	};

	assert_int_equal(pipeline__push(p, &e, sizeof(e)), 0);
}

static void push_wake(struct pipeline *p, uint32_t tid, uint64_t ts, uint64_t task,
		      uint64_t waker, uint64_t wake_id, int32_t queue)
{
	struct at_wake e = {
		.hdr = { .kind = AT_EV_WAKE, .size = sizeof(e), .tid = tid, .ts = ts },
		.task = task,
		.waker_task = waker,
		.wake_id = wake_id,
		.waker_worker = waker ? 1 : -1,
		.queue = queue,
		.depth = 1,
	};

	assert_int_equal(pipeline__push(p, &e, sizeof(e)), 0);
}

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	char *buf = calloc(1, 1 << 20);

	assert_non_null(f);
	fread(buf, 1, (1 << 20) - 1, f);
	fclose(f);
	return buf;
}

static void synthetic_stream(void **state)
{
	struct detect_config opts = { .long_poll_ns = 10 * MS, .episode_gap_ns = 1000 * MS };
	struct collector c = { .sink.ops = &collector_ops };
	const char *build = getenv("BUILD") ? getenv("BUILD") : "build";
	char path[512];
	struct pipeline p;
	struct sink *json, *proto;
	struct outbuf *pob, *job;
	struct pftrace_file *pf;
	char *out;

	assert_int_equal(pipeline__init(&p, 4242, "sample", T0, &opts), 0);
	p.model.thread_comm = thread_comm;
	snprintf(path, sizeof(path), "%s/tests/synthetic.pftrace", build);
	assert_int_equal(outbuf__open(&pob, path), 0);
	assert_int_equal(pftrace_file__new(&pf, pob, false), 0);
	assert_int_equal(trace_proto__new(&proto, pf, 1), 0);
	snprintf(path, sizeof(path), "%s/tests/synthetic.json", build);
	assert_int_equal(outbuf__open(&job, path), 0);
	assert_int_equal(trace_json__begin(job), 0);
	assert_int_equal(trace_json__new(&json, job), 0);
	pipeline__add_sink(&p, &c.sink);
	pipeline__add_sink(&p, json);
	pipeline__add_sink(&p, proto);

	push_spawn(&p, 200, T0 + 1 * US, 1, "noisy", 1);
	push_spawn(&p, 200, T0 + 2 * US, 2, "blocking", 2);
	/* a CPU-bound long poll on worker 0, a blocked one on worker 1 */
	push_poll(&p, 101, 0, T0 + 10 * US, 1, 19900 * US, 0, 100 * US, 1, T0 + 1 * US, 0);
	push_poll(&p, 102, 1, T0 + 12 * US, 2, 100 * US, 19900 * US, 0, 2, T0 + 2 * US, 0);
	/* task 2 wakes task 1 from inside its poll; the reactor's second wake coalesces */
	push_wake(&p, 102, T0 + 15 * US, 1, 2, 3, 1);
	push_wake(&p, 200, T0 + 16 * US, 1, 0, 0, AT_QUEUE_NONE);
	{
		struct at_park e = {
			.hdr = { .kind = AT_EV_PARK, .size = sizeof(e), .tid = 102,
				 .ts = T0 + 20020 * US },
			.duration_ns = 5 * MS,
			.worker = 1,
		};
		struct at_steal s = {
			.hdr = { .kind = AT_EV_STEAL, .size = sizeof(s), .tid = 101,
				 .ts = T0 + 20100 * US },
			.thief = 0,
			.victim = 1,
			.count = 1,
		};

		assert_int_equal(pipeline__push(&p, &e, sizeof(e)), 0);
		assert_int_equal(pipeline__push(&p, &s, sizeof(s)), 0);
	}
	/* worker 0 runs the stolen task 1 to completion */
	push_poll(&p, 101, 0, T0 + 20200 * US, 1, 50 * US, 0, 0, 3, T0 + 15 * US, 1);
	/* a task spawned before we attached: no name, no wake */
	push_poll(&p, 102, 1, T0 + 26000 * US, 9, 100 * US, 0, 0, 0, 0, 0);
	/* a wake whose poll never comes */
	push_wake(&p, 200, T0 + 30000 * US, 2, 0, 4, AT_QUEUE_INJECT);
	{
		struct at_hdr bad = { .kind = AT_EV_POLL, .size = sizeof(bad), .ts = T0 };
		struct at_hdr future = { .kind = 200, .size = sizeof(future), .ts = T0 };

		assert_int_equal(pipeline__push(&p, &bad, sizeof(bad)), -EINVAL);
		assert_int_equal(pipeline__push(&p, &future, sizeof(future)), 0);
		assert_int_equal(pipeline__push(&p, &future, 4), -EINVAL);
	}

	/* the detector: two long polls, told apart by where the time went */
	assert_int_equal(c.nr, 2);
	assert_int_equal(c.alerts[0].state, ALERT_BEGIN);
	assert_int_equal(c.alerts[0].task, 1);
	assert_string_equal(c.alerts[0].task_name, "noisy");
	assert_int_equal(c.alerts[0].cause, CAUSE_CPU);
	assert_int_equal(c.alerts[0].tid, 101);
	assert_int_equal(c.alerts[1].task, 2);
	assert_int_equal(c.alerts[1].cause, CAUSE_BLOCKED);
	assert_int_equal(c.alerts[1].worker, 1);

	/* the model */
	assert_int_equal(p.model.n.polls, 4);
	assert_int_equal(p.model.n.wakes, 3);
	assert_int_equal(p.model.n.tasks_spawned, 2);
	assert_int_equal(p.model.n.tasks_done, 1);
	assert_int_equal(p.model.n.steals, 1);
	assert_int_equal(p.model.n.parks, 1);
	assert_int_equal(p.model.n.malformed, 2);
	/* a newer kind is skipped, but counted and named */
	assert_int_equal(p.model.n.unknown, 1);
	assert_int_equal(p.model.n.unknown_kinds[0], 200);
	assert_int_equal(p.model.n.unknown_kinds[1], 0);
	assert_int_equal(p.model.nr_workers, 2);
	assert_int_equal(p.model.workers[1].tid, 102);
	assert_null(model__task(&p.model, 1)); /* completed: forgotten */
	assert_string_equal(model__task(&p.model, 9)->name, "task");
	assert_int_equal(model__task(&p.model, 2)->pending.wake_id, 4);

	/* the end of the stream closes both episodes, as still going */
	assert_int_equal(pipeline__finish(&p, T0 + 40 * MS), 0);
	assert_int_equal(c.nr, 4);
	for (int i = 2; i < 4; i++) {
		assert_int_equal(c.alerts[i].state, ALERT_END);
		assert_true(c.alerts[i].ongoing);
		assert_int_equal(c.alerts[i].count, 1);
	}
	assert_int_equal(trace_json__end(job), 0);
	assert_int_equal(pftrace_file__flush(pf), 0);
	pftrace_file__free(pf);
	outbuf__free(job);
	outbuf__free(pob);
	pipeline__free(&p);

	out = slurp(path);
	/* both ends of each answered wake, the spawns included */
	for (int id = 1; id <= 3; id++) {
		char want[64];

		snprintf(want, sizeof(want), "\"bind_id\":%d,\"flow_out\":true", id);
		assert_non_null(strstr(out, want));
		snprintf(want, sizeof(want), "\"bind_id\":%d,\"flow_in\":true", id);
		assert_non_null(strstr(out, want));
	}
	/* the unanswered wake is written, without a flow */
	assert_non_null(strstr(out, "\"ts\":30000.000,\"tid\":200,\"dur\":0.000,"
				    "\"name\":\"wake blocking #2\""));
	assert_null(strstr(out, "\"bind_id\":4,"));
	/* each task on its own track, named with its id */
	assert_non_null(strstr(out, "\"name\":\"noisy #1\",\"id2\":{\"local\":\"0x1\"}"));
	assert_non_null(strstr(out, "\"name\":\"task #9\",\"id2\":{\"local\":\"0x9\"}"));
	assert_non_null(strstr(out, "\"name\":\"worker 1 (worker-1)\""));
	assert_non_null(strstr(out, "\"name\":\"reactor\""));
	assert_non_null(strstr(out, "\"name\":\"steal from worker 1\""));
	assert_non_null(strstr(out, "\"name\":\"stolen by worker 0\""));
	assert_non_null(strstr(out, "\"name\":\"long-poll: blocking #2\""));
	/* tracing stopped it: not over */
	assert_non_null(strstr(out, "\"name\":\"long-poll still going: blocking #2\""));
	assert_non_null(strstr(out, "\"cause\":\"blocked\""));
	assert_non_null(strstr(out, "\"wake_delay_us\":9.000"));
	/* streamed as a bare array, and strict JSON once finished */
	assert_memory_equal(out, "[\n", 2);
	assert_non_null(strstr(out, "}\n]\n"));
	assert_null(strstr(out, "},\n]"));
	free(out);
}

/* A poll record carrying the wake its task made of itself: the wake is handed on first. */
static void self_wake_rides_in_its_poll(void **state)
{
	struct detect_config opts = { .long_poll_ns = 10 * MS, .episode_gap_ns = 1000 * MS };
	struct at_poll_self_wake r = {
		.poll = {
			.hdr = { .kind = AT_EV_POLL, .size = sizeof(r), .tid = 101, .ts = T0 + MS },
			.task = 7,
			.duration_ns = 5 * US,
			.oncpu_ns = 5 * US,
			.requeue = 0,
			.requeue_depth = 1,
		},
		.wake = {
			.hdr = { .kind = AT_EV_WAKE, .size = sizeof(r.wake), .tid = 101,
				 .ts = T0 + MS + 2 * US },
			.task = 7,
			.waker_task = 7,
			.wake_id = 99,
			.queue = AT_QUEUE_NONE,
		},
	};
	struct pipeline p;

	assert_int_equal(pipeline__init(&p, 4242, "sample", T0, &opts), 0);
	push_spawn(&p, 200, T0, 7, "spinner", 98);
	assert_int_equal(pipeline__push(&p, &r, sizeof(r)), 0);
	assert_int_equal(p.model.n.by_kind[AT_EV_WAKE], 1);
	assert_int_equal(p.model.n.by_kind[AT_EV_POLL], 1);
	assert_int_equal(p.model.n.wakes, 1);
	assert_int_equal(p.model.n.malformed, 0);
	/* the next poll answers that wake */
	assert_non_null(model__task(&p.model, 7));
	assert_int_equal(model__task(&p.model, 7)->pending.wake_id, 99);

	/* an appended wake that is not one is counted as malformed; the poll stands */
	r.wake.hdr.kind = AT_EV_STEAL;
	r.poll.hdr.ts += MS;
	assert_int_equal(pipeline__push(&p, &r, sizeof(r)), 0);
	assert_int_equal(p.model.n.by_kind[AT_EV_WAKE], 1);
	assert_int_equal(p.model.n.by_kind[AT_EV_POLL], 2);
	assert_int_equal(p.model.n.malformed, 1);
	pipeline__free(&p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(synthetic_stream),
		cmocka_unit_test(self_wake_rides_in_its_poll),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
