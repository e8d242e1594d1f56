/* SPDX-License-Identifier: MIT */
/*
 * What the command line asks to be written, for tracing live and converting a
 * capture alike: the sinks (console, alert log, trace) and the reports.
 *
 * The files are the session's: one alert log and one trace, opened once.
 * Each process traced has its own pipeline, and its own sinks writing into
 * those shared files (whole records each: alert lines, JSON events, protobuf
 * packets of its own sequence), so a trace holds every process as its own
 * Perfetto process.
 */
#ifndef OUTPUTS_H
#define OUTPUTS_H

#include <stdbool.h>
#include <stdint.h>

#include "lib/exits.h"
#include "pipeline/pipeline.h"
#include "sinks/report.h"
#include "source/stats.h"

enum summary_format {
	SUMMARY_TEXT = 0,
	SUMMARY_JSON,
};

enum trace_format {
	FORMAT_AUTO = 0,	/* from the output's name */
	FORMAT_JSON,
	FORMAT_PERFETTO,
};

enum trace_compression {
	COMPRESSION_DEFAULT = 0, /* deflate */
	COMPRESSION_DEFLATE,
	COMPRESSION_NONE,
};

/* What to write, and where. */
struct outputs_opts {
	const char *output;	/* the trace (-o; record: the capture), or NULL; "-": stdout */
	enum trace_format format;
	enum trace_compression trace_compression; /* of a protobuf trace's packets */
	const char *alerts;	/* JSON lines file, or NULL */
	int live;		/* -1: when stderr is a terminal; 0 off; 1 on */
	bool quiet;		/* no alert lines on the console */
	enum summary_format summary;
	/* --mode sample's rate (0: probe mode): the live view leaves out what it cannot see */
	uint32_t sample_hz;
};

struct outbuf;
struct pftrace_file;

struct outputs {
	const struct outputs_opts *o;
	struct outbuf *alerts;	/* --alerts, or NULL */
	struct outbuf *trace;	/* -o, or NULL */
	struct pftrace_file *pftrace; /* the trace's packets, when protobuf */
	uint32_t next_seq;	/* the next protobuf writer's packet sequence */
	uint64_t events;	/* events of every process ended so far */
	bool several;		/* several processes may be traced: alerts name theirs */
	bool failed;		/* a write failed, and was said */
	struct board *board;	/* several, on a terminal: the live view, a line each */
	/* each process's summary (the JSON of --summary json), handed over at its end */
	void (*on_summary)(void *ctx, const char *json, size_t len);
	void *summary_ctx;
};

/*
 * Opens the files o asks for, every one judged before any is created (a
 * refused one leaves the rest untouched); several: more than one process
 * may be traced. 0, or -errno after a message.
 */
int outputs__open(struct outputs *out, const struct outputs_opts *o, bool several);
/*
 * Adds one process's sinks to its pipeline; live_view: a live view of it on a
 * terminal, as o says (else its alerts only). 0, or -errno after a message.
 */
int outputs__add_sinks(struct outputs *out, struct pipeline *p, bool live_view);
/*
 * One process ends: its pipeline finishes (open episodes closed at now) and
 * its report is written as o->summary says. EXIT_OK, or EXIT_FAIL after a
 * message when a write failed.
 */
int outputs__end(struct outputs *out, struct pipeline *p, uint64_t now, const struct stats *st,
		 const struct run_info *info);
/* Ends the files (a JSON trace's closing) and says what was written; EXIT_OK or EXIT_FAIL. */
int outputs__close(struct outputs *out);
/* Several processes: the live view drawn again, once every process's line is fresh. */
void outputs__draw(struct outputs *out);
/* ... or taken off the screen, for other lines (a report on SIGUSR1). */
void outputs__hide(struct outputs *out);
/* Lets the files go as they are (tracing never started). */
void outputs__free(struct outputs *out);
/*
 * Opens --alerts again (logrotate moved it away): alerts already written
 * stay in the old file, later ones go to the new. 0, or -errno.
 */
int outputs__reopen_alerts(struct outputs *out);

#endif
