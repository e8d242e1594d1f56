/* SPDX-License-Identifier: MIT */
/* The command line (docs/cli.md is its manual; a test keeps the two in step). */
#ifndef OPTIONS_H
#define OPTIONS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "detect.h"
#include "tracer.h"

enum { EXIT_OK = 0, EXIT_FAIL = 1, EXIT_USAGE = 2 };

enum summary_format {
	SUMMARY_TEXT = 0,
	SUMMARY_JSON,
};

struct options {
	pid_t pid;
	uint64_t duration_ns;	/* 0: until stopped */
	const char *output;	/* trace file, or NULL */
	const char *alerts;	/* JSON lines file, or NULL */
	bool no_trace;		/* maps only */
	int live;		/* -1: when stderr is a terminal; 0 off; 1 on */
	bool quiet;
	enum summary_format summary;
	struct detect_opts detect;
	uint64_t ringbuf_bytes;
	const char *btf_path;
	enum sched_hook sched_hook;
	bool verbose;
};

/* 0 to run; EXIT_USAGE after a message; -1 when done (--help, --version). */
int options__parse(int argc, char **argv, struct options *o);

#endif
