// SPDX-License-Identifier: MIT
/*
 * A tracing session (trace and record): one loaded BPF object serves every
 * process traced. Each process (struct traced) has its runtime found, its
 * probes attached, and its own pipeline (model -> detectors -> sinks) fed
 * the ring buffer's records by their pid and samples of its maps; its sinks
 * write into the session's shared outputs. Without -p the session follows
 * the host: processes that start later are looked at once a second, and
 * traced if they run a known runtime. A process that exits gets its report
 * and is let go; the session runs until interrupted, the duration elapses,
 * or (with -p) every target has exited. `record` sends the records of its
 * one process to a capture instead of a pipeline.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "lib/sandbox.h"
#include "lib/util.h"
#include "pipeline/pipeline.h"
#include "session/session_priv.h"
#include "sinks/flight.h"
#include "sinks/metrics.h"
#include "stacks/ksyms.h"

#define TICK_NS (100 * 1000 * 1000ull)
/* Ticks between two snapshots of the per-task maps (the live view's pace). */
#define TASK_SAMPLE_TICKS 10
/*
 * Following the host: every SCAN_TICKS the whole host is looked through
 * again, for what the exec and fork hooks could not tell (a full ring, a
 * library mapped late; follow.c).
 */
#define SCAN_TICKS 50
/* Records handled between two looks at signals and the clock. */
#define CONSUME_BATCH 65536
/* A process that exited is ended this long after: its last records reach us first. */
#define EXIT_GRACE_NS (50 * 1000 * 1000ull)
/* run --follow-children: the longest its command is held, waiting to be looked at */
#define ROOT_HOLD_MAX_NS (10 * 1000000000ull)

/* What an epoll event is about, when not a process (struct traced *). */
enum { EV_RINGS = 1, EV_SIGNALS, EV_STDOUT, EV_BIRTHS, EV_EXAMINED };

struct traced *session__traced_of(struct session *s, uint32_t pid)
{
	if (!s->last || (uint32_t)s->last->target.pid != pid)
		s->last = u64map__get(&s->by_pid, pid);
	return s->last;
}

/* The flight recorder's view of a process: its live model (names, clock). */
const struct model *session__live_model(void *ctx, uint32_t pid)
{
	struct traced *tr = session__traced_of(ctx, pid);

	return tr && tr->piped ? &tr->pipe.model : NULL;
}

/* A ring buffer record: to the process it names. */
int session__on_record(void *ctx, const void *data, size_t size)
{
	struct session *s = ctx;
	struct at_hdr h;
	struct traced *tr;

	if (size < sizeof(h)) {
		s->malformed++;
		return 0;
	}
	memcpy(&h, data, sizeof(h));
	tr = session__traced_of(s, h.pid);
	if (tr)
		traced__record(tr, data, size);
	else
		s->stray++; /* its process was let go while the record waited in a ring */
	return 0;
}

/* On SIGUSR1: the report so far of every process, on stderr, whatever --summary says. */
static void report_now(struct session *s)
{
	struct run_info info;

	if (!s->cap)
		outputs__hide(&s->out);
	for (size_t i = 0; i < s->nr; i++) {
		struct traced *tr = s->targets[i];

		if (s->cap) {
			traced__run_info(s, tr, &info, "still recording", 0);
			info_msg("recording: %.1f s, %llu records, %.1f MB, %llu dropped\n",
				info.seconds, (unsigned long long)capture_writer__records(s->cap),
				(double)capture_writer__bytes(s->cap) / 1e6,
				(unsigned long long)report__dropped(&info));
			continue;
		}
		tracer__snapshot(s->tracer, tr->target.pid, &tr->snap, true,
				 s->o->detect.lost_waker_ns, 0);
		traced__run_info(s, tr, &info, "still tracing", 0);
		report__text(stderr, &tr->pipe.model, &tr->pipe.detector, &tr->snap, &info, true);
	}
	if (!s->nr)
		err_msg("no process traced yet: %zu looked at so far\n", s->seen.len);
}

/* --metrics: every series rendered anew, for the scrapes to come. */
static void publish_metrics(struct session *s)
{
	struct metrics_self self = {
		.traced = s->nr,
		.missed = s->over_max,
		.attach_failures = s->failed,
	};

	if (s->metrics)
		metrics__publish(s->metrics, &self);
}

/*
 * The signals that stop tracing cleanly. SIGHUP is an ssh session or a
 * terminal going away: the trace and report still get written, rather than
 * the default death that leaves a trace cut short. (Following the host with
 * --alerts, SIGHUP asks instead for the alert log to be opened again.)
 */
static const int stop_signals[] = { SIGINT, SIGTERM, SIGHUP };

static const char *stop_reason(uint32_t signo)
{
	if (signo == SIGINT)
		return "interrupted";
	return signo == SIGHUP ? "hung up" : "terminated";
}

void session__stop_signals(sigset_t *sigs)
{
	sigemptyset(sigs);
	for (size_t i = 0; i < sizeof(stop_signals) / sizeof(stop_signals[0]); i++)
		sigaddset(sigs, stop_signals[i]);
}

/* run: its command, held at its entry point, let go (once traced, or known not to be). */
void session__release_root(struct session *s)
{
	if (s->hooks && !s->released) {
		s->released = true;
		s->hooks->release(s->hooks->ctx);
	}
}

/* Processes tr that exited a while ago: ended and let go (the session goes on). */
static void end_exited(struct session *s, uint64_t now)
{
	for (size_t i = s->nr; i-- > 0;) {
		struct traced *tr = s->targets[i];

		if (!tr->exited || now < tr->exited + EXIT_GRACE_NS)
			continue;
		traced__end(s, tr, "target exited", tr->exited);
		traced__drop(s, tr);
	}
}

static size_t running(const struct session *s)
{
	size_t n = 0;

	for (size_t i = 0; i < s->nr; i++)
		n += !s->targets[i]->exited;
	return n;
}

/* A signal: SIGUSR1 reports, SIGHUP following the host reopens --alerts; the others stop. */
static const char *on_signal(struct session *s)
{
	struct signalfd_siginfo si;
	int err;

	if (read(s->sfd, &si, sizeof(si)) != sizeof(si))
		return NULL;
	if (si.ssi_signo == SIGUSR1) {
		report_now(s);
		return NULL;
	}
	if (si.ssi_signo == SIGUSR2) {
		char path[512];

		if (!s->flight) {
			info_msg("SIGUSR2: no flight recorder (--flight-recorder SECONDS)\n");
			return NULL;
		}
		for (size_t i = 0; i < s->nr; i++) {
			flight__request(s->flight, (uint32_t)s->targets[i]->target.pid, now_ns(), path,
					sizeof(path));
			info_msg("SIGUSR2: dumping pid %d to %s\n", s->targets[i]->target.pid, path);
		}
		return NULL;
	}
	if (si.ssi_signo == SIGHUP && s->follow && s->o->out.alerts) {
		err = outputs__reopen_alerts(&s->out);
		if (err)
			err_msg("cannot open '%s' again: %s; alerts still go where they went\n",
				s->o->out.alerts, strerror(-err));
		return NULL;
	}
	s->stop_signo = (int)si.ssi_signo;
	return stop_reason(si.ssi_signo);
}

/*
 * Reading where idle tasks wait costs the session's loop the read (about a
 * tenth of a millisecond; a task never read before is found along its
 * runtime's list, longer in a process of many): at most --wait-reads
 * percent of its time, in bursts of at most WAIT_READ_BURST_NS, and only
 * of tasks idle WAIT_MIN_IDLE_NS, whose span is likely to outlast the read.
 */
#define WAIT_READ_BURST_NS 20000000ll
#define WAIT_MIN_IDLE_NS 10000000ull

void session__drain(void *ctx)
{
	struct session *s = ctx;

	tracer__consume(s->tracer, CONSUME_BATCH, false);
}

void session__place_waits(struct session *s, uint64_t now)
{
	uint32_t pct = s->o->wait_read_pct;

	/* sample mode: a span between two sampled runs may hold polls never seen */
	if (!pct || s->o->sample_mode || !s->placing || !s->nr)
		return;
	if (s->wait_budget_at)
		s->wait_budget_ns += (int64_t)((now - s->wait_budget_at) * pct / 100);
	else
		s->wait_budget_ns = WAIT_READ_BURST_NS;
	s->wait_budget_at = now;
	if (s->wait_budget_ns > WAIT_READ_BURST_NS)
		s->wait_budget_ns = WAIT_READ_BURST_NS;
	/* the processes in turn, from the one after the last read first */
	for (size_t k = 0; k < s->nr && s->wait_budget_ns > 0; k++) {
		struct traced *tr = s->targets[(s->wait_next + k) % s->nr];

		if (tr->exited || !tr->pipe.model.where)
			continue;
		s->wait_budget_ns -= (int64_t)model__read_waits(&tr->pipe.model, now,
								WAIT_MIN_IDLE_NS,
								(uint64_t)s->wait_budget_ns);
	}
	s->wait_next = (s->wait_next + 1) % s->nr;
}

/* One tick: samples, time passing for the pipelines, processes come and gone. */
static const char *tick(struct session *s, uint64_t now, int ticks)
{
	for (size_t i = 0; i < s->nr; i++) {
		struct traced *tr = s->targets[i];

		traced__sample(s, tr, ticks % TASK_SAMPLE_TICKS == 0, true, 0);
		traced__deescalate(s, tr, now);
		if (!s->cap)
			pipeline__tick(&tr->pipe, now);
	}
	if (!s->cap)
		session__place_waits(s, now);
	if (ticks % TASK_SAMPLE_TICKS == 0 && !s->cap)
		outputs__draw(&s->out);
	if (s->cap) {
		capture__tick(s->cap, now);
		/* what is recorded survives asynctraced being killed */
		capture_writer__flush(s->cap);
	}
	end_exited(s, now);
	if (s->flight)
		flight__tick(s->flight, now, 0, session__live_model, s);
	if (ticks % TASK_SAMPLE_TICKS == 0)
		publish_metrics(s);
	if (s->follow)
		follow__look_at_births(s, now);
	if (s->follow && ticks % SCAN_TICKS == 0)
		follow__scan_new(s);
	if (!s->follow && !s->nr)
		return "every target exited";
	/* never held for good: whatever kept it from being looked at, it runs */
	if (s->hooks && !s->released && now > s->start + ROOT_HOLD_MAX_NS) {
		warn_msg("pid %d not looked at after %llu s: let go (traced still, if it runs a "
			 "known runtime, from when it is)\n",
			 s->hooks->root, ROOT_HOLD_MAX_NS / 1000000000ull);
		session__release_root(s);
	}
	if (s->root_pidfd >= 0 && poll(&(struct pollfd){ .fd = s->root_pidfd, .events = POLLIN },
				       1, 0) > 0)
		return "the command exited";
	return NULL;
}

static int epoll_add(int ep, int fd, uint32_t events, uint64_t tag)
{
	struct epoll_event ev = { .events = events, .data.u64 = tag };

	return epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
}

/* Runs until a signal, the deadline, or (with -p) the targets' exit; says which. */
static const char *trace_loop(struct session *s, uint64_t deadline)
{
	struct epoll_event ev[16];
	uint64_t next_tick = now_ns() + TICK_NS;
	const char *why = NULL;
	int ticks = 0;

	/* A first look at the maps: the baseline that rates are measured from. */
	for (size_t i = 0; i < s->nr; i++)
		traced__sample(s, s->targets[i], true, true, 0);
	epoll_add(s->ep, tracer__fd(s->tracer), EPOLLIN, EV_RINGS);
	epoll_add(s->ep, s->sfd, EPOLLIN, EV_SIGNALS);
	if (s->follow) {
		epoll_add(s->ep, tracer__births_fd(s->tracer), EPOLLIN, EV_BIRTHS);
		epoll_add(s->ep, examiner__fd(s->examiner), EPOLLIN, EV_EXAMINED);
	}
	/*
	 * A trace on standard output: a pipe whose reader went away (| head)
	 * reports an error at once, and tracing on would write to nobody, with
	 * SIGPIPE ignored, until stopped by hand. Not a pipe (a file): no event.
	 */
	if (s->o->out.output && !strcmp(s->o->out.output, "-"))
		epoll_add(s->ep, STDOUT_FILENO, 0, EV_STDOUT);
	while (!why) {
		uint64_t now = now_ns();
		uint64_t until = deadline && deadline < next_tick ? deadline : next_tick;
		int timeout = until > now ? (int)((until - now) / 1000000) + 1 : 0;
		int n = epoll_wait(s->ep, ev, 16, timeout);

		for (int i = 0; i < n && !why; i++) {
			uint64_t tag = ev[i].data.u64;

			if (tag == EV_SIGNALS) {
				why = on_signal(s);
			} else if (tag == EV_BIRTHS) {
				tracer__births_consume(s->tracer);
			} else if (tag == EV_EXAMINED) {
				follow__take_examined(s);
			} else if (tag == EV_STDOUT) {
				/* the write that fails at the end says so, once */
				why = "standard output closed";
			} else if (tag != EV_RINGS) {
				struct traced *tr = ev[i].data.ptr;

				epoll_ctl(s->ep, EPOLL_CTL_DEL, tr->target.pidfd, NULL);
				/* the last one with -p ends the session: finish() ends it */
				if (!s->follow && running(s) == 1)
					why = "target exited";
				else
					tr->exited = now_ns();
			}
		}
		/* Records are batched without wake-ups: drain on every turn. */
		if (tracer__consume(s->tracer, CONSUME_BATCH, false) < 0 && !why)
			why = "ring buffer read failed";
		now = now_ns();
		if (now >= next_tick) {
			const char *done = tick(s, now, ++ticks);

			if (!why)
				why = done;
			next_tick = now + TICK_NS;
		}
		if (deadline && now >= deadline && !why)
			why = "duration elapsed";
	}
	return why;
}

/* stop -> detach -> drain -> sample -> close episodes -> flush -> reports */
static int finish(struct session *s, const char *why)
{
	int ret;

	s->stop = now_ns();
	for (size_t i = 0; i < s->nr; i++)
		if (!s->targets[i]->exited)
			traced__confirm_waits(s, s->targets[i], false);
	tracer__detach(s->tracer);
	while (tracer__consume(s->tracer, CONSUME_BATCH, true) > 0)
		;
	for (size_t i = 0; i < s->nr; i++) {
		struct traced *tr = s->targets[i];

		traced__end(s, tr, tr->exited ? "target exited" : why,
			   tr->exited ? tr->exited : s->stop);
	}
	if (s->cap)
		return say__capture_written(s, why);
	publish_metrics(s);
	ret = outputs__close(&s->out);
	if (s->follow || s->ever > 1 || s->stray || s->malformed)
		say__totals(s, why);
	return ret == EXIT_OK ? s->ret : ret;
}

int session__run(const struct session_opts *o)
{
	return session__run_with(o, NULL);
}

int session__run_with(const struct session_opts *o, struct session_hooks *h)
{
	struct session s = { .o = o, .hooks = h, .sfd = -1, .root_pidfd = -1, .ret = EXIT_OK };
	sigset_t sigs;
	const char *why;
	int ret = EXIT_FAIL;

	s.follow = !o->nr_pids;
	s.max_targets = o->max_targets ? o->max_targets : DEFAULT_MAX_TARGETS;
	s.share_files = s.follow && !o->comm && !o->exclude_comm && !o->cgroup && !h;
	if (h && s.follow)
		s.root_pidfd = (int)syscall(SYS_pidfd_open, h->root, 0);
	u64map__init(&s.by_pid);
	u64map__init(&s.seen);
	u64map__init(&s.files);
	s.ana.sock = -1;
	s.stacks.sock = -1;
	s.ex_opts.verbose = o->verbose;
	s.ex_opts.probe_at_entry = o->probe_at_entry;
	s.ex_opts.remember = s.follow;
	s.ep = epoll_create1(EPOLL_CLOEXEC);
	if (s.ep >= 0 && session__start(&s) == 0) {
		if (!s.follow)
			session__release_root(&s); /* -p: traced by now */
		why = trace_loop(&s, o->duration_ns ? s.start + o->duration_ns : 0);
		/* From here a second Ctrl-C kills us the default way. */
		session__stop_signals(&sigs);
		sigprocmask(SIG_UNBLOCK, &sigs, NULL);
		ret = finish(&s, why);
		if (sandbox__say_refused())
			ret = EXIT_FAIL;
	} else {
		if (s.ep < 0)
			err_msg("epoll failed: %s\n", strerror(errno));
		/* the start may have blocked them and failed: run goes on to wait for its command */
		session__stop_signals(&sigs);
		sigprocmask(SIG_UNBLOCK, &sigs, NULL);
	}
	if (h)
		h->stopped_by = s.stop_signo;
	examiner__free(s.examiner); /* before the tracer: it may hold processes to trace */
	analyser__stop(&s.ana); /* after the examiner, which asks it */
	tracer__free(s.tracer);
	for (size_t i = 0; i < s.nr; i++)
		traced__free(s.targets[i]);
	free(s.targets);
	outputs__free(&s.out);
	metrics__close(s.metrics, !s.filtered); /* the filter forbids unlink */
	flight__free(s.flight);
	analyser__stop(&s.stacks);
	ksyms__free(s.ksyms);
	capture_writer__free(s.cap);
	u64map__clear(&s.by_pid);
	u64map__clear(&s.seen);
	u64map__clear_free(&s.files);
	free(s.births);
	if (s.filter_set)
		scan_filter__free(&s.filter);
	if (s.sfd >= 0)
		close(s.sfd);
	if (s.ep >= 0)
		close(s.ep);
	if (s.root_pidfd >= 0)
		close(s.root_pidfd);
	return ret;
}
