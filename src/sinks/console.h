/* SPDX-License-Identifier: MIT */
/*
 * The terminal: alerts as they are raised, and, when stderr is a terminal
 * (or --live), a view of the executor refreshed every second: per worker
 * busy time, queue depth, polls and steals per second, poll time and
 * wake-to-poll percentiles; the top tasks by poll time; the open alerts.
 */
#ifndef CONSOLE_H
#define CONSOLE_H

#include <stdbool.h>
#include <stdio.h>

#include "pipeline/sink.h"

struct board;

struct console_opts {
	FILE *out;
	bool live;		/* redraw the view every second */
	bool print_alerts;	/* one line per alert */
	const bool *name_process; /* ... naming its process, while *name_process (several) */
	struct board *board;	/* several traced: the live view's line of this one (board.h) */
	uint32_t sample_hz;	/* sample mode: wakes and steals unseen, shown as "-" */
	bool queues_unseen;	/* ... and queue depths (tokio's), "-" too */
};

int console__new(struct sink **s, const struct console_opts *o);

#endif
