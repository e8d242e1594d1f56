/* SPDX-License-Identifier: MIT */
/*
 * An ELF file as a tracer needs it: its functions (from .symtab and .dynsym,
 * sorted by address, names demangled on demand with libiberty, which reads
 * both Rust schemes), the file offset a uprobe needs for an address, and the
 * bytes of the code.
 */
#ifndef ELF_IMAGE_H
#define ELF_IMAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct elf_func {
	uint64_t addr;		/* link-time virtual address */
	uint64_t size;
	const char *mangled;	/* in the mapped file; may end in ".llvm.N" */
	uint32_t len;		/* of mangled without that LTO suffix */
	char *demangled;	/* NULL until elf_image__name() */
};

struct elf_section {
	uint64_t addr, size, offset;
};

struct elf_image {
	uint8_t *owned;		/* elf_image__open's copy of the file (= data); NULL: the caller's */
	const uint8_t *data;	/* the whole file, in memory */
	size_t size;
	struct elf_func *funcs;	/* sorted by addr */
	size_t nr_funcs;
	struct elf_section *secs; /* allocated, with file contents */
	size_t nr_secs;
	uint64_t load_vaddr;	/* page-aligned vaddr of the first PT_LOAD */
	/* thread-locals: the STT_TLS symbols (addr: offset in the TLS image), PT_TLS */
	struct elf_func *tls;
	size_t nr_tls;
	uint64_t tls_vaddr, tls_memsz, tls_align;
	bool has_tls;
	bool has_symtab;	/* false: stripped, .dynsym only */
	bool is_x86_64;
};

/*
 * Reads the file at path into memory (lib/file_copy.h: not mapped, a regular
 * file of at most FILE_COPY_MAX bytes). 0, -errno opening or reading,
 * -EFBIG when too large, -ENOEXEC if not an ELF file.
 */
int elf_image__open(struct elf_image *im, const char *path);
/* The same from a file's bytes in memory, which must outlive the image. */
int elf_image__open_mem(struct elf_image *im, const void *data, size_t size);
void elf_image__close(struct elf_image *im);

/* The function starting at addr (or containing it, if contains). */
const struct elf_func *elf_image__func_at(const struct elf_image *im, uint64_t addr,
					  bool contains);
/* The functions starting at addr (aliases: several symbols, one body); their count. */
size_t elf_image__aliases(const struct elf_image *im, uint64_t addr, const struct elf_func **first);
/* Its demangled name (Rust legacy or v0, C++), or the symbol if not mangled. */
const char *elf_image__name(const struct elf_image *im, const struct elf_func *f);
/* The file offset of a virtual address: what a uprobe attaches to; -1 if none. */
int64_t elf_image__offset(const struct elf_image *im, uint64_t addr);
/* The bytes at addr, len of them, or NULL if not all in the file. */
const uint8_t *elf_image__bytes(const struct elf_image *im, uint64_t addr, size_t len);

/*
 * Where the thread-local at tls_addr (a TLS symbol's value) lies from the
 * thread pointer when this file is a process's executable: its TLS block is
 * the first of the static ones, ending at the thread pointer on x86-64
 * (variant II, as glibc and musl place it). 0 with *tpoff set, or -ENOENT
 * with no PT_TLS, -ERANGE for an address outside it.
 */
int elf_image__tpoff(const struct elf_image *im, uint64_t tls_addr, int64_t *tpoff);

/*
 * Calls fn for each function whose mangled name contains needle (NULL: all);
 * stops when fn returns nonzero and returns that.
 */
typedef int (*elf_func_fn)(void *ctx, const struct elf_func *f);
int elf_image__for_each(const struct elf_image *im, const char *needle, elf_func_fn fn,
			void *ctx);

/*
 * Whether the file holds Rust code, with or without symbols: what gave it
 * away ("a .rustc section", "rustc in .comment", "Rust's standard library
 * in read-only data"), or NULL.
 */
const char *elf_image__rust_marker(const struct elf_image *im);

#endif
