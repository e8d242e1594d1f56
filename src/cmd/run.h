/* SPDX-License-Identifier: MIT */
/*
 * asynctraced run [options] -- CMD [ARGS...]: the CI gate. Starts CMD held
 * at its entry point (launch.h), traces it (session.h) until it exits, then
 * judges the run by the gates asked for (gate.h).
 */
#ifndef RUN_H
#define RUN_H

#include "cmd/options.h"

/*
 * The exit status: CMD's when it failed, else the gates' (docs/cli.md).
 * user_umask: the umask asynctraced was started with, CMD's.
 */
int run__main(struct options *o, mode_t user_umask);

#endif
