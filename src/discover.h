/* SPDX-License-Identifier: MIT */
/* Where a target's asynctrace probes are: its executable and mapped libraries. */
#ifndef DISCOVER_H
#define DISCOVER_H

#include <stdbool.h>
#include <stddef.h>

#include "target.h"
#include "usdt_notes.h"

struct probe_site {
	char *path;		/* opens the ELF from our mount namespace */
	char *target_path;	/* what the target calls it */
	char name[USDT_NAME_LEN];
};

struct discovery {
	struct probe_site *sites; /* one per (file, probe name) */
	size_t nr;
	size_t scanned;		/* ELF files looked at */
	bool verbose;		/* say why a file was skipped */
};

/* Scans every ELF file the target maps executable; 0 or -errno. */
int discover(struct discovery *d, const struct target *t);
bool discovered(const struct discovery *d, const char *probe);
void discovery__free(struct discovery *d);

#endif
