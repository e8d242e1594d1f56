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

struct outbuf;

/*
 * A writer of one process's packets into ob (shared: outbuf__get), as
 * packet sequence seq (1 and up, one per writer of the file): each process
 * of a trace is its own sequence, with its own interned names and clock.
 * Track uuids are the file's: its writers draw them from *uuids (start it
 * at 1), so that they stay small (a byte or two on the wire).
 */
int trace_proto__new(struct sink **s, struct outbuf *ob, uint32_t seq, uint64_t *uuids);

#endif
