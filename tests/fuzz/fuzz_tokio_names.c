// SPDX-License-Identifier: MIT
/*
 * libFuzzer target: any list of symbol names, one a line, as the functions
 * of a program, through tokio's classification (src/targets/tokio/tokio.c): each name
 * demangled by libiberty, its generics stripped, matched to the function it
 * is, the future type taken from v0 names or from the code of a legacy
 * raw::poll instance, GenFuture unwrapped, the worker loop left out.
 *
 * The harness writes the names into a small x86-64 ELF file and reads it
 * with elf_image__open_mem: the image the tracer would have. Each line is a
 * function; its leading spaces are its depth in a call tree: a function
 * calls (call rel32) each function one deeper that follows it before the
 * next one at its own depth, so a raw::poll instance reaches Harness::poll
 * and the drop glue the way real code does. A name that starts with '=',
 * after the spaces, names the previous function again (identical code
 * folding: one address, several symbols).
 *
 *   build/fuzz/fuzz_tokio_names -runs=0 tests/fuzz/tokio_names   replay the corpus
 */
#include <elf.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "targets/elf_image.h"
#include "targets/tokio/tokio.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define LOAD_ADDR 0x400000
#define MAX_DEPTH 8
#define CALL_SIZE 5

enum { SEC_NULL, SEC_TEXT, SEC_SYMTAB, SEC_STRTAB, SEC_SHSTRTAB, NR_SECS };

static const char shstrtab[] = "\0.text\0.symtab\0.strtab\0.shstrtab";

struct name {
	const uint8_t *s;
	size_t len;
	bool alias;	/* of the previous function */
	size_t func;	/* the function it names */
};

struct func {
	long parent;	/* -1: called by none */
	size_t calls;	/* functions it calls */
	uint64_t addr, size;
};

/*
 * The names of the input (lines, split at '\n' or NUL, empty ones skipped)
 * and the functions they name, with who calls whom; the number of names.
 */
static size_t parse(const uint8_t *data, size_t size, struct name *names, struct func *funcs,
		    size_t *nr_funcs)
{
	long last[MAX_DEPTH + 1];
	size_t n = 0, start = 0;

	*nr_funcs = 0;
	for (int d = 0; d <= MAX_DEPTH; d++)
		last[d] = -1;
	for (size_t i = 0; i <= size; i++) {
		struct name *nm;
		size_t depth = 0, at = start;

		if (i < size && data[i] != '\n' && data[i] != '\0')
			continue;
		while (at < i && data[at] == ' ')
			at++, depth++;
		start = i + 1;
		if (at == i)
			continue;
		nm = &names[n++];
		nm->alias = data[at] == '=' && *nr_funcs;
		at += data[at] == '=';
		nm->s = data + at;
		nm->len = i - at;
		if (nm->alias) {
			nm->func = *nr_funcs - 1;
			continue;
		}
		if (depth > MAX_DEPTH)
			depth = MAX_DEPTH;
		nm->func = (*nr_funcs)++;
		funcs[nm->func] = (struct func){ .parent = depth ? last[depth - 1] : -1 };
		if (funcs[nm->func].parent >= 0)
			funcs[funcs[nm->func].parent].calls++;
		last[depth] = (long)nm->func;
		for (size_t d = depth + 1; d <= MAX_DEPTH; d++)
			last[d] = -1;
	}
	return n;
}

/* An ELF file with the functions and their names: *size bytes, malloc'd. */
static uint8_t *build_elf(const struct name *names, size_t n, struct func *funcs,
			  size_t nr_funcs, size_t *size)
{
	size_t strsz = 1, text_size = 0, *called;
	size_t text_off, sym_off, str_off, shstr_off, sh_off;
	Elf64_Ehdr *eh;
	Elf64_Phdr *ph;
	Elf64_Shdr *sh;
	Elf64_Sym *sym;
	uint8_t *file, *text;
	char *str;
	uint64_t text_addr;

	text_off = sizeof(*eh) + sizeof(*ph);
	text_addr = LOAD_ADDR + text_off;
	/* a call for each callee, a ret, int3 up to 16 bytes */
	for (size_t k = 0; k < nr_funcs; k++) {
		funcs[k].addr = text_addr + text_size;
		funcs[k].size = (funcs[k].calls * CALL_SIZE + 1 + 15) & ~(uint64_t)15;
		text_size += funcs[k].size;
	}
	for (size_t i = 0; i < n; i++)
		strsz += names[i].len + 1;
	sym_off = (text_off + text_size + 7) & ~(size_t)7;
	str_off = sym_off + (n + 1) * sizeof(*sym);
	shstr_off = str_off + strsz;
	sh_off = (shstr_off + sizeof(shstrtab) + 7) & ~(size_t)7;
	*size = sh_off + NR_SECS * sizeof(*sh);
	file = calloc(1, *size);
	called = calloc(nr_funcs + 1, sizeof(*called));
	if (!file || !called) {
		free(file);
		free(called);
		return NULL;
	}
	eh = (Elf64_Ehdr *)file;
	memcpy(eh->e_ident, ELFMAG, SELFMAG);
	eh->e_ident[EI_CLASS] = ELFCLASS64;
	eh->e_ident[EI_DATA] = ELFDATA2LSB;
	eh->e_ident[EI_VERSION] = EV_CURRENT;
	eh->e_type = ET_EXEC;
	eh->e_machine = EM_X86_64;
	eh->e_version = EV_CURRENT;
	eh->e_phoff = sizeof(*eh);
	eh->e_shoff = sh_off;
	eh->e_ehsize = sizeof(*eh);
	eh->e_phentsize = sizeof(*ph);
	eh->e_phnum = 1;
	eh->e_shentsize = sizeof(*sh);
	eh->e_shnum = NR_SECS;
	eh->e_shstrndx = SEC_SHSTRTAB;

	ph = (Elf64_Phdr *)(file + sizeof(*eh));
	ph->p_type = PT_LOAD;
	ph->p_flags = PF_R | PF_X;
	ph->p_vaddr = ph->p_paddr = LOAD_ADDR;
	ph->p_filesz = ph->p_memsz = text_off + text_size;
	ph->p_align = 4096;

	text = file + text_off;
	memset(text, 0xcc, text_size);				/* int3 */
	for (size_t k = 0; k < nr_funcs; k++) {
		const struct func *f = &funcs[k];

		text[f->addr - text_addr + f->calls * CALL_SIZE] = 0xc3;	/* ret */
		if (f->parent >= 0) {
			const struct func *p = &funcs[f->parent];
			uint64_t at = p->addr + called[f->parent]++ * CALL_SIZE;
			int32_t rel = (int32_t)(f->addr - (at + CALL_SIZE));

			text[at - text_addr] = 0xe8;			/* call rel32 */
			memcpy(text + at - text_addr + 1, &rel, 4);
		}
	}
	free(called);

	sym = (Elf64_Sym *)(file + sym_off);
	str = (char *)file + str_off;
	for (size_t i = 0, at = 1; i < n; i++) {
		Elf64_Sym *s = &sym[i + 1];

		s->st_name = (Elf64_Word)at;
		s->st_info = ELF64_ST_INFO(STB_GLOBAL, STT_FUNC);
		s->st_shndx = SEC_TEXT;
		s->st_value = funcs[names[i].func].addr;
		s->st_size = funcs[names[i].func].size;
		memcpy(str + at, names[i].s, names[i].len);
		at += names[i].len + 1;
	}
	memcpy(file + shstr_off, shstrtab, sizeof(shstrtab));

	sh = (Elf64_Shdr *)(file + sh_off);
	sh[SEC_TEXT] = (Elf64_Shdr){ .sh_name = 1, .sh_type = SHT_PROGBITS,
		.sh_flags = SHF_ALLOC | SHF_EXECINSTR, .sh_addr = text_addr,
		.sh_offset = text_off, .sh_size = text_size, .sh_addralign = 16 };
	sh[SEC_SYMTAB] = (Elf64_Shdr){ .sh_name = 7, .sh_type = SHT_SYMTAB,
		.sh_offset = sym_off, .sh_size = (n + 1) * sizeof(*sym), .sh_link = SEC_STRTAB,
		.sh_info = 1, .sh_addralign = 8, .sh_entsize = sizeof(*sym) };
	sh[SEC_STRTAB] = (Elf64_Shdr){ .sh_name = 15, .sh_type = SHT_STRTAB,
		.sh_offset = str_off, .sh_size = strsz, .sh_addralign = 1 };
	sh[SEC_SHSTRTAB] = (Elf64_Shdr){ .sh_name = 23, .sh_type = SHT_STRTAB,
		.sh_offset = shstr_off, .sh_size = sizeof(shstrtab), .sh_addralign = 1 };
	return file;
}

static void check(const struct tokio_runtime *rt)
{
	size_t counted = 0, named = 0, internal = 0;

	for (size_t i = 0; i < rt->nr; i++) {
		const struct tokio_site *s = &rt->sites[i];

		CHECK(s->kind < TOKIO_KIND_MAX);
		CHECK(s->place.skip == 0 || s->place.cheap);
		CHECK(s->kind == TOKIO_POLL || (!s->future && !s->internal));
		if (s->internal) {
			internal++;
			continue;
		}
		counted++;
		named += s->kind == TOKIO_POLL && s->future;
	}
	for (int k = 0; k < TOKIO_KIND_MAX; k++)
		counted -= rt->count[k];
	CHECK(counted == 0);
	CHECK(named == rt->named);
	CHECK(internal == rt->internal);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* a name takes a byte and its line's end at least */
	struct name *names = malloc((size / 2 + 1) * sizeof(*names));
	struct func *funcs = malloc((size / 2 + 1) * sizeof(*funcs));
	struct tokio_runtime rt;
	struct elf_image im;
	size_t n, nr_funcs, file_size;
	uint8_t *file = NULL;

	if (names && funcs) {
		n = parse(data, size, names, funcs, &nr_funcs);
		file = build_elf(names, n, funcs, nr_funcs, &file_size);
	}
	free(names);
	free(funcs);
	if (!file)
		return 0;
	CHECK(!elf_image__open_mem(&im, file, file_size));
	if (!tokio__detect_image(&im, NULL, &rt)) {
		check(&rt);
		tokio__free(&rt);
	}
	elf_image__close(&im);
	free(file);
	return 0;
}
