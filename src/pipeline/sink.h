/* SPDX-License-Identifier: MIT */
/*
 * A sink consumes the event stream after the model has seen each event:
 * trace writers, the alert printer, reports. Sources (the BPF ring buffer,
 * later a capture file) never know which sinks are listening.
 */
#ifndef SINK_H
#define SINK_H

#include "asynctraced.h"
#include "pipeline/detect.h"
#include "pipeline/model.h"

struct sink;
struct stats;

struct sink_ops {
	const char *name;
	void (*event)(struct sink *s, struct model *m, const struct at_hdr *ev);
	void (*alert)(struct sink *s, struct model *m, const struct alert *a);
	/* about ten times a second: flush */
	void (*tick)(struct sink *s, struct model *m);
	/* about once a second: a fresh snapshot of the BPF side's aggregates */
	void (*stats)(struct sink *s, struct model *m, const struct stats *st);
	/* end of stream: 0 or -errno (a write failed) */
	int (*finish)(struct sink *s, struct model *m);
	void (*free)(struct sink *s);
};

struct sink {
	const struct sink_ops *ops;
};

#endif
