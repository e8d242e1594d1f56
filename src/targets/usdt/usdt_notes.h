/* SPDX-License-Identifier: MIT */
/*
 * Reads the USDT probes an ELF file declares in its .note.stapsdt section:
 * what a target offers (said clearly when it offers nothing), and where each
 * site's uprobe and semaphore go and how to read its arguments, from which
 * asynctraced attaches them (not libbpf, which would parse the notes again).
 */
#ifndef USDT_NOTES_H
#define USDT_NOTES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "asynctraced.h"

#define USDT_NAME_LEN 64
#define USDT_ARGS_LEN 256

struct usdt_probe {
	char provider[USDT_NAME_LEN];
	char name[USDT_NAME_LEN];
	uint64_t pc;		/* the probe's address (link time; prelink undone) */
	uint64_t base;		/* the note's .stapsdt.base address */
	uint64_t semaphore;	/* its semaphore's address; 0: none */
	uint64_t offset;	/* pc's file offset, where its uprobe goes; 0: not in code */
	uint64_t sema_offset;	/* the semaphore's file offset; 0: none, or not in the file */
	char args[USDT_ARGS_LEN]; /* as the note says them: "8@%rdi -4@8(%rbp)" */
	bool args_known;	  /* false: longer than args holds (then empty) */
};

/*
 * Fills *probes (malloc'd, caller frees) with the probes of provider (NULL:
 * every provider) in the ELF file at path. 0, -ENOENT/-EACCES opening it, or
 * -ENOEXEC if it is not an ELF file.
 */
int usdt__list(const char *path, const char *provider, struct usdt_probe **probes,
	       size_t *nr);
/* usdt__read from a file's bytes in memory (current: NULL, not wanted). */
int usdt__list_mem(const void *data, size_t size, const char *provider,
		   struct usdt_probe **probes, size_t *nr, uint64_t *current);
/*
 * usdt__list, and where the file's asynctrace_current_tpoff is (sample
 * mode's thread-local, docs/usdt-abi.md) into *current: its address in a
 * process less that of the code mapping's file offset 0 (0: the file has
 * no such symbol, or one that is not 8 bytes of a loaded segment).
 */
int usdt__read(const char *path, const char *provider, struct usdt_probe **probes, size_t *nr,
	       uint64_t *current);

/*
 * Parses a probe's argument string (x86-64 assembler operands: "N@%reg",
 * "N@$imm", "N@disp(%reg)"; N the size in bytes, negative if signed) into
 * spec. 0, or -EINVAL for a form we do not read (that site is then not traced),
 * -EOPNOTSUPP on other architectures.
 */
int usdt__parse_args(const char *args, struct at_usdt_spec *spec);

#endif
