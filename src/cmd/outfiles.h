/* SPDX-License-Identifier: MIT */
/* The files a command line names (outfiles.c). */
#ifndef OUTFILES_H
#define OUTFILES_H

#include <stdio.h>

#include "cmd/options.h"

/* --format's word: FORMAT_JSON, FORMAT_PERFETTO, or FORMAT_AUTO when it is neither. */
enum trace_format outfiles__format_named(const char *word);
/* The trace's format from its name when --format did not say: 0, or EXIT_USAGE after a message. */
int outfiles__trace_format(struct outputs_opts *out);
/* Two files o names are one, and one of them is written: EXIT_USAGE after a message; else 0. */
int outfiles__distinct(const struct options *o);
/* The help's list of trace formats, by the ends of names. */
void outfiles__print_names(FILE *f);

#endif
