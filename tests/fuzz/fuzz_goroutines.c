// SPDX-License-Identifier: MIT
/*
 * libFuzzer target: any bytes as a Go process's memory, read the way
 * `asynctraced tasks` reads one (src/tasks/goroutines.c, gopcln.c): a
 * struct goroutines_hdr (where the image is, the goroutine list's and the
 * funcdata's addresses, where .gopclntab is in it, which version's layout),
 * then the image, which is both the memory read and the file .gopclntab is
 * read from. The goroutines are listed (their g's, their stacks unwound by
 * pcsp, their frames named, inlined calls included), the list encoded and
 * decoded again; and the bytes themselves decoded as a list from the
 * analyser (tasks__decode), which the privileged side must survive.
 *
 * Whatever the bytes: no crash, hang, leak or UB; every task's frames and
 * strings inside the list, at most GO_STACK_MAX frames a goroutine; the
 * list decodes to what was encoded.
 *
 *   build/fuzz/fuzz_goroutines -runs=0 tests/fuzz/goroutines   replay the corpus
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "goroutines_image.h"
#include "tasks/goroutines.h"
#include "tasks/tasks.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A string index of the list: 0 (none) or one of its strings. */
static bool str_in(const struct task_list *l, uint32_t i)
{
	return !i || i < l->nr_strs;
}

static void check_list(const struct task_list *l)
{
	for (size_t i = 0; i < l->nr_tasks; i++) {
		const struct task_info *t = &l->tasks[i];

		CHECK(t->first_frame <= l->nr_frames);
		CHECK(t->nr_frames <= l->nr_frames - t->first_frame);
		CHECK(t->nr_frames <= GO_STACK_MAX);
		CHECK(t->state < TASK_STATE_MAX);
		CHECK(str_in(l, t->name) && str_in(l, t->wait));
	}
	for (size_t i = 0; i < l->nr_frames; i++)
		CHECK(str_in(l, l->frames[i].function) && str_in(l, l->frames[i].file));
}

static void round_trip(const struct task_list *l)
{
	struct task_list back;
	uint8_t *b;
	size_t len;

	if (tasks__encode(l, &b, &len))
		return;
	CHECK(tasks__decode(b, len, &back) == 0);
	CHECK(back.nr_tasks == l->nr_tasks && back.nr_frames == l->nr_frames);
	CHECK(!l->nr_tasks || !memcmp(back.tasks, l->tasks, l->nr_tasks * sizeof(*l->tasks)));
	CHECK(!l->nr_frames || !memcmp(back.frames, l->frames, l->nr_frames * sizeof(*l->frames)));
	task_list__free(&back);
	free(b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct goroutines_opts o = { .now_ns = 1ull << 40 };
	struct goroutines_hdr h;
	struct task_list l;
	struct go_binary gb;
	struct gi_mem gm;
	struct task_mem m = { gi_read, &gm };
	uint8_t *img;

	/* the bytes as what the analyser answered */
	if (!tasks__decode(data, size, &l)) {
		check_list(&l);
		task_list__free(&l);
	}
	if (size < sizeof(h))
		return 0;
	memcpy(&h, data, sizeof(h));
	if (goroutines_binary(&h, size - sizeof(h), &gb))
		return 0;
	/* the image in a buffer of its own size: a read past it is ASan's to catch */
	img = malloc(size - sizeof(h) + 1);
	if (!img)
		return 0;
	memcpy(img, data + sizeof(h), size - sizeof(h));
	gm = (struct gi_mem){ img, size - sizeof(h), h.base };
	o.system = h.system & 1;
	task_list__init(&l);
	goroutines__read(&gb, img, size - sizeof(h), 0, &m, &o, &l);
	check_list(&l);
	round_trip(&l);
	task_list__free(&l);
	free(img);
	return 0;
}
