/* SPDX-License-Identifier: MIT */
/*
 * Following the host, processes are examined on a thread of their own:
 * reading a big binary's symbols (tokio's are found by them) takes a while,
 * and the session's loop must go on draining the rings and sampling the
 * maps of the processes it already traces. The loop asks for pids; the
 * thread opens each and finds its runtime (traced__examine, quietly), and
 * hands the result back through a queue and an eventfd the loop polls.
 */
#ifndef EXAMINER_H
#define EXAMINER_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "session/traced.h"

struct examiner;

int examiner__new(struct examiner **e, struct session *s, const struct examine_opts *o);
/* Stops the thread (once its examination in hand is done) and frees what is left. */
void examiner__free(struct examiner *e);
/* Asks for process pid to be examined; a pid asked already and not yet taken is not asked again. */
int examiner__ask(struct examiner *e, pid_t pid);
/* An fd that polls readable when examined processes wait to be taken. */
int examiner__fd(const struct examiner *e);
/*
 * The next process examined: true, with *tr its traced state (NULL when it
 * runs no known runtime, is gone, or could not be read) and *pid; false
 * when none waits.
 */
bool examiner__take(struct examiner *e, pid_t *pid, struct traced **tr);
/* Processes asked for and not yet taken. */
size_t examiner__pending(struct examiner *e);

#endif
