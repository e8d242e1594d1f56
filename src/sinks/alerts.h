/* SPDX-License-Identifier: MIT */
/*
 * Alerts as text (stderr, the report) and as JSON lines (--alerts FILE).
 * The JSON schema, asynctraced.alert/1, is documented in docs/alerts.md.
 */
#ifndef ALERTS_H
#define ALERTS_H

#include <stdio.h>

#include "pipeline/sink.h"

struct outbuf;

/* One alert as a line of text, without the newline. */
void alert__format(char *buf, size_t size, const struct model *m, const struct alert *a);
/*
 * A short title for traces: "long-poll: noisy #5", "starvation over: worker 1",
 * "long-poll still going: noisy #5" (tracing stopped first).
 */
void alert__title(char *buf, size_t size, const struct alert *a);
/*
 * A stack (--stacks) as a JSON array of frames, innermost first: function,
 * module, file and line where known, inlined and kernel when so; of a table
 * of places (callstacks.by_line, where tasks wait), no module.
 */
struct callstacks;
void alert__stack_json(struct outbuf *ob, const struct callstacks *c, uint32_t id);
/* One alert as a JSON object, on one line; alert__json adds a newline. */
void alert__json_object(struct outbuf *ob, const struct model *m, const struct alert *a);
void alert__json(struct outbuf *ob, const struct model *m, const struct alert *a);

/* A sink writing every alert, BEGIN and END, as JSON lines to ob (shared: outbuf__get). */
int alert_log__new(struct sink **s, struct outbuf *ob);

#endif
