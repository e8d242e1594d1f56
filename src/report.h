/* SPDX-License-Identifier: MIT */
/* The summary printed when tracing ends. */
#ifndef REPORT_H
#define REPORT_H

#include <stdio.h>

#include "asynctraced.h"
#include "detect.h"
#include "model.h"

struct run_info {
	double seconds;		/* how long we traced */
	const char *end_reason;	/* "target exited", "interrupted", ... */
	uint64_t stats[AT_STAT_NR]; /* BPF-side counters: drops and misses */
};

void report__summary(FILE *out, const struct model *m, const struct detector *d,
		     const struct run_info *run);
/* Records the BPF side could not deliver, all kinds together. */
uint64_t report__dropped(const struct run_info *run);

#endif
