/* SPDX-License-Identifier: MIT */
/*
 * The analyser's answer to `asynctraced tasks` and to an alert's question
 * (wire.h: TASKS): the process's executable and memory, handed over as
 * descriptors (and kept, for a process traced), read into a list of its
 * tasks (tasks/), sent back as TASKLIST. 0, or -errno when the socket
 * cannot go on.
 */
#ifndef TASK_READING_H
#define TASK_READING_H

#include "analyser/wire.h"

int task_reading__read(const struct wire_hdr *h);
/* What is kept of process pid goes (FORGET). */
void task_reading__forget(int32_t pid);
/* ... of every one, at the analyser's end. */
void task_reading__end(void);

#endif
