/* SPDX-License-Identifier: MIT */
/*
 * An image's separate debug file (objcopy --only-keep-debug, Debian's
 * -dbgsym packages): where it may be, and whether one found is of the same
 * build. Nothing here opens a path: the names go to whoever may open them
 * (the analyser asks the privileged side, which opens them in the
 * process's root).
 */
#ifndef DEBUG_FILE_H
#define DEBUG_FILE_H

#include <limits.h>
#include <stdbool.h>

#include <gelf.h>

#define DEBUG_FILE_PATHS 4

/* Whether elf holds DWARF of its own (a .debug_info with bits, or GNU's .zdebug_info). */
bool debug_file__has_dwarf(Elf *elf);
/*
 * Where elf's debug file may be, as paths in its process's root: its build
 * id's under /usr/lib/debug/.build-id, then its debug link's beside file
 * (the image's path there), in .debug beside it and under /usr/lib/debug.
 * How many were written.
 */
int debug_file__paths(Elf *elf, const char *file, char out[DEBUG_FILE_PATHS][PATH_MAX]);
/*
 * Whether the file at fd is of elf's build: its build id's. An image
 * without one: its debug link's CRC-32 of the file, when it has a link;
 * else any file is taken.
 */
bool debug_file__same_build(Elf *elf, int fd);

#endif
