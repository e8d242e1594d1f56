/* SPDX-License-Identifier: MIT */
/*
 * ELF images already found to hold no runtime, so that examining them again
 * costs a stat, not a read of their notes and symbols: system-wide, every
 * process maps libc and the dynamic loader, and a server forks and execs the
 * same binaries again and again. A file is known by its device, inode, size
 * and modification time: one rebuilt or replaced is examined again. Only
 * "nothing here" is remembered; a file that holds a runtime is traced, and
 * examined for its process.
 */
#ifndef IMAGES_H
#define IMAGES_H

#include <stdbool.h>
#include <stdint.h>

#include "lib/u64map.h"

/* What was looked for in a file and not found. */
enum image_lack {
	IMAGE_NO_USDT = 1,	/* no asynctrace USDT probes */
	IMAGE_NO_TOKIO = 2,	/* no tokio */
	IMAGE_NO_GO = 4,	/* no Go runtime */
};

struct image_cache {
	struct u64map files;	/* hash of (dev, inode) -> struct image_entry * */
	uint64_t hits;		/* looks saved */
};

void image_cache__init(struct image_cache *c);
void image_cache__free(struct image_cache *c);
/* Whether the file at path (as it is now) is known to lack what lack says. */
bool image_cache__lacks(struct image_cache *c, const char *path, enum image_lack lack);
/* The file at path (as it is now) was found to lack what lack says. */
void image_cache__note(struct image_cache *c, const char *path, enum image_lack lack);

struct stat;
/*
 * A file's (device, inode) hashed, never 0: a u64map key; whoever holds
 * the map tells colliding files apart.
 */
uint64_t image__key(const struct stat *st);

#endif
