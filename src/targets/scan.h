/* SPDX-License-Identifier: MIT */
/*
 * The processes of the host, as following it goes: every process under
 * /proc, narrowed by its name (--comm, --exclude-comm) and its cgroup
 * (--cgroup: a systemd unit or a container), each told once until it runs
 * another executable; what it runs is examined elsewhere (traced.c, with
 * an image cache, so that files already found empty cost a stat).
 */
#ifndef SCAN_H
#define SCAN_H

#include <regex.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

#include "lib/u64map.h"
#include "targets/target.h"

struct scan_filter {
	bool comm_set, exclude_set;
	regex_t comm;		/* the name must match (extended regex) */
	regex_t exclude;	/* ... and must not match */
	char *cgroup;		/* a cgroup v2 path: that subtree only; NULL: any */
	pid_t ancestor;		/* that process and its descendants only; 0: any */
};

/*
 * Compiles the filter; NULL for what is not given. cgroup: as
 * /proc/PID/cgroup says it ("/system.slice/x.service"), or under the
 * cgroup2 mount ("/sys/fs/cgroup/system.slice/x.service"). 0, or -EINVAL
 * with what is wrong in err.
 */
int scan_filter__init(struct scan_filter *f, const char *comm, const char *exclude,
		      const char *cgroup, char *err, size_t err_len);
void scan_filter__free(struct scan_filter *f);
/* Whether process pid, named comm, passes the filter. */
bool scan_filter__match(const struct scan_filter *f, pid_t pid, const char *comm);

/*
 * What the filter reads of /proc, apart for the fuzzer (tests/fuzz/fuzz_proc.c).
 * Whether a /proc/PID/cgroup file puts its process in the cgroup v2 subtree
 * at want ("/a/b": "0::/a/b" and "0::/a/b/c" are in it, "0::/a/bc" is not).
 */
bool scan__cgroup_in(FILE *cgroups, const char *want);
/* The parent's pid in the text of a /proc/PID/stat file: 0, or -EINVAL. */
int scan__stat_ppid(const char *stat, pid_t *ppid);

/* A process scan__new_processes found: 0 to go on, or -errno to stop. */
typedef int (*scan_new_fn)(void *ctx, pid_t pid, const char *comm);
/*
 * Calls fn for each process that passes f and that seen does not know as
 * running what it runs now (a new pid, or an exec since); seen is then the
 * host's processes, each with what it runs (pid -> executable identity:
 * start with an empty u64map, free it with u64map__clear). A process looked
 * at once costs a stat of its /proc/PID/exe at each later scan. 0, or -errno.
 */
int scan__new_processes(const struct scan_filter *f, struct u64map *seen, scan_new_fn fn,
			void *ctx);
/* The same for one process (one that exec'd, or was forked): fn if new to seen. */
int scan__process(const struct scan_filter *f, struct u64map *seen, pid_t pid, scan_new_fn fn,
		  void *ctx);

#endif
