/* SPDX-License-Identifier: MIT */
#ifndef SE_SEMAPHORES_H
#define SE_SEMAPHORES_H

/* Nonzero once every asynctrace probe (all 7) has a tracer attached. */
unsigned probes_attached(void);

#endif /* SE_SEMAPHORES_H */
