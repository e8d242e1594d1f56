/* SPDX-License-Identifier: MIT */
/*
 * `asynctraced convert CAPTURE [-o TRACE] [--alerts FILE] [--summary ...]`:
 * replays a capture through the pipeline with the same sinks as tracing
 * live, so a trace, the alerts and the report come out as they would have.
 */
#ifndef CONVERT_H
#define CONVERT_H

#include "cmd/options.h"

/* An exit status: EXIT_OK, or EXIT_FAIL after a message. */
int convert__run(const struct options *o);

#endif
