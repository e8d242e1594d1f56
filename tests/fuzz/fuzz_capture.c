// SPDX-License-Identifier: MIT
/*
 * libFuzzer target: any bytes as a capture, through the reader, the replay,
 * the model and detectors, both trace writers, the alert log and both
 * reports. Whatever the bytes, nothing may crash, hang or leak (ASan and
 * UBSan watch); a damaged capture must simply be refused.
 *
 * A mutated capture almost never passes its chunks' checksums, which would
 * keep the fuzzer out of everything behind them: each input whose
 * checksums fail is read once as it is (the checks) and once with its
 * checksums made right (the records behind them).
 *
 *   make fuzz                      fuzz for FUZZ_TIME seconds (default 60)
 *   build/fuzz/fuzz_capture -runs=0 tests/fuzz/corpus   replay the corpus
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../capture_seal.h"
#include "capture/capture.h"
#include "capture/replay.h"
#include "lib/outbuf.h"
#include "pipeline/pipeline.h"
#include "sinks/alerts.h"
#include "sinks/console.h"
#include "sinks/pftrace_file.h"
#include "sinks/report.h"
#include "sinks/trace_json.h"
#include "sinks/trace_proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static FILE *devnull;

static void add(struct pipeline *p, int err, struct sink *s)
{
	if (!err)
		pipeline__add_sink(p, s);
}

static struct outbuf *sink_out;
static struct pftrace_file *sink_pftrace;

/* Every sink a conversion has, for each process the capture begins. */
static int on_begin(void *ctx, struct replay_proc *pr)
{
	struct console_opts co = { .out = devnull, .print_alerts = true };
	struct pipeline *p = &pr->pipe;
	struct sink *s;

	add(p, console__new(&s, &co), s);
	if (sink_out) {
		add(p, alert_log__new(&s, sink_out), s);
		add(p, trace_json__new(&s, sink_out), s);
		if (sink_pftrace)
			add(p, trace_proto__new(&s, sink_pftrace, (uint32_t)pr->pid), s);
	}
	return 0;
}

/* ... and its end: the pipeline finished, both reports. */
static void on_end(void *ctx, struct replay_proc *pr)
{
	struct pipeline *p = &pr->pipe;
	struct run_info info = { 0 };
	struct outbuf *ob;

	pipeline__finish(p, pr->stop);
	info.seconds = (double)(pr->stop - p->model.t0) / 1e9;
	info.end_reason = pr->reason;
	info.no_snapshot = !replay__has_snapshot(pr);
	report__text(devnull, &p->model, &p->detector, replay__stats(pr), &info, true);
	if (!outbuf__open(&ob, "/dev/null")) {
		report__json(ob, &p->model, &p->detector, replay__stats(pr), &info);
		outbuf__free(ob);
	}
}

static void convert(const uint8_t *data, size_t size)
{
	const struct replay_ops ops = { .begin = on_begin, .end = on_end };
	struct detect_config opts = { 0 };
	struct capture_reader *r;
	struct replay rp;
	char err[256];

	if (!devnull)
		devnull = fopen("/dev/null", "w");
	if (!sink_out && outbuf__open(&sink_out, "/dev/null"))
		sink_out = NULL;
	if (sink_out && !sink_pftrace && pftrace_file__new(&sink_pftrace, sink_out, true))
		sink_pftrace = NULL;
	if (capture_reader__open_mem(&r, data, size, err, sizeof(err)))
		return;
	if (replay__init(&rp, r, &opts, &ops) == 0) {
		replay__run(&rp, r);
		replay__end(&rp);
	}
	replay__free(&rp);
	capture_reader__free(r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *sealed;

	convert(data, size);
	sealed = malloc(size + 1);
	if (!sealed)
		return 0;
	memcpy(sealed, data, size);
	if (capture_seal(sealed, size) && memcmp(sealed, data, size))
		convert(sealed, size);
	free(sealed);
	return 0;
}
