/* SPDX-License-Identifier: MIT */
/*
 * Least privilege once attached. asynctraced needs root (or CAP_SYS_ADMIN,
 * docs/security.md) to load and attach its programs, and nothing after: the
 * loop reads rings and maps through descriptors it already holds, the
 * target's memory through a mem file opened before, thread names from
 * world-readable /proc files, and writes outputs opened before; detaching is
 * closing descriptors. So once attached it drops every capability (but
 * CAP_SYS_PTRACE where the target's strings need it, target.h) and sets
 * no_new_privs, and (unless --no-sandbox) lets only the system calls that
 * loop and the shutdown make through a seccomp filter. A call the filter
 * refuses fails with EPERM, is named on stderr at once and counted, and
 * makes the exit status 1.
 */
#ifndef SANDBOX_H
#define SANDBOX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <seccomp.h>

/*
 * Tracing programs need CAP_BPF and CAP_PERFMON (or CAP_SYS_ADMIN, which
 * Linux takes for both). That is all uprobe_multi links need, and every
 * probe is one where the kernel has them (6.6). Before, a uprobe is a perf
 * event, which Linux creates only for CAP_SYS_ADMIN (the 2025 kernel change
 * "perf: Require CAP_SYS_ADMIN for uprobes", also in stable kernels).
 */
#define SANDBOX_CAPS_NEEDED "CAP_BPF and CAP_PERFMON, or CAP_SYS_ADMIN"

/* Whether we hold capability cap (CAP_*) in our effective set. */
bool sandbox__has_cap(int cap);
/* Whether we hold SANDBOX_CAPS_NEEDED. */
bool sandbox__privileged(void);

/*
 * Drops every capability but those in keep (a bit for each capability's
 * number) that we have: effective, permitted, inheritable, ambient, and the
 * bounding set when we may. Sets no_new_privs. 0 or -errno.
 */
int sandbox__drop_privileges(uint64_t keep);

/* What the filter lets through besides the loop's own calls. */
#define SANDBOX_SERVE 1	/* answering HTTP on a socket bound before (--metrics) */
#define SANDBOX_DUMPS 2	/* files made, renamed, removed in one directory (dirfd: --dump-dir) */
#define SANDBOX_STACKS 4 /* samples unwound by an analyser (pid analyser), talked to (--stacks) */
#define SANDBOX_CHILD 8	/* run: its command (child) let go, waited for, signalled */
#define SANDBOX_ATTACH 16 /* --escalate: probes attached (bpf link_create), detached (close) */

/* A filter's rules for memory that never becomes executable: nothing new runs. */
int sandbox__allow_memory(scmp_filter_ctx ctx);

/* The seccomp allowlist, for this thread and every other. 0 or -errno. */
int sandbox__filter(unsigned flags, int dirfd, pid_t child, pid_t analyser);

/* How many calls the filter refused; their names into buf, "openat x2, ...". */
unsigned long sandbox__refused(char *buf, size_t len);
/*
 * At the end: one line that sums up the calls the filter refused (each was
 * said when refused), if any. Whether there were any: the exit status is 1.
 */
bool sandbox__say_refused(void);

#endif
