/* SPDX-License-Identifier: MIT */
/*
 * Separate debug files handed to the analyser: it says which it would read
 * (WANT), the privileged side opens those it finds and hands them over
 * (DEBUG, then their descriptors). A request that may want them (PRIME,
 * TASKS with the files) is always followed by that one exchange, empty or not.
 */
#ifndef DEBUG_FILES_H
#define DEBUG_FILES_H

#include <stdint.h>
#include <sys/types.h>

#include "stacks/unwind.h"

struct analyser;

/* The analyser's side: the paths it would read, each once. */
struct debug_wants {
	char **path;
	uint32_t nr;
	uint64_t bytes;
};

/* Path wanted (ctx: a struct debug_wants); the shape of unwinder__wanted's callback. */
void debug_wants__add(void *ctx, const char *path);
/*
 * WANT sent with w's paths; DEBUG's files taken: *out (*nr of them) each
 * named by its path and open, the caller's (w keeps the paths not found).
 * 0, or -errno when the socket cannot go on.
 */
int debug_wants__exchange(struct debug_wants *w, struct unwind_file **out, uint32_t *nr);
void debug_wants__free(struct debug_wants *w);

/*
 * The privileged side: WANT read from the analyser, each path opened in
 * pid's root if it is a regular file anyone may read, DEBUG sent with
 * those that were. 0, or -errno.
 */
int analyser__give_debug(struct analyser *a, pid_t pid, uint64_t deadline);

#endif
