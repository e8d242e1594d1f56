/* SPDX-License-Identifier: MIT */
/*
 * `asynctraced tasks -p PID [--json] [--all] [-o FILE]`: a snapshot of
 * every task of each process and where each one waits (cmd/tasks.c).
 */
#ifndef CMD_TASKS_H
#define CMD_TASKS_H

#include "cmd/options.h"

/* An exit status: EXIT_OK, or EXIT_FAIL after a message (for any process). */
int tasks__main(const struct options *o);

#endif
