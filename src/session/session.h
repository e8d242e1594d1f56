/* SPDX-License-Identifier: MIT */
/* A tracing session: trace and record (session.c). */
#ifndef SESSION_H
#define SESSION_H

#include <stddef.h>
#include <sys/types.h>

#include "cmd/options.h"

/* Runs trace or record as the options say; returns the exit status. */
int session__run(const struct options *o);

/*
 * What `run` (src/cmd/run.c) asks of a session tracing the command it
 * started, root, held at its entry point: release is called once root is
 * traced (or known not to be traceable), and summary with each process's
 * summary at its end. Without -p in o (--follow-children), root and its
 * descendants are followed, and the session ends when root exits.
 */
struct session_hooks {
	pid_t root;
	void (*release)(void *ctx);
	void (*summary)(void *ctx, const char *json, size_t len);
	void *ctx;
	int stopped_by;		/* out: the signal that stopped the session, or 0 */
};

int session__run_with(const struct options *o, struct session_hooks *h);

#endif
