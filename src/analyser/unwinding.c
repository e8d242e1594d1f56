// SPDX-License-Identifier: MIT
/*
 * The analyser's side of --stacks: a process primed from the maps text and
 * the files it is handed (and the debug files it asked for, when they were
 * found), then each sample unwound and symbolised by stacks/unwind.c into
 * frames sent back as strings. Nothing here opens a file: the names it
 * wants are the privileged side's to open, or not.
 */
#include "analyser/unwinding.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "analyser/analyser.h"
#include "analyser/wire.h"
#include "stacks/unwind.h"

/* A sample's parts at most: far above what the BPF side copies (AT_STACK_BYTES and co.). */
#define STACK_MAX (64u << 10)
#define RETURNS_MAX 64
#define FP_MAX 256
#define FRAMES_MAX 256

static struct unwinder *unw;

/* A message's body, of at most max bytes, read whole; NULL: -errno in *err. */
static uint8_t *body_of(const struct wire_hdr *h, uint64_t min, uint64_t max, int *err)
{
	uint8_t *b;

	if (h->len < min || h->len > max) {
		*err = -EBADMSG;
		return NULL;
	}
	b = malloc(h->len + 1);
	*err = b ? wire__read(ANALYSER_FD, b, h->len, 0) : -ENOMEM;
	if (*err) {
		free(b);
		return NULL;
	}
	b[h->len] = 0;
	return b;
}

/* The next string of a body: its length then its bytes; NULL past the end. */
static char *next_str(const uint8_t *b, uint64_t len, uint64_t *at)
{
	uint32_t n;

	if (len - *at < sizeof(n))
		return NULL;
	memcpy(&n, b + *at, sizeof(n));
	*at += sizeof(n);
	if (n > len - *at || n >= 4096)
		return NULL;
	*at += n;
	return strndup((const char *)b + *at - n, n);
}

struct wants {
	char **path;
	uint32_t nr;
	uint64_t bytes;
};

static void want(void *ctx, const char *path)
{
	struct wants *w = ctx;
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

static int send_wants(const struct wants *w)
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
static int take_debug(struct wants *w, struct unwind_file **out, uint32_t *nr)
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
	b = body_of(&h, sizeof(n), sizeof(n) + (uint64_t)WIRE_WANT_MAX * sizeof(n), &err);
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

int unwinding__prime(const struct wire_hdr *h)
{
	struct unwind_file *files = NULL, *debug = NULL;
	struct wants w = { 0 };
	struct wire_prime pr;
	uint32_t nr_debug = 0;
	uint64_t at = sizeof(pr);
	int err, status = 0, *fds = NULL;
	uint8_t *b = body_of(h, sizeof(pr), sizeof(pr) + WIRE_MAPS_MAX +
					    (uint64_t)WIRE_FILES_MAX * (4 + 4096), &err);

	if (!b)
		return err;
	memcpy(&pr, b, sizeof(pr));
	if (pr.nr_files > WIRE_FILES_MAX || pr.maps_len > WIRE_MAPS_MAX)
		err = -EBADMSG;
	if (!err && !unw)
		err = unwinder__new(&unw);
	if (!err) {
		files = calloc(pr.nr_files + 1, sizeof(*files));
		fds = calloc(pr.nr_files + 1, sizeof(*fds));
		err = files && fds ? 0 : -ENOMEM;
	}
	for (uint32_t i = 0; !err && i < pr.nr_files; i++) {
		files[i].fd = -1;
		files[i].name = next_str(b, h->len, &at);
		err = files[i].name ? 0 : -EBADMSG;
	}
	if (!err && h->len - at != pr.maps_len)
		err = -EBADMSG;
	if (!err)
		err = wire__take_fds(ANALYSER_FD, fds, pr.nr_files, 0);
	if (err) {
		for (uint32_t i = 0; files && i < pr.nr_files; i++)
			free(files[i].name);
		free(files);
		free(fds);
		free(b);
		return err;
	}
	for (uint32_t i = 0; i < pr.nr_files; i++)
		files[i].fd = fds[i];
	free(fds);
	/* what it maps; then which debug files it would read, and those that were found */
	status = unwinder__prime_from(unw, (uint32_t)pr.pid, (const char *)b + at, pr.maps_len,
				      files, pr.nr_files);
	free(b);
	if (!status)
		unwinder__wanted(unw, (uint32_t)pr.pid, want, &w);
	err = send_wants(&w);
	if (!err)
		err = take_debug(&w, &debug, &nr_debug);
	for (uint32_t i = 0; i < w.nr; i++)
		free(w.path[i]);
	free(w.path);
	if (!err && !status) {
		status = unwinder__give_debug(unw, (uint32_t)pr.pid, debug, nr_debug);
	} else if (debug) {
		for (uint32_t i = 0; i < nr_debug; i++) {
			free(debug[i].name);
			close(debug[i].fd);
		}
		free(debug);
	}
	return err ? err : wire__send(ANALYSER_FD, WIRE_PRIMED, &status, sizeof(status));
}

/* A frame's string: its length (WIRE_NO_STR for none), its bytes from *p on. */
static uint16_t put_str(uint8_t **p, const char *s)
{
	size_t n;

	if (!s)
		return WIRE_NO_STR;
	n = strnlen(s, WIRE_STR_MAX - 1);
	memcpy(*p, s, n);
	*p += n;
	return (uint16_t)n;
}

int unwinding__unwind(const struct wire_hdr *h)
{
	static struct stack_frame frames[FRAMES_MAX];
	struct stack_return returns[RETURNS_MAX];
	struct wire_frames fr = { 0 };
	struct wire_unwind u;
	struct stack_sample s;
	uint64_t need, fp[FP_MAX];
	uint8_t *out, *p;
	int err;
	uint8_t *b = body_of(h, sizeof(u), sizeof(u) + STACK_MAX + RETURNS_MAX * 16 + FP_MAX * 8,
			     &err);

	if (!b)
		return err;
	memcpy(&u, b, sizeof(u));
	need = sizeof(u) + (uint64_t)u.len + (uint64_t)u.nr_returns * 16 + (uint64_t)u.nr_fp * 8;
	if (u.len > STACK_MAX || u.nr_returns > RETURNS_MAX || u.nr_fp > FP_MAX ||
	    h->len != need) {
		free(b);
		return -EBADMSG;
	}
	s = (struct stack_sample){ .pid = u.pid, .tid = u.tid, .ip = u.ip, .sp = u.sp, .bp = u.bp,
				   .stack = b + sizeof(u), .len = u.len, .returns = returns,
				   .nr_returns = u.nr_returns, .nr_fp = u.nr_fp };
	memcpy(returns, b + sizeof(u) + u.len, (size_t)u.nr_returns * 16);
	/* the kernel's walk, aligned for the unwinder */
	memcpy(fp, b + sizeof(u) + u.len + (size_t)u.nr_returns * 16, (size_t)u.nr_fp * 8);
	s.fp = fp;
	if (unw) {
		bool by_fp = false;

		fr.no_image = !unwinder__covers(unw, u.pid, u.ip);

		fr.n = unwinder__unwind(unw, &s, frames, u.max < FRAMES_MAX ? (int)u.max : FRAMES_MAX,
					&by_fp);
		fr.by_fp = by_fp;
	}
	free(b);
	/* the answer's size, measured first: not a worst case allocated on every sample */
	need = sizeof(fr);
	for (int i = 0; i < fr.n; i++) {
		const char *str[3] = { frames[i].function, frames[i].module, frames[i].file };

		need += sizeof(struct wire_frame);
		for (int k = 0; k < 3; k++)
			need += str[k] ? strnlen(str[k], WIRE_STR_MAX - 1) : 0;
	}
	out = malloc(need);
	if (!out)
		return -ENOMEM;
	p = out + sizeof(fr);
	for (int i = 0; i < fr.n; i++) {
		struct wire_frame wf = { .pc = frames[i].pc, .rel_pc = frames[i].rel_pc,
					 .line = frames[i].line, .inlined = frames[i].inlined };
		uint8_t *at = p;

		p += sizeof(wf);
		wf.len[0] = put_str(&p, frames[i].function);
		wf.len[1] = put_str(&p, frames[i].module);
		wf.len[2] = put_str(&p, frames[i].file);
		memcpy(at, &wf, sizeof(wf));
	}
	memcpy(out, &fr, sizeof(fr));
	err = wire__send(ANALYSER_FD, WIRE_FRAMES, out, (uint64_t)(p - out));
	free(out);
	return err;
}

void unwinding__forget(int32_t pid)
{
	if (unw)
		unwinder__forget(unw, (uint32_t)pid);
}

void unwinding__end(void)
{
	unwinder__free(unw);
	unw = NULL;
}
