/* SPDX-License-Identifier: MIT */
/*
 * What the task readers' fuzz targets check of a list beyond the
 * sanitizers: every index inside the list, at most max_frames frames a
 * task, and the list decoding to what was encoded (as the privileged side
 * decodes the analyser's answer).
 */
#ifndef FUZZ_TASK_LIST_CHECKS_H
#define FUZZ_TASK_LIST_CHECKS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tasks/tasks.h"

/* A string index of the list: 0 (none) or one of its strings. */
static inline bool str_in(const struct task_list *l, uint32_t i)
{
	return !i || i < l->nr_strs;
}

static inline void check_list(const struct task_list *l, uint32_t max_frames)
{
	for (size_t i = 0; i < l->nr_tasks; i++) {
		const struct task_info *t = &l->tasks[i];

		CHECK(t->first_frame <= l->nr_frames);
		CHECK(t->nr_frames <= l->nr_frames - t->first_frame);
		CHECK(t->nr_frames <= max_frames);
		CHECK(t->state < TASK_STATE_MAX);
		CHECK(str_in(l, t->name) && str_in(l, t->wait));
	}
	for (size_t i = 0; i < l->nr_frames; i++)
		CHECK(str_in(l, l->frames[i].function) && str_in(l, l->frames[i].file));
}

static inline void round_trip(const struct task_list *l)
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

#endif
