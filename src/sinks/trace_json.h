/* SPDX-License-Identifier: MIT */
/*
 * Chrome JSON (Trace Event Format) writer, laid out for Perfetto's importer:
 * a bare array, one event per line, so a file cut short still loads.
 * docs/trace-format.md describes every track and event it writes.
 */
#ifndef TRACE_JSON_H
#define TRACE_JSON_H

#include "sink.h"

/* Opens path now, so an unwritable output fails before tracing starts. */
int trace_json__new(struct sink **s, const char *path);

#endif
