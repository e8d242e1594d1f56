// SPDX-License-Identifier: MIT
/*
 * tasks/: a Go process in a few KB (tests/fuzz/goroutines_image.h) read
 * by goroutines.c: the parked goroutine's frames, innermost first, with
 * the inlined call, each at its line; the dead one left out, the running
 * one without frames; one that keeps changing while read called torn. The
 * list's bytes decode to what was encoded, and bytes out of bounds are
 * refused. With TASKS_SEEDS=DIR, the image is written there as the
 * fuzzer's seed (make fuzz-seeds does).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../fuzz/goroutines_image.h"
#include "tasks/goroutines.h"
#include "tasks/tasks.h"

static uint8_t img[GI_SIZE];
static struct goroutines_hdr hdr;

static int read_image(struct task_list *l, struct task_mem *m)
{
	struct goroutines_opts o = { .now_ns = 1 };
	struct go_binary gb;

	assert_int_equal(goroutines_binary(&hdr, sizeof(img), &gb), 0);
	return goroutines__read(&gb, img + 0, sizeof(img), 0, m, &o, l);
}

/* A reader that refuses one address: the list's length, so that only what was met is read. */
static uint64_t refuse_at;

static int refusing(void *ctx, uint64_t addr, void *buf, size_t len)
{
	return addr == refuse_at ? -EIO : gi_read(ctx, addr, buf, len);
}

static void frame_is(const struct task_list *l, const struct task_frame *f, const char *fn,
		     const char *file, int line, bool inlined)
{
	assert_string_equal(task_list__at(l, f->function), fn);
	assert_string_equal(task_list__at(l, f->file), file);
	assert_int_equal(f->line, line);
	assert_int_equal(f->inlined, inlined);
}

static void a_parked_goroutine(void **state)
{
	struct gi_mem gm = { img, sizeof(img), GI_BASE };
	struct task_mem m = { gi_read, &gm };
	struct task_list l;
	const struct task_info *t;

	(void)state;
	task_list__init(&l);
	assert_int_equal(read_image(&l, &m), 0);
	assert_string_equal(l.runtime, "go");
	assert_int_equal(l.nr_tasks, 2);	/* 8 is dead */
	assert_int_equal(l.nr_torn, 0);
	t = &l.tasks[0];
	assert_int_equal(t->id, 7);
	assert_int_equal(t->state, TASK_WAITING);
	assert_string_equal(task_list__at(&l, t->wait), "chan receive");
	assert_int_equal(t->nr_frames, 4);
	frame_is(&l, &l.frames[t->first_frame], "runtime.gopark", "proc.go", 474, false);
	frame_is(&l, &l.frames[t->first_frame + 1], "main.helper", "helper.go", 9, true);
	frame_is(&l, &l.frames[t->first_frame + 2], "main.waiter", "main.go", 42, false);
	frame_is(&l, &l.frames[t->first_frame + 3], "main.outer", "main.go", 30, false);
	frame_is(&l, &t->created, "main.outer", "main.go", 30, false);
	/* the running one: where it runs is not in its g */
	t = &l.tasks[1];
	assert_int_equal(t->id, 9);
	assert_int_equal(t->state, TASK_RUNNING);
	assert_int_equal(t->nr_frames, 0);
	task_list__free(&l);
}

/*
 * An alert's or an idle span's goroutine (only): the ids met looking for it
 * are kept, and one met before is read where it was, the list not walked.
 */
static void an_only_is_read_where_it_was_met(void **state)
{
	struct gi_mem gm = { img, sizeof(img), GI_BASE };
	struct task_mem m = { gi_read, &gm };
	struct goroutines_opts o = { .now_ns = 1, .only = 9 };
	struct u64map found;
	struct go_binary gb;
	struct task_list l;

	(void)state;
	u64map__init(&found);
	o.found = &found;
	assert_int_equal(goroutines_binary(&hdr, sizeof(img), &gb), 0);
	task_list__init(&l);
	assert_int_equal(goroutines__read(&gb, img, sizeof(img), 0, &m, &o, &l), 0);
	assert_int_equal(l.nr_tasks, 1);
	assert_int_equal(l.tasks[0].id, 9);
	task_list__free(&l);
	/* met on the way: the parked one, and the dead one (its g may be another's later) */
	assert_non_null(u64map__get(&found, 7));
	assert_non_null(u64map__get(&found, 8));
	/* the list unreadable now: 7 is read where it was met, whole */
	refuse_at = gb.walk.allglen;
	m.read = refusing;
	o.only = 7;
	task_list__init(&l);
	assert_int_equal(goroutines__read(&gb, img, sizeof(img), 0, &m, &o, &l), 0);
	assert_int_equal(l.nr_tasks, 1);
	assert_int_equal(l.tasks[0].id, 7);
	assert_int_equal(l.tasks[0].nr_frames, 4);
	task_list__free(&l);
	/* one never met is looked for along the list (unreadable here) */
	o.only = 12345;
	task_list__init(&l);
	assert_int_equal(goroutines__read(&gb, img, sizeof(img), 0, &m, &o, &l), -EIO);
	task_list__free(&l);
	/* a g now another goroutine's: not taken for the one met there before */
	u64map__set(&found, 12345, u64map__get(&found, 7));
	task_list__init(&l);
	assert_int_equal(goroutines__read(&gb, img, sizeof(img), 0, &m, &o, &l), -EIO);
	assert_int_equal(l.nr_tasks, 0);
	task_list__free(&l);
	u64map__clear(&found);
	golang__free(&gb);
}

/* A reader whose goroutine's status changes between every two reads of it. */
static int changing(void *ctx, uint64_t addr, void *buf, size_t len)
{
	static unsigned int reads;
	int err = gi_read(ctx, addr, buf, len);

	if (!err && addr == GI_BASE + GI_G && len > 148)
		((uint8_t *)buf)[144] = (reads++ & 1) ? 4 : 1; /* waiting, runnable */
	return err;
}

static void torn_when_it_keeps_changing(void **state)
{
	struct gi_mem gm = { img, sizeof(img), GI_BASE };
	struct task_mem m = { changing, &gm };
	struct task_list l;

	(void)state;
	task_list__init(&l);
	assert_int_equal(read_image(&l, &m), 0);
	assert_int_equal(l.nr_torn, 1);
	assert_int_equal(l.tasks[0].id, 7);
	assert_true(l.tasks[0].flags & TASK_TORN);
	assert_int_equal(l.tasks[0].nr_frames, 0);
	task_list__free(&l);
}

static void encoded_and_decoded(void **state)
{
	struct gi_mem gm = { img, sizeof(img), GI_BASE };
	struct task_mem m = { gi_read, &gm };
	struct task_list l, back;
	uint8_t *b;
	size_t len;

	(void)state;
	task_list__init(&l);
	assert_int_equal(read_image(&l, &m), 0);
	assert_int_equal(tasks__encode(&l, &b, &len), 0);
	assert_int_equal(tasks__decode(b, len, &back), 0);
	assert_int_equal(back.nr_tasks, l.nr_tasks);
	assert_int_equal(back.nr_frames, l.nr_frames);
	assert_memory_equal(back.tasks, l.tasks, l.nr_tasks * sizeof(*l.tasks));
	assert_memory_equal(back.frames, l.frames, l.nr_frames * sizeof(*l.frames));
	for (size_t i = 1; i < l.nr_strs; i++)
		assert_string_equal(back.strs[i], l.strs[i]);
	task_list__free(&back);
	/* cut anywhere: refused */
	for (size_t cut = 0; cut < len; cut += 7)
		assert_int_equal(tasks__decode(b, cut, &back), -EBADMSG);
	/* a frame naming a string past the end: refused */
	l.frames[0].function = (uint32_t)l.nr_strs;
	free(b);
	assert_int_equal(tasks__encode(&l, &b, &len), 0);
	assert_int_equal(tasks__decode(b, len, &back), -EBADMSG);
	free(b);
	task_list__free(&l);
}

static void write_seed(void)
{
	const char *dir = getenv("TASKS_SEEDS");
	char path[4096];
	FILE *f;

	if (!dir)
		return;
	snprintf(path, sizeof(path), "%s/parked-1.27", dir);
	f = fopen(path, "wb");
	if (!f || fwrite(&hdr, sizeof(hdr), 1, f) != 1 || fwrite(img, sizeof(img), 1, f) != 1)
		fail_msg("%s: cannot write the seed", path);
	fclose(f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(a_parked_goroutine),
		cmocka_unit_test(torn_when_it_keeps_changing),
		cmocka_unit_test(an_only_is_read_where_it_was_met),
		cmocka_unit_test(encoded_and_decoded),
	};

	goroutines_image(img, &hdr);
	write_seed();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
