// SPDX-License-Identifier: MIT
#include "usdt_notes.h"

#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
	return 0;
}

static int collect(Elf *elf, const char *provider, struct usdt_probe **probes, size_t *nr)
{
	size_t shstrndx;
	Elf_Scn *scn = NULL;
	int is64 = gelf_getclass(elf) == ELFCLASS64;

	if (elf_getshdrstrndx(elf, &shstrndx))
		return -ENOEXEC;
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr shdr;
		Elf_Data *data;
		GElf_Nhdr nhdr;
		size_t off = 0, name_off, desc_off, next;
		const char *sname;

		if (!gelf_getshdr(scn, &shdr) || shdr.sh_type != SHT_NOTE)
			continue;
		sname = elf_strptr(elf, shstrndx, shdr.sh_name);
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

int usdt__list(const char *path, const char *provider, struct usdt_probe **probes, size_t *nr)
{
	Elf *elf;
	int fd, err;

	*probes = NULL;
	*nr = 0;
	if (elf_version(EV_CURRENT) == EV_NONE)
		return -EINVAL;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!elf || elf_kind(elf) != ELF_K_ELF) {
		err = -ENOEXEC;
	} else {
		err = collect(elf, provider, probes, nr);
	}
	elf_end(elf);
	close(fd);
	if (err) {
		free(*probes);
		*probes = NULL;
		*nr = 0;
	}
	return err;
}
