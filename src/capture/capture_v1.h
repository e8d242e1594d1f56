/* SPDX-License-Identifier: MIT */
/*
 * Captures of format version 1, read by this version's reader (capture.c).
 * Version 1 had no chunks (its records ran to the end of the file, without
 * checksums: the reader takes them as one unchecked chunk), and numbered the
 * BPF side's counters from AT_EV_KIND_MAX, so that appending an event kind
 * renumbered them all. Its records' layouts are version 2's (pinned in
 * capture.h): only its counters are translated here.
 */
#ifndef CAPTURE_V1_H
#define CAPTURE_V1_H

#include <stddef.h>

#include "capture/capture.h"

/* What a translated record may take: the runtime record with every counter. */
#define CAPTURE_V1_MAX_TRANSLATED 512
_Static_assert(sizeof(struct cap_runtime_stats) + AT_STAT_NR * sizeof(uint64_t) <=
		       CAPTURE_V1_MAX_TRANSLATED,
	       "room for a runtime record with every counter");

/*
 * A whole, checked version 1 record as version 2's: rec itself, or its
 * translation in out (*size updated). out: CAPTURE_V1_MAX_TRANSLATED bytes.
 */
const void *capture_v1__translate(const void *rec, size_t *size, void *out);

#endif
