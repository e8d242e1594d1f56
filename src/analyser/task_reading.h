/* SPDX-License-Identifier: MIT */
/*
 * The analyser's answer to `asynctraced tasks` (wire.h: TASKS): the
 * process's executable and memory, handed over as descriptors, read into a
 * list of its tasks (tasks/), sent back as TASKLIST. 0, or -errno when the
 * socket cannot go on.
 */
#ifndef TASK_READING_H
#define TASK_READING_H

#include "analyser/wire.h"

int task_reading__read(const struct wire_hdr *h);

#endif
