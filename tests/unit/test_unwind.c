// SPDX-License-Identifier: MIT
/*
 * The unwinder on this very process: a stack captured in a function built
 * without frame pointers (-O2), from its registers and a copy of the stack
 * as the BPF side copies it, unwound by the call-frame information and
 * symbolised: the callers come back in order, an inlined call as a frame of
 * its own, with file and line from DWARF.
 */
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "stacks/unwind.h"

#define COPY (16u << 10)

static uint8_t copy[COPY];
static struct stack_sample sample;

/* The stack's bytes from sp up to at most COPY, never past the stack's end. */
static __attribute__((noinline)) void capture(void)
{
	uint64_t sp, bp, ip;
	pthread_attr_t attr;
	void *base;
	size_t size, len;

	__asm__ volatile("mov %%rsp, %0\n\tmov %%rbp, %1\n\tlea 0(%%rip), %2"
			 : "=r"(sp), "=r"(bp), "=r"(ip));
	pthread_getattr_np(pthread_self(), &attr);
	pthread_attr_getstack(&attr, &base, &size);
	pthread_attr_destroy(&attr);
	len = (uintptr_t)base + size - sp;
	if (len > COPY)
		len = COPY;
	memcpy(copy, (const void *)(uintptr_t)sp, len);
	sample = (struct stack_sample){ .pid = (uint32_t)getpid(), .tid = (uint32_t)gettid(),
					.ip = ip, .sp = sp, .bp = bp, .stack = copy, .len = len };
}

static volatile int sink;

static inline __attribute__((always_inline)) void leaf(void)
{
	capture();
	sink++;
}

static __attribute__((noinline)) void middle(void)
{
	leaf();
	sink++;
}

static __attribute__((noinline)) void outer(void)
{
	middle();
	sink++;
}

/* Where name first appears in frames, from `from` on; -1 if not. */
static int find(const struct stack_frame *frames, int n, int from, const char *name)
{
	for (int i = from; i < n; i++)
		if (frames[i].function && !strcmp(frames[i].function, name))
			return i;
	return -1;
}

static bool by_fp;

static void unwinds_own_stack(void **state)
{
	struct stack_frame frames[64];
	struct unwinder *u;
	int n, c, l, m, o, t;

	outer();
	assert_int_equal(unwinder__new(&u), 0);
	n = unwinder__unwind(u, &sample, frames, 64, &by_fp);
	for (int i = 0; i < n; i++)
		print_message("  #%d %s%s (%s) %s:%d\n", i, frames[i].inlined ? "[inlined] " : "",
			      frames[i].function ? frames[i].function : "?",
			      frames[i].module ? frames[i].module : "?",
			      frames[i].file ? frames[i].file : "?", frames[i].line);
	c = find(frames, n, 0, "capture");
	l = find(frames, n, c, "leaf");
	m = find(frames, n, c, "middle");
	o = find(frames, n, m, "outer");
	t = find(frames, n, o, "unwinds_own_stack");
	assert_int_equal(c, 0);
	/* leaf is inlined into middle: a frame of its own, marked, before middle's */
	assert_int_equal(l, 1);
	assert_true(frames[l].inlined);
	assert_int_equal(m, 2);
	assert_false(frames[m].inlined);
	assert_true(o > m);
	assert_true(t > o);
	/* a versioned symbol is named without its version */
	for (int i = 0; i < n; i++)
		assert_null(frames[i].function ? strchr(frames[i].function, '@') : NULL);
	for (int i = 0; i <= t; i++) {
		assert_string_equal(frames[i].module, "test_unwind");
		assert_non_null(frames[i].file);
		assert_non_null(strstr(frames[i].file, "test_unwind.c"));
		assert_true(frames[i].line > 0);
	}
	unwinder__free(u);
}

/* No stack copied: the sampled function alone; a process gone: nothing. */
static void what_cannot_be_unwound(void **state)
{
	struct stack_frame frames[8];
	struct stack_sample s;
	struct unwinder *u;
	int n;

	outer();
	s = sample;
	s.len = 0;
	assert_int_equal(unwinder__new(&u), 0);
	n = unwinder__unwind(u, &s, frames, 8, &by_fp);
	assert_true(n >= 1);
	assert_string_equal(frames[0].function, "capture");
	/* frame pointers are not what it follows: a garbage rbp changes nothing */
	s = sample;
	s.bp = 0x5a5a5a5a5a5a5a5aull;
	assert_true(unwinder__unwind(u, &s, frames, 8, &by_fp) >= 4);
	assert_string_equal(frames[3].function, "outer");
	s.pid = 0x7ffffff0; /* no such process */
	assert_int_equal(unwinder__unwind(u, &s, frames, 8, &by_fp), 0);
	unwinder__forget(u, s.pid);
	unwinder__forget(u, sample.pid);
	/* forgotten, then read again */
	assert_true(unwinder__unwind(u, &sample, frames, 8, &by_fp) >= 4);
	unwinder__free(u);
}

/*
 * A frame-pointer walk is taken only where every link is sound: not over
 * functions built without frame pointers (as this file is: their call-frame
 * information says so), but over code no call-frame information covers.
 */
static void frame_pointer_walks(void **state)
{
	struct stack_frame frames[64], dwarf[64];
	uint64_t walk[64], nowhere[] = { 0x1000, 0x2004, 0x3008 };
	struct stack_sample s;
	struct unwinder *u;
	int n, d;

	outer();
	assert_int_equal(unwinder__new(&u), 0);
	d = unwinder__unwind(u, &sample, dwarf, 64, &by_fp);
	assert_false(by_fp);
	/* the right pcs, as a walk would give them, but over frames without a frame pointer */
	for (int i = 0, j = 0; i < d; i++)
		if (!dwarf[i].inlined)
			walk[j++] = i ? dwarf[i].pc + 1 : dwarf[i].pc;
	s = sample;
	s.fp = walk;
	s.nr_fp = 4;
	n = unwinder__unwind(u, &s, frames, 64, &by_fp);
	assert_false(by_fp);
	assert_int_equal(n, d); /* the call-frame information was followed instead */
	/* pcs in no image: nothing to check them by, so the walk is taken */
	s.ip = nowhere[0];
	s.fp = nowhere;
	s.nr_fp = 3;
	n = unwinder__unwind(u, &s, frames, 64, &by_fp);
	assert_true(by_fp);
	assert_int_equal(n, 3);
	assert_int_equal(frames[0].pc, 0x1000);
	assert_int_equal(frames[1].pc, 0x2003); /* a return address: its call, a byte back */
	assert_null(frames[2].function);
	/* a walk that does not begin at the sampled ip is not this sample's */
	s.ip = 0x1001;
	unwinder__unwind(u, &s, frames, 64, &by_fp);
	assert_false(by_fp);
	unwinder__free(u);
}

/* This process's maps text, and (with_files) each file it maps executable, opened. */
static size_t given(char *maps, size_t room, bool with_files, struct unwind_file **files,
		    size_t *nr)
{
	FILE *f = fopen("/proc/self/maps", "re");
	size_t len = f ? fread(maps, 1, room - 1, f) : 0;
	char *line, *save = NULL, *text;

	if (f)
		fclose(f);
	maps[len] = 0;
	text = strdup(maps);
	*files = calloc(64, sizeof(**files));
	*nr = 0;
	for (line = strtok_r(text, "\n", &save); with_files && line && *nr < 64;
	     line = strtok_r(NULL, "\n", &save)) {
		char perms[8] = "", *path = strchr(line, '/');
		bool seen = false;

		sscanf(line, "%*s %7s", perms);
		if (!path || perms[2] != 'x')
			continue;
		for (size_t i = 0; i < *nr; i++)
			seen |= !strcmp((*files)[i].name, path);
		if (seen)
			continue;
		(*files)[*nr].name = strdup(path);
		(*files)[(*nr)++].fd = open(path, O_RDONLY | O_CLOEXEC);
	}
	free(text);
	return len;
}

/* The debug files asked for: those that are here, opened as the privileged side does. */
struct wants {
	int nr;
	int build_ids;
	struct unwind_file found[64];
	size_t nr_found;
};

static void want(void *ctx, const char *path)
{
	struct wants *w = ctx;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	w->nr++;
	w->build_ids += !strncmp(path, "/usr/lib/debug/.build-id/", 25);
	assert_true(path[0] == '/');
	if (fd >= 0 && w->nr_found < 64)
		w->found[w->nr_found++] = (struct unwind_file){ .name = strdup(path), .fd = fd };
	else if (fd >= 0)
		close(fd);
}

/*
 * As the analyser unwinds: from the maps text and the files it is handed,
 * opening nothing itself. The same frames as read from /proc; without the
 * files, not one symbol (nothing was opened by name behind its back).
 */
static void unwinds_from_the_files_given(void **state)
{
	static char maps[1 << 18];
	struct stack_frame frames[64], own[64];
	struct unwind_file *files, *found;
	struct wants w = { 0 };
	struct unwinder *u;
	size_t nr, len;
	int n, d;

	(void)state;
	outer();
	assert_int_equal(unwinder__new(&u), 0);
	d = unwinder__unwind(u, &sample, own, 64, &by_fp);
	for (int i = 0; i < d; i++) /* kept: they go with the process */
		own[i].function = own[i].function ? strdup(own[i].function) : NULL;
	unwinder__forget(u, sample.pid);
	len = given(maps, sizeof(maps), true, &files, &nr);
	assert_true(nr >= 2); /* this program and the C library at least */
	assert_int_equal(unwinder__prime_from(u, sample.pid, maps, len, files, nr), 0);
	assert_int_equal(unwinder__wanted(u, sample.pid, want, &w), 0);
	/* the C library's debug file, by its build id (this program has its DWARF) */
	assert_true(w.build_ids >= 1);
	found = calloc(w.nr_found + 1, sizeof(*found));
	memcpy(found, w.found, w.nr_found * sizeof(*found));
	assert_int_equal(unwinder__give_debug(u, sample.pid, found, w.nr_found), 0);
	assert_true(unwinder__covers(u, sample.pid, sample.ip));
	assert_false(unwinder__covers(u, sample.pid, 0x1000));
	n = unwinder__unwind(u, &sample, frames, 64, &by_fp);
	assert_int_equal(n, d);
	for (int i = 0; i < n; i++) {
		assert_int_equal(frames[i].pc, own[i].pc);
		if (own[i].function)
			assert_string_equal(frames[i].function, own[i].function);
	}
	assert_int_equal(find(frames, n, 0, "outer"), find(own, d, 0, "outer"));
	/* the same maps, no file: the images are known, not one is read */
	len = given(maps, sizeof(maps), false, &files, &nr);
	assert_int_equal(unwinder__prime_from(u, sample.pid, maps, len, files, nr), 0);
	assert_true(unwinder__covers(u, sample.pid, sample.ip));
	n = unwinder__unwind(u, &sample, frames, 64, &by_fp);
	for (int i = 0; i < n; i++)
		assert_null(frames[i].function);
	/* maps that say nothing: refused, and nothing is left of it */
	given(maps, sizeof(maps), false, &files, &nr);
	assert_int_not_equal(unwinder__prime_from(u, sample.pid, "", 0, files, nr), 0);
	assert_false(unwinder__covers(u, sample.pid, sample.ip));
	unwinder__free(u);
	for (int i = 0; i < d; i++)
		free((char *)own[i].function);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(unwinds_own_stack),
		cmocka_unit_test(what_cannot_be_unwound),
		cmocka_unit_test(frame_pointer_walks),
		cmocka_unit_test(unwinds_from_the_files_given),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
