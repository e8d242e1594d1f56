/* SPDX-License-Identifier: MIT */
/*
 * The flight recorder (--flight-recorder SECONDS): the last records of every
 * traced process, kept in a bounded memory ring, the oldest going first.
 * When an alert episode begins (and on SIGUSR2) the window around it, the
 * SECONDS before and a few after, is written as a Perfetto protobuf trace
 * into --dump-dir: replayed through a pipeline of its own, with the names
 * the live model knows. Dumps are rate-limited per process, and the
 * directory is capped in size: the oldest dump goes, never a file
 * asynctraced did not write (asynctraced-*.pftrace).
 */
#ifndef FLIGHT_H
#define FLIGHT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pipeline/detect.h"
#include "pipeline/model.h"

struct flight_opts {
	uint64_t window_ns;	/* kept before the alert */
	uint64_t after_ns;	/* written after it */
	uint64_t min_gap_ns;	/* between two dumps of one process */
	uint64_t max_bytes;	/* the ring's memory */
	uint64_t dir_max_bytes;	/* the dumps' total in the directory */
	const char *dir;
	struct detect_config detect; /* the dump's own detectors: its alerts in its trace */
	uint64_t sample_period_ns;	/* sample mode's (0: probe mode), for those detectors */
};

struct flight;

/* 0, or -errno said on stderr (the directory missing or not writable). */
int flight__new(struct flight **f, const struct flight_opts *o);
void flight__free(struct flight *f);
/* The directory's fd: the sandbox lets files be made there, and nowhere else. */
int flight__dirfd(const struct flight *f);
/* Keeps a record (a ring buffer record or a sample), in the order they come. */
void flight__record(struct flight *f, const void *rec, size_t size);
/*
 * Process pid's alert of kind began at ts (its clock): its dump is due
 * after_ns later (0: the recorder's own after_ns). Fills path with the
 * dump's file and returns true; false (path empty) if one of pid's dumps
 * was written less than min_gap_ns ago or is still due.
 */
bool flight__alert(struct flight *f, uint32_t pid, const char *kind, uint64_t ts,
		   uint64_t after_ns, char *path, size_t len);
/* SIGUSR2: pid's window up to now, due at once, whatever the rate limit. */
void flight__request(struct flight *f, uint32_t pid, uint64_t now, char *path, size_t len);
/*
 * Writes every dump due by now (all of pid's now, if pid is nonzero: the
 * process is ending). live(ctx, pid) gives the live model of a process (its
 * names, comm, clock), NULL if gone.
 */
typedef const struct model *(*flight_live_fn)(void *ctx, uint32_t pid);
void flight__tick(struct flight *f, uint64_t now, uint32_t pid, flight_live_fn live, void *ctx);

#endif
