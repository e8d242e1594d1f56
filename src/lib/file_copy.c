// SPDX-License-Identifier: MIT
#include "lib/file_copy.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int file_copy__read(struct file_copy *fc, const char *path, size_t max)
{
	struct stat st;
	size_t got = 0;
	int fd, err = 0;

	memset(fc, 0, sizeof(*fc));
	fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
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
