/* SPDX-License-Identifier: MIT */
/* The command line (docs/cli.md is its manual; a test keeps the two in step). */
#ifndef OPTIONS_H
#define OPTIONS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "gate/gate.h"
#include "lib/exits.h"
#include "session/session.h"

enum command {
	CMD_TRACE = 0,		/* asynctraced [trace] -p PID */
	CMD_RECORD,		/* asynctraced record -p PID -o CAPTURE */
	CMD_CONVERT,		/* asynctraced convert CAPTURE */
	CMD_RUN,		/* asynctraced run [options] -- CMD [ARGS...] */
	CMD_PROBE_RULES,	/* asynctraced probe-rules */
	CMD_TASKS,		/* asynctraced tasks -p PID */
};

struct options {
	enum command command;
	const char *capture;	/* convert: the capture to read */
	/* trace and record: what to trace, how, and what to write (convert: the writing) */
	struct session_opts session;
	/* run */
	char **cmd;		/* the command and its arguments (NULL-terminated) */
	bool follow_children;	/* its descendants traced too */
	struct gate_opts gate;	/* --fail-on, --max, --baseline, --tolerance */
	const char *junit;	/* --junit FILE */
	const char *user;	/* --user USER: whom the command runs as (NULL: the default) */
	mode_t umask;		/* --umask: of every file created (default 077) */
	/* tasks */
	bool tasks_json;	/* --json */
	bool tasks_all;		/* --all: the runtime's own tasks too */
};

/* 0 to run; EXIT_USAGE after a message; -1 when done (--help, --version). */
int options__parse(int argc, char **argv, struct options *o);

#endif
