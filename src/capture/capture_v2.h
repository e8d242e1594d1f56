/* SPDX-License-Identifier: MIT */
/*
 * Captures of format versions 1 and 2, read by this version's reader
 * (capture.c). Their record header was 16 bytes: kind, size, tid, ts, with
 * no pid, since a capture held one process. Version 3's header adds the pid
 * (struct at_hdr); every other field of every record is where it was,
 * 8 bytes further on, and a poll ends with cpu_ns. Here an old record is
 * widened to the new layout, with the pid of the capture's process.
 */
#ifndef CAPTURE_V2_H
#define CAPTURE_V2_H

#include <stddef.h>
#include <stdint.h>

#include "capture/capture.h"

/* The record header of versions 1 and 2. */
#define CAPTURE_V2_HDR_SIZE 16

/*
 * A whole version 1 or 2 record (size >= CAPTURE_V2_HDR_SIZE bytes at rec)
 * written in out (at least size + CAPTURE_V2_GROWTH bytes) as version 3's:
 * its header, and that of a wake riding in a poll record, take the pid
 * (the process record's own pid for itself; 0 for ticks and the end, which
 * are about the session), and a poll takes at_poll.cpu_ns, not known.
 * Returns the new size, or 0 when it would not fit a record's 16-bit size.
 */
#define CAPTURE_V2_GROWTH 24
size_t capture_v2__widen(const void *rec, size_t size, uint32_t pid, void *out);

#endif
