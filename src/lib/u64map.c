// SPDX-License-Identifier: MIT
#include "lib/u64map.h"

#include <errno.h>
#include <stdlib.h>

#include "asynctraced.h"

static inline size_t slot_of(const struct u64map *m, uint64_t key)
{
	/* Fibonacci hashing: task ids are sequential, spread them. */
	return (size_t)((key * AT_HASH_MULT) >> 17) & (m->cap - 1);
}

void u64map__init(struct u64map *m)
{
	m->slots = NULL;
	m->cap = 0;
	m->len = 0;
}

void u64map__clear(struct u64map *m)
{
	free(m->slots);
	u64map__init(m);
}

void u64map__clear_free(struct u64map *m)
{
	for (size_t i = 0; i < m->cap; i++)
		if (m->slots[i].key)
			free(m->slots[i].val);
	u64map__clear(m);
}

void *u64map__get(const struct u64map *m, uint64_t key)
{
	if (!m->cap || !key)
		return NULL;
	for (size_t i = slot_of(m, key);; i = (i + 1) & (m->cap - 1)) {
		if (m->slots[i].key == key)
			return m->slots[i].val;
		if (!m->slots[i].key)
			return NULL;
	}
}

static int grow(struct u64map *m)
{
	struct u64map old = *m;

	m->cap = old.cap ? old.cap * 2 : 64;
	m->slots = calloc(m->cap, sizeof(*m->slots));
	if (!m->slots) {
		*m = old;
		return -ENOMEM;
	}
	m->len = 0;
	for (size_t i = 0; i < old.cap; i++)
		if (old.slots[i].key)
			u64map__set(m, old.slots[i].key, old.slots[i].val);
	free(old.slots);
	return 0;
}

int u64map__set(struct u64map *m, uint64_t key, void *val)
{
	size_t i;

	if (!key)
		return -EINVAL;
	/* a key there is given its value, which never fails (no growing first) */
	for (i = m->cap ? slot_of(m, key) : 0; m->cap && m->slots[i].key;
	     i = (i + 1) & (m->cap - 1)) {
		if (m->slots[i].key == key) {
			m->slots[i].val = val;
			return 0;
		}
	}
	/* Keep the load under 3/4: probes stay short. */
	if ((m->len + 1) * 4 > m->cap * 3 && grow(m))
		return -ENOMEM;
	for (i = slot_of(m, key); m->slots[i].key; i = (i + 1) & (m->cap - 1))
		;
	m->slots[i].key = key;
	m->slots[i].val = val;
	m->len++;
	return 0;
}

void *u64map__del(struct u64map *m, uint64_t key)
{
	size_t mask = m->cap - 1, i, j;
	void *val;

	if (!m->cap || !key)
		return NULL;
	for (i = slot_of(m, key); m->slots[i].key != key; i = (i + 1) & mask)
		if (!m->slots[i].key)
			return NULL;
	val = m->slots[i].val;
	/* Shift later members of the cluster back into the hole. */
	for (j = (i + 1) & mask; m->slots[j].key; j = (j + 1) & mask) {
		size_t home = slot_of(m, m->slots[j].key);

		/* Move j into i unless its home lies cyclically in (i, j]. */
		if (((j - home) & mask) >= ((j - i) & mask)) {
			m->slots[i] = m->slots[j];
			i = j;
		}
	}
	m->slots[i].key = 0;
	m->slots[i].val = NULL;
	m->len--;
	return val;
}

int u64map__next(const struct u64map *m, size_t *iter, uint64_t *key, void **val)
{
	for (; *iter < m->cap; (*iter)++) {
		if (m->slots[*iter].key) {
			*key = m->slots[*iter].key;
			*val = m->slots[*iter].val;
			(*iter)++;
			return 1;
		}
	}
	return 0;
}
