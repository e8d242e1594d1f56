// SPDX-License-Identifier: MIT
/*
 * Separate debug files, both sides of their exchange (wire.h: WANT, then
 * DEBUG and its descriptors). The analyser names the files an image's
 * build id and debug link point to (stacks/debug_file.c); the privileged
 * side opens those it finds inside the process's root, and only when
 * anyone may read them; the analyser checks each is of its image's build
 * before it reads a byte of it.
 */
#include "analyser/debug_files.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "analyser/analyser.h"
#include "analyser/wire.h"

/* The analyser's side. */

void debug_wants__add(void *ctx, const char *path)
{
	struct debug_wants *w = ctx;
	char **more;

	if (w->nr >= WIRE_WANT_MAX)
		return;
	for (uint32_t i = 0; i < w->nr; i++)
		if (!strcmp(w->path[i], path))
			return;
	more = realloc(w->path, (w->nr + 1) * sizeof(*more));
	if (!more)
		return;
	w->path = more;
	if ((w->path[w->nr] = strdup(path))) {
		w->bytes += sizeof(uint32_t) + strlen(path);
		w->nr++;
	}
}

static int send_wants(const struct debug_wants *w)
{
	uint8_t *b = malloc(sizeof(uint32_t) + w->bytes), *p = b;
	int err;

	if (!b)
		return -ENOMEM;
	memcpy(p, &w->nr, sizeof(w->nr));
	p += sizeof(w->nr);
	for (uint32_t i = 0; i < w->nr; i++) {
		uint32_t n = (uint32_t)strlen(w->path[i]);

		memcpy(p, &n, sizeof(n));
		memcpy(p + sizeof(n), w->path[i], n);
		p += sizeof(n) + n;
	}
	err = wire__send(ANALYSER_FD, WIRE_WANT, b, (uint64_t)(p - b));
	free(b);
	return err;
}

/* The debug files found of those wanted: their indices, then their descriptors. */
static int take_debug(struct debug_wants *w, struct unwind_file **out, uint32_t *nr)
{
	struct wire_hdr h;
	uint32_t n = 0;
	uint8_t *b;
	int err = wire__read_hdr(ANALYSER_FD, &h, 0), *fds = NULL;
	bool taken = false;

	*out = NULL;
	*nr = 0;
	if (err <= 0)
		return err ? err : -EPIPE;
	if (h.kind != WIRE_DEBUG)
		return -EBADMSG;
	b = wire__read_body(ANALYSER_FD, &h, sizeof(n), sizeof(n) + (uint64_t)WIRE_WANT_MAX * sizeof(n), &err);
	if (b)
		memcpy(&n, b, sizeof(n));
	if (b && (n > w->nr || h.len != sizeof(n) * (1 + (uint64_t)n)))
		err = -EBADMSG;
	if (!err && n) {
		*out = calloc(n, sizeof(**out));
		fds = calloc(n, sizeof(*fds));
		err = *out && fds ? wire__take_fds(ANALYSER_FD, fds, n, 0) : -ENOMEM;
		taken = !err;
	}
	for (uint32_t i = 0; !err && i < n; i++) {
		uint32_t k;

		memcpy(&k, b + sizeof(n) * (1 + i), sizeof(k));
		if (k >= w->nr || !w->path[k]) { /* not asked for, or given twice */
			err = -EBADMSG;
			break;
		}
		(*out)[i] = (struct unwind_file){ .name = w->path[k], .fd = fds[i] };
		w->path[k] = NULL; /* the unwinder's now */
		*nr = i + 1;
	}
	if (err) {
		for (uint32_t i = 0; i < *nr; i++)
			free((*out)[i].name);
		for (uint32_t i = 0; taken && i < n; i++)
			close(fds[i]);
		free(*out);
		*out = NULL;
		*nr = 0;
	}
	free(fds);
	free(b);
	return err;
}

int debug_wants__exchange(struct debug_wants *w, struct unwind_file **out, uint32_t *nr)
{
	int err = send_wants(w);

	*out = NULL;
	*nr = 0;
	return err ? err : take_debug(w, out, nr);
}

void debug_wants__free(struct debug_wants *w)
{
	for (uint32_t i = 0; i < w->nr; i++)
		free(w->path[i]);
	free(w->path);
	*w = (struct debug_wants){ 0 };
}

/* The privileged side. */

/*
 * A debug file at path inside pid's root, as the process would see it
 * (symlinks cannot leave that root), opened without blocking: a regular
 * file anyone may read, or -1. The analyser named it; what it is given is
 * never more than any user may read.
 */
static int open_debug(int root, const char *path)
{
	struct open_how how = { .flags = O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY,
				.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS };
	struct stat st;
	int fd;

	if (path[0] != '/' || strstr(path, "/../") || strlen(path) >= PATH_MAX)
		return -1;
	fd = (int)syscall(SYS_openat2, root, path + 1, &how, sizeof(how));
	if (fd >= 0 && (fstat(fd, &st) || !S_ISREG(st.st_mode) || !(st.st_mode & S_IROTH))) {
		close(fd);
		fd = -1;
	}
	return fd;
}

/* WANT's paths, each opened in pid's root if it may be; DEBUG with those that were. */
int analyser__give_debug(struct analyser *a, pid_t pid, uint64_t deadline)
{
	struct wire_hdr h;
	uint32_t nr, at = sizeof(nr), found = 0, *idx = NULL;
	int *fds = NULL, root, err;
	char path[PATH_MAX], rootp[64];
	uint8_t *b;

	err = wire__read_hdr(a->sock, &h, deadline);
	if (err <= 0)
		return err ? err : -EPIPE;
	if (h.kind != WIRE_WANT || h.len < sizeof(nr) ||
	    h.len > sizeof(nr) + (uint64_t)WIRE_WANT_MAX * (sizeof(nr) + PATH_MAX))
		return -EBADMSG;
	b = malloc(h.len);
	if (!b)
		return -ENOMEM;
	err = wire__read(a->sock, b, h.len, deadline);
	memcpy(&nr, b, sizeof(nr));
	if (!err && nr > WIRE_WANT_MAX)
		err = -EBADMSG;
	snprintf(rootp, sizeof(rootp), "/proc/%d/root", pid);
	root = err || !nr ? -1 : open(rootp, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (root >= 0) {
		idx = calloc(nr, sizeof(*idx));
		fds = calloc(nr, sizeof(*fds));
		err = idx && fds ? 0 : -ENOMEM;
	}
	for (uint32_t i = 0; !err && root >= 0 && i < nr; i++) {
		uint32_t n;
		int fd;

		if (h.len - at < sizeof(n)) {
			err = -EBADMSG;
			break;
		}
		memcpy(&n, b + at, sizeof(n));
		at += sizeof(n);
		if (n > h.len - at || n >= sizeof(path)) {
			err = -EBADMSG;
			break;
		}
		memcpy(path, b + at, n);
		path[n] = 0;
		at += n;
		fd = strlen(path) == n ? open_debug(root, path) : -1;
		if (fd >= 0) {
			idx[found] = i;
			fds[found++] = fd;
		}
	}
	if (root >= 0)
		close(root);
	free(b);
	if (!err) {
		uint32_t *msg = calloc(found + 1, sizeof(*msg));

		if (msg) {
			msg[0] = found;
			memcpy(msg + 1, idx, found * sizeof(*idx));
			err = wire__send(a->sock, WIRE_DEBUG, msg, (found + 1) * sizeof(*msg));
		} else {
			err = -ENOMEM;
		}
		free(msg);
		if (!err)
			err = wire__send_all_fds(a->sock, fds, found);
	}
	for (uint32_t i = 0; i < found; i++)
		close(fds[i]);
	free(fds);
	free(idx);
	return err;
}
