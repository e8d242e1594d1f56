/* SPDX-License-Identifier: MIT */
#ifndef SE_SEMAPHORES_H
#define SE_SEMAPHORES_H

/*
 * How many tracers have attached every asynctrace probe (all 7): the
 * smallest of the 7 semaphores, since each attached uprobe adds one.
 */
unsigned probes_attached(void);

#endif /* SE_SEMAPHORES_H */
