// SPDX-License-Identifier: MIT
/*
 * libFuzzer target: any bytes as a Go binary, read the way the tracer reads
 * one (src/targets/go/golang.c): golang__detect_mem (the version in
 * .go.buildinfo, the functions of .symtab or .gopclntab, the offsets of
 * runtime.g, m and p from DWARF or the version table, the wait reasons
 * from runtime.waitReasonStrings), then what discovery and attaching do
 * with what it found, over the same bytes as an elf_image: functions named
 * by address, goroutines by the function their wrapper calls (capstone),
 * the probed functions' sizes and code, newproc1's returns, whether a
 * prologue keeps the registers the probes read, casgstatus's calls and the
 * statuses each one changes between. As the tracer, it goes on
 * with whatever was found when the version was, error or not.
 *
 * Whatever the bytes: no crash, hang, leak or UB; the function table sorted
 * by address, every name inside the names and ended there, no more bytes
 * of names copied than the file has; each scheduler function found is a
 * function of that name at that address; a goroutine's name is one of the
 * table's; every return found inside its function; a wait never woken is
 * one that may be lost; and 0 only with everything found.
 *
 *   build/fuzz/fuzz_golang -runs=0 tests/fuzz/golang   replay the corpus
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "lib/util.h"
#include "ro_buf.h"
#include "targets/elf_image.h"
#include "targets/go/golang.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Functions whose goroutine name is asked for, at most: each may be disassembled. */
#define NAMED_MAX 256
/* newproc1's returns probed, at most (attach.c's GO_RETS) */
#define RETS_MAX 16

/* A name the table hands out: one of its own strings. */
static void check_name(const struct go_binary *gb, const char *name)
{
	if (!name)
		return;
	CHECK(name >= gb->names && name < gb->names + gb->names_len);
	CHECK(memchr(name, '\0', (size_t)(gb->names + gb->names_len - name)));
}

static void check_table(const struct go_binary *gb, size_t size)
{
	CHECK(gb->nr_all <= gb->cap_all && gb->names_len <= gb->names_cap);
	CHECK(gb->names_len <= size);
	for (size_t i = 0; i < gb->nr_all; i++) {
		CHECK(!i || gb->all[i - 1].addr <= gb->all[i].addr);
		check_name(gb, gb->names + gb->all[i].name);
	}
	for (int f = 0; f < GO_FUNC_MAX; f++) {
		size_t at = gb->funcs[f] ? upper_bound_u64(gb->all, gb->nr_all, sizeof(*gb->all),
							   gb->funcs[f])
					  : 0;
		bool named = false;

		/* the functions at that address, one of them by that name */
		while (at-- > 0 && gb->all[at].addr == gb->funcs[f])
			named |= !strcmp(gb->names + gb->all[at].name, go_func_names[f]);
		CHECK(!gb->funcs[f] || named);
	}
	CHECK(strnlen(gb->version, sizeof(gb->version)) < sizeof(gb->version));
	for (int w = 0; w < 4; w++)
		CHECK(!(gb->never_woken[w] & ~gb->may_lose[w]));
	CHECK(!(gb->may_lose[0] & 1)); /* reason 0 is no wait */
}

/* As attach.c: each probed function's code, its prologue, newproc1's returns. */
static void probed(const struct go_binary *gb, const struct elf_image *im)
{
	for (int f = 0; f < GO_FUNC_MAX; f++) {
		uint64_t addr = gb->funcs[f], size = golang__func_size(gb, addr);
		const uint8_t *code = size ? elf_image__bytes(im, addr, size) : NULL;
		uint64_t rets[RETS_MAX];
		int n;

		check_name(gb, golang__func_at(gb, addr));
		if (!code)
			continue;
		golang__keeps_args(code, size < 64 ? size : 64, addr);
		if (f == GO_RUNQSTEAL) {
			uint64_t taken = golang__steal_taken(code, size, addr);

			CHECK(!taken || (taken > addr && taken - addr < size));
		}
		n = golang__rets(code, size, addr, rets, RETS_MAX);
		CHECK(n <= RETS_MAX);
		for (int i = 0; i < n; i++)
			CHECK(rets[i] >= addr && rets[i] - addr < size);
	}
}

/* As discovery: casgstatus's calls, each inside a function, with what it changes. */
static void status_sites(const struct go_binary *gb, const struct elf_image *im)
{
	struct go_status_site sites[GO_STATUS_SITES];
	int n = golang__status_sites(gb, im, sites, GO_STATUS_SITES);

	CHECK(n <= GO_STATUS_SITES);
	for (int i = 0; i < n; i++) {
		CHECK(golang__func_at(gb, sites[i].addr));
		CHECK(!i || sites[i - 1].addr < sites[i].addr);
		CHECK(sites[i].from >= -1 && sites[i].to >= -1);
		golang__status_site_needed(&sites[i]);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct go_binary gb;
	struct elf_image im;
	struct ro_buf b;
	const uint8_t *file = ro_buf__copy(&b, data, size);
	int err = golang__detect_mem(file, size, &gb);

	check_table(&gb, size);
	if (!err) {
		CHECK(gb.version[0] && gb.nr_all);
		for (int f = 0; f < GO_FUNC_MAX; f++) /* some may be missing (said) */
			CHECK(gb.funcs[f] || golang__optional(f));
		CHECK(gb.off.g_goid >= 0 && gb.off.g_startpc >= 0 && gb.off.p_runqtail >= 0);
	}
	/* discovery keeps going with a Go program of a layout it does not know */
	if (gb.version[0] && !elf_image__open_mem(&im, file, size)) {
		probed(&gb, &im);
		status_sites(&gb, &im);
		golang__name_goroutines(&gb, &im);
		for (size_t i = 0; i < gb.nr_all && i < NAMED_MAX; i++) {
			const struct go_func_entry *e = &gb.all[i];

			check_name(&gb, golang__goroutine_name(&gb, e->addr));
			check_name(&gb, golang__func_at(&gb, e->addr + e->size / 2));
			golang__func_size(&gb, e->addr);
		}
		elf_image__close(&im);
	}
	golang__free(&gb);
	ro_buf__free(&b);
	return 0;
}
