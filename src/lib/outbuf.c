// SPDX-License-Identifier: MIT
#include "lib/outbuf.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Room every primitive may assume without checking twice. */
#define OUTBUF_SLACK 64


/* A file asynctraced will write over: a regular one, or -ENXIO (-EISDIR for a directory). */
static int regular(const struct stat *st)
{
	if (S_ISREG(st->st_mode))
		return 0;
	return S_ISDIR(st->st_mode) ? -EISDIR : -ENXIO;
}

/*
 * As root, whatever sits at path may have been planted there by someone else:
 * a symlink to a root-only file, a FIFO, a device. So the last component is
 * never followed, nothing is truncated before fstat says it is a regular file,
 * and a device is not even opened (opening one can have effects of its own)
 * when lstat already says what it is. O_NONBLOCK: a FIFO swapped in after the
 * lstat makes open fail or return at once instead of waiting for a reader.
 */
/*
 * The file opened is the authority, whatever lstat saw: a regular file, then
 * blocking again (writes to a full disk must not spin). 0 or -errno.
 */
static int opened_regular(int fd)
{
	struct stat st;
	int fl, err;

	err = fstat(fd, &st) ? -errno : regular(&st);
	fl = err ? 0 : fcntl(fd, F_GETFL);
	if (!err && (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK)))
		err = -errno;
	return err;
}

static int open_output(const char *path)
{
	const int flags = O_WRONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC;
	struct stat st;
	int fd = -1, err;

	/* a file that comes or goes between lstat and open: look again */
	for (int tries = 0; tries < 3; tries++) {
		if (lstat(path, &st) == 0) {
			if (S_ISLNK(st.st_mode))
				return -ELOOP;
			err = regular(&st);
			if (err)
				return err;
			fd = open(path, flags);
		} else if (errno == ENOENT) {
			/* O_EXCL: a file this open creates, nothing planted since */
			fd = open(path, flags | O_CREAT | O_EXCL, OUTBUF_MODE);
		} else {
			return -errno;
		}
		if (fd >= 0 || (errno != ENOENT && errno != EEXIST))
			break;
	}
	if (fd < 0)
		return -errno;
	err = opened_regular(fd);
	if (!err && ftruncate(fd, 0))
		err = -errno;
	if (err) {
		close(fd);
		return err;
	}
	return fd;
}

int outbuf__open_file(const char *path)
{
	return open_output(path);
}

int outbuf__check(const char *path)
{
	char dir[PATH_MAX];
	const char *slash;
	struct stat st;

	if (strcmp(path, "-") == 0)
		return 0;
	if (lstat(path, &st) == 0)
		return S_ISLNK(st.st_mode) ? -ELOOP : regular(&st);
	if (errno != ENOENT)
		return -errno;
	/* a new file: its directory must take one */
	slash = strrchr(path, '/');
	if (!slash)
		snprintf(dir, sizeof(dir), ".");
	else if (slash == path)
		snprintf(dir, sizeof(dir), "/");
	else
		snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
	return access(dir, W_OK | X_OK) ? -errno : 0;
}

const char *outbuf__strerror(int err)
{
	switch (err) {
	case -ELOOP:
		return "it is a symbolic link, and asynctraced does not follow one to write: "
		       "name the file itself";
	case -ENXIO:
		return "not a regular file (asynctraced writes only regular files, or - for "
		       "standard output)";
	default:
		return strerror(-err);
	}
}

int outbuf__open(struct outbuf **obp, const char *path)
{
	int fd;

	if (strcmp(path, "-") == 0) {
		fd = dup(STDOUT_FILENO);
		if (fd < 0)
			return -errno;
	} else {
		fd = open_output(path);
		if (fd < 0)
			return fd;
	}
	return outbuf__from_fd(obp, fd);
}

int outbuf__from_fd(struct outbuf **obp, int fd)
{
	struct outbuf *ob;

	ob = malloc(sizeof(*ob));
	if (!ob) {
		close(fd);
		return -ENOMEM;
	}
	ob->fd = fd;
	ob->err = 0;
	ob->len = 0;
	ob->bytes = 0;
	ob->refs = 1;
	*obp = ob;
	return 0;
}

int outbuf__flush(struct outbuf *ob)
{
	size_t off = 0;

	while (off < ob->len && !ob->err) {
		ssize_t n = write(ob->fd, ob->buf + off, ob->len - off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			ob->err = -errno;
		else
			off += n;
	}
	ob->bytes += off;
	ob->len = 0;
	return ob->err;
}

int outbuf__reopen(struct outbuf *ob, const char *path)
{
	struct stat st;
	int fd, err;

	outbuf__flush(ob);
	/* as open_output: a planted FIFO or device is not even opened, a
	 * swapped-in one does not block the loop (O_NONBLOCK), fstat decides */
	if (lstat(path, &st) == 0 && !S_ISLNK(st.st_mode) && (err = regular(&st)))
		return err;
	fd = open(path, OUTBUF_REOPEN_FLAGS, OUTBUF_MODE);
	if (fd < 0)
		return -errno;
	err = opened_regular(fd);
	if (err) {
		close(fd);
		return err;
	}
	close(ob->fd);
	ob->fd = fd;
	ob->err = 0;
	return 0;
}

struct outbuf *outbuf__get(struct outbuf *ob)
{
	ob->refs++;
	return ob;
}

void outbuf__free(struct outbuf *ob)
{
	if (!ob || --ob->refs > 0)
		return;
	close(ob->fd);
	free(ob);
}

uint64_t outbuf__bytes(const struct outbuf *ob)
{
	return ob->bytes + ob->len;
}

static inline void need(struct outbuf *ob, size_t n)
{
	if (OUTBUF_SIZE - ob->len < n)
		outbuf__flush(ob);
}

void ob_write_slow(struct outbuf *ob, const void *data, size_t len)
{
	if (len > OUTBUF_SIZE / 2) {
		outbuf__flush(ob);
		while (len && !ob->err) { /* large blobs bypass the buffer */
			ssize_t n = write(ob->fd, data, len);

			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0) {
				ob->err = -errno;
				return;
			}
			ob->bytes += n;
			data = (const char *)data + n;
			len -= n;
		}
		return;
	}
	need(ob, len);
	memcpy(ob->buf + ob->len, data, len);
	ob->len += len;
}

void ob_u64(struct outbuf *ob, uint64_t v)
{
	/* two digits a division: "00" to "99" */
	static const char pairs[201] =
		"0001020304050607080910111213141516171819"
		"2021222324252627282930313233343536373839"
		"4041424344454647484950515253545556575859"
		"6061626364656667686970717273747576777879"
		"8081828384858687888990919293949596979899";
	char tmp[20];
	int n = sizeof(tmp);

	need(ob, sizeof(tmp));
	while (v >= 100) {
		unsigned d = (unsigned)(v % 100) * 2;

		v /= 100;
		tmp[--n] = pairs[d + 1];
		tmp[--n] = pairs[d];
	}
	if (v >= 10) {
		tmp[--n] = pairs[v * 2 + 1];
		tmp[--n] = pairs[v * 2];
	} else {
		tmp[--n] = (char)('0' + v);
	}
	memcpy(ob->buf + ob->len, tmp + n, sizeof(tmp) - (size_t)n);
	ob->len += sizeof(tmp) - (size_t)n;
}

void ob_i64(struct outbuf *ob, int64_t v)
{
	if (v < 0) {
		ob_putc(ob, '-');
		ob_u64(ob, -(uint64_t)v);
	} else {
		ob_u64(ob, (uint64_t)v);
	}
}

void ob_hex(struct outbuf *ob, uint64_t v)
{
	static const char digits[] = "0123456789abcdef";
	char tmp[16];
	int n = 0;

	need(ob, sizeof(tmp) + 2);
	ob->buf[ob->len++] = '0';
	ob->buf[ob->len++] = 'x';
	do {
		tmp[n++] = digits[v & 15];
		v >>= 4;
	} while (v);
	while (n)
		ob->buf[ob->len++] = tmp[--n];
}

void ob_us(struct outbuf *ob, uint64_t ns)
{
	uint64_t frac = ns % 1000;

	ob_u64(ob, ns / 1000);
	need(ob, 4);
	ob->buf[ob->len++] = '.';
	ob->buf[ob->len++] = (char)('0' + frac / 100);
	ob->buf[ob->len++] = (char)('0' + frac / 10 % 10);
	ob->buf[ob->len++] = (char)('0' + frac % 10);
}

/* Length of the valid UTF-8 sequence at s, or 0. */
static int utf8_len(const unsigned char *s)
{
	int n = s[0] >= 0xf0 && s[0] < 0xf5 ? 4 : s[0] >= 0xe0 ? 3 : s[0] >= 0xc2 ? 2 : 0;

	for (int i = 1; i < n; i++)
		if ((s[i] & 0xc0) != 0x80)
			return 0;
	return n;
}

void ob_json_str(struct outbuf *ob, const char *s)
{
	ob_putc(ob, '"');
	ob_json_chars(ob, s);
	ob_putc(ob, '"');
}

void ob_json_chars(struct outbuf *ob, const char *s)
{
	static const char hex[] = "0123456789abcdef";

	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		need(ob, 6);
		if (c >= 0x80) {
			/* Names come from another process's memory: keep the
			 * output valid UTF-8 whatever they hold. */
			int n = utf8_len((const unsigned char *)s);

			if (!n) {
				ob->buf[ob->len++] = '?';
				continue;
			}
			memcpy(ob->buf + ob->len, s, n);
			ob->len += n;
			s += n - 1;
		} else if (c == '"' || c == '\\') {
			ob->buf[ob->len++] = '\\';
			ob->buf[ob->len++] = (char)c;
		} else if (c < 0x20) {
			memcpy(ob->buf + ob->len, "\\u00", 4);
			ob->buf[ob->len + 4] = hex[c >> 4];
			ob->buf[ob->len + 5] = hex[c & 15];
			ob->len += 6;
		} else {
			ob->buf[ob->len++] = (char)c;
		}
	}
}
