// SPDX-License-Identifier: MIT
/*
 * A tracing session (trace and record): find the target's runtime, load and
 * attach the BPF programs, run the pipeline (ring buffer and map samples ->
 * model -> detectors -> sinks) until interrupted, the duration elapses, or
 * the target exits; then report. `record` sends the same records to a
 * capture instead of the pipeline.
 */
#include <errno.h>
#include <limits.h>
#include <linux/capability.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>

#include "attach.h"
#include "capture.h"
#include "discover.h"
#include "options.h"
#include "outbuf.h"
#include "outputs.h"
#include "pipeline.h"
#include "report.h"
#include "sampler.h"
#include "sandbox.h"
#include "scan.h"
#include "session.h"
#include "target.h"
#include "tracer.h"
#include "util.h"

#define TICK_NS (100 * 1000 * 1000ull)
/* Ticks between two snapshots of the per-task maps (the live view's pace). */
#define TASK_SAMPLE_TICKS 10
/* Records handled between two looks at signals and the clock. */
#define CONSUME_BATCH 65536

/* Everything one tracing session holds. */
struct session {
	const struct options *o;
	struct target target;
	struct discovery disc;
	struct pipeline pipe;
	struct sampler sampler;
	struct tracer *tracer;
	struct capture_writer *cap;	/* record: where records go instead */
	size_t probes_moved;		/* tokio entry probes placed past their entry */
	struct stats snap;
	uint64_t start;
	uint64_t stop;		/* 0 while tracing */
	int sfd;
};

/* record: a record and, the first time they show up, its thread's and task's names. */
static void capture_record(struct session *s, const struct at_hdr *h, size_t size)
{
	uint64_t addr = 0;
	char buf[AT_TASK_NAME_LEN];

	if (!capture__has_thread(s->cap, h->tid)) {
		if (target__thread_comm(&s->target, h->tid, buf, CAP_COMM_LEN))
			snprintf(buf, CAP_COMM_LEN, "tid %u", h->tid);
		capture__thread(s->cap, h->tid, buf);
	}
	if (h->kind == AT_EV_POLL && size >= sizeof(struct at_poll))
		addr = ((const struct at_poll *)h)->name_addr;
	else if (h->kind == AT_EV_SPAWN && size >= sizeof(struct at_spawn) &&
		 !((const struct at_spawn *)h)->name[0])
		addr = ((const struct at_spawn *)h)->name_addr;
	else if (h->kind == AT_EV_TASK_SAMPLE && size >= sizeof(struct at_task_sample))
		addr = ((const struct at_task_sample *)h)->name_addr;
	if (!capture__has_name(s->cap, addr)) {
		if (s->disc.kind == RUNTIME_USDT &&
		    target__read_str(&s->target, addr, buf, sizeof(buf)) == 0 && buf[0])
			capture__name(s->cap, addr, buf);
		else
			capture__no_name(s->cap, addr);
	}
	capture__event(s->cap, h, size);
}

static int on_record(void *ctx, const void *data, size_t size)
{
	struct session *s = ctx;

	if (!s->cap) {
		pipeline__push(&s->pipe, data, size);
	} else if (model__validate(data, size) < 0) {
		/* a record whose size lies would throw every later one out of step */
		s->pipe.model.n.malformed++;
	} else {
		capture_record(s, data, size);
	}
	return 0;
}

static void on_sample(void *ctx, const void *rec, size_t size)
{
	on_record(ctx, rec, size);
}

static int attach_all(struct session *s)
{
	struct attach_opts ao = { .probe_at_entry = s->o->probe_at_entry, .verbose = s->o->verbose };
	int err = tracer__attach_sched(s->tracer);

	if (err) {
		err_msg("failed to attach %s sched_switch: %s\n", tracer__sched_hook(s->tracer),
			strerror(-err));
		return err;
	}
	return attach__probes(s->tracer, &s->disc, &ao, &s->probes_moved);
}

/* tokio names its tasks by the future type of the raw::poll they go through. */
static void name_tokio_tasks(struct session *s)
{
	const struct tokio_binary *tb = &s->disc.tokio;

	for (size_t i = 0; i < tb->rt.nr; i++)
		if (tb->rt.sites[i].kind == TOKIO_POLL && tb->rt.sites[i].future) {
			uint64_t addr = discovery__tokio_addr(&s->disc, tb->rt.sites[i].offset);

			if (s->cap)
				capture__name(s->cap, addr, tb->rt.sites[i].future);
			else
				model__name(&s->pipe.model, addr, tb->rt.sites[i].future);
		}
}

static const char *mode_str(const struct options *o)
{
	if (o->empty_programs)
		return "empty programs (the floor: nothing is recorded)";
	if (o->command == CMD_RECORD)
		return o->no_trace ? "maps only" : "every event";
	return o->no_trace ? "maps only" : "full trace";
}

/* "tracing pid 42 (server)", or where record puts what it records */
static void say_what(const struct session *s, char *buf, size_t len)
{
	if (s->cap)
		snprintf(buf, len, "recording pid %d (%s) to %s", s->o->pid, s->target.comm,
			 s->o->output);
	else
		snprintf(buf, len, "tracing pid %d (%s)", s->o->pid, s->target.comm);
}

/* One line: what was found, and what will be attached. */
static void say_found(const struct session *s)
{
	const struct tokio_runtime *rt = &s->disc.tokio.rt;
	char moved[96] = "", what[PATH_MAX + 64];

	say_what(s, what, sizeof(what));
	if (s->disc.kind == RUNTIME_USDT) {
		err_msg("%s: %zu asynctrace probes in %s, sched_switch via %s, %s; Ctrl-C to "
			"stop\n",
			what, s->disc.nr, s->disc.sites[0].target_path,
			tracer__sched_hook(s->tracer), mode_str(s->o));
		return;
	}
	if (s->probes_moved)
		snprintf(moved, sizeof(moved),
			 "; %zu probes placed past a single-stepped entry (--probe-at)",
			 s->probes_moved);
	err_msg("%s: tokio in %s (%s mangling): %zu raw::poll instances "
		"(%zu named by future type%s%s), %zu wake, %zu schedule, %zu spawn, %zu remove, "
		"%s%s%s; sched_switch via %s, %s; Ctrl-C to stop\n",
		what, s->disc.tokio.target_path, rt->v0 ? "v0" : "legacy",
		rt->count[TOKIO_POLL], rt->named,
		rt->ambiguous ? ", some share their code with other futures: v0 mangling names "
				"them"
			      : "",
		rt->internal ? ", the worker loop left out" : "", rt->count[TOKIO_WAKE],
		rt->count[TOKIO_SCHEDULE], rt->count[TOKIO_BIND] + rt->count[TOKIO_BIND_INNER],
		rt->count[TOKIO_REMOVE],
		rt->count[TOKIO_STEAL] ? "steal_into probed"
				       : "steal_into inlined: steals inferred from migrations",
		rt->count[TOKIO_REMOVE] ? "" : ", remove inlined: completions and lost wakers not seen",
		moved, tracer__sched_hook(s->tracer), mode_str(s->o));
}

/*
 * Samples the maps into the pipeline: the workers every tick, the tasks (and
 * a snapshot for the live view) every TASK_SAMPLE_TICKS.
 */
static void sample(struct session *s, bool tasks, bool show)
{
	if (tracer__snapshot(s->tracer, &s->snap, tasks, s->o->detect.lost_waker_ns, s->stop))
		return;
	sampler__workers(&s->sampler, &s->snap);
	if (!tasks)
		return;
	sampler__tasks(&s->sampler, &s->snap);
	if (show && !s->cap)
		pipeline__stats(&s->pipe, &s->snap);
}

static void fill_run_info(struct session *s, struct run_info *info, const char *why)
{
	memset(info, 0, sizeof(*info));
	info->seconds = (double)((s->stop ? s->stop : now_ns()) - s->start) / 1e9;
	info->end_reason = why;
	info->maps_only = s->o->no_trace;
	tracer__stats(s->tracer, info->stats);
}

/* On SIGUSR1: the report so far, on stderr, whatever --summary says. */
static void report_now(struct session *s)
{
	struct run_info info;

	if (s->cap) {
		fill_run_info(s, &info, "still recording");
		err_msg("recording: %.1f s, %llu records, %.1f MB, %llu dropped\n", info.seconds,
			(unsigned long long)capture_writer__records(s->cap),
			(double)capture_writer__bytes(s->cap) / 1e6,
			(unsigned long long)report__dropped(&info));
		return;
	}
	tracer__snapshot(s->tracer, &s->snap, true, s->o->detect.lost_waker_ns, 0);
	fill_run_info(s, &info, "still tracing");
	report__text(stderr, &s->pipe.model, &s->pipe.detector, &s->snap, &info, true);
}

/*
 * The signals that stop tracing cleanly. SIGHUP is an ssh session or a
 * terminal going away: the trace and report still get written, rather than
 * the default death that leaves a trace cut short.
 */
static const int stop_signals[] = { SIGINT, SIGTERM, SIGHUP };

static const char *stop_reason(uint32_t signo)
{
	if (signo == SIGINT)
		return "interrupted";
	return signo == SIGHUP ? "hung up" : "terminated";
}

static void stop_signal_set(sigset_t *sigs)
{
	sigemptyset(sigs);
	for (size_t i = 0; i < sizeof(stop_signals) / sizeof(stop_signals[0]); i++)
		sigaddset(sigs, stop_signals[i]);
}

/* Runs until a signal, the deadline, or the target's exit; says which. */
static const char *trace_loop(struct session *s, uint64_t deadline)
{
	struct epoll_event ev[4];
	uint64_t next_tick = now_ns() + TICK_NS;
	int ep = epoll_create1(EPOLL_CLOEXEC), fds[3], ticks = 0;
	const char *why = NULL;

	if (ep < 0)
		return "epoll failed";
	/* A first look at the maps: the baseline that rates are measured from. */
	sample(s, true, true);
	fds[0] = tracer__fd(s->tracer);
	fds[1] = s->sfd;
	fds[2] = s->target.pidfd;
	for (int i = 0; i < 3; i++) {
		ev[0] = (struct epoll_event){ .events = EPOLLIN, .data.fd = fds[i] };
		epoll_ctl(ep, EPOLL_CTL_ADD, fds[i], &ev[0]);
	}
	/*
	 * A trace on standard output: a pipe whose reader went away (| head)
	 * reports an error at once, and tracing on would write to nobody, with
	 * SIGPIPE ignored, until stopped by hand. Not a pipe (a file): no event.
	 */
	if (s->o->output && !strcmp(s->o->output, "-")) {
		ev[0] = (struct epoll_event){ .events = 0, .data.fd = STDOUT_FILENO };
		epoll_ctl(ep, EPOLL_CTL_ADD, STDOUT_FILENO, &ev[0]);
	}
	while (!why) {
		uint64_t now = now_ns();
		uint64_t until = deadline && deadline < next_tick ? deadline : next_tick;
		int timeout = until > now ? (int)((until - now) / 1000000) + 1 : 0;
		int n = epoll_wait(ep, ev, 4, timeout);

		for (int i = 0; i < n; i++) {
			if (ev[i].data.fd == s->sfd) {
				struct signalfd_siginfo si;

				if (read(s->sfd, &si, sizeof(si)) != sizeof(si))
					continue;
				if (si.ssi_signo == SIGUSR1)
					report_now(s);
				else
					why = stop_reason(si.ssi_signo);
			} else if (ev[i].data.fd == s->target.pidfd) {
				why = "target exited";
			} else if (ev[i].data.fd == STDOUT_FILENO) {
				/* the write that fails at the end says so, once */
				why = "standard output closed";
			}
		}
		/* Records are batched without wake-ups: drain on every turn. */
		if (tracer__consume(s->tracer, CONSUME_BATCH, false) < 0 && !why)
			why = "ring buffer read failed";
		now = now_ns();
		if (now >= next_tick) {
			sample(s, ++ticks % TASK_SAMPLE_TICKS == 0, true);
			if (s->cap) {
				capture__tick(s->cap, now);
				/* what is recorded survives asynctraced being killed */
				capture_writer__flush(s->cap);
			} else {
				pipeline__tick(&s->pipe, now);
			}
			next_tick = now + TICK_NS;
		}
		if (deadline && now >= deadline && !why)
			why = "duration elapsed";
	}
	close(ep);
	return why;
}

/* The capture's first records: the process, its thresholds, tokio's task names. */
static void begin_capture(struct session *s)
{
	const struct detect_opts *d = &s->o->detect;
	struct cap_process proc = {
		.hdr.ts = s->start,
		.pid = (uint32_t)s->o->pid,
		.runtime = s->disc.kind == RUNTIME_TOKIO ? CAPTURE_RUNTIME_TOKIO : CAPTURE_RUNTIME_USDT,
		.realtime_offset = s->pipe.model.realtime_offset,
		.maps_only = s->o->no_trace,
		.long_poll_ns = d->long_poll_ns,
		.sched_delay_ns = d->sched_delay_ns,
		.starve_ns = d->starve_ns,
		.lost_waker_ns = d->lost_waker_ns,
		.episode_gap_ns = d->episode_gap_ns,
		.starve_depth = d->starve_depth,
		.thrash_rate = d->thrash_rate,
	};

	snprintf(proc.comm, sizeof(proc.comm), "%s", s->target.comm);
	capture__begin(s->cap, &proc);
	if (s->disc.kind == RUNTIME_TOKIO)
		name_tokio_tasks(s);
	capture_writer__flush(s->cap);
}

/* Whether we may trace; says what is missing when not. */
static bool privileged(void)
{
	if (sandbox__privileged())
		return true;
	err_msg("must run as root, or with the capabilities %s (docs/security.md)\n",
		SANDBOX_CAPS_NEEDED);
	return false;
}

/* Everything up to attached: each failure says what and exits 1. */
static int start(struct session *s)
{
	const struct options *o = s->o;
	struct tracer_opts topts = {
		.pid = o->pid,
		.btf_path = o->btf_path,
		.ringbuf_bytes = o->ringbuf_bytes,
		.task_slots = o->task_slots,
		.sched_hook = o->sched_hook,
		.trace_events = !o->no_trace,
		.long_poll_ns = o->detect.long_poll_ns,
		.sched_delay_ns = o->detect.sched_delay_ns,
		.starve_depth = o->detect.starve_depth,
		.empty_programs = o->empty_programs,
	};
	struct timespec rt;
	sigset_t sigs;
	int err;

	if (!privileged())
		return -EPERM;
	err = tracer__check_btf(o->btf_path);
	if (err) {
		if (o->btf_path)
			err_msg("cannot read BTF file '%s': %s\n", o->btf_path, strerror(-err));
		else
			err_msg("kernel BTF not found at /sys/kernel/btf/vmlinux: the kernel needs "
				"CONFIG_DEBUG_INFO_BTF=y, or give --btf FILE\n");
		return err;
	}
	s->disc.verbose = o->verbose;
	err = discover(&s->disc, &s->target);
	if (err) {
		err_msg("cannot read the mappings of pid %d: %s%s\n", o->pid, strerror(-err),
			(err == -EACCES || err == -EPERM) && !sandbox__has_cap(CAP_SYS_PTRACE)
				? ": a process of another user needs CAP_SYS_PTRACE"
				: "");
		return err;
	}
	if (s->disc.kind == RUNTIME_NONE && s->disc.stripped) {
		err_msg("no known runtime in pid %d (%s): no %s USDT probes, and its binary is "
			"stripped (no symbol table), so tokio cannot be looked for: asynctraced "
			"finds tokio by its function symbols; rebuild without `strip = true` "
			"(strip = \"debuginfo\" keeps them)\n",
			o->pid, s->target.comm, AT_USDT_PROVIDER);
		return -ENOENT;
	}
	if (s->disc.kind == RUNTIME_NONE) {
		err_msg("no known runtime in pid %d (%s): no %s USDT probes (see "
			"docs/usdt-abi.md) and no tokio symbols in its %zu mapped ELF files\n",
			o->pid, s->target.comm, AT_USDT_PROVIDER, s->disc.scanned);
		return -ENOENT;
	}
	if (s->disc.kind == RUNTIME_USDT &&
	    (!discovered(&s->disc, "poll_begin") || !discovered(&s->disc, "poll_end"))) {
		err_msg("pid %d (%s) has %s probes but not poll_begin and poll_end: nothing to "
			"trace\n",
			o->pid, s->target.comm, AT_USDT_PROVIDER);
		return -ENOENT;
	}

	pipeline__init(&s->pipe, (uint32_t)o->pid, s->target.comm, now_ns(), &o->detect);
	/* USDT runtimes pass name strings; tokio's name_addr is code, named from symbols. */
	if (s->disc.kind == RUNTIME_USDT)
		s->pipe.model.read_str = target__read_str;
	s->pipe.model.thread_comm = target__thread_comm;
	s->pipe.model.target_ctx = &s->target;
	if (o->command == CMD_RECORD) {
		err = capture_writer__open(&s->cap, o->output);
		if (err) {
			err_msg("cannot write capture to '%s': %s\n", o->output,
				outbuf__strerror(err));
			return err;
		}
	} else {
		if (s->disc.kind == RUNTIME_TOKIO)
			name_tokio_tasks(s);
		err = outputs__open(&s->pipe, o, true);
		if (err)
			return err;
	}

	/* Signals arrive through the loop's epoll; a second one kills (see run). */
	stop_signal_set(&sigs);
	sigaddset(&sigs, SIGUSR1);
	sigprocmask(SIG_BLOCK, &sigs, NULL);
	s->sfd = signalfd(-1, &sigs, SFD_CLOEXEC | SFD_NONBLOCK);
	signal(SIGPIPE, SIG_IGN);

	topts.uprobes = s->disc.kind == RUNTIME_TOKIO;
	if (s->disc.tokio.rt.count[TOKIO_STEAL])
		topts.target_flags |= AT_TARGET_TOKIO_STEAL;
	/* the Header cache needs remove to say when a Header is let go (docs/tokio.md) */
	if (s->disc.tokio.rt.count[TOKIO_REMOVE])
		topts.target_flags |= AT_TARGET_TOKIO_REMOVE | AT_TARGET_TOKIO_HDR_CACHE;
	if (s->disc.kind == RUNTIME_USDT) {
		topts.usdt_specs = s->disc.specs;
		if (discovered(&s->disc, "worker_park") && discovered(&s->disc, "worker_unpark"))
			topts.target_flags |= AT_TARGET_PARKS_PROBED;
	}
	err = tracer__new(&s->tracer, &topts, on_record, s);
	if (err) {
		err_msg("failed to load BPF programs: %s%s\n", strerror(-err),
			o->verbose ? "" : " (-v shows libbpf's log)");
		return err;
	}
	/* Time zero: nothing can happen before the first probe is attached. */
	s->start = now_ns();
	clock_gettime(CLOCK_REALTIME, &rt);
	s->pipe.model.t0 = s->start;
	s->pipe.model.last_ts = s->start;
	s->pipe.model.realtime_offset =
		(uint64_t)rt.tv_sec * 1000000000ull + (uint64_t)rt.tv_nsec - s->start;
	if (s->cap)
		begin_capture(s);
	err = attach_all(s);
	if (err) {
		if (!target__alive(&s->target))
			err_msg("pid %d exited while attaching\n", o->pid);
		return err;
	}
	/*
	 * Nothing from here on needs a privilege (sandbox.h), but reading a USDT
	 * target's strings when its mem file could not be opened (target.h).
	 */
	err = sandbox__drop_privileges(s->disc.kind == RUNTIME_USDT && s->target.memfd < 0
					       ? 1ull << CAP_SYS_PTRACE
					       : 0);
	if (err) {
		err_msg("failed to drop privileges after attaching: %s\n", strerror(-err));
		return err;
	}
	if (!o->no_sandbox) {
		err = sandbox__filter();
		if (err) {
			err_msg("failed to install the seccomp filter: %s (--no-sandbox runs "
				"without it)\n",
				strerror(-err));
			return err;
		}
	}
	say_found(s);
	return 0;
}

/* record: the last snapshot and the end record; one line to say what was written. */
static int finish_capture(struct session *s, const struct run_info *info)
{
	const struct options *o = s->o;
	int err;

	capture__finish(s->cap, &s->snap, info->stats, AT_STAT_NR, s->stop, info->end_reason);
	err = capture_writer__flush(s->cap);
	if (err) {
		err_msg("failed to write '%s': %s\n", o->output, strerror(-err));
		return EXIT_FAIL;
	}
	err_msg("recorded pid %d (%s) for %.2f s, %s: %llu records, %.1f MB in %s; "
		"%llu dropped\n",
		o->pid, s->target.comm, info->seconds, info->end_reason,
		(unsigned long long)capture_writer__records(s->cap),
		(double)capture_writer__bytes(s->cap) / 1e6, o->output,
		(unsigned long long)report__dropped(info));
	return EXIT_OK;
}

/* stop -> detach -> drain -> sample -> close episodes -> flush -> report */
static int finish(struct session *s, const char *why)
{
	struct run_info info;
	int ret;

	s->stop = now_ns();
	tracer__detach(s->tracer);
	while (tracer__consume(s->tracer, CONSUME_BATCH, true) > 0)
		;
	/* The last state, for the detectors and the report; no live view. */
	sample(s, true, false);
	fill_run_info(s, &info, why);
	if (s->cap)
		ret = finish_capture(s, &info);
	else
		ret = outputs__finish(&s->pipe, s->o, now_ns(), &s->snap, &info);
	if (sandbox__say_refused())
		ret = EXIT_FAIL;
	return ret;
}

/*
 * No -p: the host's process that runs a known runtime, as --comm,
 * --exclude-comm and --cgroup narrow them. Tracing several at once is not
 * built yet: when several do, they are named and -p is asked for.
 */
static int pick_target(const struct options *o, pid_t *pid)
{
	bool narrowed = o->comm || o->exclude_comm || o->cgroup;
	struct image_cache images;
	struct scan_filter f;
	struct scan_result r;
	char why[256], list[512] = "";
	size_t len = 0, i;
	int err;

	err = scan_filter__init(&f, o->comm, o->exclude_comm, o->cgroup, why, sizeof(why));
	if (err) {
		err_msg("%s\n", why);
		return err;
	}
	image_cache__init(&images);
	err = scan__processes(&f, &images, &r);
	image_cache__free(&images);
	scan_filter__free(&f);
	if (err) {
		err_msg("cannot look through the host's processes: %s\n", strerror(-err));
		return err;
	}
	if (r.nr == 1) {
		*pid = r.hits[0].pid;
		scan_result__free(&r);
		return 0;
	}
	for (i = 0; i < r.nr && len + 40 < sizeof(list); i++)
		len += (size_t)snprintf(list + len, sizeof(list) - len, "%s%d (%s)", i ? ", " : "",
					r.hits[i].pid, r.hits[i].comm);
	if (!r.nr)
		err_msg("no process %s runs a known runtime (%s USDT probes, or tokio): %zu "
			"looked at%s; give -p PID to name one\n",
			narrowed ? "that --comm, --exclude-comm and --cgroup let through"
				 : "on this host",
			AT_USDT_PROVIDER, r.matched, r.unreadable ? ", some could not be read" : "");
	else
		err_msg("%zu processes run a known runtime: %s%s; asynctraced traces one at a time "
			"for now: give -p PID, or narrow them with --comm, --exclude-comm or "
			"--cgroup\n",
			r.nr, list, i < r.nr ? ", ..." : "");
	scan_result__free(&r);
	return -ENOENT;
}

int session__run(const struct options *o)
{
	struct session s = { .o = o, .sfd = -1 };
	struct options picked;
	sigset_t sigs;
	const char *why;
	int err, ret = EXIT_FAIL;

	if (!o->pid) {
		if (!privileged())
			return EXIT_FAIL;
		picked = *o;
		if (pick_target(o, &picked.pid))
			return EXIT_FAIL;
		s.o = o = &picked;
	}
	err = target__open(&s.target, o->pid);

	if (err) {
		if (err == -ESRCH)
			err_msg("no process with pid %d\n", o->pid);
		else
			err_msg("cannot inspect pid %d: %s\n", o->pid, strerror(-err));
		return EXIT_FAIL;
	}
	sampler__init(&s.sampler, on_sample, &s);
	if (start(&s) == 0) {
		why = trace_loop(&s, o->duration_ns ? s.start + o->duration_ns : 0);
		/* From here a second Ctrl-C kills us the default way. */
		stop_signal_set(&sigs);
		sigprocmask(SIG_UNBLOCK, &sigs, NULL);
		ret = finish(&s, why);
	}
	tracer__free(s.tracer);
	pipeline__free(&s.pipe);
	sampler__free(&s.sampler);
	capture_writer__free(s.cap);
	stats__free(&s.snap);
	if (s.sfd >= 0)
		close(s.sfd);
	discovery__free(&s.disc);
	target__close(&s.target);
	return ret;
}
