/* SPDX-License-Identifier: MIT */
/*
 * Which runtime a target runs, and where to attach: the asynctrace USDT
 * probes in its executable or a mapped library, or else tokio's own
 * functions in an unmodified binary.
 */
#ifndef DISCOVER_H
#define DISCOVER_H

#include <stdbool.h>
#include <stddef.h>

#include "targets/go/golang.h"
#include "targets/images.h"
#include "targets/target.h"
#include "targets/tokio/tokio.h"
#include "targets/usdt/usdt_notes.h"

enum runtime_kind {
	RUNTIME_NONE = 0,
	RUNTIME_USDT,
	RUNTIME_TOKIO,
	RUNTIME_GO,
};

/* One place a USDT probe is in a file. */
struct usdt_site {
	uint64_t offset;		/* its file offset: its uprobe's */
	uint64_t ref_ctr;		/* its semaphore's file offset; 0: none */
	struct at_usdt_spec spec;	/* its arguments */
};

/* A USDT probe of one file: every site of it there, attached together. */
struct probe_site {
	char *path;		/* opens the ELF from our mount namespace */
	char *target_path;	/* what the target calls it */
	char name[USDT_NAME_LEN];
	int probe;		/* enum at_usdt_probe; -1: not one we know */
	struct usdt_site *at;
	size_t nr_at;
};

struct tokio_binary {
	char *path;
	char *target_path;
	struct target_mapping map;	/* where its code is in the target */
	struct tokio_runtime rt;
};

/* newproc1's ret instructions: at most this many are probed. */
#define GO_RETS 16

/* Where one Go probe goes, chosen when the binary was read (placement.h). */
struct go_probe {
	uint64_t at;		/* its file offset */
	uint64_t entry;		/* its function's entry, should the kernel refuse `at` */
	bool optimized;		/* at `at`, the kernel makes it a call */
	bool moved;		/* past a single-stepped entry */
	char said[256];		/* -v: where it goes, and why */
};

/* The Go functions probed at their entry, besides newproc1's returns. */
enum go_entry_probe {
	GO_PROBE_CASGSTATUS,
	GO_PROBE_RUNQSTEAL,
	GO_PROBE_HANDOFFP,
	GO_PROBE_STOP_THE_WORLD,
	GO_PROBE_PREEMPT_PARK,
	GO_ENTRY_PROBES
};

struct discovery {
	enum runtime_kind kind;
	/* every file the target maps executable, held open: the paths below are theirs */
	struct target_files files;
	struct probe_site *sites;	/* USDT: one per (file, probe name) */
	size_t nr;
	/* USDT: each probe's arguments, if all its sites agree (known) */
	struct at_usdt_spec specs[AT_USDT_NR_PROBES];
	unsigned int specs_seen;	/* bits by probe */
	/*
	 * USDT: where sample mode reads each worker's asynctrace_current from:
	 * the address of asynctrace_current_tpoff in the target (0: the
	 * executor keeps none; docs/usdt-abi.md)
	 */
	uint64_t usdt_current;
	struct tokio_binary tokio;	/* TOKIO */
	size_t scanned;			/* ELF files looked at */
	struct image_cache *images;	/* files known to hold nothing (NULL: none) */
	/* no runtime found, and the executable is stripped Rust: tokio may be
	 * in it, but only symbols would show it (src/targets/elf_image.h) */
	bool stripped;
	/*
	 * GO, or no runtime found in a Go program (a layout this version does
	 * not know): its version and what was found of its runtime
	 */
	bool is_go;
	struct go_binary go;
	int go_err;			/* golang__detect()'s: 0, or what it lacked */
	char *go_path, *go_target_path;	/* GO: its binary, as for tokio */
	struct go_probe go_rets[GO_RETS];	/* GO: newproc1's returns */
	int nr_go_rets;				/* ... how many; -errno: not found */
	struct go_probe go_entries[GO_ENTRY_PROBES];
	/*
	 * GO: the calls of runtime.casgstatus probed (at_go_change() needs
	 * them; go_site_at: their file offsets), rather than its entry; how many
	 * calls were let be (system calls' changes, ones the probes ignore).
	 * nr_go_sites -errno: its entry is probed (--probe-at entry, or its
	 * calls not read).
	 */
	/*
	 * GO: where in runqsteal only a steal that took something goes (said
	 * empty: not found, or --probe-at entry: its entry is probed, every
	 * attempt with it)
	 */
	struct go_probe go_steal_taken;
	struct go_status_site go_sites[GO_STATUS_SITES];
	uint64_t go_site_at[GO_STATUS_SITES];
	int nr_go_sites;
	uint32_t go_sites_skipped;
	uint64_t go_bias;		/* GO: its addresses in the target less link-time ones (PIE) */
	struct target_mapping go_map;
	const struct probe_rules *rules; /* where the kernel lets probes go (probe_rules.h) */
	bool probe_at_entry;		/* --probe-at entry: Go's probes on the entries */
	bool verbose;			/* say why a file was skipped */
	/* told of each file before it is read (NULL: not) */
	void (*reading)(void *ctx, size_t file);
	void *reading_ctx;
};

/* Scans every ELF file the target maps executable; 0 or -errno. */
int discover(struct discovery *d, const struct target *t);
/* The same in the files d->files, already open, of process pid. */
int discover_files(struct discovery *d, pid_t pid);
bool discovered(const struct discovery *d, const char *probe);
void discovery__free(struct discovery *d);
/* The address in the target of a file offset of the tokio binary. */
uint64_t discovery__tokio_addr(const struct discovery *d, uint64_t offset);

#endif
