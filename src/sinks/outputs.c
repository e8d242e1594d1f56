// SPDX-License-Identifier: MIT
#include "outputs.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alerts.h"
#include "console.h"
#include "outbuf.h"
#include "trace_json.h"
#include "trace_proto.h"
#include "util.h"


int outputs__open(struct pipeline *p, const struct options *o, bool live)
{
	struct console_opts co = {
		.out = stderr,
		.live = live && !o->quiet &&
			(o->live == 1 || (o->live < 0 && isatty(STDERR_FILENO))),
		.print_alerts = !o->quiet,
	};
	struct sink *sink;
	int err;

	/* every output judged before any is created: a refused one leaves the rest untouched */
	if (o->alerts && (err = outbuf__check(o->alerts))) {
		err_msg("cannot write alerts to '%s': %s\n", o->alerts, outbuf__strerror(err));
		return err;
	}
	if (o->output && (err = outbuf__check(o->output))) {
		err_msg("cannot write trace to '%s': %s\n", o->output, outbuf__strerror(err));
		return err;
	}
	err = console__new(&sink, &co);
	if (!err)
		err = pipeline__add_sink(p, sink);
	if (!err && o->alerts) {
		err = alert_log__new(&sink, o->alerts);
		if (err) {
			err_msg("cannot write alerts to '%s': %s\n", o->alerts,
				outbuf__strerror(err));
			return err;
		}
		err = pipeline__add_sink(p, sink);
	}
	if (!err && o->output) {
		/* options__parse took the format from the name when --format did not say */
		err = o->format == FORMAT_PERFETTO ? trace_proto__new(&sink, o->output)
						   : trace_json__new(&sink, o->output);
		if (err) {
			err_msg("cannot write trace to '%s': %s\n", o->output,
				outbuf__strerror(err));
			return err;
		}
		err = pipeline__add_sink(p, sink);
	}
	return err;
}

/* "wrote t.pftrace: 4.8 MB, 97 bytes per event" */
static void say_written(const char *path, const struct model *m)
{
	struct stat st;
	uint64_t events = m->n.events;

	if (!strcmp(path, "-") || stat(path, &st) || !S_ISREG(st.st_mode)) {
		err_msg("wrote %s\n", path);
		return;
	}
	err_msg("wrote %s: %.1f MB, %.0f bytes per event\n", path, (double)st.st_size / 1e6,
		events ? (double)st.st_size / (double)events : 0.0);
}

int outputs__finish(struct pipeline *p, const struct options *o, uint64_t now,
		    const struct stats *st, const struct run_info *info)
{
	int err, ret = EXIT_OK;

	err = pipeline__finish(p, now);
	if (err) {
		err_msg("failed to write '%s': %s\n", o->output ? o->output : o->alerts,
			strerror(-err));
		ret = EXIT_FAIL;
	}
	if (o->summary == SUMMARY_JSON) {
		struct outbuf *ob;

		report__text(stderr, &p->model, &p->detector, st, info, false);
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
	if (o->output && ret == EXIT_OK)
		say_written(o->output, &p->model);
	return ret;
}
