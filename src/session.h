/* SPDX-License-Identifier: MIT */
/* A tracing session: trace and record (session.c). */
#ifndef SESSION_H
#define SESSION_H

#include "options.h"

/* Runs trace or record as the options say; returns the exit status. */
int session__run(const struct options *o);

#endif
