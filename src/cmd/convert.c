// SPDX-License-Identifier: MIT
#include "cmd/convert.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "capture/capture.h"
#include "capture/replay.h"
#include "lib/sandbox.h"
#include "lib/util.h"
#include "pipeline/pipeline.h"
#include "sinks/outputs.h"

struct conversion {
	struct outputs out;
	unsigned int begun;	/* processes begun */
	int ret;
};

/* A process of the capture begins: its sinks, writing into the shared outputs. */
static int on_begin(void *ctx, struct replay_proc *p)
{
	struct conversion *c = ctx;

	/* a second process: from now on every alert says whose it is */
	if (c->begun++)
		c->out.several = true;
	return outputs__add_sinks(&c->out, &p->pipe, false);
}

/* A process of the capture ended: its pipeline finished, its report. */
static void on_end(void *ctx, struct replay_proc *p)
{
	struct conversion *c = ctx;
	struct run_info info;

	memset(&info, 0, sizeof(info));
	info.seconds = (double)(p->stop - p->pipe.model.t0) / 1e9;
	info.end_reason = p->reason;
	info.maps_only = p->maps_only;
	info.sample_hz = p->sample_hz;
	info.runtime = p->pipe.runtime;
	info.no_snapshot = !replay__has_snapshot(p);
	memcpy(info.stats, p->counters, sizeof(info.stats));
	if (outputs__end(&c->out, &p->pipe, p->stop, replay__stats(p), &info) != EXIT_OK)
		c->ret = EXIT_FAIL;
}

/* What was skipped, said once the replay is over. */
static void say_unknown(const char *path, const struct replay *rp)
{
	for (size_t i = 0; i < rp->nr; i++) {
		const struct model *m = &rp->procs[i]->pipe.model;
		char kinds[64];

		if (!m->n.unknown)
			continue;
		report__unknown_kinds(kinds, sizeof(kinds), m);
		err_msg("capture '%s' holds %llu records of kinds this asynctraced does not know "
			"(%s): skipped; a newer asynctraced converts them\n",
			path, (unsigned long long)m->n.unknown, kinds);
	}
	if (rp->strays)
		err_msg("capture '%s' holds %llu records of no process it began: skipped\n", path,
			(unsigned long long)rp->strays);
}

int convert__run(const struct options *o)
{
	/* each threshold not given on the command line: the capture's */
	struct detect_config detect = o->session.detect;
	struct conversion c = { .ret = EXIT_OK };
	const struct replay_ops ops = { .begin = on_begin, .end = on_end, .ctx = &c };
	struct capture_reader *r;
	struct replay rp = { 0 };
	char why[256];
	int err;

	err = capture_reader__open(&r, o->capture, why, sizeof(why));
	if (err) {
		err_msg("cannot read capture '%s': %s\n", o->capture, why);
		return EXIT_FAIL;
	}
	if (capture_reader__version(r) < 2)
		err_msg("capture '%s' is of format version %u, which has no checksums: damage "
			"in it may go unnoticed\n",
			o->capture, capture_reader__version(r));
	err = outputs__open(&c.out, &o->session.out, false);
	if (!err)
		err = replay__init(&rp, r, &detect, &ops);
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
	if (!err && !o->session.no_sandbox) {
		err = sandbox__filter(0, -1, 0, 0);
		if (err)
			err_msg("failed to install the seccomp filter: %s (--no-sandbox runs "
				"without it)\n",
				strerror(-err));
	}
	if (err) {
		replay__free(&rp);
		outputs__free(&c.out);
		capture_reader__free(r);
		return EXIT_FAIL;
	}
	err = replay__run(&rp, r);
	/* What came before any damage is written out all the same. */
	replay__end(&rp);
	if (outputs__close(&c.out) != EXIT_OK)
		c.ret = EXIT_FAIL;
	if (err) {
		err_msg("capture '%s' is damaged %s; converted the %llu records before it\n",
			o->capture, capture_reader__error(r), (unsigned long long)rp.records);
		c.ret = EXIT_FAIL;
	}
	say_unknown(o->capture, &rp);
	if (sandbox__say_refused())
		c.ret = EXIT_FAIL;
	replay__free(&rp);
	capture_reader__free(r);
	return c.ret;
}
