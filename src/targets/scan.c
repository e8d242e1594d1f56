// SPDX-License-Identifier: MIT
#include "targets/scan.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CGROUP2_MOUNT "/sys/fs/cgroup"

static int compile(regex_t *re, const char *what, const char *pattern, char *err,
		   size_t err_len)
{
	char why[128];
	int ret = regcomp(re, pattern, REG_EXTENDED | REG_NOSUB);

	if (!ret)
		return 0;
	regerror(ret, re, why, sizeof(why));
	snprintf(err, err_len, "%s '%s' is not a regular expression: %s", what, pattern, why);
	return -EINVAL;
}

int scan_filter__init(struct scan_filter *f, const char *comm, const char *exclude,
		      const char *cgroup, char *err, size_t err_len)
{
	size_t len;

	memset(f, 0, sizeof(*f));
	if (comm) {
		if (compile(&f->comm, "--comm", comm, err, err_len))
			return -EINVAL;
		f->comm_set = true;
	}
	if (exclude) {
		if (compile(&f->exclude, "--exclude-comm", exclude, err, err_len)) {
			scan_filter__free(f);
			return -EINVAL;
		}
		f->exclude_set = true;
	}
	if (cgroup) {
		if (!strncmp(cgroup, CGROUP2_MOUNT "/", sizeof(CGROUP2_MOUNT)))
			cgroup += sizeof(CGROUP2_MOUNT) - 1;
		else if (!strcmp(cgroup, CGROUP2_MOUNT))
			cgroup = "/";
		/* "/a/b", whatever the slashes given */
		if (asprintf(&f->cgroup, "%s%s", cgroup[0] == '/' ? "" : "/", cgroup) < 0) {
			f->cgroup = NULL;
			scan_filter__free(f);
			return -ENOMEM;
		}
		len = strlen(f->cgroup);
		while (len > 1 && f->cgroup[len - 1] == '/')
			f->cgroup[--len] = '\0';
	}
	return 0;
}

void scan_filter__free(struct scan_filter *f)
{
	if (f->comm_set)
		regfree(&f->comm);
	if (f->exclude_set)
		regfree(&f->exclude);
	free(f->cgroup);
	memset(f, 0, sizeof(*f));
}

bool scan__cgroup_in(FILE *cgroups, const char *want)
{
	char line[4096];
	size_t n = strlen(want);
	bool in = false;

	while (!in && fgets(line, sizeof(line), cgroups)) {
		const char *cg;

		line[strcspn(line, "\n")] = '\0';
		if (strncmp(line, "0::", 3))
			continue; /* a cgroup v1 hierarchy */
		cg = line + 3;
		in = !strcmp(want, "/") ||
		     (!strncmp(cg, want, n) && (cg[n] == '\0' || cg[n] == '/'));
	}
	return in;
}

/* Whether the process's cgroup v2 path ("0::/a/b") lies in the subtree at want. */
static bool in_cgroup(pid_t pid, const char *want)
{
	char path[64];
	bool in;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/cgroup", pid);
	f = fopen(path, "re");
	if (!f)
		return false;
	in = scan__cgroup_in(f, want);
	fclose(f);
	return in;
}

int scan__stat_ppid(const char *stat, pid_t *ppid)
{
	/* "pid (comm) state ppid ...": comm may hold anything, ')' too */
	const char *close_paren = strrchr(stat, ')');

	return close_paren && sscanf(close_paren + 1, " %*c %d", ppid) == 1 ? 0 : -EINVAL;
}

/*
 * Whether pid is ancestor or one of its descendants (its parents, up
 * /proc/PID/stat). We may be the child subreaper of ancestor's tree (run
 * --follow-children): a process whose parent is us, other than ancestor,
 * is an orphan of that tree.
 */
static bool descends_from(pid_t pid, pid_t ancestor)
{
	pid_t self = getpid();

	for (int depth = 0; pid > 1 && depth < 256; depth++) {
		char path[64], buf[512];
		ssize_t n;
		int fd;

		if (pid == ancestor || (depth && pid == self))
			return true;
		snprintf(path, sizeof(path), "/proc/%d/stat", pid);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			return false;
		n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (n <= 0)
			return false;
		buf[n] = '\0';
		if (scan__stat_ppid(buf, &pid))
			return false;
	}
	return pid == ancestor;
}

bool scan_filter__match(const struct scan_filter *f, pid_t pid, const char *comm)
{
	if (f->ancestor && !descends_from(pid, f->ancestor))
		return false;
	if (f->comm_set && regexec(&f->comm, comm, 0, NULL, 0))
		return false;
	if (f->exclude_set && !regexec(&f->exclude, comm, 0, NULL, 0))
		return false;
	return !f->cgroup || in_cgroup(pid, f->cgroup);
}

/* What process pid runs now: its executable's device and inode, never 0; 0 if gone. */
static uint64_t exe_identity(pid_t pid)
{
	char path[64];
	struct stat st;

	snprintf(path, sizeof(path), "/proc/%d/exe", pid);
	if (stat(path, &st))
		return 0;
	return ((uint64_t)st.st_dev << 40 ^ (uint64_t)st.st_ino) | 1;
}

/* Process pid, running id: fn if seen did not know it so and the filter lets it through. */
static int look_at(const struct scan_filter *f, const struct u64map *seen, pid_t pid,
		   uint64_t id, scan_new_fn fn, void *ctx)
{
	char comm[TARGET_COMM_LEN];

	if ((uintptr_t)u64map__get(seen, (uint64_t)pid) == id)
		return 0;
	if (target__comm(pid, comm, sizeof(comm)) || !scan_filter__match(f, pid, comm))
		return 0;
	return fn(ctx, pid, comm);
}

int scan__process(const struct scan_filter *f, struct u64map *seen, pid_t pid, scan_new_fn fn,
		  void *ctx)
{
	uint64_t id = exe_identity(pid);
	int err;

	if (!id || pid == getpid())
		return 0;
	err = look_at(f, seen, pid, id, fn, ctx);
	if (!err)
		err = u64map__set(seen, (uint64_t)pid, (void *)(uintptr_t)id);
	return err;
}

int scan__new_processes(const struct scan_filter *f, struct u64map *seen, scan_new_fn fn,
			void *ctx)
{
	DIR *dir = opendir("/proc");
	struct u64map now;
	struct dirent *de;
	pid_t self = getpid();
	int err = 0;

	if (!dir)
		return -errno;
	u64map__init(&now);
	while (!err && (de = readdir(dir))) {
		char *end;
		long pid = strtol(de->d_name, &end, 10);
		uint64_t id;

		if (*end || pid <= 0 || pid == self)
			continue;
		id = exe_identity((pid_t)pid);
		if (!id)
			continue; /* gone, or a kernel thread */
		err = u64map__set(&now, (uint64_t)pid, (void *)(uintptr_t)id);
		if (!err)
			err = look_at(f, seen, (pid_t)pid, id, fn, ctx);
	}
	closedir(dir);
	/* the processes gone are forgotten: the map holds the host's processes, no more */
	u64map__clear(seen);
	*seen = now;
	return err;
}
