/* SPDX-License-Identifier: MIT */
/*
 * Chrome JSON (Trace Event Format) writer, laid out for Perfetto's importer:
 * a bare array, one event per line, so a file cut short still loads. What
 * the trace holds is slices.c's; this is how JSON writes it.
 * docs/trace-format.md describes every track and event it writes.
 */
#ifndef TRACE_JSON_H
#define TRACE_JSON_H

#include "pipeline/sink.h"

struct outbuf;

#define TRACE_JSON_HEAD "[\n"

/*
 * One JSON array holds the events of every process traced: begin writes
 * its opening (flushed: an empty trace is still a file), end its closing.
 */
int trace_json__begin(struct outbuf *ob);
int trace_json__end(struct outbuf *ob);
/* A writer of one process's events into the array in ob (shared: outbuf__get). */
int trace_json__new(struct sink **s, struct outbuf *ob);

#endif
