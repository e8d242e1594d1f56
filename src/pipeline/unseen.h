/* SPDX-License-Identifier: MIT */
/*
 * What sample mode cannot see (docs/modes.md), in one place: the report's
 * "unseen" list and its mode line, the gate's verdict on a gate of one of
 * them, the metrics families a sampled process has no series of. Each is
 * named as the summary's JSON lists it; its words are what people read.
 * Some are one runtime's: tokio keeps no poll counter and no queue length
 * the samples could read.
 */
#ifndef UNSEEN_H
#define UNSEEN_H

#include <stdbool.h>
#include <stddef.h>

#include "pipeline/detect.h"

struct unseen {
	const char *name;	/* in a summary's "unseen" list: "wake_delays" */
	const char *words;	/* said: "wake-to-poll delays" */
	const char *under;	/* the item it comes from ("wakes"), NULL for none */
	const char *runtime;	/* only this runtime's ("tokio"); NULL: every runtime's */
};

extern const struct unseen unseen_by_samples[];
extern const size_t nr_unseen_by_samples;

/* Whether name is one of the items. */
bool unseen__known(const char *name);
/*
 * Whether sample mode does not see item u (or the item called name) in a
 * process of runtime (say__runtime_name()'s; NULL: not known, the items of
 * every runtime only).
 */
bool unseen__applies(const struct unseen *u, const char *runtime);
bool unseen__for(const char *name, const char *runtime);
/* The words of the item called name (name itself if it is none). */
const char *unseen__words(const char *name);
/*
 * The item an alert kind stands on, where samples may not see it (in some
 * runtime: a summary's "unseen" list says); NULL if they always do.
 */
const char *unseen__alert(enum alert_kind k);

#endif
