// SPDX-License-Identifier: MIT
#include "analyser/wire.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "lib/util.h"

static int send_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return errno == ECONNRESET ? -EPIPE : -errno;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int wire__send(int fd, uint32_t kind, const void *body, uint64_t len)
{
	struct wire_hdr h = { .magic = WIRE_MAGIC, .kind = kind, .len = len };
	int err = send_all(fd, &h, sizeof(h));

	return err || !len ? err : send_all(fd, body, len);
}

int wire__send_fds(int fd, const int *fds, uint32_t n)
{
	struct wire_hdr h = { .magic = WIRE_MAGIC, .kind = WIRE_FDS, .len = sizeof(n) };
	char control[CMSG_SPACE(WIRE_FDS_MAX * sizeof(int))] = { 0 };
	struct iovec iov = { &n, sizeof(n) };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control,
			      .msg_controllen = CMSG_SPACE(n * sizeof(int)) };
	struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
	ssize_t sent;
	int err;

	if (!n || n > WIRE_FDS_MAX)
		return -EINVAL;
	/* the header alone, then the count with the descriptors: read by one recvmsg */
	err = send_all(fd, &h, sizeof(h));
	if (err)
		return err;
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(n * sizeof(int));
	memcpy(CMSG_DATA(c), fds, n * sizeof(int));
	do
		sent = sendmsg(fd, &msg, MSG_NOSIGNAL);
	while (sent < 0 && errno == EINTR);
	if (sent < 0)
		return errno == ECONNRESET ? -EPIPE : -errno;
	return (size_t)sent < sizeof(n) ? send_all(fd, (char *)&n + sent, sizeof(n) - (size_t)sent)
					: 0;
}

/* Until the socket is readable, or the deadline. */
static int wait_readable(int fd, uint64_t deadline)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	uint64_t now;
	int n;

	if (!deadline)
		return 0;
	do {
		now = now_ns();
		if (now >= deadline)
			return -ETIMEDOUT;
		n = poll(&p, 1, (int)((deadline - now) / 1000000 + 1));
	} while (n < 0 && errno == EINTR);
	return n < 0 ? -errno : n ? 0 : -ETIMEDOUT;
}

int wire__read(int fd, void *buf, size_t len, uint64_t deadline)
{
	char *p = buf;

	while (len) {
		int err = wait_readable(fd, deadline);
		ssize_t n;

		if (err)
			return err;
		n = recv(fd, p, len, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return errno == ECONNRESET ? -EPIPE : -errno;
		if (!n)
			return -EPIPE;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int wire__read_hdr(int fd, struct wire_hdr *h, uint64_t deadline)
{
	int err = wait_readable(fd, deadline);
	ssize_t n;

	if (err)
		return err;
	do
		n = recv(fd, h, 1, MSG_PEEK);
	while (n < 0 && errno == EINTR);
	if (!n)
		return 0;
	err = wire__read(fd, h, sizeof(*h), deadline);
	if (!err && h->magic != WIRE_MAGIC)
		err = -EBADMSG;
	return err ? err : 1;
}

int wire__read_fds(int fd, const struct wire_hdr *h, int *fds, uint32_t max)
{
	char control[CMSG_SPACE(WIRE_FDS_MAX * sizeof(int))];
	uint32_t n = 0, got = 0;
	struct iovec iov = { &n, sizeof(n) };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control,
			      .msg_controllen = sizeof(control) };
	ssize_t r;

	if (h->kind != WIRE_FDS || h->len != sizeof(n))
		return -EBADMSG;
	do
		r = recvmsg(fd, &msg, MSG_CMSG_CLOEXEC);
	while (r < 0 && errno == EINTR);
	if (r < 0)
		return -errno;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
		uint32_t k;

		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		k = (uint32_t)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
		for (uint32_t i = 0; i < k; i++) {
			int d;

			memcpy(&d, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
			if (got < max)
				fds[got++] = d;
			else
				close(d);
		}
	}
	if ((size_t)r < sizeof(n) && wire__read(fd, (char *)&n + r, sizeof(n) - (size_t)r, 0))
		r = -1;
	if (r < 0 || (msg.msg_flags & MSG_CTRUNC) || n != got) {
		for (uint32_t i = 0; i < got; i++)
			close(fds[i]);
		return -EBADMSG;
	}
	return (int)got;
}

int wire__send_all_fds(int fd, const int *fds, size_t n)
{
	int err = 0;

	for (size_t i = 0; !err && i < n; i += WIRE_FDS_MAX)
		err = wire__send_fds(fd, fds + i, n - i < WIRE_FDS_MAX ? (uint32_t)(n - i)
								  : WIRE_FDS_MAX);
	return err;
}

int wire__take_fds(int fd, int *fds, uint32_t n, uint64_t deadline)
{
	uint32_t got = 0;

	while (got < n) {
		int some[WIRE_FDS_MAX], k;
		struct wire_hdr h;

		k = wire__read_hdr(fd, &h, deadline);
		if (k > 0)
			k = wire__read_fds(fd, &h, some, WIRE_FDS_MAX);
		else if (!k)
			k = -EPIPE;
		if (k < 0) { /* what came before goes too */
			while (got)
				close(fds[--got]);
			return k;
		}
		for (int i = 0; i < k; i++) {
			if (got < n)
				fds[got++] = some[i];
			else
				close(some[i]);
		}
	}
	return 0;
}

uint8_t *wire__read_body(int fd, const struct wire_hdr *h, uint64_t min, uint64_t max, int *err)
{
	uint8_t *b;

	if (h->len < min || h->len > max) {
		*err = -EBADMSG;
		return NULL;
	}
	b = malloc(h->len + 1);
	*err = b ? wire__read(fd, b, h->len, 0) : -ENOMEM;
	if (*err) {
		free(b);
		return NULL;
	}
	b[h->len] = 0;
	return b;
}
