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
#include "task_list_checks.h"
#include "goroutines_image.h"
#include "tasks/goroutines.h"
#include "tasks/tasks.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

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
		check_list(&l, GO_STACK_MAX);
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
	check_list(&l, GO_STACK_MAX);
	round_trip(&l);
	task_list__free(&l);
	free(img);
	return 0;
}
