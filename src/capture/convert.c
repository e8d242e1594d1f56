// SPDX-License-Identifier: MIT
#include "convert.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "capture.h"
#include "outputs.h"
#include "pipeline.h"
#include "util.h"
#include "replay.h"
#include "sandbox.h"


int convert__run(const struct options *o)
{
	struct options opts = *o;
	struct capture_reader *r;
	struct pipeline pipe;
	struct outputs out = { 0 };
	struct replay rp;
	struct run_info info;
	char why[256];
	int err, ret;

	err = capture_reader__open(&r, o->capture, why, sizeof(why));
	if (err) {
		err_msg("cannot read capture '%s': %s\n", o->capture, why);
		return EXIT_FAIL;
	}
	if (capture_reader__version(r) < 2)
		err_msg("capture '%s' is of format version %u, which has no checksums: damage "
			"in it may go unnoticed\n",
			o->capture, capture_reader__version(r));
	err = replay__init(&rp, r, &pipe, &opts.detect, o->detect_given);
	if (!err)
		err = outputs__open(&out, &opts, false);
	if (!err)
		err = outputs__add_sinks(&out, &pipe, false);
	/*
	 * The capture is any file the user was handed: everything after this
	 * line parses it, with the capture and the outputs open and nothing
	 * more to open, so the sandbox of tracing applies (sandbox.h).
	 */
	if (!err) {
		err = sandbox__drop_privileges(0);
		if (err)
			err_msg("failed to drop privileges: %s\n", strerror(-err));
	}
	if (!err && !o->no_sandbox) {
		err = sandbox__filter();
		if (err)
			err_msg("failed to install the seccomp filter: %s (--no-sandbox runs "
				"without it)\n",
				strerror(-err));
	}
	if (err) {
		pipeline__free(&pipe);
		outputs__close(&out);
		replay__free(&rp);
		capture_reader__free(r);
		return EXIT_FAIL;
	}
	err = replay__run(&rp, r, &pipe);

	memset(&info, 0, sizeof(info));
	info.seconds = (double)(rp.stop - pipe.model.t0) / 1e9;
	info.end_reason = rp.ended ? rp.reason : "capture cut short";
	info.maps_only = capture_reader__process(r)->maps_only;
	info.no_snapshot = !replay__has_snapshot(&rp);
	memcpy(info.stats, rp.counters, sizeof(info.stats));
	/* What came before any damage is written out all the same. */
	ret = outputs__end(&out, &pipe, rp.stop, replay__stats(&rp), &info);
	if (outputs__close(&out) != EXIT_OK)
		ret = EXIT_FAIL;
	if (err) {
		err_msg("capture '%s' is damaged %s; converted the %llu records before it\n",
			o->capture, capture_reader__error(r), (unsigned long long)rp.records);
		ret = EXIT_FAIL;
	}
	if (pipe.model.n.unknown) {
		char kinds[64];

		report__unknown_kinds(kinds, sizeof(kinds), &pipe.model);
		err_msg("capture '%s' holds %llu records of kinds this asynctraced does not know "
			"(%s): skipped; a newer asynctraced converts them\n",
			o->capture, (unsigned long long)pipe.model.n.unknown, kinds);
	}
	if (sandbox__say_refused())
		ret = EXIT_FAIL;
	pipeline__free(&pipe);
	replay__free(&rp);
	capture_reader__free(r);
	return ret;
}
