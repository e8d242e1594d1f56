/* SPDX-License-Identifier: MIT */
/*
 * The pipeline: source -> model -> detectors -> sinks.
 *
 * A source hands over raw records; the pipeline validates each, updates the
 * model, runs the detectors, and passes the event and any alerts it raised
 * to every sink in the order they were added.
 */
#ifndef PIPELINE_H
#define PIPELINE_H

#include <stddef.h>

#include "pipeline/detect.h"
#include "pipeline/model.h"
#include "pipeline/sink.h"

#define PIPELINE_MAX_SINKS 8

struct pipeline {
	struct model model;
	struct detector detector;
	struct sink *sinks[PIPELINE_MAX_SINKS];
	int nr_sinks;
	/* sees each alert before the sinks, and may add to it (the flight recorder's dump) */
	void (*on_alert)(void *ctx, struct alert *a);
	void *on_alert_ctx;
	const char *runtime;	/* "tokio", "go", "usdt" (NULL: not known), for what is unseen */
};

int pipeline__init(struct pipeline *p, uint32_t pid, const char *comm, uint64_t t0,
		   const struct detect_config *opts);
/* Takes ownership of the sink. */
int pipeline__add_sink(struct pipeline *p, struct sink *s);
/* 0, or -EINVAL for a malformed record (counted in the model, skipped). */
int pipeline__push(struct pipeline *p, const void *rec, size_t size);
/* Time passes (now: the source's clock): detectors end quiet episodes. */
void pipeline__tick(struct pipeline *p, uint64_t now);
/* Hands a snapshot of the aggregates to the sinks that want one. */
void pipeline__stats(struct pipeline *p, const struct stats *st);
/* Ends the stream: closes open episodes; 0, or the first sink's -errno. */
int pipeline__finish(struct pipeline *p, uint64_t now);
void pipeline__free(struct pipeline *p);

#endif
