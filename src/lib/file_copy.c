// SPDX-License-Identifier: MIT
#include "lib/file_copy.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/*
 * "/proc/self/fd/N", a file we hold open, is read through that descriptor
 * (a copy of it) rather than opened again: opening it again checks its mode
 * against our user, and the analyser, running as nobody, may hold a file
 * it could not open (docs/security.md). Anything else is opened.
 */
static int open_file(const char *path)
{
	const char *held = "/proc/self/fd/";
	char *end;
	long fd;

	if (!strncmp(path, held, strlen(held))) {
		fd = strtol(path + strlen(held), &end, 10);
		if (end != path + strlen(held) && !*end && fd >= 0 && fd <= INT32_MAX)
			return fcntl((int)fd, F_DUPFD_CLOEXEC, 0);
	}
	return open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
}

int file_copy__read(struct file_copy *fc, const char *path, size_t max)
{
	struct stat st;
	size_t got = 0;
	int fd, err = 0;

	memset(fc, 0, sizeof(*fc));
	fd = open_file(path);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st))
		err = -errno;
	else if (!S_ISREG(st.st_mode) || st.st_size <= 0)
		err = -ENOEXEC;
	else if ((uint64_t)st.st_size > max)
		err = -EFBIG;
	else if (!(fc->data = malloc((size_t)st.st_size)))
		err = -ENOMEM;
	while (!err && got < (size_t)st.st_size) {
		ssize_t n = pread(fd, fc->data + got, (size_t)st.st_size - got, (off_t)got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			err = -errno;
		else if (n == 0)
			break; /* it shrank since fstat: what it holds now is all there is */
		else
			got += (size_t)n;
	}
	close(fd);
	if (!err && !got)
		err = -ENOEXEC;
	if (err) {
		file_copy__free(fc);
		return err;
	}
	fc->size = got;
	fc->dev = st.st_dev;
	fc->ino = st.st_ino;
	return 0;
}

void file_copy__free(struct file_copy *fc)
{
	free(fc->data);
	memset(fc, 0, sizeof(*fc));
}
