// SPDX-License-Identifier: MIT
#include "targets/images.h"

#include <stdlib.h>
#include <sys/stat.h>

#include "asynctraced.h"

/* Files remembered at most: beyond, nothing new is (a stat each is all they cost). */
#define IMAGE_CACHE_MAX 65536

struct image_entry {
	dev_t dev;
	ino_t ino;
	off_t size;
	struct timespec mtime;
	unsigned int lacks;	/* enum image_lack bits */
};

void image_cache__init(struct image_cache *c)
{
	u64map__init(&c->files);
	c->hits = 0;
}

void image_cache__free(struct image_cache *c)
{
	u64map__clear_free(&c->files);
}

/* The map's key: (dev, inode) hashed, never 0; the entry holds the whole identity. */
uint64_t image__key(const struct stat *st)
{
	uint64_t k = ((uint64_t)st->st_dev * AT_HASH_MULT) ^ (uint64_t)st->st_ino;

	return k ? k : 1;
}

static bool same_file(const struct image_entry *e, const struct stat *st)
{
	return e->dev == st->st_dev && e->ino == st->st_ino && e->size == st->st_size &&
	       e->mtime.tv_sec == st->st_mtim.tv_sec && e->mtime.tv_nsec == st->st_mtim.tv_nsec;
}

bool image_cache__lacks(struct image_cache *c, const char *path, enum image_lack lack)
{
	struct image_entry *e;
	struct stat st;

	if (stat(path, &st))
		return false;
	e = u64map__get(&c->files, image__key(&st));
	if (!e || !same_file(e, &st) || !(e->lacks & lack))
		return false;
	c->hits++;
	return true;
}

void image_cache__note(struct image_cache *c, const char *path, enum image_lack lack)
{
	struct image_entry *e;
	struct stat st;
	uint64_t key;

	if (stat(path, &st))
		return;
	key = image__key(&st);
	e = u64map__get(&c->files, key);
	if (e && !same_file(e, &st))
		e->lacks = 0; /* rebuilt, or another file at a hash's collision: start over */
	if (!e) {
		if (c->files.len >= IMAGE_CACHE_MAX || !(e = calloc(1, sizeof(*e))))
			return;
		if (u64map__set(&c->files, key, e)) {
			free(e);
			return;
		}
	}
	e->dev = st.st_dev;
	e->ino = st.st_ino;
	e->size = st.st_size;
	e->mtime = st.st_mtim;
	e->lacks |= lack;
}
