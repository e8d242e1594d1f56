/* SPDX-License-Identifier: MIT */
/*
 * The names in an ELF file another user owns, read so that no file makes
 * it slow: not by elf_strptr(), which checks that a string ends by scanning
 * back from its table's end, as long as the table at every call when its
 * last byte is not a NUL (18 ms a name in 64 MiB, a million symbols); and
 * within a budget of bytes read in all, the file's size, as many entries
 * of a hostile table can name one long string.
 */
#ifndef ELF_STRTAB_H
#define ELF_STRTAB_H

#include <libelf.h>
#include <stddef.h>
#include <stdint.h>

/* Section index's data if it is a string table (SHT_STRTAB, uncompressed); NULL if not. */
const Elf_Data *elf_strtab(Elf *elf, size_t index);
/*
 * The name at off in a table of size bytes, NULL if it does not end inside
 * it or *budget is spent; what was read of the table is taken off *budget.
 */
const char *elf_strtab__name(const void *tab, size_t size, uint64_t off, uint64_t *budget);

#endif
