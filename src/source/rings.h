/* SPDX-License-Identifier: MIT */
/*
 * The BPF side's per-CPU ring buffers, read as one stream in time order.
 *
 * Each CPU writes its own ring (no lock or cache line shared between
 * writers). Records in one ring come in the order they were made; across
 * rings, the reader merges them by the time each was made: its timestamp, or
 * for records written when something ends (a poll, a park) the end. A record
 * is only handed on once no ring can still produce an earlier one: every
 * ring has a later record waiting, or it is older than the `until` bound the
 * caller gives (now minus a margin for programs still running).
 */
#ifndef RINGS_H
#define RINGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct rings;

/* One record (header included); nonzero stops the read and is returned. */
typedef int (*rings_fn)(void *ctx, const void *rec, size_t size);

/* fds: n BPF ring buffer maps of size bytes each (a power of two). */
int rings__new(struct rings **rp, const int *fds, int n, size_t size, rings_fn fn, void *ctx);
/* Readable when a ring woke the reader: wait on it with epoll or poll. */
int rings__fd(const struct rings *rs);
/*
 * Hands on up to max records (0: no limit) in time order, none made after
 * until unless every ring has a later one waiting (UINT64_MAX: everything
 * written so far, once nothing writes any more). Returns the number handed
 * on, or a negative error (the callback's, or -EINVAL for a damaged ring).
 */
int rings__consume(struct rings *rs, size_t max, uint64_t until);
/* Whether any ring holds records not handed on yet (some may still be written). */
bool rings__pending(const struct rings *rs);
void rings__free(struct rings *rs);

#endif
