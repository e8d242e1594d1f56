/* SPDX-License-Identifier: MIT */
/*
 * A probe plan: what the analyser found in a process's files (struct
 * discovery, without its files), as bytes that cross from the analyser,
 * which runs as nobody, to the privileged side. The decoder trusts none of
 * them: every count, index, enum, string and offset is checked, offsets
 * against the size of the very file they are in, and what it builds is
 * what discover() would have built.
 */
#ifndef PLAN_H
#define PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "targets/discover.h"

/* The largest plan taken: a Go binary's function table is most of it. */
#define PLAN_MAX ((size_t)256 << 20)

struct plan_buf {
	uint8_t *data;
	size_t len, cap;
	int err;		/* -ENOMEM once a write failed */
};

/* d (its files given by index: d->files) as a plan, appended to b. 0 or -ENOMEM. */
int plan__encode(const struct discovery *d, struct plan_buf *b);
void plan_buf__free(struct plan_buf *b);

/*
 * The discovery in plan (len bytes) into d, whose files d->files are
 * already set (the paths in d are theirs; sizes[i]: file i's size). 0, or
 * -EBADMSG with why (a static string) when any part is out of bounds; d is
 * then freed, but for its files, which the caller keeps.
 */
int plan__decode(const uint8_t *plan, size_t len, const uint64_t *sizes, struct discovery *d,
		 const char **why);

#endif
