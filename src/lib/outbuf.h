/* SPDX-License-Identifier: MIT */
/*
 * A buffered writer for trace files: formats numbers and JSON strings by hand
 * (printf is the bottleneck of a trace writer) and remembers the first write
 * error, so callers check once, at flush time.
 */
#ifndef OUTBUF_H
#define OUTBUF_H

#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define OUTBUF_SIZE (1u << 20)

/*
 * In the open for the inline writers below (a trace writer calls them a few
 * dozen times an event); use the functions, never the fields.
 */
struct outbuf {
	int fd;
	int err;
	int refs;	/* holders: outbuf__get, each let go by outbuf__free */
	size_t len;
	uint64_t bytes;
	char buf[OUTBUF_SIZE];
};

/*
 * Opens path to write it from its start; "-" is standard output. Safe as root
 * where others can plant files: a symlink as the last component is refused
 * (-ELOOP), and so is anything but a regular file (-ENXIO; -EISDIR for a
 * directory), before it is truncated. A new file gets OUTBUF_MODE less the
 * umask (asynctraced's is 077 unless --umask says otherwise: 0600).
 */
int outbuf__open(struct outbuf **ob, const char *path);
/* The same checks and open, for a writer of its own (stdio): the descriptor, or -errno. */
int outbuf__open_file(const char *path);
/* The mode files are created with, before the umask. */
#define OUTBUF_MODE 0666
/*
 * Whether outbuf__open would take path, asked before anything is created or
 * truncated (so that one refused output of several leaves the others as
 * they were): 0, or the error it would give. A file that appears or changes
 * meanwhile is still judged by outbuf__open.
 */
int outbuf__check(const char *path);
/* Writes to fd, a file the caller opened (it is closed with the outbuf). 0 or -ENOMEM. */
int outbuf__from_fd(struct outbuf **ob, int fd);
/* What an error of outbuf__open means, for a message. */
const char *outbuf__strerror(int err);
/*
 * Another holder of ob (several writers sharing one file, each writing whole
 * records between flushes); each holder lets go with outbuf__free, and the
 * last one closes the file.
 */
struct outbuf *outbuf__get(struct outbuf *ob);
/*
 * Goes on writing to path, opened anew (a log that logrotate moved away),
 * appending and without following a symlink; what was buffered goes to the
 * old file first. 0, or -errno (ob then writes where it did).
 */
int outbuf__reopen(struct outbuf *ob, const char *path);
/* The open flags of outbuf__reopen. */
#define OUTBUF_REOPEN_FLAGS \
	(O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK | O_CLOEXEC)
void outbuf__free(struct outbuf *ob);

/* 0, or the -errno of the first failed write. */
int outbuf__flush(struct outbuf *ob);
/* Bytes written so far, buffered ones included. */
uint64_t outbuf__bytes(const struct outbuf *ob);

/* What does not fit the buffer's room: flushes first, or writes around it. */
void ob_write_slow(struct outbuf *ob, const void *data, size_t len);

static inline void ob_write(struct outbuf *ob, const void *data, size_t len)
{
	if (OUTBUF_SIZE - ob->len < len) {
		ob_write_slow(ob, data, len);
		return;
	}
	memcpy(ob->buf + ob->len, data, len);
	ob->len += len;
}

/* Inline, so that a literal's length is known where it is written. */
static inline void ob_puts(struct outbuf *ob, const char *s)
{
	ob_write(ob, s, strlen(s));
}

static inline void ob_putc(struct outbuf *ob, char c)
{
	ob_write(ob, &c, 1);
}

void ob_u64(struct outbuf *ob, uint64_t v);
void ob_i64(struct outbuf *ob, int64_t v);
void ob_hex(struct outbuf *ob, uint64_t v);
/* ns as microseconds with three decimals: what JSON trace timestamps want */
void ob_us(struct outbuf *ob, uint64_t ns);
/* a quoted, escaped JSON string */
void ob_json_str(struct outbuf *ob, const char *s);
/* ... escaped, without the quotes */
void ob_json_chars(struct outbuf *ob, const char *s);

/* key as given (quotes, colon, any leading comma), then the value */
static inline void ob_key_u64(struct outbuf *ob, const char *key, uint64_t v)
{
	ob_puts(ob, key);
	ob_u64(ob, v);
}

static inline void ob_key_str(struct outbuf *ob, const char *key, const char *v)
{
	ob_puts(ob, key);
	ob_json_str(ob, v);
}

#endif
