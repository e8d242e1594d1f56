/* SPDX-License-Identifier: MIT */
/*
 * A fuzz input laid out the way the tracer sees a file it maps: read-only
 * (a parser that writes to it faults, as it would on a PROT_READ mapping),
 * starting on a page, with the rest of its last page poisoned for ASan and
 * a PROT_NONE page after it, so that a read past the file's end is caught
 * whether or not the parser was compiled with ASan (libelf is not).
 */
#ifndef FUZZ_RO_BUF_H
#define FUZZ_RO_BUF_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <sanitizer/asan_interface.h>

struct ro_buf {
	uint8_t *map;
	size_t len;	/* mapped: the input's pages and the guard page */
	size_t pages;	/* the input's pages */
};

static inline const uint8_t *ro_buf__copy(struct ro_buf *b, const uint8_t *data, size_t size)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);

	b->pages = (size + page - 1) / page * page;
	b->len = b->pages + page;
	b->map = mmap(NULL, b->len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (b->map == MAP_FAILED)
		abort();
	memcpy(b->map, data, size);
	if (mprotect(b->map, b->pages, PROT_READ) || mprotect(b->map + b->pages, page, PROT_NONE))
		abort();
	ASAN_POISON_MEMORY_REGION(b->map + size, b->pages - size);
	return b->map;
}

static inline void ro_buf__free(struct ro_buf *b)
{
	/* the next mapping may land here: it must not inherit the poison */
	ASAN_UNPOISON_MEMORY_REGION(b->map, b->len);
	munmap(b->map, b->len);
}

#endif
