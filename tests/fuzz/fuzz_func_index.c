// SPDX-License-Identifier: MIT
/*
 * libFuzzer target: any bytes as an ELF file the traced program maps,
 * handed to libdwfl as a module (from a memfd, as --stacks gets one from
 * /proc/PID/map_files), and its DWARF read into the function index the
 * symbolising uses (src/stacks/func_index.c): every function with code in
 * every compile unit, inside namespaces and modules; then for pcs in each
 * range, what is inlined there and the file and line each inlined call
 * was made from, as unwind.c's symbolise() asks. libdw's own parsing is not
 * instrumented (its crashes are still caught); what is fuzzed is what our
 * code does with its answers. Relocatable files (ET_REL) are skipped: no
 * process maps one, and libdwfl would relocate them first.
 *
 * Whatever the bytes: no crash, hang, leak or UB; ranges non-empty and
 * sorted; a pc's outermost scope is a function, the ones inside it
 * inlined calls or blocks, never more than FUNC_INDEX_MAX_SCOPES.
 *
 *   build/fuzz/fuzz_func_index -runs=0 tests/fuzz/func_index   replay the corpus
 */
#include <dwarf.h>
#include <elf.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "check.h"
#include "stacks/func_index.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Ranges looked into, at most, each at three pcs. */
#define LOOKED_MAX 512

/* No separate debug file: only what the input holds. */
static int no_file(Dwfl_Module *mod, void **userdata, const char *name, Dwarf_Addr base,
		   const char *file_name, const char *debuglink, GElf_Word crc, char **path)
{
	(void)mod, (void)userdata, (void)name, (void)base, (void)file_name, (void)debuglink;
	(void)crc, (void)path;
	return -1;
}

static int no_elf(Dwfl_Module *mod, void **userdata, const char *name, Dwarf_Addr base,
		  char **path, Elf **elf)
{
	(void)mod, (void)userdata, (void)name, (void)base, (void)path, (void)elf;
	return -1;
}

static const Dwfl_Callbacks callbacks = {
	.find_elf = no_elf,
	.find_debuginfo = no_file,
};

/* What symbolise() asks of a pc: the scopes, each inlined call's name and call site. */
static void at_pc(const struct func_index *ix, Dwarf_Addr pc)
{
	Dwarf_Die cu, scopes[FUNC_INDEX_MAX_SCOPES];
	int n = func_index__scopes(ix, pc, scopes, &cu);
	volatile size_t sink = 0;

	CHECK(n >= 0 && n <= FUNC_INDEX_MAX_SCOPES);
	if (n)
		CHECK(dwarf_tag(&scopes[0]) == DW_TAG_subprogram);
	for (int i = n - 1; i >= 1; i--) {
		int tag = dwarf_tag(&scopes[i]), line;
		const char *name, *file;

		CHECK(tag == DW_TAG_inlined_subroutine || tag == DW_TAG_lexical_block);
		if (tag != DW_TAG_inlined_subroutine)
			continue;
		name = dwarf_diename(&scopes[i]);
		file = func_index__call_file(&cu, &scopes[i], &line);
		sink += name ? strlen(name) : 0;
		sink += file ? strlen(file) : 0;
	}
	(void)sink;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	int fd;
	Dwfl *dwfl;
	Dwfl_Module *mod;
	struct func_index ix;

	if (size >= sizeof(Elf64_Ehdr) && data[EI_DATA] == ELFDATA2LSB &&
	    (data[16] | data[17] << 8) == ET_REL)
		return 0;
	fd = memfd_create("fuzz_func_index", MFD_CLOEXEC);
	if (fd < 0 || write(fd, data, size) != (ssize_t)size)
		abort();
	dwfl = dwfl_begin(&callbacks);
	if (!dwfl)
		abort();
	dwfl_report_begin(dwfl);
	mod = dwfl_report_elf(dwfl, "fuzz", "fuzz", fd, 0, false);
	dwfl_report_end(dwfl, NULL, NULL);
	if (!mod) {
		close(fd); /* consumed only when reported */
		dwfl_end(dwfl);
		return 0;
	}
	func_index__build(&ix, mod);
	CHECK(ix.nr <= ix.cap && ix.nr <= FUNC_INDEX_MAX_RANGES);
	for (size_t i = 0; i < ix.nr; i++) {
		CHECK(ix.r[i].lo < ix.r[i].hi);
		CHECK(!i || ix.r[i - 1].lo <= ix.r[i].lo);
	}
	for (size_t i = 0; i < ix.nr && i < LOOKED_MAX; i++) {
		const struct func_range *r = &ix.r[i];

		at_pc(&ix, r->lo);
		at_pc(&ix, r->lo + (r->hi - r->lo) / 2);
		at_pc(&ix, r->hi - 1);
	}
	func_index__free(&ix);
	dwfl_end(dwfl);
	return 0;
}
