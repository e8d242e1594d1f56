// SPDX-License-Identifier: MIT
/*
 * libFuzzer target: any bytes as an ELF file the target maps, read the way
 * the tracer reads it (src/targets/elf_image.c): sections, the first PT_LOAD, the
 * functions of .symtab and .dynsym, every name demangled (libiberty), file
 * offsets and code bytes of every function, and tokio looked for in it.
 * Whatever the bytes: no crash, hang, leak or UB, and every pointer handed
 * out lies inside the file.
 *
 *   build/fuzz/fuzz_elf_image -runs=0 tests/fuzz/elf_image   replay the corpus
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "check.h"
#include "ro_buf.h"
#include "targets/elf_image.h"
#include "targets/tokio/tokio.h"

/* Where tokio's CONTEXT is, if anywhere: inside the thread-local block, its fields inside it. */
static void check_current(const struct elf_image *im)
{
	struct tokio_current c;
	int64_t tpoff;

	for (size_t i = 0; i < im->nr_tls; i++) {
		CHECK(elf_image__name(im, &im->tls[i]) != NULL);
		if (!elf_image__tpoff(im, im->tls[i].addr, &tpoff))
			CHECK(tpoff < 0 && (uint64_t)-tpoff <= im->tls_memsz + im->tls_align);
	}
	if (tokio__current(im, &c)) {
		CHECK(c.why[0]);
		return;
	}
	CHECK(!c.why[0] && c.tpoff < 0 && c.size && c.size <= 4096);
	CHECK(c.task_id >= 0 && (uint32_t)c.task_id + 16 <= c.size);
	CHECK(c.budget >= 0 && (uint32_t)c.budget + 2 <= c.size);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* What a caller may read: len bytes inside the file, touched at both ends. */
static void check_bytes(const struct elf_image *im, uint64_t addr, uint64_t len)
{
	const uint8_t *b = elf_image__bytes(im, addr, len);
	volatile uint8_t sink;

	if (!b || !len)
		return;
	CHECK(b >= im->data && b <= im->data + im->size);
	CHECK(len <= (uint64_t)(im->data + im->size - b));
	sink = b[0];
	sink = b[len - 1];
	(void)sink;
}

static int visit(void *ctx, const struct elf_func *f)
{
	const struct elf_image *im = ctx;
	const struct elf_func *at = elf_image__func_at(im, f->addr, false), *first;
	size_t n = elf_image__aliases(im, f->addr, &first);

	CHECK(at && at->addr == f->addr);
	CHECK(n >= 1);
	for (size_t i = 0; i < n; i++)
		CHECK(first[i].addr == f->addr);
	CHECK(elf_image__name(im, f) != NULL);
	elf_image__func_at(im, f->addr + f->size / 2, true);
	elf_image__offset(im, f->addr);
	/* as placement reads a whole function, and the name search its start */
	check_bytes(im, f->addr, f->size);
	check_bytes(im, f->addr, 256);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct tokio_runtime rt;
	struct elf_image im;
	struct ro_buf b;
	const uint8_t *file = ro_buf__copy(&b, data, size);

	if (!elf_image__open_mem(&im, file, size)) {
		for (size_t i = 1; i < im.nr_funcs; i++)
			CHECK(im.funcs[i - 1].addr <= im.funcs[i].addr);
		elf_image__for_each(&im, NULL, visit, &im);
		/* what the tracer does with a file without USDT probes */
		if (!tokio__detect_image(&im, NULL, &rt))
			tokio__free(&rt);
		/* sample mode's: the thread-locals, and the code that writes tokio's */
		check_current(&im);
		elf_image__close(&im);
	}
	ro_buf__free(&b);
	return 0;
}
