// SPDX-License-Identifier: MIT
/*
 * The privileged side of --stacks: a process's images handed to an
 * analyser of their own (its maps text and files, opened here), the debug
 * files it names opened too (debug_files.c), and each sample sent to be
 * unwound. An analyser
 * that dies or hangs on a process is killed; that process's stacks are
 * left out, and the others' are handed to the next analyser as they come.
 */
#include "analyser/analyser.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "analyser/debug_files.h"
#include "analyser/wire.h"
#include "lib/util.h"

/* What the analyser holds of a process. */
struct primed {
	unsigned int gen;	/* of the analyser that holds it (analyser.gen) */
	bool refreshed;		/* primed again once for a pc in no image */
	bool given_up;		/* the analyser failed on it: its stacks are left out */
};

/* The text of /proc/PID/maps, whole (at most WIRE_MAPS_MAX). -errno, or its length. */
static long read_maps(pid_t pid, char **out)
{
	char path[64], *buf = NULL, *more;
	size_t len = 0, cap = 0;
	ssize_t n = 1;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/maps", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	while (n > 0) {
		if (cap - len < 4096) {
			if (cap >= WIRE_MAPS_MAX || !(more = realloc(buf, cap ? 2 * cap : 65536))) {
				n = cap >= WIRE_MAPS_MAX ? -E2BIG : -ENOMEM;
				break;
			}
			buf = more;
			cap = cap ? 2 * cap : 65536;
		}
		n = read(fd, buf + len, cap - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			n = -errno;
		else
			len += (size_t)n;
	}
	close(fd);
	if (n < 0) {
		free(buf);
		return (long)n;
	}
	*out = buf;
	return (long)len;
}

/* The request: the files' names, the maps text, then the files. */
static int send_prime(struct analyser *a, pid_t pid, const struct target_files *fs,
		      const char *maps, size_t maps_len)
{
	struct wire_prime pr = { .pid = pid, .nr_files = (uint32_t)fs->nr, .maps_len = maps_len };
	size_t len = sizeof(pr) + maps_len;
	uint8_t *b, *p;
	int err, *fds;

	for (size_t i = 0; i < fs->nr; i++)
		len += sizeof(uint32_t) + strlen(fs->f[i].target_path);
	b = malloc(len);
	fds = calloc(fs->nr + 1, sizeof(*fds));
	if (!b || !fds) {
		free(b);
		free(fds);
		return -ENOMEM;
	}
	memcpy(b, &pr, sizeof(pr));
	p = b + sizeof(pr);
	for (size_t i = 0; i < fs->nr; i++) {
		uint32_t n = (uint32_t)strlen(fs->f[i].target_path);

		memcpy(p, &n, sizeof(n));
		memcpy(p + sizeof(n), fs->f[i].target_path, n);
		p += sizeof(n) + n;
		fds[i] = fs->f[i].fd;
	}
	memcpy(p, maps, maps_len);
	err = wire__send(a->sock, WIRE_PRIME, b, len);
	if (!err)
		err = wire__send_all_fds(a->sock, fds, fs->nr);
	free(b);
	free(fds);
	return err;
}

/* The analyser's answer to a request: PRIMED, or FRAMES (its body into *body). */
static int expect(struct analyser *a, uint32_t kind, uint64_t min, uint64_t max,
		  uint64_t deadline, uint8_t **body, uint64_t *len)
{
	struct wire_hdr h;
	int err = wire__read_hdr(a->sock, &h, deadline);

	if (err <= 0)
		return err ? err : -EPIPE;
	if (h.kind != kind || h.len < min || h.len > max)
		return -EBADMSG;
	*body = malloc(h.len + 1);
	if (!*body)
		return -ENOMEM;
	err = wire__read(a->sock, *body, h.len, deadline);
	if (err) {
		free(*body);
		*body = NULL;
	}
	*len = h.len;
	return err;
}

/* An analyser for stacks that can take a request: running, or started again. */
static bool ready(struct analyser *a)
{
	if (a->pid > 0)
		return true;
	if (a->failed || a->no_restart)
		return false;
	if (analyser__start(a, a->timeout_ms)) {
		a->failed = true;
		return false;
	}
	return true;
}

/* It failed on t (err): killed, said, and t's stacks left out. */
static void failed_on(struct analyser *a, const struct target *t, struct primed *p, int err,
		      const char *doing)
{
	char ended[64];

	analyser__kill(a, ended, sizeof(ended));
	if (err == -ETIMEDOUT)
		snprintf(ended, sizeof(ended), "took over %u s", (a->timeout_ms + 999) / 1000);
	else if (err == -EBADMSG)
		snprintf(ended, sizeof(ended), "answered out of bounds");
	if (p)
		p->given_up = true;
	warn_msg("the analyser %s %s of pid %d (%s): its stacks are left out%s\n", ended, doing,
		 t->pid, t->comm,
		 a->no_restart ? ", and no other stack is unwound (it cannot be started again "
				 "once attached with -p)"
			       : "");
}

/* t's images handed over, whatever the analyser held of it before. */
static int prime(struct analyser *a, const struct target *t, struct primed *p)
{
	uint64_t deadline = now_ns() + (uint64_t)a->timeout_ms * 1000000, len = 0;
	struct target_files fs;
	char *maps = NULL;
	uint8_t *body = NULL;
	int32_t status;
	long maps_len;
	int err;

	if (!ready(a))
		return -EIO;
	/* what cannot be read now leaves what the analyser holds of it as it was */
	maps_len = read_maps(t->pid, &maps);
	if (maps_len < 0)
		return (int)maps_len;
	err = target__open_files(t, &fs);
	if (err) {
		free(maps);
		return err;
	}
	p->given_up = true; /* until it is handed over */
	err = send_prime(a, t->pid, &fs, maps, (size_t)maps_len);
	target_files__close(&fs);
	free(maps);
	if (!err)
		err = analyser__give_debug(a, t->pid, deadline);
	if (!err)
		err = expect(a, WIRE_PRIMED, sizeof(status), sizeof(status), deadline, &body, &len);
	if (!err) {
		memcpy(&status, body, sizeof(status));
		free(body);
		p->gen = a->gen;
		p->given_up = status != 0;
		return status <= 0 && status > -4096 ? status : -EBADMSG;
	}
	failed_on(a, t, p, err, "reading the images");
	return -EIO;
}

int analyser__prime(struct analyser *a, const struct target *t)
{
	struct primed *p = u64map__get(&a->primed, (uint64_t)t->pid);
	int err;

	if (!p) {
		p = calloc(1, sizeof(*p));
		if (!p || u64map__set(&a->primed, (uint64_t)t->pid, p)) {
			free(p);
			return -ENOMEM;
		}
	}
	*p = (struct primed){ 0 };
	err = prime(a, t, p);
	p->given_up |= err != 0;
	return err;
}

/* FRAMES' body into frames, its strings kept in a->frames until the next. How many, or -EBADMSG. */
static int decode_frames(struct analyser *a, const uint8_t *b, uint64_t len,
			 struct stack_frame *frames, int max, bool *by_fp, bool *no_image)
{
	struct wire_frames fr;
	uint64_t at = sizeof(fr);
	char *strs, *q;

	memcpy(&fr, b, sizeof(fr));
	if (fr.n < 0 || fr.n > max)
		return -EBADMSG;
	*by_fp = fr.by_fp;
	*no_image = fr.no_image;
	strs = q = malloc(len + 3 * (size_t)fr.n + 1);
	if (!strs)
		return -ENOMEM;
	for (int i = 0; i < fr.n; i++) {
		const char **str[3] = { &frames[i].function, &frames[i].module, &frames[i].file };
		struct wire_frame wf;

		if (len - at < sizeof(wf))
			goto bad;
		memcpy(&wf, b + at, sizeof(wf));
		at += sizeof(wf);
		frames[i] = (struct stack_frame){ .pc = wf.pc, .rel_pc = wf.rel_pc, .line = wf.line,
						  .inlined = wf.inlined != 0 };
		for (int k = 0; k < 3; k++) {
			if (wf.len[k] == WIRE_NO_STR)
				continue;
			if (wf.len[k] >= WIRE_STR_MAX || wf.len[k] > len - at)
				goto bad;
			memcpy(q, b + at, wf.len[k]);
			q[wf.len[k]] = 0;
			*str[k] = q;
			q += wf.len[k] + 1;
			at += wf.len[k];
		}
	}
	if (at != len)
		goto bad;
	free(a->frames);
	a->frames = strs;
	return fr.n;
bad:
	free(strs);
	return -EBADMSG;
}

/* The request: the sample, its stack's bytes, the returns a uretprobe took, the kernel's walk. */
static int send_unwind(struct analyser *a, const struct stack_sample *s, int max)
{
	struct wire_unwind u = { .pid = s->pid, .tid = s->tid, .ip = s->ip, .sp = s->sp,
				 .bp = s->bp, .len = (uint32_t)s->len,
				 .nr_returns = (uint32_t)s->nr_returns, .nr_fp = (uint32_t)s->nr_fp,
				 .max = (uint32_t)max };
	size_t len = sizeof(u) + s->len + s->nr_returns * 16 + s->nr_fp * 8;
	uint8_t *b = malloc(len), *p;
	int err;

	if (!b)
		return -ENOMEM;
	memcpy(b, &u, sizeof(u));
	p = b + sizeof(u);
	memcpy(p, s->stack, s->len);
	p += s->len;
	for (size_t i = 0; i < s->nr_returns; i++, p += 16) {
		memcpy(p, &s->returns[i].slot, 8);
		memcpy(p + 8, &s->returns[i].ret, 8);
	}
	memcpy(p, s->fp, s->nr_fp * 8);
	err = wire__send(a->sock, WIRE_UNWIND, b, len);
	free(b);
	return err;
}

int analyser__unwind(struct analyser *a, const struct target *t, const struct stack_sample *s,
		     struct stack_frame *frames, int max, bool *by_fp)
{
	struct primed *p = u64map__get(&a->primed, (uint64_t)t->pid);
	uint64_t deadline, len;
	bool no_image = false;
	uint8_t *body;
	int n, err;

	*by_fp = false;
	if (!p || p->given_up || max <= 0)
		return 0;
	for (int tries = 0; tries < 2; tries++) {
		/* an analyser started since it was handed over holds nothing of it */
		if ((a->pid <= 0 || p->gen != a->gen) && prime(a, t, p)) {
			p->given_up = true;
			return 0;
		}
		deadline = now_ns() + (uint64_t)a->timeout_ms * 1000000;
		err = send_unwind(a, s, max);
		if (!err)
			err = expect(a, WIRE_FRAMES, sizeof(struct wire_frames), WIRE_FRAMES_MAX,
				     deadline, &body, &len);
		if (err) {
			failed_on(a, t, p, err, "unwinding a stack");
			return 0;
		}
		n = decode_frames(a, body, len, frames, max, by_fp, &no_image);
		free(body);
		if (n < 0) {
			failed_on(a, t, p, -EBADMSG, "unwinding a stack");
			return 0;
		}
		/*
		 * a pc in no image it was given: something was mapped since
		 * (dlopen): handed over again, once, if it can be read now;
		 * not once confined (-p): its files are out of reach then
		 */
		if (!no_image || p->refreshed || a->no_restart)
			return n;
		p->refreshed = true;
		err = prime(a, t, p);
		if (err == -EIO || p->given_up)
			return 0;
		if (err)
			return n;
	}
	return 0;
}

void analyser__forget(struct analyser *a, pid_t pid)
{
	free(u64map__del(&a->primed, (uint64_t)pid));
	if (a->pid > 0 && wire__send(a->sock, WIRE_FORGET, &(int32_t){ pid }, sizeof(int32_t))) {
		char ended[64];

		analyser__kill(a, ended, sizeof(ended)); /* started again when next asked */
	}
}

void analyser__clear(struct analyser *a)
{
	u64map__clear_free(&a->primed);
	free(a->frames);
	a->frames = NULL;
}
