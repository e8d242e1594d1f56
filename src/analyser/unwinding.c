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
#include "analyser/debug_files.h"
#include "analyser/wire.h"
#include "stacks/unwind.h"

/* A sample's parts at most: far above what the BPF side copies (AT_STACK_BYTES and co.). */
#define STACK_MAX (64u << 10)
#define RETURNS_MAX 64
#define FP_MAX 256
#define FRAMES_MAX 256

static struct unwinder *unw;

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

int unwinding__prime(const struct wire_hdr *h)
{
	struct unwind_file *files = NULL, *debug = NULL;
	struct debug_wants w = { 0 };
	struct wire_prime pr;
	uint32_t nr_debug = 0;
	uint64_t at = sizeof(pr);
	int err, status = 0, *fds = NULL;
	uint8_t *b = wire__read_body(ANALYSER_FD, h, sizeof(pr), sizeof(pr) + WIRE_MAPS_MAX +
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
		unwinder__wanted(unw, (uint32_t)pr.pid, debug_wants__add, &w);
	err = debug_wants__exchange(&w, &debug, &nr_debug);
	debug_wants__free(&w);
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
	uint8_t *b = wire__read_body(ANALYSER_FD, h, sizeof(u), sizeof(u) + STACK_MAX + RETURNS_MAX * 16 + FP_MAX * 8,
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
