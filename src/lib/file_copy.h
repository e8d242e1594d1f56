/* SPDX-License-Identifier: MIT */
/*
 * A file someone else controls (a traced program's executable, its
 * libraries), read whole into our own memory before anything parses it.
 * Not mapped: the file's owner can truncate a mapped file under the
 * parser, which then dies of SIGBUS at the first page past the new end;
 * a copy can only be what the file held when it was read. Opened with
 * O_NONBLOCK and taken only if it is a regular file (a FIFO or a device
 * swapped in at its path neither blocks nor feeds the parser), and only up
 * to a size, so that a huge file cannot take the tracer's memory. A copy
 * is anonymous memory, where a uprobe never puts a breakpoint (Linux puts
 * one into every private mapping of a probed file, a reader's too).
 */
#ifndef FILE_COPY_H
#define FILE_COPY_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* The largest file read: a Go or Rust server's executable is tens of MB. */
#define FILE_COPY_MAX ((size_t)512 << 20)

struct file_copy {
	uint8_t *data;		/* malloc'd, size bytes */
	size_t size;		/* what was read: less than its size when it shrank meanwhile */
	dev_t dev;		/* which file it was */
	ino_t ino;
};

/*
 * Reads the regular file at path, at most max bytes. 0; -errno opening or
 * reading; -ENOEXEC when it is not a regular file or is empty (no ELF file
 * either); -EFBIG when it is larger than max.
 */
int file_copy__read(struct file_copy *fc, const char *path, size_t max);
void file_copy__free(struct file_copy *fc);

#endif
