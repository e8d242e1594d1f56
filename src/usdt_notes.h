/* SPDX-License-Identifier: MIT */
/*
 * Reads the USDT probes an ELF file declares in its .note.stapsdt section.
 * libbpf parses the same notes when it attaches; we read them first to know
 * what a target offers, and to say so clearly when it offers nothing.
 */
#ifndef USDT_NOTES_H
#define USDT_NOTES_H

#include <stddef.h>
#include <stdint.h>

#define USDT_NAME_LEN 64

struct usdt_probe {
	char provider[USDT_NAME_LEN];
	char name[USDT_NAME_LEN];
	uint64_t pc;
	uint64_t semaphore; /* 0: none */
};

/*
 * Fills *probes (malloc'd, caller frees) with the probes of provider (NULL:
 * every provider) in the ELF file at path. 0, -ENOENT/-EACCES opening it, or
 * -ENOEXEC if it is not an ELF file.
 */
int usdt__list(const char *path, const char *provider, struct usdt_probe **probes,
	       size_t *nr);

#endif
