/* SPDX-License-Identifier: MIT */
/*
 * An open-addressing hash map from nonzero u64 keys to pointers: tasks by id,
 * threads by tid. Linear probing with backward-shift deletion, so lookups
 * never wade through tombstones however many tasks come and go.
 */
#ifndef U64MAP_H
#define U64MAP_H

#include <stddef.h>
#include <stdint.h>

struct u64map_slot {
	uint64_t key; /* 0: empty */
	void *val;
};

struct u64map {
	struct u64map_slot *slots;
	size_t cap; /* power of two */
	size_t len;
};

void u64map__init(struct u64map *m);
void u64map__clear(struct u64map *m); /* frees the table, not the values */
/* Frees every value (each one malloc'd, nothing else holding it), then the table. */
void u64map__clear_free(struct u64map *m);
void *u64map__get(const struct u64map *m, uint64_t key);
/* Inserts or replaces; returns 0 or -ENOMEM. */
int u64map__set(struct u64map *m, uint64_t key, void *val);
/* Removes key; returns its value or NULL. */
void *u64map__del(struct u64map *m, uint64_t key);

/* Iterate: for (size_t i = 0; u64map__next(m, &i, &key, &val); ) */
int u64map__next(const struct u64map *m, size_t *iter, uint64_t *key, void **val);

#endif
