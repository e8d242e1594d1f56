// SPDX-License-Identifier: MIT
#include "targets/target.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "lib/u64map.h"
#include "targets/images.h"

static int read_line(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "re");
	int err = 0;

	if (!f)
		return -errno;
	if (!fgets(buf, (int)len, f))
		err = -EIO;
	else
		buf[strcspn(buf, "\n")] = '\0';
	fclose(f);
	return err;
}

int target__comm(pid_t pid, char *comm, size_t len)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d/comm", pid);
	return read_line(path, comm, len);
}

int target__open(struct target *t, pid_t pid)
{
	struct stat st;
	char path[64];
	int err;

	memset(t, 0, sizeof(*t));
	t->pid = pid;
	t->pidfd = -1;
	t->memfd = -1;
	if (pid <= 0)
		return -ESRCH;
	if (kill(pid, 0) && errno == ESRCH)
		return -ESRCH;
	err = target__comm(pid, t->comm, sizeof(t->comm));
	if (err)
		return err == -ENOENT ? -ESRCH : err;
	snprintf(t->exe, sizeof(t->exe), "/proc/%d/exe", pid);
	if (!stat(t->exe, &st)) {
		t->exe_dev = st.st_dev;
		t->exe_ino = st.st_ino;
	}
	t->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (t->pidfd < 0)
		return errno == ESRCH ? -ESRCH : -errno;
	/*
	 * The kernel checks the right to read another process's memory when
	 * its mem file is opened, not at each read: opened now, while we may,
	 * it still reads once the capabilities are dropped (sandbox.h).
	 */
	snprintf(path, sizeof(path), "/proc/%d/mem", pid);
	t->memfd = open(path, O_RDONLY | O_CLOEXEC);
	return 0;
}

void target__close(struct target *t)
{
	if (t->pidfd >= 0)
		close(t->pidfd);
	if (t->memfd >= 0)
		close(t->memfd);
	t->pidfd = -1;
	t->memfd = -1;
}

/*
 * A pidfd turns readable when its process exits. Asking whether it can be
 * signalled (signal 0) would not do: a live process of another user answers
 * EPERM to a tracer without CAP_KILL, which is not an exit.
 */
int target__alive(const struct target *t)
{
	struct pollfd p = { .fd = t->pidfd, .events = POLLIN };

	return poll(&p, 1, 0) == 0;
}

bool target__same_program(const struct target *t)
{
	struct stat st;

	if (!target__alive(t))
		return false;
	if (!t->exe_ino) /* not ours to look at then: its maps were not read either */
		return true;
	if (stat(t->exe, &st))
		return false;
	return st.st_dev == t->exe_dev && st.st_ino == t->exe_ino;
}

int target__thread_comm(void *target, uint32_t tid, char *comm, size_t len)
{
	const struct target *t = target;
	char path[96];

	snprintf(path, sizeof(path), "/proc/%d/task/%u/comm", t->pid, tid);
	return read_line(path, comm, len);
}

static ssize_t read_mem(const struct target *t, char *buf, size_t len, uint64_t addr)
{
	struct iovec local = { buf, len };
	struct iovec remote = { (void *)(uintptr_t)addr, len };

	if (t->memfd >= 0)
		return pread(t->memfd, buf, len, (off_t)addr);
	return process_vm_readv(t->pid, &local, 1, &remote, 1, 0);
}

int target__read_str(void *target, uint64_t addr, char *buf, size_t len)
{
	const struct target *t = target;
	size_t got = 0;

	if (!addr || !len)
		return -EINVAL;
	/* Page by page: a string may end just before an unmapped page. */
	while (got < len - 1) {
		size_t room = 4096 - ((addr + got) & 4095);
		size_t want = room < len - 1 - got ? room : len - 1 - got;
		ssize_t n = read_mem(t, buf + got, want, addr + got);

		if (n <= 0) {
			if (!got)
				return -errno;
			buf[got] = '\0'; /* what was readable, up to an unmapped page */
			return 0;
		}
		if (memchr(buf + got, '\0', (size_t)n))
			return 0;
		got += (size_t)n;
	}
	buf[len - 1] = '\0';
	return 0;
}

/* A file met, by (device, inode); next: another in the same bucket of the hash. */
struct seen {
	dev_t dev;
	ino_t ino;
	struct seen *next;
};

/*
 * 1 if this file was met before, 0 if not (and remembers it), -ENOMEM. A
 * hash of them: a process can map tens of thousands of files, and each was
 * compared with every one before.
 */
static int seen_before(struct u64map *seen, const struct stat *st)
{
	uint64_t key = image__key(st);
	struct seen *head = u64map__get(seen, key), *s;

	for (s = head; s; s = s->next)
		if (s->dev == st->st_dev && s->ino == st->st_ino)
			return 1;
	s = malloc(sizeof(*s));
	if (!s)
		return -ENOMEM;
	*s = (struct seen){ .dev = st->st_dev, .ino = st->st_ino, .next = head };
	if (u64map__set(seen, key, s)) {
		free(s);
		return -ENOMEM;
	}
	return 0;
}

static void seen_free(struct u64map *seen)
{
	uint64_t key;
	void *val;

	for (size_t i = 0; u64map__next(seen, &i, &key, &val);)
		for (struct seen *s = val, *next; s; s = next) {
			next = s->next;
			free(s);
		}
	u64map__clear(seen);
}

int target__next_exec_mapping(FILE *maps, struct target_exec_mapping *m)
{
	char line[4352];

	while (fgets(line, sizeof(line), maps)) {
		char perms[8] = "";
		unsigned long start, end, offset;

		m->file[0] = '\0';
		m->inode = 0;
		if (sscanf(line, "%lx-%lx %7s %lx %*s %lu %4095[^\n]", &start, &end, perms, &offset,
			   &m->inode, m->file) < 4)
			continue;
		if (perms[2] != 'x' || m->file[0] != '/')
			continue;
		m->map = (struct target_mapping){ start, end, offset };
		return 1;
	}
	return 0;
}

/*
 * The file of mapping m, opened: the mapped file itself through map_files,
 * else its name under the target's root if that is a file of the inode the
 * mapping shows. -EACCES/-EPERM: not ours to reach; -ENOENT: neither.
 */
static int open_mapped(const struct target *t, const struct target_exec_mapping *m,
		       struct stat *st)
{
	const int flags = O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY;
	char path[4352];
	int fd, err;

	snprintf(path, sizeof(path), "/proc/%d/map_files/%lx-%lx", t->pid,
		 (unsigned long)m->map.start, (unsigned long)m->map.end);
	fd = open(path, flags);
	err = fd < 0 ? -errno : 0;
	if (fd < 0 && !strstr(m->file, " (deleted)")) {
		snprintf(path, sizeof(path), "/proc/%d/root%s", t->pid, m->file);
		fd = open(path, flags);
		if (fd >= 0 && (fstat(fd, st) || st->st_ino != m->inode)) {
			close(fd); /* renamed or replaced since it was mapped */
			fd = -1;
			errno = ENOENT;
		}
		err = fd < 0 && err != -EACCES && err != -EPERM ? -errno : err;
	}
	if (fd < 0)
		return err;
	if (fstat(fd, st) || !S_ISREG(st->st_mode)) {
		close(fd);
		return -ENOENT;
	}
	return fd;
}

static int add_file(struct target_files *fs, int fd, const struct stat *st,
		    const struct target_exec_mapping *m)
{
	struct target_file *f = realloc(fs->f, (fs->nr + 1) * sizeof(*f));

	if (!f)
		return -ENOMEM;
	fs->f = f;
	f += fs->nr;
	*f = (struct target_file){ .fd = fd, .map = m->map, .dev = st->st_dev, .ino = st->st_ino };
	snprintf(f->path, sizeof(f->path), "/proc/self/fd/%d", fd);
	f->target_path = strdup(m->file);
	if (!f->target_path)
		return -ENOMEM;
	fs->nr++;
	return 0;
}

int target__open_files(const struct target *t, struct target_files *fs)
{
	struct target_exec_mapping m;
	struct u64map seen;
	char maps[64];
	struct stat exe_st;
	int have_exe, err = 0;
	size_t reached = 0, denied = 0;
	FILE *f;

	*fs = (struct target_files){ .exe = -1 };
	snprintf(maps, sizeof(maps), "/proc/%d/maps", t->pid);
	f = fopen(maps, "re");
	if (!f)
		return errno == ENOENT ? -ESRCH : -errno;
	u64map__init(&seen);
	have_exe = stat(t->exe, &exe_st) == 0;
	while (!err && target__next_exec_mapping(f, &m)) {
		struct stat st;
		int fd = open_mapped(t, &m, &st);

		if (fd < 0) {
			denied += fd == -EACCES || fd == -EPERM;
			err = fd == -ENOMEM ? fd : 0;
			continue;
		}
		reached++;
		err = seen_before(&seen, &st);
		if (!err) {
			if (have_exe && exe_st.st_dev == st.st_dev && exe_st.st_ino == st.st_ino)
				fs->exe = (int)fs->nr;
			err = add_file(fs, fd, &st, &m);
			fd = err ? fd : -1;
		}
		err = err < 0 ? err : 0;
		if (fd >= 0)
			close(fd);
	}
	fclose(f);
	seen_free(&seen);
	/*
	 * Not one file reached, for want of the right to follow the target's
	 * links (another user's process, without CAP_SYS_PTRACE): saying that
	 * is better than "no runtime in 0 files".
	 */
	if (!err && !reached && denied)
		err = -EACCES;
	if (err)
		target_files__close(fs);
	return err;
}

void target_files__close(struct target_files *fs)
{
	for (size_t i = 0; i < fs->nr; i++) {
		close(fs->f[i].fd);
		free(fs->f[i].target_path);
	}
	free(fs->f);
	*fs = (struct target_files){ .exe = -1 };
}
