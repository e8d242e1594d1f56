/* SPDX-License-Identifier: MIT */
/*
 * What the command line asks to be written, for tracing live and converting a
 * capture alike: the sinks (console, alert log, trace) and the final report.
 */
#ifndef OUTPUTS_H
#define OUTPUTS_H

#include <stdbool.h>

#include "options.h"
#include "pipeline.h"
#include "report.h"
#include "stats.h"

/* Adds the sinks o asks for; live: a live view is possible. 0, or -errno after a message. */
int outputs__open(struct pipeline *p, const struct options *o, bool live);
/*
 * Ends the pipeline (closing open episodes at now) and prints the report as
 * o->summary says; EXIT_OK, or EXIT_FAIL after a message when a write failed.
 */
int outputs__finish(struct pipeline *p, const struct options *o, uint64_t now,
		    const struct stats *st, const struct run_info *info);

#endif
