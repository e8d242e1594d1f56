/* SPDX-License-Identifier: MIT */
/* Prints alerts as they are raised, one line each, on a stream (stderr). */
#ifndef ALERTS_H
#define ALERTS_H

#include <stdio.h>

#include "sink.h"

int alert_printer__new(struct sink **s, FILE *out);
/* One alert as a line of text, without the newline. */
void alert__format(char *buf, size_t size, const struct model *m, const struct alert *a);

#endif
