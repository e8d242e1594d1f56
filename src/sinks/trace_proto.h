/* SPDX-License-Identifier: MIT */
/*
 * Native Perfetto protobuf writer (TrackEvent): the process; a thread track
 * per worker with its polls (the CPU view); a "tasks" track with one track
 * per task nested under it, or under its parent task; queue-depth and
 * runnable-task counters; alerts; wake, spawn and steal flows. Names are
 * interned. What the trace holds is slices.c's; this is how protobuf writes
 * it. docs/trace-format.md describes the layout.
 */
#ifndef TRACE_PROTO_H
#define TRACE_PROTO_H

#include "pipeline/sink.h"

struct pftrace_file;

/*
 * A writer of one process's packets into file (shared: pftrace_file__get),
 * as packet sequence seq (1 and up, one per writer of the file): each
 * process of a trace is its own sequence, with its own interned names and
 * clock; track uuids are the file's.
 */
int trace_proto__new(struct sink **s, struct pftrace_file *file, uint32_t seq);

#endif
