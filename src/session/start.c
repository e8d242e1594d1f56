// SPDX-License-Identifier: MIT
/*
 * A session's start, everything up to attached: privileges and BTF checked,
 * the kernel's uprobe rules learnt, the outputs opened, the BPF object
 * loaded, the first processes traced, and privileges then dropped.
 */
#include <errno.h>
#include <linux/capability.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>

#include "lib/outbuf.h"
#include "lib/sandbox.h"
#include "lib/util.h"
#include "session/session_priv.h"
#include "sinks/flight.h"
#include "sinks/metrics.h"
#include "stacks/ksyms.h"

/* The flight recorder: one dump a process this often (FLIGHT_AFTER_NS: session_priv.h) */
#define FLIGHT_MIN_GAP_NS (30 * 1000000000ull)
#define FLIGHT_DEFAULT_BYTES (256ull << 20)
#define DUMP_DIR_DEFAULT_BYTES (1ull << 30)
/* --stacks: when a poll's stack is taken, without a long-poll threshold */
#define STACK_AFTER_NS (5 * 1000000ull)

/* Whether we may trace; says what is missing when not. */
static bool privileged(void)
{
	if (sandbox__privileged())
		return true;
	err_msg("must run as root, or with the capabilities %s (docs/security.md)\n",
		SANDBOX_CAPS_NEEDED);
	return false;
}

/*
 * USDT probes' arguments fixed at load (the cheapest reads, usdt_args.bpf.h)
 * when every process to trace agrees on them; NULL otherwise (and following
 * the host, where processes yet unseen may not): each hit finds its site's.
 */
static const struct at_usdt_spec *common_usdt_specs(struct traced **tr, size_t nr)
{
	const struct at_usdt_spec *specs = NULL;

	for (size_t i = 0; i < nr; i++) {
		if (tr[i]->disc.kind != RUNTIME_USDT)
			continue;
		if (!specs)
			specs = tr[i]->disc.specs;
		else if (memcmp(specs, tr[i]->disc.specs, sizeof(tr[i]->disc.specs)))
			return NULL;
	}
	return specs;
}

/* The processes -p names, examined: those that can be traced. 0, or -errno. */
static int examine_pids(struct session *s, struct traced ***out, size_t *nr)
{
	const struct session_opts *o = s->o;
	struct traced **tr = calloc(o->nr_pids, sizeof(*tr));
	size_t n = 0;

	if (!tr)
		return -ENOMEM;
	for (size_t i = 0; i < o->nr_pids; i++)
		if (traced__examine(&tr[n], s, o->pids[i], &s->ex_opts, false) == 0)
			n++;
	*out = tr;
	*nr = n;
	/* one process named: it is the session; several: each that can be is traced */
	return n ? 0 : -ENOENT;
}

/*
 * After attaching: privileges dropped and the seccomp filter installed
 * (sandbox.h). Following the host, what attaching needs is kept, for the
 * processes that start later, and no filter is installed (docs/security.md).
 */
static int confine(struct session *s)
{
	/*
	 * and the analyser's: started again as nobody after it failed
	 * (CAP_SETUID, CAP_SETGID), killed when it hangs (CAP_KILL: it is
	 * another user's process)
	 */
	const uint64_t attach_caps = 1ull << CAP_SYS_ADMIN | 1ull << CAP_BPF |
				     1ull << CAP_PERFMON | 1ull << CAP_SYS_PTRACE |
				     1ull << CAP_DAC_READ_SEARCH | 1ull << CAP_DAC_OVERRIDE |
				     1ull << CAP_SETUID | 1ull << CAP_SETGID | 1ull << CAP_KILL;
	uint64_t keep = 0;
	int err;

	/* reading a USDT target's strings when its mem file could not be opened (target.h) */
	for (size_t i = 0; i < s->nr; i++)
		if (s->targets[i]->disc.kind == RUNTIME_USDT && s->targets[i]->target.memfd < 0)
			keep |= 1ull << CAP_SYS_PTRACE;
	/*
	 * The live analyser (--stacks', and alerts' places), another user's
	 * process, killed should it hang (the filter lets that one pid alone be
	 * signalled); it cannot be started again once confined
	 */
	if (s->stacks.pid > 0)
		keep |= 1ull << CAP_KILL;
	/* --escalate: a traced process's probes attached later (uprobe_multi links) */
	if (s->o->escalate_ns)
		keep |= 1ull << CAP_BPF | 1ull << CAP_PERFMON;
	s->stacks.no_restart = !s->follow;
	err = sandbox__drop_privileges(s->follow ? attach_caps : keep);
	if (err) {
		err_msg("failed to drop privileges after attaching: %s\n", strerror(-err));
		return err;
	}
	/* run: its command let go and waited for, its --junit opened before */
	if (!s->o->no_sandbox && !s->follow) {
		err = sandbox__filter((s->metrics ? SANDBOX_SERVE : 0) |
					      (s->flight ? SANDBOX_DUMPS : 0) |
					      (s->stacks.pid > 0 ? SANDBOX_STACKS : 0) |
					      (s->hooks ? SANDBOX_CHILD : 0) |
					      (s->o->escalate_ns ? SANDBOX_ATTACH : 0),
				      flight__dirfd(s->flight), s->hooks ? s->hooks->root : 0,
				      s->stacks.pid);
		if (err) {
			err_msg("failed to install the seccomp filter: %s (--no-sandbox runs "
				"without it)\n",
				strerror(-err));
			return err;
		}
		s->filtered = true;
	}
	return 0;
}

/* Root (or the capabilities), BTF, and where this kernel lets a uprobe go. 0, or -errno. */
static int check_host(struct session *s)
{
	const struct session_opts *o = s->o;
	char why[256];
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
	/* before any probe is placed: where the kernel lets them go, cached per boot */
	if (probe_learn__get(&s->rules, PROBE_RULES_DIR, false, why, sizeof(why)))
		warn_msg("cannot learn which instructions this kernel emulates under a uprobe "
			 "(%s): function probes stay at their entries\n",
			 why);
	else if (why[0])
		warn_msg("learning this kernel's uprobe rules: %s: that form is not used\n", why);
	s->ex_opts.rules = &s->rules;
	return 0;
}

/* --flight-recorder: its directory first, so a bad --dump-dir is said before any process. */
static int open_flight(struct session *s)
{
	const struct session_opts *o = s->o;
	struct flight_opts fo = {
		.window_ns = o->flight_ns,
		.after_ns = FLIGHT_AFTER_NS,
		.min_gap_ns = FLIGHT_MIN_GAP_NS,
		.max_bytes = o->flight_bytes ? o->flight_bytes : FLIGHT_DEFAULT_BYTES,
		.dir_max_bytes = o->dump_dir_bytes ? o->dump_dir_bytes : DUMP_DIR_DEFAULT_BYTES,
		.dir = o->dump_dir,
		.detect = o->detect,
		.sample_period_ns = session__sample_period_ns(o),
	};

	return o->flight_ns ? flight__new(&s->flight, &fo) : 0;
}

/*
 * What to trace: following the host, its filter; with -p, the processes
 * examined (*first), and what loading the BPF side needs to know of them.
 */
static int find_targets(struct session *s, struct traced ***first, size_t *nr_first,
			struct tracer_opts *topts)
{
	const struct session_opts *o = s->o;
	char why[256];
	int err;

	if (!s->follow) {
		err = examine_pids(s, first, nr_first);
		if (err)
			return err;
		topts->usdt_specs = common_usdt_specs(*first, *nr_first);
		return 0;
	}
	err = scan_filter__init(&s->filter, o->comm, o->exclude_comm, o->cgroup, why, sizeof(why));
	if (err) {
		err_msg("%s\n", why);
		return err;
	}
	s->filter_set = true;
	if (s->hooks)
		s->filter.ancestor = s->hooks->root;
	return 0;
}

/* Where records go (the capture, or the trace and alerts), signals, --metrics. 0, or -errno. */
static int open_outputs(struct session *s)
{
	const struct session_opts *o = s->o;
	sigset_t sigs;
	int err;

	if (o->record) {
		err = capture_writer__open(&s->cap, o->out.output);
		if (err) {
			err_msg("cannot write capture to '%s': %s\n", o->out.output,
				outbuf__strerror(err));
			return err;
		}
	} else {
		err = outputs__open(&s->out, &o->out, s->follow || o->nr_pids > 1);
		if (err)
			return err;
		if (s->hooks) {
			s->out.on_summary = s->hooks->summary;
			s->out.summary_ctx = s->hooks->ctx;
		}
	}

	/* Signals arrive through the loop's epoll; a second one kills (see run). */
	session__stop_signals(&sigs);
	sigaddset(&sigs, SIGUSR1);
	sigaddset(&sigs, SIGUSR2);
	sigprocmask(SIG_BLOCK, &sigs, NULL);
	s->sfd = signalfd(-1, &sigs, SFD_CLOEXEC | SFD_NONBLOCK);
	signal(SIGPIPE, SIG_IGN);
	/*
	 * The server's thread starts with the signals blocked, as every thread
	 * after this; its socket is bound now: the sandbox lets it answer, not bind.
	 */
	return o->metrics ? metrics__open(&s->metrics, o->metrics) : 0;
}

/*
 * --stacks: the sampling programs attached, the analyser that unwinds
 * (one of its own: an examination may take long, a stack should not wait
 * for it) and the kernel's symbols.
 */
static int begin_stacks(struct session *s)
{
	int err = analyser__start(&s->stacks, s->o->examine_timeout_ms);

	s->unwinding = !err;
	if (err) {
		err_msg("cannot sample stacks (--stacks): %s\n", strerror(-err));
		return err;
	}
	err = ksyms__load(&s->ksyms, NULL);
	if (err)
		warn_msg("the kernel's symbols cannot be read (/proc/kallsyms: %s): "
			 "blocked polls' stacks show no kernel frames\n",
			 err == -EPERM ? "addresses hidden, see kptr_restrict" : strerror(-err));
	return 0;
}

/* The BPF object loaded, sched_switch attached, and --stacks' programs. 0, or -errno. */
static int load(struct session *s, const struct tracer_opts *topts)
{
	int err = tracer__new(&s->tracer, topts, session__on_record, s);

	if (err) {
		err_msg("failed to load BPF programs: %s%s\n", strerror(-err),
			s->o->verbose ? "" : " (-v shows libbpf's log)");
		return err;
	}
	s->start = now_ns();
	err = tracer__attach_sched(s->tracer);
	if (err) {
		err_msg("failed to attach %s sched_switch: %s\n", tracer__sched_hook(s->tracer),
			strerror(-err));
		return err;
	}
	if (s->o->sample_mode || s->o->stacks) {
		err = tracer__attach_samples(s->tracer, session__sample_hz(s->o));
		if (err) {
			err_msg("cannot sample the CPUs (%s): %s\n",
				s->o->sample_mode ? "--mode sample" : "--stacks", strerror(-err));
			return err;
		}
	}
	return s->o->stacks ? begin_stacks(s) : 0;
}

/*
 * The first processes traced: with -p, those examined (first, taken); or,
 * following the host, the examiner started and the host looked through.
 */
static int begin_tracing(struct session *s, struct traced **first, size_t nr_first)
{
	int err;

	if (s->follow) {
		err = examiner__new(&s->examiner, s, &s->ex_opts);
		if (err) {
			err_msg("cannot start the thread that examines processes: %s\n",
				strerror(-err));
			return err;
		}
		follow__scan_new(s);
		follow__say_watching(s);
		return 0;
	}
	for (size_t i = 0; i < nr_first; i++) {
		struct traced *tr = first[i];

		first[i] = NULL;
		traced__start(s, tr); /* a failure is said, and tr let go */
	}
	return s->nr ? 0 : -ENOENT;
}

/* Everything up to attached: each failure says what. 0, or -errno. */
int session__start(struct session *s)
{
	const struct session_opts *o = s->o;
	struct tracer_opts topts = {
		.btf_path = o->btf_path,
		.ringbuf_bytes = o->ringbuf_bytes,
		.task_slots = o->task_slots,
		.sched_hook = o->sched_hook,
		.trace_events = !o->no_trace, /* the flight recorder keeps them too */
		.detect = o->detect,
		.empty_programs = o->empty_programs,
		/* half the threshold: a long poll is sampled before it ends */
		.stack_after_ns = o->stacks ? (o->detect.long_poll_ns ? o->detect.long_poll_ns / 2
								    : STACK_AFTER_NS)
					    : 0,
		.sample_period_ns = session__sample_period_ns(o),
		.escalate = o->escalate_ns != 0,
		.verbose = o->verbose,
		.births = s->follow ? follow__on_birth : NULL,
		.births_ctx = s,
	};
	struct traced **first = NULL;
	size_t nr_first = 0;
	int err;

	err = check_host(s);
	/* before any process is examined: it reads their files (analyser.h) */
	if (!err)
		err = analyser__start(&s->ana, o->examine_timeout_ms);
	if (!err)
		err = open_flight(s);
	if (!err)
		err = find_targets(s, &first, &nr_first, &topts);
	if (!err)
		err = open_outputs(s);
	if (!err)
		err = load(s, &topts);
	if (!err)
		err = begin_tracing(s, first, nr_first);
	/* with -p, nothing is examined once attached: it goes before the sandbox */
	if (!s->follow)
		analyser__stop(&s->ana);
	if (!err) {
		err = confine(s);
		s->started = true;
	}
	for (size_t i = 0; !err && i < s->nr; i++)
		say__found(s, s->targets[i], i == 0);
	for (size_t i = 0; i < nr_first; i++)
		traced__free(first[i]);
	free(first);
	return err;
}
