/* SPDX-License-Identifier: MIT */
/*
 * Native Perfetto protobuf writer (TrackEvent): the process; a thread track
 * per worker with its polls (the CPU view); a "tasks" track with one track
 * per task nested under it, or under its parent task; queue-depth and
 * runnable-task counters; alerts; wake, spawn and steal flows. Names are
 * interned. docs/trace-format.md describes the layout.
 */
#ifndef TRACE_PROTO_H
#define TRACE_PROTO_H

#include "sink.h"

/* Opens path now, so an unwritable output fails before tracing starts. */
int trace_proto__new(struct sink **s, const char *path);

#endif
