// SPDX-License-Identifier: MIT
/*
 * asynctraced: trace an async executor from the outside.
 *
 *   sudo asynctraced -p PID [-d SECONDS] [-o FILE]
 *
 * Finds the target's asynctrace USDT probes, loads and attaches the BPF
 * programs, and runs the pipeline (ring buffer -> model -> detectors ->
 * sinks) until interrupted, the duration elapses, or the target exits.
 */
#include <errno.h>
#include <getopt.h>
#include <linux/capability.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <bpf/libbpf.h>

#include "alerts.h"
#include "pipeline.h"
#include "report.h"
#include "target.h"
#include "trace_json.h"
#include "tracer.h"
#include "usdt_notes.h"
#include "util.h"

#define VERSION "0.1.0"

enum { EXIT_OK = 0, EXIT_FAIL = 1, EXIT_USAGE = 2 };

#define TICK_NS (100 * 1000 * 1000ull)
/* Records handled between two looks at signals and the clock. */
#define CONSUME_BATCH 65536

struct options {
	pid_t pid;
	uint64_t duration_ns;	/* 0: until stopped */
	const char *output;
	uint64_t long_poll_ns;
	uint64_t ringbuf_bytes;
	const char *btf_path;
	enum sched_hook sched_hook;
	bool verbose;
};

static bool verbose;

#define err_msg(...) fprintf(stderr, "asynctraced: " __VA_ARGS__)

static const char usage[] =
	"usage: asynctraced -p PID [options]\n"
	"\n"
	"Trace the async executor running as PID: every poll, wake, spawn, steal\n"
	"and park, with live alerts on stderr and, with -o, a trace for Perfetto.\n"
	"\n"
	"  -p, --pid PID           process to trace (required)\n"
	"  -d, --duration SECONDS  stop after this long (default: until Ctrl-C or exit)\n"
	"  -o, --output FILE       write a Chrome JSON trace (Perfetto loads it)\n"
	"      --long-poll TIME    alert on polls longer than TIME (default 10ms;\n"
	"                          units ns, us, ms, s; 0 turns the alert off)\n"
	"      --ringbuf-size SIZE ring buffer size (default 16M; power of two)\n"
	"      --btf FILE          kernel BTF to use instead of /sys/kernel/btf/vmlinux\n"
	"      --sched-hook HOOK   sched_switch via auto, tp_btf or raw_tp (default auto)\n"
	"  -v, --verbose           say what is found and attached; show libbpf's log\n"
	"  -h, --help              this help\n"
	"  -V, --version           version\n"
	"\n"
	"Exit status: 0 success, 1 failure, 2 usage error.\n";

static int libbpf_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	if (!verbose || level == LIBBPF_DEBUG)
		return 0;
	return vfprintf(stderr, fmt, ap);
}

static int parse_args(int argc, char **argv, struct options *o)
{
	static const struct option longopts[] = {
		{ "pid", required_argument, NULL, 'p' },
		{ "duration", required_argument, NULL, 'd' },
		{ "output", required_argument, NULL, 'o' },
		{ "long-poll", required_argument, NULL, 'L' },
		{ "ringbuf-size", required_argument, NULL, 'R' },
		{ "btf", required_argument, NULL, 'B' },
		{ "sched-hook", required_argument, NULL, 'S' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	int c, pid;

	memset(o, 0, sizeof(*o));
	o->long_poll_ns = DEFAULT_LONG_POLL_NS;
	o->ringbuf_bytes = DEFAULT_RINGBUF_BYTES;
	while ((c = getopt_long(argc, argv, "p:d:o:vhV", longopts, NULL)) != -1) {
		switch (c) {
		case 'p':
			if (parse_int(optarg, 1, INT32_MAX, &pid)) {
				err_msg("invalid pid '%s'\n", optarg);
				return EXIT_USAGE;
			}
			o->pid = pid;
			break;
		case 'd':
			if (parse_duration(optarg, 1000000000ull, &o->duration_ns) ||
			    !o->duration_ns) {
				err_msg("invalid duration '%s': want seconds, e.g. 5 or 2.5\n",
					optarg);
				return EXIT_USAGE;
			}
			break;
		case 'o':
			o->output = optarg;
			break;
		case 'L':
			if (parse_duration(optarg, 1000000ull, &o->long_poll_ns)) {
				err_msg("invalid --long-poll '%s': want a time, e.g. 10ms\n",
					optarg);
				return EXIT_USAGE;
			}
			break;
		case 'R':
			if (parse_size(optarg, &o->ringbuf_bytes) || o->ringbuf_bytes < 4096 ||
			    o->ringbuf_bytes > (1ull << 30) ||
			    (o->ringbuf_bytes & (o->ringbuf_bytes - 1))) {
				err_msg("invalid --ringbuf-size '%s': want a power of two from "
					"4K to 1G\n",
					optarg);
				return EXIT_USAGE;
			}
			break;
		case 'B':
			o->btf_path = optarg;
			break;
		case 'S':
			if (!strcmp(optarg, "auto"))
				o->sched_hook = SCHED_HOOK_AUTO;
			else if (!strcmp(optarg, "tp_btf"))
				o->sched_hook = SCHED_HOOK_TP_BTF;
			else if (!strcmp(optarg, "raw_tp"))
				o->sched_hook = SCHED_HOOK_RAW_TP;
			else {
				err_msg("invalid --sched-hook '%s': want auto, tp_btf or raw_tp\n",
					optarg);
				return EXIT_USAGE;
			}
			break;
		case 'v':
			o->verbose = true;
			break;
		case 'h':
			fputs(usage, stdout);
			return -1;
		case 'V':
			printf("asynctraced %s\n", VERSION);
			return -1;
		default:
			fputs(usage, stderr);
			return EXIT_USAGE;
		}
	}
	if (optind < argc) {
		err_msg("unexpected argument '%s'\n", argv[optind]);
		return EXIT_USAGE;
	}
	if (!o->pid) {
		err_msg("no target: give -p PID\n");
		fputs(usage, stderr);
		return EXIT_USAGE;
	}
	if (o->output) {
		const char *dot = strrchr(o->output, '.');

		if (dot && (!strcmp(dot, ".pftrace") || !strcmp(dot, ".perfetto-trace"))) {
			err_msg("'%s': protobuf output is not implemented yet; "
				"write a .json trace\n",
				o->output);
			return EXIT_USAGE;
		}
	}
	return 0;
}

/* BPF programs and perf uprobes need CAP_BPF and CAP_PERFMON, or CAP_SYS_ADMIN. */
static bool privileged(void)
{
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct data[2];

	memset(data, 0, sizeof(data));
	if (syscall(SYS_capget, &hdr, data))
		return geteuid() == 0;
#define HAS_CAP(c) (data[(c) / 32].effective & (1u << ((c) % 32)))
	return HAS_CAP(CAP_SYS_ADMIN) || (HAS_CAP(CAP_BPF) && HAS_CAP(CAP_PERFMON));
#undef HAS_CAP
}

/* Where the target's asynctrace probes are. */
struct probe_site {
	char *path;		/* opens the ELF from here */
	char *target_path;	/* what the target calls it */
	char name[USDT_NAME_LEN];
};

struct discovery {
	struct probe_site *sites;
	size_t nr;
	size_t scanned;		/* ELF files looked at */
};

static int discover_binary(void *ctx, const char *path, const char *target_path)
{
	struct discovery *d = ctx;
	struct usdt_probe *probes;
	size_t nr;
	int err;

	d->scanned++;
	err = usdt__list(path, AT_USDT_PROVIDER, &probes, &nr);
	if (err) {
		if (verbose)
			err_msg("skipping %s: %s\n", target_path, strerror(-err));
		return 0;
	}
	for (size_t i = 0; i < nr; i++) {
		struct probe_site *s;
		bool dup = false;

		/* One attach covers every site of a probe in one file. */
		for (size_t j = 0; j < d->nr; j++)
			if (!strcmp(d->sites[j].path, path) &&
			    !strcmp(d->sites[j].name, probes[i].name))
				dup = true;
		if (dup)
			continue;
		s = realloc(d->sites, (d->nr + 1) * sizeof(*s));
		if (!s) {
			free(probes);
			return -ENOMEM;
		}
		d->sites = s;
		s = &d->sites[d->nr];
		s->path = strdup(path);
		s->target_path = strdup(target_path);
		snprintf(s->name, sizeof(s->name), "%s", probes[i].name);
		if (!s->path || !s->target_path) {
			free(s->path);
			free(s->target_path);
			free(probes);
			return -ENOMEM;
		}
		d->nr++;
	}
	free(probes);
	return 0;
}

static void discovery_free(struct discovery *d)
{
	for (size_t i = 0; i < d->nr; i++) {
		free(d->sites[i].path);
		free(d->sites[i].target_path);
	}
	free(d->sites);
}

static bool discovered(const struct discovery *d, const char *name)
{
	for (size_t i = 0; i < d->nr; i++)
		if (!strcmp(d->sites[i].name, name))
			return true;
	return false;
}

static int on_record(void *ctx, const void *data, size_t size)
{
	pipeline__push(ctx, data, size);
	return 0;
}

static int setup_sinks(struct pipeline *p, const struct options *o)
{
	struct sink *s;
	int err;

	err = alert_printer__new(&s, stderr);
	if (err)
		return err;
	pipeline__add_sink(p, s);
	if (o->output) {
		err = trace_json__new(&s, o->output);
		if (err) {
			err_msg("cannot write trace to '%s': %s\n", o->output, strerror(-err));
			return err;
		}
		pipeline__add_sink(p, s);
	}
	return 0;
}

static int attach_all(struct tracer *t, const struct discovery *d, const struct target *tg)
{
	int err = tracer__attach_sched(t);

	if (err) {
		err_msg("failed to attach %s sched_switch: %s\n", tracer__sched_hook(t),
			strerror(-err));
		return err;
	}
	for (size_t i = 0; i < d->nr; i++) {
		const struct probe_site *s = &d->sites[i];

		err = tracer__attach_usdt(t, s->path, s->name);
		if (err == -ENOENT) {
			/* A probe from a newer ABI than ours: not an error. */
			if (verbose)
				err_msg("ignoring unknown probe '%s:%s' in %s\n", AT_USDT_PROVIDER,
					s->name, s->target_path);
			continue;
		}
		if (err) {
			err_msg("failed to attach usdt '%s:%s' in %s: %s\n", AT_USDT_PROVIDER,
				s->name, s->path, strerror(-err));
			return err;
		}
		if (verbose)
			err_msg("attached usdt '%s:%s' in %s\n", AT_USDT_PROVIDER, s->name,
				s->target_path);
	}
	(void)tg;
	return 0;
}

/* Runs until a signal, the deadline, or the target's exit; says which. */
static const char *trace_loop(struct tracer *t, struct pipeline *p, const struct target *tg,
			      int sfd, uint64_t deadline)
{
	struct epoll_event ev[4];
	uint64_t next_tick = now_ns() + TICK_NS;
	int ep = epoll_create1(EPOLL_CLOEXEC);
	const char *why = NULL;

	if (ep < 0)
		return "epoll failed";
	ev[0] = (struct epoll_event){ .events = EPOLLIN, .data.fd = tracer__fd(t) };
	epoll_ctl(ep, EPOLL_CTL_ADD, tracer__fd(t), &ev[0]);
	ev[0] = (struct epoll_event){ .events = EPOLLIN, .data.fd = sfd };
	epoll_ctl(ep, EPOLL_CTL_ADD, sfd, &ev[0]);
	ev[0] = (struct epoll_event){ .events = EPOLLIN, .data.fd = tg->pidfd };
	epoll_ctl(ep, EPOLL_CTL_ADD, tg->pidfd, &ev[0]);

	while (!why) {
		uint64_t now = now_ns();
		uint64_t until = deadline && deadline < next_tick ? deadline : next_tick;
		int timeout = until > now ? (int)((until - now) / 1000000) + 1 : 0;
		int n = epoll_wait(ep, ev, 4, timeout);

		for (int i = 0; i < n; i++) {
			if (ev[i].data.fd == sfd) {
				struct signalfd_siginfo si;

				if (read(sfd, &si, sizeof(si)) == sizeof(si))
					why = si.ssi_signo == SIGINT ? "interrupted" : "terminated";
			} else if (ev[i].data.fd == tg->pidfd) {
				why = "target exited";
			}
		}
		/* Records are batched without wake-ups: drain on every turn. */
		if (tracer__consume(t, CONSUME_BATCH) < 0 && !why)
			why = "ring buffer read failed";
		now = now_ns();
		if (now >= next_tick) {
			pipeline__tick(p);
			next_tick = now + TICK_NS;
		}
		if (deadline && now >= deadline && !why)
			why = "duration elapsed";
	}
	close(ep);
	return why;
}

static int run(const struct options *o)
{
	struct discovery disc = { 0 };
	struct tracer_opts topts = {
		.pid = o->pid,
		.btf_path = o->btf_path,
		.ringbuf_bytes = o->ringbuf_bytes,
		.sched_hook = o->sched_hook,
	};
	struct detect_opts dopts = { .long_poll_ns = o->long_poll_ns };
	struct run_info info = { 0 };
	struct tracer *tracer = NULL;
	struct pipeline pipe;
	struct target tg;
	sigset_t sigs;
	uint64_t start;
	int err, sfd = -1, ret = EXIT_FAIL;

	err = target__open(&tg, o->pid);
	if (err) {
		if (err == -ESRCH)
			err_msg("no process with pid %d\n", o->pid);
		else
			err_msg("cannot inspect pid %d: %s\n", o->pid, strerror(-err));
		return EXIT_FAIL;
	}
	if (!privileged()) {
		err_msg("must run as root: loading BPF programs needs CAP_BPF and CAP_PERFMON "
			"(or CAP_SYS_ADMIN)\n");
		goto out_target;
	}
	err = tracer__check_btf(o->btf_path);
	if (err) {
		if (o->btf_path)
			err_msg("cannot read BTF file '%s': %s\n", o->btf_path, strerror(-err));
		else
			err_msg("kernel BTF not found at /sys/kernel/btf/vmlinux: the kernel needs "
				"CONFIG_DEBUG_INFO_BTF=y, or give --btf FILE\n");
		goto out_target;
	}
	err = target__for_each_binary(&tg, discover_binary, &disc);
	if (err) {
		err_msg("cannot read the mappings of pid %d: %s\n", o->pid, strerror(-err));
		goto out_disc;
	}
	if (!disc.nr) {
		err_msg("no %s USDT probes in pid %d (%s): looked in %zu mapped ELF files; "
			"the target is not an instrumented executor (see docs/usdt-abi.md)\n",
			AT_USDT_PROVIDER, o->pid, tg.comm, disc.scanned);
		goto out_disc;
	}
	if (!discovered(&disc, "poll_begin") || !discovered(&disc, "poll_end")) {
		err_msg("pid %d (%s) has %s probes but not poll_begin and poll_end: nothing to "
			"trace\n",
			o->pid, tg.comm, AT_USDT_PROVIDER);
		goto out_disc;
	}

	start = now_ns();
	pipeline__init(&pipe, (uint32_t)o->pid, tg.comm, start, &dopts);
	pipe.model.read_str = target__read_str;
	pipe.model.thread_comm = target__thread_comm;
	pipe.model.target_ctx = &tg;
	if (setup_sinks(&pipe, o))
		goto out_pipe;

	/* Signals arrive through the loop's epoll; a second one kills (see below). */
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	sigprocmask(SIG_BLOCK, &sigs, NULL);
	sfd = signalfd(-1, &sigs, SFD_CLOEXEC | SFD_NONBLOCK);
	signal(SIGPIPE, SIG_IGN);

	err = tracer__new(&tracer, &topts, on_record, &pipe);
	if (err) {
		err_msg("failed to load BPF programs: %s%s\n", strerror(-err),
			verbose ? "" : " (-v shows libbpf's log)");
		goto out_pipe;
	}
	if (attach_all(tracer, &disc, &tg)) {
		if (!target__alive(&tg))
			err_msg("pid %d exited while attaching\n", o->pid);
		goto out_tracer;
	}
	err_msg("tracing pid %d (%s): %zu probes in %s, sched_switch via %s; Ctrl-C to stop\n",
		o->pid, tg.comm, disc.nr, disc.sites[0].target_path, tracer__sched_hook(tracer));

	info.end_reason = trace_loop(tracer, &pipe, &tg, sfd,
				     o->duration_ns ? start + o->duration_ns : 0);
	/* From here a second Ctrl-C kills us the default way. */
	sigprocmask(SIG_UNBLOCK, &sigs, NULL);

	/* stop -> detach -> drain -> flush -> report */
	tracer__detach(tracer);
	while (tracer__consume(tracer, CONSUME_BATCH) > 0)
		;
	tracer__stats(tracer, info.stats);
	info.seconds = (double)(now_ns() - start) / 1e9;
	err = pipeline__finish(&pipe);
	if (err)
		err_msg("failed to write trace to '%s': %s\n", o->output, strerror(-err));
	report__summary(stderr, &pipe.model, &pipe.detector, &info);
	if (o->output && !err)
		err_msg("wrote %s\n", o->output);
	ret = err ? EXIT_FAIL : EXIT_OK;
out_tracer:
	tracer__free(tracer);
out_pipe:
	pipeline__free(&pipe);
	if (sfd >= 0)
		close(sfd);
out_disc:
	discovery_free(&disc);
out_target:
	target__close(&tg);
	return ret;
}

int main(int argc, char **argv)
{
	struct options o;
	int err = parse_args(argc, argv, &o);

	if (err)
		return err < 0 ? EXIT_OK : err;
	verbose = o.verbose;
	libbpf_set_print(libbpf_print);
	return run(&o);
}
