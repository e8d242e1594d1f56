// SPDX-License-Identifier: MIT
#include "sinks/outputs.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/outbuf.h"
#include "lib/util.h"
#include "pipeline/unseen.h"
#include "sinks/alerts.h"
#include "sinks/board.h"
#include "sinks/console.h"
#include "sinks/pftrace_file.h"
#include "sinks/trace_json.h"
#include "sinks/trace_proto.h"

/* Whether o asks for a live view (and may have one). */
static bool live(const struct outputs_opts *o)
{
	return !o->quiet && (o->live == 1 || (o->live < 0 && isatty(STDERR_FILENO)));
}

int outputs__open(struct outputs *out, const struct outputs_opts *o, bool several)
{
	int err;

	memset(out, 0, sizeof(*out));
	out->o = o;
	out->next_seq = 1;
	out->several = several;
	if (several && live(o) && (err = board__new(&out->board, stderr)))
		return err;
	if (o->alerts && (err = outbuf__check(o->alerts))) {
		err_msg("cannot write alerts to '%s': %s\n", o->alerts, outbuf__strerror(err));
		return err;
	}
	if (o->output && (err = outbuf__check(o->output))) {
		err_msg("cannot write trace to '%s': %s\n", o->output, outbuf__strerror(err));
		return err;
	}
	if (o->alerts && (err = outbuf__open(&out->alerts, o->alerts))) {
		err_msg("cannot write alerts to '%s': %s\n", o->alerts, outbuf__strerror(err));
		return err;
	}
	if (o->output) {
		err = outbuf__open(&out->trace, o->output);
		/* created at once, an empty trace a loadable file: a bad path fails now */
		if (!err && o->format == FORMAT_PERFETTO)
			err = pftrace_file__new(&out->pftrace, out->trace,
						o->trace_compression != COMPRESSION_NONE);
		if (!err)
			err = o->format == FORMAT_PERFETTO ? pftrace_file__flush(out->pftrace)
							   : trace_json__begin(out->trace);
		if (err) {
			err_msg("cannot write trace to '%s': %s\n", o->output,
				outbuf__strerror(err));
			return err;
		}
	}
	return 0;
}

int outputs__add_sinks(struct outputs *out, struct pipeline *p, bool live_view)
{
	const struct outputs_opts *o = out->o;
	struct console_opts co = {
		.out = stderr,
		.live = live_view && !out->several && live(o),
		.print_alerts = !o->quiet,
		.name_process = &out->several,
		.board = out->board,
		.sample_hz = o->sample_hz,
		.queues_unseen = o->sample_hz && unseen__for("queue_depths", p->runtime),
	};
	struct sink *sink;
	int err = console__new(&sink, &co);

	if (!err)
		err = pipeline__add_sink(p, sink);
	if (!err && out->alerts) {
		err = alert_log__new(&sink, out->alerts);
		if (!err)
			err = pipeline__add_sink(p, sink);
	}
	if (!err && out->trace) {
		/* options__parse took the format from the name when --format did not say */
		err = o->format == FORMAT_PERFETTO ? trace_proto__new(&sink, out->pftrace,
								      out->next_seq++)
						   : trace_json__new(&sink, out->trace);
		if (!err)
			err = pipeline__add_sink(p, sink);
	}
	if (err)
		err_msg("cannot set up the outputs: %s\n", strerror(-err));
	return err;
}

/* The JSON summary rendered in memory (a memfd), for on_summary. 0, or -errno. */
static int hand_summary(struct outputs *out, struct pipeline *p, const struct stats *st,
			const struct run_info *info)
{
	int fd = memfd_create("asynctraced-summary", MFD_CLOEXEC), copy, err;
	struct outbuf *ob;
	struct stat sb;
	char *text;

	if (fd < 0)
		return -errno;
	copy = dup(fd);
	/* the copy is the outbuf's, closed with it (or at once, if it fails) */
	err = copy < 0 ? -errno : outbuf__from_fd(&ob, copy);
	if (err) {
		close(fd);
		return err;
	}
	report__json(ob, &p->model, &p->detector, st, info);
	err = outbuf__flush(ob);
	outbuf__free(ob);
	if (!err && fstat(fd, &sb))
		err = -errno;
	text = err ? NULL : malloc((size_t)sb.st_size + 1);
	if (!err && !text)
		err = -ENOMEM;
	if (!err && pread(fd, text, (size_t)sb.st_size, 0) != sb.st_size)
		err = -EIO;
	if (!err) {
		text[sb.st_size] = '\0';
		out->on_summary(out->summary_ctx, text, (size_t)sb.st_size);
	}
	free(text);
	close(fd);
	return err;
}

int outputs__end(struct outputs *out, struct pipeline *p, uint64_t now, const struct stats *st,
		 const struct run_info *info)
{
	const struct outputs_opts *o = out->o;
	int err, ret = EXIT_OK;

	if (out->board)
		board__erase(out->board); /* the report goes where the board was */
	err = pipeline__finish(p, now);
	if (err && !out->failed) {
		err_msg("failed to write '%s': %s\n", o->output ? o->output : o->alerts,
			strerror(-err));
		out->failed = true;	/* said once */
	}
	if (err)
		ret = EXIT_FAIL;
	out->events += p->model.n.events;
	err = out->on_summary ? hand_summary(out, p, st, info) : 0;
	if (err) {
		err_msg("failed to hand over the summary: %s\n", strerror(-err));
		ret = EXIT_FAIL;
	}
	if (o->summary == SUMMARY_JSON) {
		struct outbuf *ob;

		report__text(stderr, &p->model, &p->detector, st, info, false);
		/* one object per process, each on its own line */
		err = outbuf__open(&ob, "-");
		if (!err) {
			report__json(ob, &p->model, &p->detector, st, info);
			err = outbuf__flush(ob);
			outbuf__free(ob);
		}
		if (err) {
			err_msg("failed to write the summary: %s\n", strerror(-err));
			ret = EXIT_FAIL;
		}
	} else {
		report__text(stderr, &p->model, &p->detector, st, info, true);
	}
	return ret;
}

/* "wrote t.pftrace: 4.8 MB, 97 bytes per event" */
static void say_written(const char *path, uint64_t events)
{
	struct stat st;

	if (!strcmp(path, "-") || stat(path, &st) || !S_ISREG(st.st_mode)) {
		info_msg("wrote %s\n", path);
		return;
	}
	info_msg("wrote %s: %.1f MB, %.0f bytes per event\n", path, (double)st.st_size / 1e6,
		events ? (double)st.st_size / (double)events : 0.0);
}

int outputs__close(struct outputs *out)
{
	const struct outputs_opts *o = out->o;
	int ret = EXIT_OK, err;

	if (out->alerts && (err = outbuf__flush(out->alerts))) {
		if (!out->failed)
			err_msg("failed to write '%s': %s\n", o->alerts, strerror(-err));
		ret = EXIT_FAIL;
	}
	if (out->trace) {
		err = o->format == FORMAT_PERFETTO ? pftrace_file__flush(out->pftrace)
						   : trace_json__end(out->trace);
		if (err) {
			if (!out->failed)
				err_msg("failed to write '%s': %s\n", o->output, strerror(-err));
			ret = EXIT_FAIL;
		} else {
			say_written(o->output, out->events);
		}
	}
	outputs__free(out);
	return ret;
}

int outputs__reopen_alerts(struct outputs *out)
{
	if (!out->alerts)
		return 0;
	return outbuf__reopen(out->alerts, out->o->alerts);
}

void outputs__hide(struct outputs *out)
{
	if (out->board)
		board__erase(out->board);
}

void outputs__draw(struct outputs *out)
{
	if (out->board)
		board__draw(out->board);
}

void outputs__free(struct outputs *out)
{
	board__free(out->board);
	out->board = NULL;
	outbuf__free(out->alerts);
	pftrace_file__free(out->pftrace);
	outbuf__free(out->trace);
	out->alerts = out->trace = NULL;
	out->pftrace = NULL;
}
