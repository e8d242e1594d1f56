/* SPDX-License-Identifier: MIT */
/*
 * Starting the command `asynctraced run` traces, with no race: it is
 * started under ptrace and held at its entry point (AT_ENTRY: the dynamic
 * loader has mapped its libraries, none of its own code has run), the
 * probes are attached to it there, and only then is it let go.
 */
#ifndef LAUNCH_H
#define LAUNCH_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct launch {
	pid_t pid;		/* 0: not started */
	bool held;		/* still stopped under ptrace */
	uint64_t held_at;	/* when it stopped at its entry point (now_ns()) */
	uint64_t held_ns;	/* how long it was held there */
	int status;		/* ended before its entry point: its exit status */
};

/*
 * Starts argv (argv[0] searched in PATH, as a shell does) and holds it at
 * its entry point. 0; or, after a message, EXIT_NOT_FOUND (127: no such
 * command), EXIT_CANNOT_EXEC (126: not executable) or EXIT_FAIL.
 */
int launch__start(struct launch *l, char *const argv[]);
/* Lets it run (detaching ptrace); a no-op once done. */
void launch__release(struct launch *l);
/* Waits for it to end: its exit status, 128 + N when killed by signal N. */
int launch__wait(struct launch *l);

#endif
