// SPDX-License-Identifier: MIT
#include "stacks/debug_file.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <elfutils/libdwelf.h>
#include <zlib.h>

bool debug_file__has_dwarf(Elf *elf)
{
	size_t shstrndx;
	GElf_Shdr sh;
	const char *name;

	if (!elf || elf_getshdrstrndx(elf, &shstrndx))
		return false;
	for (Elf_Scn *scn = elf_nextscn(elf, NULL); scn; scn = elf_nextscn(elf, scn))
		if (gelf_getshdr(scn, &sh) && sh.sh_type == SHT_PROGBITS &&
		    (name = elf_strptr(elf, shstrndx, sh.sh_name)) &&
		    (!strcmp(name, ".debug_info") || !strcmp(name, ".zdebug_info")))
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

/* The CRC-32 of the whole file at fd (a debug link's, as zlib computes it); false: unread. */
static bool file_crc(int fd, uint32_t *crc)
{
	unsigned char buf[65536];
	uLong c = crc32(0, NULL, 0);
	off_t at = 0;
	ssize_t n;

	while ((n = pread(fd, buf, sizeof(buf), at)) > 0) {
		c = crc32(c, buf, (uInt)n);
		at += n;
	}
	*crc = (uint32_t)c;
	return n == 0;
}

bool debug_file__same_build(Elf *elf, int fd)
{
	const void *ours, *theirs;
	ssize_t n = dwelf_elf_gnu_build_id(elf, &ours);
	GElf_Word link_crc;
	uint32_t crc;
	Elf *debug;
	bool same;

	if (n <= 0) /* no build id: the debug link's checksum, if it has one */
		return !dwelf_elf_gnu_debuglink(elf, &link_crc) ||
		       (file_crc(fd, &crc) && crc == link_crc);
	debug = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	same = debug && dwelf_elf_gnu_build_id(debug, &theirs) == n &&
	       !memcmp(ours, theirs, (size_t)n);
	elf_end(debug);
	return same;
}
