/* SPDX-License-Identifier: MIT */
/* The exit statuses (docs/cli.md), for every layer that returns one. */
#ifndef EXITS_H
#define EXITS_H

enum { EXIT_OK = 0, EXIT_FAIL = 1, EXIT_USAGE = 2 };
/* run: a gate failed; a gate could not be evaluated; the command not found or not runnable */
enum { EXIT_GATE_FAILED = 3, EXIT_GATE_UNKNOWN = 4, EXIT_CANNOT_EXEC = 126, EXIT_NOT_FOUND = 127 };

#endif
