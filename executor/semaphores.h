/* SPDX-License-Identifier: MIT */
#ifndef SE_SEMAPHORES_H
#define SE_SEMAPHORES_H

#include <stdbool.h>

/* True once a tracer has attached every asynctrace probe (all 7). */
bool probes_all_attached(void);

#endif /* SE_SEMAPHORES_H */
