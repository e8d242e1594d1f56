/* SPDX-License-Identifier: MIT */
/*
 * Prometheus metrics (--metrics [ADDR:]PORT or unix:PATH): every traced
 * process's aggregates as Prometheus series, served at /metrics by
 * libmicrohttpd's own thread (on epoll: a daemon following many processes
 * holds descriptors past select()'s 1024), in the text exposition format
 * (0.0.4), or in OpenMetrics when the scraper asks for it. The session renders the series once a
 * second from the snapshot it has just read (metrics__update, then
 * metrics__publish); a scrape takes the latest rendering, never waits for
 * the maps, and never touches the session's state. docs/metrics.md lists
 * the series.
 */
#ifndef METRICS_H
#define METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pipeline/detect.h"
#include "pipeline/model.h"
#include "source/stats.h"

struct metrics;

/* A traced process as the metrics show it: the session's latest snapshot of it. */
struct metrics_target {
	uint32_t pid;
	const char *comm;
	const char *runtime;		/* "tokio", "usdt" */
	const struct stats *snap;
	const struct detector *det;
	struct model *model;		/* names its tasks */
	size_t top_tasks;		/* --metrics-tasks: series for this many tasks, the busiest */
	uint32_t sample_hz;		/* sample mode: its rate (0: probe mode) */
};

/* What asynctraced says of itself. */
struct metrics_self {
	size_t traced;			/* processes traced now */
	uint64_t missed;		/* processes --max-targets left out, so far */
	uint64_t attach_failures;	/* processes found and not traced, so far */
};

/*
 * Serves on listen: "PORT" (on 127.0.0.1), "ADDR:PORT", "[ADDR6]:PORT", or
 * "unix:PATH", a socket made there (0660), replacing only a stale socket.
 * 0, or -errno, said on stderr. Call before the sandbox closes the network.
 */
int metrics__open(struct metrics **out, const char *listen);
/* Takes process t's latest values (copied). */
void metrics__update(struct metrics *m, const struct metrics_target *t);
/*
 * Process pid is no longer traced: its series keep their last values until
 * a scrape has seen them (at most a minute), then go.
 */
void metrics__gone(struct metrics *m, uint32_t pid);
/* Renders every series for the scrapes to come. */
void metrics__publish(struct metrics *m, const struct metrics_self *self);
/*
 * Stops serving. remove_socket: the unix socket is removed too (if it is still
 * ours); the seccomp filter forbids it, so under the filter it stays, and
 * the next run replaces it.
 */
void metrics__close(struct metrics *m, bool remove_socket);

/* What is wrong with --metrics listen, as "want ..." says it (for the option parser); or NULL. */
const char *metrics__bad_listen(const char *listen);

#endif
