// SPDX-License-Identifier: MIT
#include "stacks/debug_file.h"

#include <stdio.h>
#include <string.h>

#include <elfutils/libdwelf.h>

bool debug_file__has_dwarf(Elf *elf)
{
	size_t shstrndx;
	GElf_Shdr sh;
	const char *name;

	if (!elf || elf_getshdrstrndx(elf, &shstrndx))
		return false;
	for (Elf_Scn *scn = elf_nextscn(elf, NULL); scn; scn = elf_nextscn(elf, scn))
		if (gelf_getshdr(scn, &sh) && sh.sh_type == SHT_PROGBITS &&
		    (name = elf_strptr(elf, shstrndx, sh.sh_name)) && !strcmp(name, ".debug_info"))
			return true;
	return false;
}

int debug_file__paths(Elf *elf, const char *file, char out[DEBUG_FILE_PATHS][PATH_MAX])
{
	const void *bits;
	GElf_Word crc;
	const char *link = elf ? dwelf_elf_gnu_debuglink(elf, &crc) : NULL;
	const char *slash = file ? strrchr(file, '/') : NULL;
	ssize_t len = elf ? dwelf_elf_gnu_build_id(elf, &bits) : -1;
	int n = 0;

	if (len > 1 && len <= 64) {
		char hex[129];

		for (ssize_t i = 0; i < len; i++)
			snprintf(hex + 2 * i, 3, "%02x", ((const unsigned char *)bits)[i]);
		snprintf(out[n++], PATH_MAX, "/usr/lib/debug/.build-id/%.2s/%s.debug", hex, hex + 2);
	}
	/* a link names a file, never a path: beside the image, in .debug, under /usr/lib/debug */
	if (link && *link && !strchr(link, '/') && strcmp(link, ".") && strcmp(link, "..") &&
	    slash && file[0] == '/') {
		int dir = (int)(slash - file);

		snprintf(out[n++], PATH_MAX, "%.*s/%s", dir, file, link);
		snprintf(out[n++], PATH_MAX, "%.*s/.debug/%s", dir, file, link);
		snprintf(out[n++], PATH_MAX, "/usr/lib/debug%.*s/%s", dir, file, link);
	}
	return n;
}

bool debug_file__same_build(Elf *elf, int fd)
{
	const void *ours, *theirs;
	ssize_t n = dwelf_elf_gnu_build_id(elf, &ours);
	Elf *debug;
	bool same;

	if (n <= 0)
		return true;
	debug = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	same = debug && dwelf_elf_gnu_build_id(debug, &theirs) == n &&
	       !memcmp(ours, theirs, (size_t)n);
	elf_end(debug);
	return same;
}
