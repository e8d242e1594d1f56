// SPDX-License-Identifier: MIT
#include "targets/elf_image.h"

#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <libiberty/demangle.h>

#include "lib/file_copy.h"
#include "lib/util.h"
#include "targets/elf_strtab.h"

static int by_addr(const void *a, const void *b)
{
	const struct elf_func *x = a, *y = b;

	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	if (x->len != y->len)
		return x->len < y->len ? -1 : 1;
	return strncmp(x->mangled, y->mangled, x->len);
}

/* One more symbol in *set (functions, or thread-locals), of *nr, room for *cap. */
static int add_sym(struct elf_func **set, size_t *nr, size_t *cap, const GElf_Sym *sym,
		   const char *name)
{
	const char *lto = strstr(name, ".llvm.");

	if (*nr == *cap) {
		struct elf_func *f;

		*cap = *cap ? *cap * 2 : 64;
		f = realloc(*set, *cap * sizeof(*f));
		if (!f)
			return -ENOMEM;
		*set = f;
	}
	(*set)[(*nr)++] = (struct elf_func){
		.addr = sym->st_value,
		.size = sym->st_size,
		.mangled = name,
		/* LTO's local copies: "...E.llvm.1234" names the same function */
		.len = (uint32_t)(lto ? (size_t)(lto - name) : strlen(name)),
	};
	return 0;
}

/*
 * The functions of the first .symtab and the first .dynsym (ELF allows one
 * of each: a hostile file's thousand copies of one table would each be read
 * again). Their names through elf_strtab.h, the file's size of them at most.
 */
static int read_symbols(struct elf_image *im, Elf *elf)
{
	uint64_t budget = im->size;
	bool seen_symtab = false, seen_dynsym = false;
	Elf_Scn *scn = NULL;
	size_t cap = 0, tls_cap = 0;
	int err;

	while ((scn = elf_nextscn(elf, scn))) {
		const Elf_Data *names;
		GElf_Shdr sh;
		Elf_Data *data;
		size_t nr;

		if (!gelf_getshdr(scn, &sh) || (sh.sh_type != SHT_SYMTAB && sh.sh_type != SHT_DYNSYM))
			continue;
		if (sh.sh_type == SHT_SYMTAB ? seen_symtab : seen_dynsym)
			continue;
		seen_symtab |= sh.sh_type == SHT_SYMTAB;
		seen_dynsym |= sh.sh_type == SHT_DYNSYM;
		if (sh.sh_type == SHT_SYMTAB)
			im->has_symtab = true;
		data = elf_getdata(scn, NULL);
		names = elf_strtab(elf, sh.sh_link);
		if (!data || !sh.sh_entsize || !names)
			continue;
		/* as many as the header says and the section holds (gelf_getsym reads no more) */
		nr = sh.sh_size / sh.sh_entsize;
		if (nr > data->d_size / gelf_fsize(elf, ELF_T_SYM, 1, EV_CURRENT))
			nr = data->d_size / gelf_fsize(elf, ELF_T_SYM, 1, EV_CURRENT);
		for (size_t i = 0; i < nr; i++) {
			GElf_Sym sym;
			const char *name;

			if (!gelf_getsym(data, (int)i, &sym) || sym.st_shndx == SHN_UNDEF)
				continue;
			if (GELF_ST_TYPE(sym.st_info) == STT_TLS) {
				/* thread-locals: their value is an offset in the TLS image, 0 included */
				name = elf_strtab__name(names->d_buf, names->d_size, sym.st_name,
							&budget);
				if (name && *name && sh.sh_type == SHT_SYMTAB &&
				    (err = add_sym(&im->tls, &im->nr_tls, &tls_cap, &sym, name)))
					return err;
				continue;
			}
			if (GELF_ST_TYPE(sym.st_info) != STT_FUNC || !sym.st_value)
				continue;
			/* Names point into the mapped file, which outlives the Elf. */
			name = elf_strtab__name(names->d_buf, names->d_size, sym.st_name, &budget);
			if (name && *name &&
			    (err = add_sym(&im->funcs, &im->nr_funcs, &cap, &sym, name)))
				return err;
		}
	}
	/* no functions: funcs is NULL, which qsort() must not be given even for 0 */
	if (im->nr_funcs) {
		size_t w = 1;

		qsort(im->funcs, im->nr_funcs, sizeof(*im->funcs), by_addr);
		/* .symtab and .dynsym both list exported functions: keep one of each. */
		for (size_t r = 1; r < im->nr_funcs; r++)
			if (by_addr(&im->funcs[r], &im->funcs[w - 1]))
				im->funcs[w++] = im->funcs[r];
		im->nr_funcs = w;
	}
	return 0;
}

static int read_layout(struct elf_image *im, Elf *elf)
{
	size_t nr_phdrs = 0;
	Elf_Scn *scn = NULL;
	bool first = true;

	if (elf_getphdrnum(elf, &nr_phdrs))
		return -ENOEXEC;
	for (size_t i = 0; i < nr_phdrs; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(elf, (int)i, &ph))
			continue;
		if (ph.p_type == PT_LOAD && first) {
			im->load_vaddr = ph.p_vaddr & ~(uint64_t)4095;
			first = false;
		}
		if (ph.p_type == PT_TLS && !im->has_tls) {
			im->has_tls = true;
			im->tls_vaddr = ph.p_vaddr;
			im->tls_memsz = ph.p_memsz;
			im->tls_align = ph.p_align ? ph.p_align : 1;
		}
	}
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		struct elf_section *s;

		if (!gelf_getshdr(scn, &sh) || !(sh.sh_flags & SHF_ALLOC) || sh.sh_type == SHT_NOBITS)
			continue;
		s = realloc(im->secs, (im->nr_secs + 1) * sizeof(*s));
		if (!s)
			return -ENOMEM;
		im->secs = s;
		im->secs[im->nr_secs++] = (struct elf_section){ sh.sh_addr, sh.sh_size, sh.sh_offset };
	}
	return 0;
}

/* Reads im->data, im->size: what both ways of opening share. */
static int read_image(struct elf_image *im)
{
	GElf_Ehdr eh;
	Elf *elf;
	int err;

	if (elf_version(EV_CURRENT) == EV_NONE)
		return -EINVAL;
	/* libelf only reads an image it is given: const for us, not for its API */
	elf = elf_memory((char *)im->data, im->size);
	if (!elf || elf_kind(elf) != ELF_K_ELF || !gelf_getehdr(elf, &eh)) {
		elf_end(elf);
		return -ENOEXEC;
	}
	im->is_x86_64 = eh.e_machine == EM_X86_64;
	err = read_layout(im, elf);
	if (!err)
		err = read_symbols(im, elf);
	elf_end(elf);
	return err;
}

int elf_image__open_mem(struct elf_image *im, const void *data, size_t size)
{
	int err;

	memset(im, 0, sizeof(*im));
	im->data = data;
	im->size = size;
	err = read_image(im);
	if (err)
		elf_image__close(im);
	return err;
}

int elf_image__open(struct elf_image *im, const char *path)
{
	struct file_copy fc;
	int err;

	/* a copy, not a mapping: its owner may truncate the file (file_copy.h) */
	err = file_copy__read(&fc, path, FILE_COPY_MAX);
	if (err) {
		memset(im, 0, sizeof(*im));
		return err;
	}
	err = elf_image__open_mem(im, fc.data, fc.size);
	if (err) {
		file_copy__free(&fc);
		return err;
	}
	im->owned = fc.data;
	return 0;
}

void elf_image__close(struct elf_image *im)
{
	for (size_t i = 0; i < im->nr_funcs; i++)
		free(im->funcs[i].demangled);
	free(im->funcs);
	for (size_t i = 0; i < im->nr_tls; i++)
		free(im->tls[i].demangled);
	free(im->tls);
	free(im->secs);
	free(im->owned); /* elf_image__open's copy; elf_image__open_mem's caller owns its bytes */
	memset(im, 0, sizeof(*im));
}

const struct elf_func *elf_image__func_at(const struct elf_image *im, uint64_t addr, bool contains)
{
	/* one past the last function starting at or before addr */
	size_t lo = upper_bound_u64(im->funcs, im->nr_funcs, sizeof(*im->funcs), addr);

	if (!lo)
		return NULL;
	for (size_t i = lo; i-- > 0 && im->funcs[i].addr == im->funcs[lo - 1].addr;) {
		const struct elf_func *f = &im->funcs[i];

		if (f->addr == addr || (contains && addr < f->addr + f->size))
			return f;
	}
	return NULL;
}

size_t elf_image__aliases(const struct elf_image *im, uint64_t addr, const struct elf_func **first)
{
	const struct elf_func *f = elf_image__func_at(im, addr, false);
	size_t n = 0;

	if (!f)
		return 0;
	while (f > im->funcs && f[-1].addr == addr)
		f--;
	*first = f;
	while (f + n < im->funcs + im->nr_funcs && f[n].addr == addr)
		n++;
	return n;
}

const char *elf_image__name(const struct elf_image *im, const struct elf_func *f)
{
	struct elf_func *mf = (struct elf_func *)f; /* the cache is not part of the image's state */

	(void)im;
	if (!mf->demangled) {
		char *sym = strndup(mf->mangled, mf->len);
		char *d = sym ? cplus_demangle(sym, DMGL_RUST | DMGL_PARAMS) : NULL;

		mf->demangled = d ? d : sym;
		if (d)
			free(sym);
	}
	return mf->demangled ? mf->demangled : "?";
}

int elf_image__tpoff(const struct elf_image *im, uint64_t tls_addr, int64_t *tpoff)
{
	uint64_t align = im->tls_align, first, block;

	if (!im->has_tls)
		return -ENOENT;
	/* a hostile header's: no alignment past a page, no block past a gigabyte */
	if (align & (align - 1) || align > 4096 || im->tls_memsz > (1ull << 30) ||
	    tls_addr >= im->tls_memsz)
		return -ERANGE;
	/* the block's start keeps its image's misalignment (p_vaddr modulo p_align) */
	first = (0 - (im->tls_vaddr & (align - 1))) & (align - 1);
	if (first > im->tls_memsz)
		return -ERANGE;
	block = ((im->tls_memsz - first + align - 1) & ~(align - 1)) + first;
	*tpoff = (int64_t)tls_addr - (int64_t)block;
	return 0;
}

int64_t elf_image__offset(const struct elf_image *im, uint64_t addr)
{
	for (size_t i = 0; i < im->nr_secs; i++) {
		const struct elf_section *s = &im->secs[i];

		/* differences, not sums: a hostile header's addr + size may wrap */
		if (addr >= s->addr && addr - s->addr < s->size && s->offset <= INT64_MAX &&
		    addr - s->addr <= (uint64_t)INT64_MAX - s->offset)
			return (int64_t)(addr - s->addr + s->offset);
	}
	return -1;
}

const uint8_t *elf_image__bytes(const struct elf_image *im, uint64_t addr, size_t len)
{
	int64_t off = elf_image__offset(im, addr);

	/* len is a symbol's size, which the file says: off + len may wrap */
	if (off < 0 || (uint64_t)off > im->size || len > im->size - (uint64_t)off)
		return NULL;
	return im->data + off;
}

int elf_image__for_each(const struct elf_image *im, const char *needle, elf_func_fn fn,
			void *ctx)
{
	for (size_t i = 0; i < im->nr_funcs; i++) {
		int ret;

		if (needle && !strstr(im->funcs[i].mangled, needle))
			continue;
		ret = fn(ctx, &im->funcs[i]);
		if (ret)
			return ret;
	}
	return 0;
}

/*
 * Stripping removes symbols, not data. Every marker below survives `strip`
 * and Cargo's `strip = true`: the name of a section, the linker's .comment
 * (which recent rustc versions sign, and strip keeps), and the places that
 * core's and std's panics name, which every program built on them holds as
 * data: "library/core/src/slice/index.rs", after whatever prefix the
 * toolchain was built under ("/rustc/<commit>/", "/usr/src/rustc-1.63.0/",
 * none). A prefix alone is not enough: a program that looks for these
 * paths (this one) holds the prefix too, but no source file after it.
 */
static const char *const rust_sources[] = {
	"library/core/src/",
	"library/std/src/",
};

static bool section_data(const struct elf_image *im, const GElf_Shdr *sh, const uint8_t **p)
{
	if (sh->sh_type != SHT_PROGBITS || sh->sh_offset > im->size ||
	    sh->sh_size > im->size - sh->sh_offset)
		return false;
	*p = im->data + sh->sh_offset;
	return true;
}

static bool section_holds(const struct elf_image *im, const GElf_Shdr *sh, const char *needle)
{
	const uint8_t *p;

	return section_data(im, sh, &p) && memmem(p, sh->sh_size, needle, strlen(needle));
}

static bool path_char(uint8_t c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '_' || c == '/' || c == '.' || c == '-';
}

/* prefix, then a path that ends in ".rs" (Rust's strings end without a NUL) */
static bool section_holds_source(const struct elf_image *im, const GElf_Shdr *sh,
				 const char *prefix)
{
	size_t n = strlen(prefix);
	const uint8_t *p, *end, *hit;

	if (!section_data(im, sh, &p))
		return false;
	end = p + sh->sh_size;
	while ((hit = memmem(p, (size_t)(end - p), prefix, n))) {
		for (const uint8_t *c = hit + n; c < end && c - hit < 256 && path_char(*c); c++)
			if (end - c >= 3 && !memcmp(c, ".rs", 3) && c > hit + n)
				return true;
		p = hit + 1;
	}
	return false;
}

const char *elf_image__rust_marker(const struct elf_image *im)
{
	/* names, and sections searched: the file's size of each (elf_strtab.h) */
	uint64_t names_budget = im->size, search_budget = im->size;
	const char *found = NULL;
	const Elf_Data *names;
	Elf_Scn *scn = NULL;
	size_t shstrndx;
	Elf *elf;

	if (!im->data)
		return NULL;
	elf = elf_memory((char *)im->data, im->size);
	if (!elf || elf_getshdrstrndx(elf, &shstrndx) || !(names = elf_strtab(elf, shstrndx))) {
		elf_end(elf);
		return NULL;
	}
	while (!found && (scn = elf_nextscn(elf, scn))) {
		bool comment, rodata;
		const char *name;
		GElf_Shdr sh;

		if (!gelf_getshdr(scn, &sh))
			continue;
		name = elf_strtab__name(names->d_buf, names->d_size, sh.sh_name, &names_budget);
		if (!name)
			continue;
		if (!strcmp(name, ".rustc")) {
			found = "a .rustc section";
			continue;
		}
		comment = !strcmp(name, ".comment");
		rodata = (sh.sh_flags & SHF_ALLOC) && !(sh.sh_flags & (SHF_WRITE | SHF_EXECINSTR));
		/* a thousand headers over one region are not each searched */
		if ((!comment && !rodata) || sh.sh_size > search_budget)
			continue;
		search_budget -= sh.sh_size;
		if (comment && section_holds(im, &sh, "rustc"))
			found = "rustc in .comment";
		else if (!comment)
			for (size_t i = 0; !found && i < sizeof(rust_sources) / sizeof(*rust_sources); i++)
				if (section_holds_source(im, &sh, rust_sources[i]))
					found = "Rust's standard library in read-only data";
	}
	elf_end(elf);
	return found;
}
