// SPDX-License-Identifier: MIT
#include "targets/usdt/usdt_notes.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/file_copy.h"
#include "targets/elf_strtab.h"

#define NT_STAPSDT 3

/* desc = pc, base, semaphore (address-sized), then provider\0name\0args\0 */
static int parse_note(const char *desc, size_t len, int is64, struct usdt_probe *p)
{
	size_t asz = is64 ? 8 : 4, off = 3 * asz, n;
	uint64_t addr[3] = { 0, 0, 0 };

	if (len < off + 2)
		return -EINVAL;
	for (int i = 0; i < 3; i++) {
		if (is64) {
			memcpy(&addr[i], desc + i * asz, 8);
		} else {
			uint32_t a;

			memcpy(&a, desc + i * asz, 4);
			addr[i] = a;
		}
	}
	p->pc = addr[0];
	p->base = addr[1];
	p->semaphore = addr[2];
	n = strnlen(desc + off, len - off);
	if (off + n >= len || n >= sizeof(p->provider))
		return -EINVAL;
	memcpy(p->provider, desc + off, n + 1);
	off += n + 1;
	n = strnlen(desc + off, len - off);
	if (off + n >= len || n >= sizeof(p->name))
		return -EINVAL;
	memcpy(p->name, desc + off, n + 1);
	off += n + 1;
	/* arguments longer than we keep: the probe is still there, its spec unknown */
	n = strnlen(desc + off, len - off);
	if (off + n >= len)
		return -EINVAL;
	p->args_known = n < sizeof(p->args);
	if (p->args_known)
		memcpy(p->args, desc + off, n + 1);
	return 0;
}

static int collect(Elf *elf, size_t size, const char *provider, struct usdt_probe **probes,
		   size_t *nr)
{
	size_t shstrndx;
	Elf_Scn *scn = NULL;
	int is64 = gelf_getclass(elf) == ELFCLASS64;
	const Elf_Data *names;
	uint64_t budget = size; /* of section names read (elf_strtab.h) */

	if (elf_getshdrstrndx(elf, &shstrndx))
		return -ENOEXEC;
	if (!(names = elf_strtab(elf, shstrndx)))
		return 0;
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr shdr;
		Elf_Data *data;
		GElf_Nhdr nhdr;
		size_t off = 0, name_off, desc_off, next;
		const char *sname;

		if (!gelf_getshdr(scn, &shdr) || shdr.sh_type != SHT_NOTE)
			continue;
		sname = elf_strtab__name(names->d_buf, names->d_size, shdr.sh_name, &budget);
		if (!sname || strcmp(sname, ".note.stapsdt"))
			continue;
		data = elf_getdata(scn, NULL);
		if (!data)
			continue;
		while ((next = gelf_getnote(data, off, &nhdr, &name_off, &desc_off)) > 0) {
			struct usdt_probe p, *grown;

			off = next;
			if (nhdr.n_type != NT_STAPSDT || nhdr.n_namesz != sizeof("stapsdt") ||
			    memcmp((char *)data->d_buf + name_off, "stapsdt", 8))
				continue;
			memset(&p, 0, sizeof(p));
			if (parse_note((char *)data->d_buf + desc_off, nhdr.n_descsz, is64, &p))
				continue;
			if (provider && strcmp(p.provider, provider))
				continue;
			grown = realloc(*probes, (*nr + 1) * sizeof(p));
			if (!grown)
				return -ENOMEM;
			*probes = grown;
			(*probes)[(*nr)++] = p;
		}
	}
	return 0;
}

/*
 * The first PT_LOAD segment with flags (PF_X: code) that holds vaddr in
 * memory (UINT64_MAX: any), into *out; false if none.
 */
static bool segment(Elf *elf, uint32_t flags, uint64_t vaddr, GElf_Phdr *out)
{
	size_t n;

	if (elf_getphdrnum(elf, &n))
		return false;
	for (size_t i = 0; i < n; i++)
		if (gelf_getphdr(elf, (int)i, out) && out->p_type == PT_LOAD &&
		    (out->p_flags & flags) == flags &&
		    (vaddr == UINT64_MAX ||
		     (vaddr >= out->p_vaddr && vaddr - out->p_vaddr < out->p_memsz)))
			return true;
	return false;
}

/*
 * The file offset of vaddr in a PT_LOAD segment with flags; 0 if none, or
 * not in the part the file holds (not .bss), or not inside the file (size
 * bytes: a crafted header may say anything).
 */
static uint64_t file_offset(Elf *elf, size_t size, uint64_t vaddr, uint32_t flags)
{
	GElf_Phdr ph;
	uint64_t off;

	if (!segment(elf, flags, vaddr, &ph) || vaddr - ph.p_vaddr >= ph.p_filesz)
		return 0;
	off = ph.p_offset + (vaddr - ph.p_vaddr);
	return off >= ph.p_offset && off < size ? off : 0;
}

/*
 * Where each probe's uprobe and semaphore go, as file offsets. A prelinked
 * file moved its code after the notes were written: the distance between
 * the .stapsdt.base section's address now and the one a note recorded is
 * how far (as in systemtap's sdt.h and libbpf).
 */
static void locate(Elf *elf, size_t size, struct usdt_probe *probes, size_t nr)
{
	size_t shstrndx;
	Elf_Scn *scn = NULL;
	uint64_t base = 0;
	bool has_base = false;

	if (!elf_getshdrstrndx(elf, &shstrndx))
		while ((scn = elf_nextscn(elf, scn))) {
			GElf_Shdr sh;
			const char *name;

			if (!gelf_getshdr(scn, &sh))
				continue;
			name = elf_strptr(elf, shstrndx, sh.sh_name);
			if (name && !strcmp(name, ".stapsdt.base")) {
				base = sh.sh_addr;
				has_base = true;
				break;
			}
		}
	for (size_t i = 0; i < nr; i++) {
		struct usdt_probe *p = &probes[i];

		if (has_base && p->base)
			p->pc += base - p->base;
		p->offset = file_offset(elf, size, p->pc, PF_X);
		p->sema_offset = p->semaphore ? file_offset(elf, size, p->semaphore, 0) : 0;
	}
}

#define CURRENT_TPOFF "asynctrace_current_tpoff"

/* See usdt__read(): 0 if there is none. */
static uint64_t current_slot(Elf *elf)
{
	Elf_Scn *scn = NULL;
	GElf_Phdr text, data;

	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		Elf_Data *d;

		if (!gelf_getshdr(scn, &sh) || (sh.sh_type != SHT_SYMTAB && sh.sh_type != SHT_DYNSYM) ||
		    !sh.sh_entsize || !(d = elf_getdata(scn, NULL)))
			continue;
		for (size_t i = 0; i < d->d_size / sh.sh_entsize; i++) {
			GElf_Sym sym;
			const char *name;

			if (!gelf_getsym(d, (int)i, &sym) || sym.st_size != 8 ||
			    GELF_ST_TYPE(sym.st_info) != STT_OBJECT || sym.st_shndx == SHN_UNDEF ||
			    !(name = elf_strptr(elf, sh.sh_link, sym.st_name)) ||
			    strcmp(name, CURRENT_TPOFF))
				continue;
			/* in a loaded segment, placed as the code is (one load bias for both) */
			if (!segment(elf, PF_X, UINT64_MAX, &text) ||
			    !segment(elf, 0, sym.st_value, &data) ||
			    sym.st_value + text.p_offset < text.p_vaddr)
				return 0;
			return sym.st_value + text.p_offset - text.p_vaddr;
		}
	}
	return 0;
}

static int list_mem(const void *data, size_t size, const char *provider,
		    struct usdt_probe **probes, size_t *nr, uint64_t *current)
{
	Elf *elf;
	int err;

	*probes = NULL;
	*nr = 0;
	if (elf_version(EV_CURRENT) == EV_NONE)
		return -EINVAL;
	/* libelf only reads an image it is given: const for us, not for its API */
	elf = elf_memory((char *)data, size);
	if (!elf || elf_kind(elf) != ELF_K_ELF)
		err = -ENOEXEC;
	else
		err = collect(elf, size, provider, probes, nr);
	if (!err)
		locate(elf, size, *probes, *nr);
	if (!err && current)
		*current = current_slot(elf);
	elf_end(elf);
	if (err) {
		free(*probes);
		*probes = NULL;
		*nr = 0;
	}
	return err;
}

int usdt__list_mem(const void *data, size_t size, const char *provider,
		   struct usdt_probe **probes, size_t *nr, uint64_t *current)
{
	if (current)
		*current = 0;
	return list_mem(data, size, provider, probes, nr, current);
}

int usdt__read(const char *path, const char *provider, struct usdt_probe **probes, size_t *nr,
	       uint64_t *current)
{
	struct file_copy fc;
	int err;

	*probes = NULL;
	*nr = 0;
	if (current)
		*current = 0;
	/* a copy, not a mapping: its owner may truncate the file (file_copy.h) */
	err = file_copy__read(&fc, path, FILE_COPY_MAX);
	if (err)
		return err;
	err = usdt__list_mem(fc.data, fc.size, provider, probes, nr, current);
	file_copy__free(&fc);
	return err;
}

int usdt__list(const char *path, const char *provider, struct usdt_probe **probes, size_t *nr)
{
	return usdt__read(path, provider, probes, nr, NULL);
}

#if defined(__x86_64__)
/* A register's offset in struct pt_regs, by any of its names (64 to 8 bits). */
static int reg_offset(const char *name, size_t len)
{
	static const struct {
		const char *names[4];
		int off;
	} regs[] = {
		{ { "r15", "r15d", "r15w", "r15b" }, 0 },
		{ { "r14", "r14d", "r14w", "r14b" }, 8 },
		{ { "r13", "r13d", "r13w", "r13b" }, 16 },
		{ { "r12", "r12d", "r12w", "r12b" }, 24 },
		{ { "rbp", "ebp", "bp", "bpl" }, 32 },
		{ { "rbx", "ebx", "bx", "bl" }, 40 },
		{ { "r11", "r11d", "r11w", "r11b" }, 48 },
		{ { "r10", "r10d", "r10w", "r10b" }, 56 },
		{ { "r9", "r9d", "r9w", "r9b" }, 64 },
		{ { "r8", "r8d", "r8w", "r8b" }, 72 },
		{ { "rax", "eax", "ax", "al" }, 80 },
		{ { "rcx", "ecx", "cx", "cl" }, 88 },
		{ { "rdx", "edx", "dx", "dl" }, 96 },
		{ { "rsi", "esi", "si", "sil" }, 104 },
		{ { "rdi", "edi", "di", "dil" }, 112 },
		{ { "rsp", "esp", "sp", "spl" }, 152 },
	};

	for (size_t i = 0; i < sizeof(regs) / sizeof(regs[0]); i++)
		for (int j = 0; j < 4; j++)
			if (strlen(regs[i].names[j]) == len && !memcmp(regs[i].names[j], name, len))
				return regs[i].off;
	return -1;
}

/* "%reg" up to the end of s or a ')': its offset, with *end past it; -1 if none. */
static int parse_reg(const char *s, const char **end)
{
	size_t len = 0;

	if (*s != '%')
		return -1;
	s++;
	while (isalnum((unsigned char)s[len]))
		len++;
	*end = s + len;
	return reg_offset(s, len);
}

/* One operand, "N@..." */
static int parse_arg(const char *s, const char **end, struct at_usdt_arg *a)
{
	char *p;
	long size = strtol(s, &p, 10);
	long bytes;
	long long v;
	int off;

	/* the size's sign first: labs(LONG_MIN), from "-9223372036854775808@", is undefined */
	if (p == s || *p != '@' || size < -8 || size > 8)
		return -EINVAL;
	bytes = size < 0 ? -size : size;
	if (bytes != 1 && bytes != 2 && bytes != 4 && bytes != 8)
		return -EINVAL;
	memset(a, 0, sizeof(*a));
	a->shift = (uint8_t)(64 - 8 * bytes);
	a->is_signed = size < 0;
	s = p + 1;
	if (*s == '$') {
		errno = 0;
		v = strtoll(s + 1, &p, 0);
		if (p == s + 1 || errno)
			return -EINVAL;
		a->kind = AT_USDT_ARG_CONST;
		a->val = v;
		*end = p;
		return 0;
	}
	if (*s == '%') {
		off = parse_reg(s, end);
		if (off < 0)
			return -EINVAL;
		a->kind = AT_USDT_ARG_REG;
		a->reg_off = (uint16_t)off;
		return 0;
	}
	/* disp(%reg): no index registers, no symbols */
	v = 0;
	if (*s != '(') {
		errno = 0;
		v = strtoll(s, &p, 0);
		if (p == s || errno || *p != '(')
			return -EINVAL;
		s = p;
	}
	off = parse_reg(s + 1, end);
	if (off < 0 || **end != ')')
		return -EINVAL;
	(*end)++;
	a->kind = AT_USDT_ARG_DEREF;
	a->reg_off = (uint16_t)off;
	a->val = v;
	return 0;
}

int usdt__parse_args(const char *args, struct at_usdt_spec *spec)
{
	const char *s = args;

	memset(spec, 0, sizeof(*spec));
	for (;;) {
		struct at_usdt_arg a;
		int err;

		while (*s == ' ' || *s == '\t')
			s++;
		if (!*s)
			break;
		err = parse_arg(s, &s, &a);
		if (!err && *s && *s != ' ' && *s != '\t')
			err = -EINVAL;
		if (err) {
			memset(spec, 0, sizeof(*spec));
			return err;
		}
		if (spec->nr_args < AT_USDT_MAX_ARGS)
			spec->args[spec->nr_args] = a;
		spec->nr_args++;
	}
	if (spec->nr_args > AT_USDT_MAX_ARGS)
		spec->nr_args = AT_USDT_MAX_ARGS;
	spec->known = 1;
	return 0;
}
#else
int usdt__parse_args(const char *args, struct at_usdt_spec *spec)
{
	(void)args;
	memset(spec, 0, sizeof(*spec));
	return -EOPNOTSUPP;
}
#endif
