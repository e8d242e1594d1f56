/* SPDX-License-Identifier: MIT */
/*
 * One process a session traces: the process through /proc, the runtime
 * found in it, and its pipeline (model -> detectors -> sinks) with the
 * sampler that feeds it the BPF side's maps. traced.c attaches it, feeds
 * its records to it, ends it and lets it go.
 */
#ifndef TRACED_H
#define TRACED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "lib/u64map.h"
#include "pipeline/pipeline.h"
#include "source/attach.h"
#include "source/sampler.h"
#include "source/stats.h"
#include "targets/discover.h"
#include "targets/target.h"

struct session;

struct traced {
	struct session *s;
	struct target target;
	struct discovery disc;
	struct pipeline pipe;
	struct sampler sampler;
	struct stats snap;
	struct attach_counts probes;	/* where the tokio probes went */
	uint64_t start;		/* its time zero: just before its probes were attached */
	uint64_t exited;	/* when it was seen to exit; 0 while it runs */
	bool piped;		/* its pipeline is set up (and freed with it) */
	struct u64map dumps;	/* flight recorder: alert episode -> its dump's path */
	/* --escalate: its probes attached until then (0: not now); none again before next */
	uint64_t escalated_until, next_escalation;
	uint32_t escalations;
	bool said_suspect;	/* sample mode, no --escalate: a tokio run that may hide a long poll, said */
	uint64_t *files;	/* following the host: the shared files it holds a share of */
	size_t nr_files;
	/* tokio primed before its runtime ran: its threads, read again until its list is found */
	struct thread_ptrs *threads;
};

struct examine_opts {
	bool verbose;			/* say why each file was skipped */
	bool remember;			/* files found to hold no runtime are remembered */
	const struct probe_rules *rules; /* the kernel's, for probe placement */
	bool probe_at_entry;		/* --probe-at entry */
};

/*
 * Opens process pid and finds its runtime, into a new struct traced of
 * session s. 0, or -errno after a message; quiet: no message for a process
 * gone or without a known runtime (following the host, most are that).
 */
int traced__examine(struct traced **tr, struct session *s, pid_t pid,
		    const struct examine_opts *o, bool quiet);
void traced__free(struct traced *tr);

#endif
