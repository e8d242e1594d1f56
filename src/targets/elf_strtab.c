// SPDX-License-Identifier: MIT
#include "targets/elf_strtab.h"

#include <gelf.h>
#include <string.h>

const Elf_Data *elf_strtab(Elf *elf, size_t index)
{
	Elf_Scn *scn = elf_getscn(elf, index);
	GElf_Shdr sh;
	Elf_Data *d;

	if (!scn || !gelf_getshdr(scn, &sh) || sh.sh_type != SHT_STRTAB ||
	    (sh.sh_flags & SHF_COMPRESSED) || !(d = elf_getdata(scn, NULL)) || !d->d_buf)
		return NULL;
	return d;
}

const char *elf_strtab__name(const void *tab, size_t size, uint64_t off, uint64_t *budget)
{
	const char *s = (const char *)tab + off, *end;
	size_t room;

	if (off >= size || !*budget)
		return NULL;
	room = size - off < *budget ? size - off : (size_t)*budget;
	end = memchr(s, '\0', room);
	*budget -= end ? (uint64_t)(end - s) + 1 : room;
	return end ? s : NULL;
}
