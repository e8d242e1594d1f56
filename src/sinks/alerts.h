/* SPDX-License-Identifier: MIT */
/*
 * Alerts as text (stderr, the report) and as JSON lines (--alerts FILE).
 * The JSON schema, asynctraced.alert/1, is documented in docs/alerts.md.
 */
#ifndef ALERTS_H
#define ALERTS_H

#include <stdio.h>

#include "sink.h"

struct outbuf;

/* One alert as a line of text, without the newline. */
void alert__format(char *buf, size_t size, const struct model *m, const struct alert *a);
/*
 * A short title for traces: "long-poll: noisy #5", "starvation over: worker 1",
 * "long-poll still going: noisy #5" (tracing stopped first).
 */
void alert__title(char *buf, size_t size, const struct alert *a);
/*
 * A long poll's stack (--stacks) as text for a trace's arguments, a frame a
 * line, innermost first: "function (module file:line)". "" without one.
 */
void alert__stack_text(char *buf, size_t size, const struct alert *a);
/* One alert as a JSON object, on one line; alert__json adds a newline. */
void alert__json_object(struct outbuf *ob, const struct model *m, const struct alert *a);
void alert__json(struct outbuf *ob, const struct model *m, const struct alert *a);

/* A sink writing every alert, BEGIN and END, as JSON lines to ob (shared: outbuf__get). */
int alert_log__new(struct sink **s, struct outbuf *ob);

#endif
