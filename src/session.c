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
#include <limits.h>
#include <linux/capability.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "attach.h"
#include "capture.h"
#include "discover.h"
#include "examiner.h"
#include "flight.h"
#include "metrics.h"
#include "options.h"
#include "outbuf.h"
#include "outputs.h"
#include "pipeline.h"
#include "probe_learn.h"
#include "report.h"
#include "sampler.h"
#include "sandbox.h"
#include "scan.h"
#include "session.h"
#include "target.h"
#include "traced.h"
#include "tracer.h"
#include "u64map.h"
#include "ksyms.h"
#include "unwind.h"
#include "util.h"

#define TICK_NS (100 * 1000 * 1000ull)
/* Ticks between two snapshots of the per-task maps (the live view's pace). */
#define TASK_SAMPLE_TICKS 10
/* The flight recorder: after an alert, the window goes on this long; one dump a process this often */
#define FLIGHT_AFTER_NS (2 * 1000000000ull)
#define FLIGHT_MIN_GAP_NS (30 * 1000000000ull)
#define FLIGHT_DEFAULT_BYTES (256ull << 20)
#define DUMP_DIR_DEFAULT_BYTES (1ull << 30)
/*
 * Following the host: a process that exec'd (or that a traced one forked) is
 * looked at this long after, once its dynamic loader has mapped its
 * libraries; and every SCAN_TICKS the whole host is looked through again,
 * for what those hooks could not tell (a full ring, a library mapped late).
 */
#define BIRTH_SETTLE_NS (100 * 1000 * 1000ull)
#define SCAN_TICKS 50
/* Records handled between two looks at signals and the clock. */
#define CONSUME_BATCH 65536
/* A process that exited is ended this long after: its last records reach us first. */
#define EXIT_GRACE_NS (50 * 1000 * 1000ull)

/* What an epoll event is about, when not a process (struct traced *). */
enum { EV_RINGS = 1, EV_SIGNALS, EV_STDOUT, EV_BIRTHS, EV_EXAMINED };

struct session;


/* A file whose probes are attached once for every process that maps it. */
struct shared_file {
	long owner;		/* of its probes (tracer.h) */
	unsigned int refs;	/* processes traced that share them */
};

/* Everything one tracing session holds. */
/* run --follow-children: the longest its command is held, waiting to be looked at */
#define ROOT_HOLD_MAX_NS (10 * 1000000000ull)

struct session {
	const struct options *o;
	struct session_hooks *hooks;	/* run: the command's (or NULL) */
	int stop_signo;			/* the signal that stopped the session, or 0 */
	bool released;			/* ... and it was let go */
	int root_pidfd;			/* ... following its children: it, to end with it */
	struct tracer *tracer;
	struct outputs out;
	struct capture_writer *cap;	/* record: where its one process's records go */
	struct traced **targets;
	size_t nr;
	struct u64map by_pid;		/* pid -> struct traced * */
	struct traced *last;		/* the latest record's */
	bool follow;			/* no -p: processes that start later are traced too */
	struct scan_filter filter;	/* follow: --comm, --exclude-comm, --cgroup */
	bool filter_set;
	struct u64map seen;		/* follow: the processes looked at (scan.h) */
	struct image_cache images;	/* follow: files known to hold no runtime */
	/*
	 * Following the whole host (no filter), a file's probes are attached
	 * once, for every process that maps it: each of its processes is
	 * traced anyway. A filter may leave some of them out, and those would
	 * pay for probes that record nothing: then each process has its own.
	 */
	bool share_files;
	struct u64map files;		/* share_files: files whose probes processes share */
	long last_owner;		/* the owner given the last shared file's probes */
	struct examine_opts ex_opts;
	struct probe_rules rules;	/* where this kernel lets a uprobe go (probe_learn.h) */
	struct examiner *examiner;	/* follow: examines processes off the loop */
	bool said_watching;
	bool started;			/* attached and confined: the loop may begin */
	struct birth {
		pid_t pid;
		uint64_t due;
	} *births;			/* follow: processes to look at, once due */
	size_t nr_births, cap_births;
	uint32_t max_targets;
	size_t ever;			/* processes traced in this session */
	size_t over_max;		/* processes --max-targets left out */
	uint64_t stray;			/* records of processes already let go */
	uint64_t failed;		/* processes found and not traced */
	struct metrics *metrics;	/* --metrics: the series it serves */
	struct flight *flight;		/* --flight-recorder */
	struct unwinder *unwinder;	/* --stacks: unwinds the long polls' stacks */
	struct ksyms *ksyms;		/* --stacks: names their kernel frames; NULL unknown */
	uint64_t malformed;		/* records too short to say whose they are */
	uint64_t dropped;		/* record: records the rings had no room for */
	uint64_t start;
	uint64_t stop;			/* 0 while tracing */
	int sfd, ep;
	int ret;			/* EXIT_FAIL once a write failed */
};

static void on_sample(void *ctx, const void *rec, size_t size);

/* --stacks: CPU-clock samples a second on each CPU, and when a poll's are taken */
#define STACK_HZ 250
#define STACK_AFTER_NS (5 * 1000000ull)

/*
 * The kernel frames of a stack that slept, innermost first, from the wait
 * itself (those of the sched_switch tracepoint that took them are left out).
 */
static int kernel_frames(const struct ksyms *k, const struct at_stack *st,
			 struct stack_frame *frames, int max)
{
	static const char *const tracing[] = { "bpf_", "__bpf", "__traceiter", "trace_" };
	uint32_t nr = st->nr_kstack <= AT_KSTACK_FRAMES ? st->nr_kstack : 0;
	bool above_tracing = false;
	int n = 0;

	for (uint32_t i = 0; k && i < nr && n < max; i++) {
		const char *module = NULL, *fn = ksyms__find(k, st->kstack[i], &module);
		bool tracing_frame = false;

		for (size_t j = 0; fn && !above_tracing && j < sizeof(tracing) / sizeof(tracing[0]); j++)
			tracing_frame |= !strncmp(fn, tracing[j], strlen(tracing[j]));
		if (tracing_frame)
			continue;
		above_tracing = true;
		frames[n++] = (struct stack_frame){ .pc = st->kstack[i], .function = fn,
						    .module = module ? module : "[kernel]",
						    .kernel = true };
	}
	return n;
}

static int unwind_stack(void *ctx, const struct at_stack *st, struct stack_frame *frames, int max,
			bool *by_fp)
{
	struct session *ss = ctx;
	struct stack_return returns[AT_STACK_RETURNS];
	struct stack_sample s = { .pid = st->hdr.pid, .tid = st->hdr.tid, .ip = st->ip,
				  .sp = st->sp, .bp = st->bp, .stack = st->stack,
				  .len = st->len <= AT_STACK_BYTES ? st->len : 0, .returns = returns,
				  .nr_returns = st->nr_returns <= AT_STACK_RETURNS ? st->nr_returns : 0,
				  /* a walk that filled its room may have been cut: not whole */
				  .fp = (const uint64_t *)st->fp,
				  .nr_fp = st->nr_fp < AT_FP_FRAMES ? st->nr_fp : 0 };

	for (size_t i = 0; i < s.nr_returns; i++) {
		returns[i].slot = st->returns[i].slot;
		returns[i].ret = st->returns[i].ret;
	}

	int k = kernel_frames(ss->ksyms, st, frames, max);
	int u = unwinder__unwind(ss->unwinder, &s, frames + k, max - k, by_fp);

	/* a wait with no user frames to say who made it is not worth showing */
	return u > 0 ? k + u : 0;
}

static const char *go_code_name(void *ctx, uint64_t addr);

/* record: a record and, the first time they show up, its thread's and task's names. */
static void capture_record(struct session *s, struct traced *tr, const struct at_hdr *h,
			   size_t size)
{
	uint64_t addr = 0;
	char buf[AT_TASK_NAME_LEN];

	uint32_t pid = (uint32_t)tr->target.pid;

	if (!capture__has_thread(s->cap, h->tid)) {
		if (target__thread_comm(&tr->target, h->tid, buf, CAP_COMM_LEN))
			snprintf(buf, CAP_COMM_LEN, "tid %u", h->tid);
		capture__thread(s->cap, pid, h->tid, buf);
	}
	if (h->kind == AT_EV_POLL && size >= sizeof(struct at_poll))
		addr = ((const struct at_poll *)h)->name_addr;
	else if (h->kind == AT_EV_SPAWN && size >= sizeof(struct at_spawn) &&
		 !((const struct at_spawn *)h)->name[0])
		addr = ((const struct at_spawn *)h)->name_addr;
	else if (h->kind == AT_EV_TASK_SAMPLE && size >= sizeof(struct at_task_sample))
		addr = ((const struct at_task_sample *)h)->name_addr;
	if (!capture__has_name(s->cap, pid, addr)) {
		const char *code = tr->disc.kind == RUNTIME_GO ? go_code_name(&tr->disc, addr) : NULL;

		if (code)
			capture__name(s->cap, pid, addr, code);
		else if (tr->disc.kind == RUNTIME_USDT &&
			 target__read_str(&tr->target, addr, buf, sizeof(buf)) == 0 && buf[0])
			capture__name(s->cap, pid, addr, buf);
		else
			capture__no_name(s->cap, pid, addr);
	}
	capture__event(s->cap, h, size);
}

/* A record for process tr: its pipeline, or the capture. */
static void traced_record(struct traced *tr, const void *data, size_t size)
{
	struct session *s = tr->s;

	if (!s->cap) {
		/* kept first: an alert this record raises dumps a window holding it */
		if (s->flight)
			flight__record(s->flight, data, size);
		pipeline__push(&tr->pipe, data, size);
	} else if (model__validate(data, size) < 0) {
		/* a record whose size lies would throw every later one out of step */
		tr->pipe.model.n.malformed++;
	} else {
		capture_record(s, tr, data, size);
	}
}

static struct traced *traced_of(struct session *s, uint32_t pid)
{
	if (!s->last || (uint32_t)s->last->target.pid != pid)
		s->last = u64map__get(&s->by_pid, pid);
	return s->last;
}

/* The flight recorder's view of a process: its live model (names, clock). */
static const struct model *live_model(void *ctx, uint32_t pid)
{
	struct traced *tr = traced_of(ctx, pid);

	return tr && tr->piped ? &tr->pipe.model : NULL;
}

/*
 * An alert of process tr, before the sinks see it: the flight recorder
 * dumps the window of an episode that begins, and the alert (its BEGIN and
 * its END) names the file.
 */
static void on_alert(void *ctx, struct alert *a)
{
	struct traced *tr = ctx;
	struct session *s = tr->s;
	char *path;

	if (a->state == ALERT_BEGIN) {
		if (flight__alert(s->flight, (uint32_t)tr->target.pid, alert_kind_str(a->kind),
				  a->ts, a->dump, sizeof(a->dump)) &&
		    (path = strdup(a->dump)) && u64map__set(&tr->dumps, a->episode, path))
			free(path);
	} else if ((path = u64map__del(&tr->dumps, a->episode))) {
		snprintf(a->dump, sizeof(a->dump), "%s", path);
		free(path);
	}
}

/* A ring buffer record: to the process it names. */
static int on_record(void *ctx, const void *data, size_t size)
{
	struct session *s = ctx;
	struct at_hdr h;
	struct traced *tr;

	if (size < sizeof(h)) {
		s->malformed++;
		return 0;
	}
	memcpy(&h, data, sizeof(h));
	tr = traced_of(s, h.pid);
	if (tr)
		traced_record(tr, data, size);
	else
		s->stray++; /* its process was let go while the record waited in a ring */
	return 0;
}

static void on_sample(void *ctx, const void *rec, size_t size)
{
	traced_record(ctx, rec, size);
}

static const char *runtime_name(enum runtime_kind kind)
{
	return kind == RUNTIME_TOKIO ? "tokio" : kind == RUNTIME_GO ? "go" : "usdt";
}

/* A goroutine's name: the function it started in, at addr in the target. */
static const char *go_code_name(void *ctx, uint64_t addr)
{
	const struct discovery *d = ctx; /* RUNTIME_GO: its image is read */

	return addr > d->go_bias ? golang__goroutine_name(&d->go, d->go_image, addr - d->go_bias)
				 : NULL;
}

/* Where the Go probes find goid, m, p and the run queue in process tr (bpf side). */
static int go_layout(struct tracer *t, const struct traced *tr)
{
	const struct go_offsets *o = &tr->disc.go.off;
	struct at_go_layout l = { .g_goid = o->g_goid, .g_m = o->g_m, .g_startpc = o->g_startpc,
				  .g_preempt = o->g_preempt, .g_waitreason = o->g_waitreason,
				  .m_p = o->m_p, .p_id = o->p_id,
				  .p_runqhead = o->p_runqhead, .p_runqtail = o->p_runqtail };

	memcpy(l.may_lose, tr->disc.go.may_lose, sizeof(l.may_lose));
	memcpy(l.never_woken, tr->disc.go.never_woken, sizeof(l.never_woken));

	return tracer__go_layout(t, tr->target.pid, &l);
}

/*
 * What process tr's runtime offers the programs: enum at_target_flag. lost:
 * the probes the kernel refused (NULL: before attaching, none yet).
 */
static uint32_t target_flags(const struct discovery *d, const struct attach_counts *lost)
{
	const size_t *count = d->tokio.rt.count;
	uint32_t flags = 0;

	if (count[TOKIO_STEAL] > (lost ? lost->lost[TOKIO_STEAL] : 0))
		flags |= AT_TARGET_TOKIO_STEAL;
	/* the Header cache needs remove to say when a Header is let go (docs/tokio.md) */
	if (count[TOKIO_REMOVE] > (lost ? lost->lost[TOKIO_REMOVE] : 0))
		flags |= AT_TARGET_TOKIO_REMOVE | AT_TARGET_TOKIO_HDR_CACHE;
	if (d->kind == RUNTIME_USDT && discovered(d, "worker_park") &&
	    discovered(d, "worker_unpark"))
		flags |= AT_TARGET_PARKS_PROBED;
	return flags;
}

/* tokio names its tasks by the future type of the raw::poll they go through. */
static void name_tokio_tasks(struct session *s, struct traced *tr)
{
	const struct tokio_binary *tb = &tr->disc.tokio;

	for (size_t i = 0; i < tb->rt.nr; i++)
		if (tb->rt.sites[i].kind == TOKIO_POLL && tb->rt.sites[i].future) {
			/* the instance's file offset: the key the BPF side names tasks by */
			uint64_t addr = tb->rt.sites[i].offset;

			if (s->cap)
				capture__name(s->cap, (uint32_t)tr->target.pid, addr,
					      tb->rt.sites[i].future);
			else
				model__name(&tr->pipe.model, addr, tb->rt.sites[i].future);
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
static void say_what(const struct session *s, const struct traced *tr, char *buf, size_t len)
{
	if (s->cap)
		snprintf(buf, len, "recording pid %d (%s) to %s", tr->target.pid, tr->target.comm,
			 s->o->output);
	else
		snprintf(buf, len, "tracing pid %d (%s)", tr->target.pid, tr->target.comm);
}

/* One line: what was found, and what was attached. */
static void say_found(const struct session *s, const struct traced *tr, bool first)
{
	const struct tokio_runtime *rt = &tr->disc.tokio.rt;
	const char *ctrl_c = first ? "; Ctrl-C to stop" : "";
	char moved[96] = "", stepped[96] = "", lost[96] = "", what[PATH_MAX + 64];
	size_t nr_lost = tr->probes.lost_go;

	say_what(s, tr, what, sizeof(what));
	if (tr->disc.kind == RUNTIME_USDT) {
		info_msg("%s: %zu asynctrace probes in %s, sched_switch via %s, %s%s\n", what,
			tr->disc.nr, tr->disc.sites[0].target_path, tracer__sched_hook(s->tracer),
			mode_str(s->o), ctrl_c);
		return;
	}
	if (tr->probes.moved)
		snprintf(moved, sizeof(moved),
			 "; %zu probes placed past a single-stepped entry (--probe-at)",
			 tr->probes.moved);
	if (tr->probes.stepped)
		snprintf(stepped, sizeof(stepped), "; %zu probes single-stepped (-v says why)",
			 tr->probes.stepped);
	for (size_t k = 0; k < TOKIO_KIND_MAX; k++)
		nr_lost += tr->probes.lost[k];
	if (nr_lost)
		snprintf(lost, sizeof(lost), "; %zu probes refused by the kernel (said above)",
			 nr_lost);
	if (tr->disc.kind == RUNTIME_GO) {
		info_msg("%s: Go %s in %s (offsets from %s): casgstatus, newproc1's returns, "
			"runqsteal%s%s%s; sched_switch via %s, %s%s\n",
			what, tr->disc.go.version, tr->disc.go_target_path,
			tr->disc.go.has_dwarf ? "DWARF" : "the version table", moved, stepped, lost,
			tracer__sched_hook(s->tracer), mode_str(s->o), ctrl_c);
		return;
	}
	info_msg("%s: tokio in %s (%s mangling): %zu raw::poll instances "
		"(%zu named by future type%s%s), %zu wake, %zu schedule, %zu spawn, %zu remove, "
		"%s%s%s%s%s; sched_switch via %s, %s%s\n",
		what, tr->disc.tokio.target_path, rt->v0 ? "v0" : "legacy",
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
		moved, stepped, lost, tracer__sched_hook(s->tracer), mode_str(s->o), ctrl_c);
}

/*
 * Samples process tr's maps into its pipeline: the workers every tick, the
 * tasks (and a snapshot for the live view) every TASK_SAMPLE_TICKS. at: the
 * time the sample stands for (0: now).
 */
static void sample(struct session *s, struct traced *tr, bool tasks, bool show, uint64_t at)
{
	if (tracer__snapshot(s->tracer, tr->target.pid, &tr->snap, tasks,
			     s->o->detect.lost_waker_ns, at))
		return;
	sampler__workers(&tr->sampler, &tr->snap);
	if (!tasks)
		return;
	sampler__tasks(&tr->sampler, &tr->snap);
	if (show && !s->cap)
		pipeline__stats(&tr->pipe, &tr->snap);
	if (s->metrics) {
		struct metrics_target mt = {
			.pid = (uint32_t)tr->target.pid,
			.comm = tr->target.comm,
			.runtime = runtime_name(tr->disc.kind),
			.snap = &tr->snap,
			.det = &tr->pipe.detector,
			.model = &tr->pipe.model,
			.top_tasks = s->o->metrics_tasks,
		};

		metrics__update(s->metrics, &mt);
	}
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

static void fill_run_info(struct session *s, struct traced *tr, struct run_info *info,
			  const char *why, uint64_t end)
{
	memset(info, 0, sizeof(info[0]));
	info->seconds = (double)((end ? end : now_ns()) - tr->start) / 1e9;
	info->end_reason = why;
	info->maps_only = s->o->no_trace;
	tracer__stats(s->tracer, info->stats);
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
			fill_run_info(s, tr, &info, "still recording", 0);
			info_msg("recording: %.1f s, %llu records, %.1f MB, %llu dropped\n",
				info.seconds, (unsigned long long)capture_writer__records(s->cap),
				(double)capture_writer__bytes(s->cap) / 1e6,
				(unsigned long long)report__dropped(&info));
			continue;
		}
		tracer__snapshot(s->tracer, tr->target.pid, &tr->snap, true,
				 s->o->detect.lost_waker_ns, 0);
		fill_run_info(s, tr, &info, "still tracing", 0);
		report__text(stderr, &tr->pipe.model, &tr->pipe.detector, &tr->snap, &info, true);
	}
	if (!s->nr)
		err_msg("no process traced yet: %zu looked at so far\n", s->seen.len);
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

static void stop_signal_set(sigset_t *sigs)
{
	sigemptyset(sigs);
	for (size_t i = 0; i < sizeof(stop_signals) / sizeof(stop_signals[0]); i++)
		sigaddset(sigs, stop_signals[i]);
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

/* The capture's first records: the process, its thresholds, tokio's task names. */
static void begin_capture(struct session *s, struct traced *tr)
{
	const struct detect_opts *d = &s->o->detect;
	struct cap_process proc = {
		.hdr.ts = tr->start,
		.pid = (uint32_t)tr->target.pid,
		.runtime = tr->disc.kind == RUNTIME_TOKIO ? CAPTURE_RUNTIME_TOKIO
			   : tr->disc.kind == RUNTIME_GO  ? CAPTURE_RUNTIME_GO
							  : CAPTURE_RUNTIME_USDT,
		.realtime_offset = tr->pipe.model.realtime_offset,
		.maps_only = s->o->no_trace,
		.long_poll_ns = d->long_poll_ns,
		.sched_delay_ns = d->sched_delay_ns,
		.starve_ns = d->starve_ns,
		.lost_waker_ns = d->lost_waker_ns,
		.episode_gap_ns = d->episode_gap_ns,
		.starve_depth = d->starve_depth,
		.thrash_rate = d->thrash_rate,
	};

	snprintf(proc.comm, sizeof(proc.comm), "%s", tr->target.comm);
	capture__begin(s->cap, &proc);
	if (tr->disc.kind == RUNTIME_TOKIO)
		name_tokio_tasks(s, tr);
	capture_writer__flush(s->cap);
}

/*
 * Following the host: a file whose probes process tr shares (attach.h). The
 * first process to map it attaches them, for every process, as a new owner;
 * the others take a share. 1: attach now, 0: attached already, -errno.
 */
static int share_file(void *ctx, const char *path, long *owner)
{
	struct traced *tr = ctx;
	struct session *s = tr->s;
	struct shared_file *f;
	struct stat st;
	uint64_t key, *keys;

	if (stat(path, &st))
		return -errno;
	key = ((uint64_t)st.st_dev << 40 ^ (uint64_t)st.st_ino) | 1;
	keys = realloc(tr->files, (tr->nr_files + 1) * sizeof(*keys));
	if (!keys)
		return -ENOMEM;
	tr->files = keys;
	f = u64map__get(&s->files, key);
	if (f) {
		f->refs++;
		tr->files[tr->nr_files++] = key;
		*owner = f->owner;
		return 0;
	}
	f = calloc(1, sizeof(*f));
	if (!f || u64map__set(&s->files, key, f)) {
		free(f);
		return -ENOMEM;
	}
	f->refs = 1;
	f->owner = --s->last_owner; /* below 0: never a pid */
	tr->files[tr->nr_files++] = key;
	*owner = f->owner;
	return 1;
}

/* Process tr's shares of files let go: the last one's probes detached. */
static void release_files(struct session *s, struct traced *tr)
{
	for (size_t i = 0; i < tr->nr_files; i++) {
		struct shared_file *f = u64map__get(&s->files, tr->files[i]);

		if (f && !--f->refs) {
			tracer__detach_owner(s->tracer, f->owner);
			u64map__del(&s->files, tr->files[i]);
			free(f);
		}
	}
	tr->nr_files = 0;
}

/* Lets process tr go: its probes, its state in the maps, its place in the session. */
static void traced_drop(struct session *s, struct traced *tr)
{
	size_t i;

	if (tr->target.pidfd >= 0)
		epoll_ctl(s->ep, EPOLL_CTL_DEL, tr->target.pidfd, NULL);
	tracer__detach_owner(s->tracer, tr->target.pid);
	release_files(s, tr);
	tracer__unfollow(s->tracer, tr->target.pid);
	tracer__forget(s->tracer, tr->target.pid);
	u64map__del(&s->by_pid, (uint64_t)tr->target.pid);
	if (s->last == tr)
		s->last = NULL;
	for (i = 0; i < s->nr && s->targets[i] != tr; i++)
		;
	if (i < s->nr)
		memmove(&s->targets[i], &s->targets[i + 1], (s->nr - i - 1) * sizeof(*s->targets));
	s->nr -= i < s->nr;
	if (s->unwinder)
		unwinder__forget(s->unwinder, (uint32_t)tr->target.pid);
	traced__free(tr);
}

/*
 * Process tr, examined, is traced from now: its pipeline and sinks (or the
 * capture), then its probes. 0, or -errno after a message (tr is then freed).
 */
static int traced_start(struct session *s, struct traced *tr)
{
	const struct options *o = s->o;
	struct attach_opts ao = {
		.pid = tr->target.pid,
		.share = s->share_files ? share_file : NULL,
		.share_ctx = tr,
		.probe_at_entry = o->probe_at_entry,
		.verbose = o->verbose,
		.memfd = tr->target.memfd,
	};
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = tr };
	struct traced **targets;
	struct timespec rt;
	int err;

	targets = realloc(s->targets, (s->nr + 1) * sizeof(*targets));
	if (!targets || u64map__set(&s->by_pid, (uint64_t)tr->target.pid, tr)) {
		s->targets = targets ? targets : s->targets;
		traced__free(tr);
		return -ENOMEM;
	}
	s->targets = targets;
	s->targets[s->nr++] = tr;
	err = pipeline__init(&tr->pipe, (uint32_t)tr->target.pid, tr->target.comm, now_ns(),
			     &o->detect);
	tr->piped = true;
	if (s->flight) {
		tr->pipe.on_alert = on_alert;
		tr->pipe.on_alert_ctx = tr;
	}
	/* tokio parks a task woken by a poll in that worker's LIFO slot */
	tr->pipe.detector.lifo_slot = tr->disc.kind == RUNTIME_TOKIO;
	/*
	 * A goroutine parked on a channel for long is as often meant to (a
	 * worker waiting for a job, a ticker's loop) as leaked: Go's lost
	 * wakers are the nil channels' unless --lost-waker asks for more.
	 */
	if (tr->disc.kind == RUNTIME_GO)
		tr->pipe.detector.lost_waker_exact_only = !(o->detect_given & GIVEN_LOST_WAKER);
	/* its GC's workers, sweeper and scavenger hold Ps by design: never alerted on */
	if (tr->disc.kind == RUNTIME_GO)
		tr->pipe.detector.runtime_tasks = "runtime.";
	sampler__init(&tr->sampler, on_sample, tr);
	/* USDT runtimes pass name strings; tokio's name_addr is code, named from symbols. */
	if (tr->disc.kind == RUNTIME_USDT)
		tr->pipe.model.read_str = target__read_str;
	/* a goroutine is named by its start function */
	if (tr->disc.kind == RUNTIME_GO) {
		tr->pipe.model.code_name = go_code_name;
		tr->pipe.model.code_ctx = &tr->disc;
	}
	tr->pipe.model.thread_comm = target__thread_comm;
	tr->pipe.model.target_ctx = &tr->target;
	if (s->unwinder) {
		tr->pipe.model.unwind = unwind_stack;
		tr->pipe.model.unwind_ctx = s;
		tr->pipe.model.stack_period_ns = 1000000000ull / STACK_HZ;
		/* its images now: once attached, the tracer may no longer read its maps */
		if (unwinder__prime(s->unwinder, (uint32_t)tr->target.pid))
			warn_msg("pid %d: its stacks cannot be unwound (its memory map could not "
				 "be read)\n", tr->target.pid);
	}
	if (!err && !s->cap) {
		if (tr->disc.kind == RUNTIME_TOKIO)
			name_tokio_tasks(s, tr);
		/* one process's live view, or (several) its line on the board */
		err = outputs__add_sinks(&s->out, &tr->pipe, true);
	}
	if (!err)
		err = tracer__follow(s->tracer, tr->target.pid, target_flags(&tr->disc, NULL));
	if (!err && tr->disc.kind == RUNTIME_GO)
		err = go_layout(s->tracer, tr);
	if (!err && tr->disc.kind == RUNTIME_TOKIO)
		err = tracer__tokio_base(s->tracer, tr->target.pid,
					 discovery__tokio_addr(&tr->disc, 0), tr->disc.tokio.rt.defer_ret,
					 tr->disc.tokio.rt.nr_defer);
	if (err) {
		if (err == -E2BIG || err == -ENOSPC)
			err_msg("cannot follow pid %d: the BPF maps hold no more processes\n",
				tr->target.pid);
		else
			err_msg("cannot trace pid %d (%s): %s\n", tr->target.pid, tr->target.comm,
				strerror(-err));
		s->failed++;
		traced_drop(s, tr);
		return err;
	}
	/* Its time zero: nothing can happen before its first probe is attached. */
	tr->start = now_ns();
	clock_gettime(CLOCK_REALTIME, &rt);
	tr->pipe.model.t0 = tr->start;
	tr->pipe.model.last_ts = tr->start;
	tr->pipe.model.realtime_offset =
		(uint64_t)rt.tv_sec * 1000000000ull + (uint64_t)rt.tv_nsec - tr->start;
	if (s->cap)
		begin_capture(s, tr);
	err = attach__probes(s->tracer, &tr->disc, &ao, &tr->probes);
	/* a probe the kernel refused takes what it offered away, for threads not met yet */
	if (!err && target_flags(&tr->disc, &tr->probes) != target_flags(&tr->disc, NULL))
		err = tracer__follow(s->tracer, tr->target.pid, target_flags(&tr->disc, &tr->probes));
	if (!err && epoll_ctl(s->ep, EPOLL_CTL_ADD, tr->target.pidfd, &ev))
		err = -errno;
	if (err) {
		if (!target__alive(&tr->target))
			err_msg("pid %d exited while attaching\n", tr->target.pid);
		else
			err_msg("cannot trace pid %d (%s): attaching failed: %s\n", tr->target.pid,
				tr->target.comm, strerror(-err));
		s->failed++;
		traced_drop(s, tr);
		return err;
	}
	s->ever++;
	/* those attached at the start are said once confined (start()) */
	if (s->started)
		say_found(s, tr, s->ever == 1 && !s->said_watching);
	return 0;
}

/*
 * Process tr's tracing ends (it exited at `at`, or the session stops): a
 * last sample, its pipeline finished, its report.
 */
static void traced_end(struct session *s, struct traced *tr, const char *why, uint64_t at)
{
	struct run_info info;

	sample(s, tr, true, false, at);
	fill_run_info(s, tr, &info, why, at);
	if (s->flight) /* its dumps still due, while its names are known */
		flight__tick(s->flight, now_ns(), (uint32_t)tr->target.pid, live_model, s);
	if (s->cap) {
		capture__snapshot(s->cap, &tr->snap, info.stats, AT_STAT_NR);
		capture__process_end(s->cap, (uint32_t)tr->target.pid, at, why);
		s->dropped = report__dropped(&info); /* the session's: the same for every process */
	} else if (outputs__end(&s->out, &tr->pipe, at, &tr->snap, &info) != EXIT_OK) {
		s->ret = EXIT_FAIL;
	}
	if (s->metrics) /* its final values, until a scrape has seen them */
		metrics__gone(s->metrics, (uint32_t)tr->target.pid);
}

/* Processes tr that exited a while ago: ended and let go (the session goes on). */
static void end_exited(struct session *s, uint64_t now)
{
	for (size_t i = s->nr; i-- > 0;) {
		struct traced *tr = s->targets[i];

		if (!tr->exited || now < tr->exited + EXIT_GRACE_NS)
			continue;
		traced_end(s, tr, "target exited", tr->exited);
		traced_drop(s, tr);
	}
}

static size_t running(const struct session *s)
{
	size_t n = 0;

	for (size_t i = 0; i < s->nr; i++)
		n += !s->targets[i]->exited;
	return n;
}

/* Following the host: a process found that may run a known runtime. */
static int on_new_process(void *ctx, pid_t pid, const char *comm)
{
	struct session *s = ctx;
	struct traced *tr = u64map__get(&s->by_pid, (uint64_t)pid);

	if (tr) {
		/* it exec'd: what it ran is gone, what it runs now is looked at anew */
		traced_end(s, tr, "target exec'd", now_ns());
		traced_drop(s, tr);
	}
	if (s->o->verbose)
		info_msg("looking at pid %d (%s)\n", pid, comm);
	return examiner__ask(s->examiner, pid) == -ENOMEM ? -ENOMEM : 0;
}

/* Following the host: no process traced yet, and none being looked at. Said once. */
static void say_watching(struct session *s)
{
	const struct options *o = s->o;

	if (s->said_watching || s->ever || examiner__pending(s->examiner))
		return;
	s->said_watching = true;
	if (s->hooks) {
		info_msg("no process of the command runs a known runtime yet: watching those it "
			 "starts\n");
		return;
	}
	err_msg("no process %s runs a known runtime (%s USDT probes, tokio or Go) yet: %zu looked "
		"at; watching for one, Ctrl-C to stop\n",
		o->comm || o->exclude_comm || o->cgroup
			? "that --comm, --exclude-comm and --cgroup let through"
			: "on this host",
		AT_USDT_PROVIDER, s->seen.len);
}

/* run: its command, held at its entry point, let go (once traced, or known not to be). */
static void release_root(struct session *s)
{
	if (s->hooks && !s->released) {
		s->released = true;
		s->hooks->release(s->hooks->ctx);
	}
}

/* Following the host: the processes examined meanwhile, traced if they run a known runtime. */
static void take_examined(struct session *s)
{
	struct traced *tr;
	pid_t pid;

	while (examiner__take(s->examiner, &pid, &tr)) {
		bool root = s->hooks && pid == s->hooks->root;

		if (!tr) {
			if (s->o->verbose || root)
				info_msg("pid %d: no known runtime, or gone\n", pid);
			if (root)
				release_root(s);
			continue;
		}
		if (u64map__get(&s->by_pid, (uint64_t)pid)) {
			traced__free(tr); /* traced already */
		} else if (s->nr >= s->max_targets) {
			s->over_max++;
			warn_msg("pid %d (%s) runs %s, not traced: --max-targets %u processes are "
				"traced already%s\n",
				pid, tr->target.comm,
				tr->disc.kind == RUNTIME_USDT ? "asynctrace probes"
							       : runtime_name(tr->disc.kind),
				s->max_targets,
				s->share_files && tr->disc.kind == RUNTIME_USDT
					? " (a probe of its files attached for a process traced "
					  "still stops it, for nothing)"
					: "");
			traced__free(tr);
		} else {
			traced_start(s, tr); /* a failure is said, and tr let go */
		}
		if (root)
			release_root(s);
	}
	say_watching(s);
}

/* Following the host: the processes that started (or exec'd) since the last look. */
static void scan_new(struct session *s)
{
	int err = scan__new_processes(&s->filter, &s->seen, on_new_process, s);

	if (err)
		err_msg("cannot look through the host's processes: %s\n", strerror(-err));
}

/* The BPF side saw process pid exec, or a traced process fork it: to look at soon. */
static void on_birth(void *ctx, pid_t pid)
{
	struct session *s = ctx;

	if (s->o->verbose)
		info_msg("pid %d exec'd, or a process traced forked it\n", pid);
	if (s->nr_births == s->cap_births) {
		size_t cap = s->cap_births ? s->cap_births * 2 : 64;
		struct birth *b = realloc(s->births, cap * sizeof(*b));

		if (!b)
			return; /* the next full scan finds it */
		s->births = b;
		s->cap_births = cap;
	}
	s->births[s->nr_births++] = (struct birth){ .pid = pid, .due = now_ns() + BIRTH_SETTLE_NS };
}

/* The processes born a while ago, looked at. */
static void look_at_births(struct session *s, uint64_t now)
{
	size_t n = 0;

	for (size_t i = 0; i < s->nr_births; i++) {
		if (s->births[i].due > now) {
			s->births[n++] = s->births[i];
			continue;
		}
		if (scan__process(&s->filter, &s->seen, s->births[i].pid, on_new_process, s) ==
		    -ENOMEM)
			err_msg("out of memory looking at pid %d\n", s->births[i].pid);
	}
	s->nr_births = n;
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
	if (si.ssi_signo == SIGHUP && s->follow && s->o->alerts) {
		err = outputs__reopen_alerts(&s->out);
		if (err)
			err_msg("cannot open '%s' again: %s; alerts still go where they went\n",
				s->o->alerts, strerror(-err));
		return NULL;
	}
	s->stop_signo = (int)si.ssi_signo;
	return stop_reason(si.ssi_signo);
}

/* One tick: samples, time passing for the pipelines, processes come and gone. */
static const char *tick(struct session *s, uint64_t now, int ticks)
{
	for (size_t i = 0; i < s->nr; i++) {
		struct traced *tr = s->targets[i];

		sample(s, tr, ticks % TASK_SAMPLE_TICKS == 0, true, 0);
		if (!s->cap)
			pipeline__tick(&tr->pipe, now);
	}
	if (ticks % TASK_SAMPLE_TICKS == 0 && !s->cap)
		outputs__draw(&s->out);
	if (s->cap) {
		capture__tick(s->cap, now);
		/* what is recorded survives asynctraced being killed */
		capture_writer__flush(s->cap);
	}
	end_exited(s, now);
	if (s->flight)
		flight__tick(s->flight, now, 0, live_model, s);
	if (ticks % TASK_SAMPLE_TICKS == 0)
		publish_metrics(s);
	if (s->follow)
		look_at_births(s, now);
	if (s->follow && ticks % SCAN_TICKS == 0)
		scan_new(s);
	if (!s->follow && !s->nr)
		return "every target exited";
	/* never held for good: whatever kept it from being looked at, it runs */
	if (s->hooks && !s->released && now > s->start + ROOT_HOLD_MAX_NS) {
		warn_msg("pid %d not looked at after %llu s: let go (traced still, if it runs a "
			 "known runtime, from when it is)\n",
			 s->hooks->root, ROOT_HOLD_MAX_NS / 1000000000ull);
		release_root(s);
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
		sample(s, s->targets[i], true, true, 0);
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
	if (s->o->output && !strcmp(s->o->output, "-"))
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
				take_examined(s);
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

/* record: the end record; one line to say what was written. */
static int finish_capture(struct session *s, const char *why)
{
	const struct options *o = s->o;
	char who[64];
	int err;

	if (!s->ever) {
		err_msg("recorded nothing in '%s': no process ran a known runtime (%s)\n", o->output,
			why);
		return EXIT_FAIL;
	}
	capture__end(s->cap, s->stop, why);
	err = capture_writer__flush(s->cap);
	if (err) {
		err_msg("failed to write '%s': %s\n", o->output, strerror(-err));
		return EXIT_FAIL;
	}
	if (s->ever == 1 && s->nr == 1)
		snprintf(who, sizeof(who), "pid %d (%s)", s->targets[0]->target.pid,
			 s->targets[0]->target.comm);
	else
		snprintf(who, sizeof(who), "%zu processes", s->ever);
	info_msg("recorded %s for %.2f s, %s: %llu records, %.1f MB in %s; %llu dropped\n", who,
		(double)(s->stop - s->start) / 1e9, why,
		(unsigned long long)capture_writer__records(s->cap),
		(double)capture_writer__bytes(s->cap) / 1e6, o->output,
		(unsigned long long)s->dropped);
	return EXIT_OK;
}

/* Several processes traced: one line for the whole session. */
static void say_totals(const struct session *s, const char *why)
{
	char extra[160] = "";
	size_t len = 0;

	if (s->over_max)
		len += (size_t)snprintf(extra + len, sizeof(extra) - len,
					"; %zu left out by --max-targets", s->over_max);
	if (s->stray && len < sizeof(extra))
		len += (size_t)snprintf(extra + len, sizeof(extra) - len,
					"; %llu records came after their process was let go",
					(unsigned long long)s->stray);
	if (s->malformed && len < sizeof(extra))
		snprintf(extra + len, sizeof(extra) - len, "; %llu malformed records",
			 (unsigned long long)s->malformed);
	info_msg("%zu processes traced in %.2f s, %s%s\n", s->ever,
		(double)(s->stop - s->start) / 1e9, why, extra);
}

/* stop -> detach -> drain -> sample -> close episodes -> flush -> reports */
static int finish(struct session *s, const char *why)
{
	int ret;

	s->stop = now_ns();
	tracer__detach(s->tracer);
	while (tracer__consume(s->tracer, CONSUME_BATCH, true) > 0)
		;
	for (size_t i = 0; i < s->nr; i++) {
		struct traced *tr = s->targets[i];

		traced_end(s, tr, tr->exited ? "target exited" : why,
			   tr->exited ? tr->exited : s->stop);
	}
	if (s->cap)
		return finish_capture(s, why);
	publish_metrics(s);
	ret = outputs__close(&s->out);
	if (s->follow || s->ever > 1 || s->stray || s->malformed)
		say_totals(s, why);
	return ret == EXIT_OK ? s->ret : ret;
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
	const struct options *o = s->o;
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
	const uint64_t attach_caps = 1ull << CAP_SYS_ADMIN | 1ull << CAP_BPF |
				     1ull << CAP_PERFMON | 1ull << CAP_SYS_PTRACE |
				     1ull << CAP_DAC_READ_SEARCH | 1ull << CAP_DAC_OVERRIDE;
	uint64_t keep = 0;
	int err;

	/* reading a USDT target's strings when its mem file could not be opened (target.h) */
	for (size_t i = 0; i < s->nr; i++)
		if (s->targets[i]->disc.kind == RUNTIME_USDT && s->targets[i]->target.memfd < 0)
			keep |= 1ull << CAP_SYS_PTRACE;
	err = sandbox__drop_privileges(s->follow ? attach_caps : keep);
	if (err) {
		err_msg("failed to drop privileges after attaching: %s\n", strerror(-err));
		return err;
	}
	/* run waits for its command and writes its gates after: no filter there either */
	if (!s->o->no_sandbox && !s->follow && !s->hooks) {
		err = sandbox__filter((s->metrics ? SANDBOX_SERVE : 0) |
					      (s->flight ? SANDBOX_DUMPS : 0) |
					      (s->unwinder ? SANDBOX_STACKS : 0),
				      flight__dirfd(s->flight));
		if (err) {
			err_msg("failed to install the seccomp filter: %s (--no-sandbox runs "
				"without it)\n",
				strerror(-err));
			return err;
		}
	}
	return 0;
}

/* Everything up to attached: each failure says what. 0, or -errno. */
static int start(struct session *s)
{
	const struct options *o = s->o;
	struct tracer_opts topts = {
		.btf_path = o->btf_path,
		.ringbuf_bytes = o->ringbuf_bytes,
		.task_slots = o->task_slots,
		.sched_hook = o->sched_hook,
		.trace_events = !o->no_trace, /* the flight recorder keeps them too */
		.long_poll_ns = o->detect.long_poll_ns,
		.sched_delay_ns = o->detect.sched_delay_ns,
		.starve_depth = o->detect.starve_depth,
		.empty_programs = o->empty_programs,
		/* half the threshold: a long poll is sampled before it ends */
		.stack_after_ns = o->stacks ? (o->detect.long_poll_ns ? o->detect.long_poll_ns / 2
								    : STACK_AFTER_NS)
					    : 0,
		.uprobes = s->follow,
		.births = s->follow ? on_birth : NULL,
		.births_ctx = s,
	};
	struct traced **first = NULL;
	size_t nr_first = 0;
	char why[256];
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
	/* before any probe is placed: where the kernel lets them go, cached per boot */
	if (probe_learn__get(&s->rules, PROBE_RULES_DIR, false, why, sizeof(why)))
		warn_msg("cannot learn which instructions this kernel emulates under a uprobe "
			 "(%s): function probes stay at their entries\n",
			 why);
	else if (why[0])
		warn_msg("learning this kernel's uprobe rules: %s: that form is not used\n", why);
	s->ex_opts.rules = &s->rules;
	/* its directory first: a bad --dump-dir is said before any process is looked at */
	if (o->flight_ns) {
		struct flight_opts fo = {
			.window_ns = o->flight_ns,
			.after_ns = FLIGHT_AFTER_NS,
			.min_gap_ns = FLIGHT_MIN_GAP_NS,
			.max_bytes = o->flight_bytes ? o->flight_bytes : FLIGHT_DEFAULT_BYTES,
			.dir_max_bytes = o->dump_dir_bytes ? o->dump_dir_bytes : DUMP_DIR_DEFAULT_BYTES,
			.dir = o->dump_dir,
			.detect = o->detect,
		};

		err = flight__new(&s->flight, &fo);
		if (err)
			goto out;
	}
	if (s->follow) {
		err = scan_filter__init(&s->filter, o->comm, o->exclude_comm, o->cgroup, why,
					sizeof(why));
		if (err) {
			err_msg("%s\n", why);
			return err;
		}
		s->filter_set = true;
		if (s->hooks)
			s->filter.ancestor = s->hooks->root;
	} else {
		err = examine_pids(s, &first, &nr_first);
		if (err)
			goto out;
		for (size_t i = 0; i < nr_first; i++)
			topts.uprobes |= first[i]->disc.kind == RUNTIME_TOKIO ||
					 first[i]->disc.kind == RUNTIME_GO;
		topts.usdt_specs = common_usdt_specs(first, nr_first);
	}
	if (o->command == CMD_RECORD) {
		err = capture_writer__open(&s->cap, o->output);
		if (err) {
			err_msg("cannot write capture to '%s': %s\n", o->output,
				outbuf__strerror(err));
			goto out;
		}
	} else {
		err = outputs__open(&s->out, o, s->follow || o->nr_pids > 1);
		if (err)
			goto out;
		if (s->hooks) {
			s->out.on_summary = s->hooks->summary;
			s->out.summary_ctx = s->hooks->ctx;
		}
	}

	/* Signals arrive through the loop's epoll; a second one kills (see run). */
	stop_signal_set(&sigs);
	sigaddset(&sigs, SIGUSR1);
	sigaddset(&sigs, SIGUSR2);
	sigprocmask(SIG_BLOCK, &sigs, NULL);
	s->sfd = signalfd(-1, &sigs, SFD_CLOEXEC | SFD_NONBLOCK);
	signal(SIGPIPE, SIG_IGN);
	/*
	 * The server's thread starts with the signals blocked, as every thread
	 * after this; its socket is bound now: the sandbox lets it answer, not bind.
	 */
	if (o->metrics) {
		err = metrics__open(&s->metrics, o->metrics);
		if (err)
			goto out;
	}

	err = tracer__new(&s->tracer, &topts, on_record, s);
	if (err) {
		err_msg("failed to load BPF programs: %s%s\n", strerror(-err),
			o->verbose ? "" : " (-v shows libbpf's log)");
		goto out;
	}
	s->start = now_ns();
	err = tracer__attach_sched(s->tracer);
	if (err) {
		err_msg("failed to attach %s sched_switch: %s\n", tracer__sched_hook(s->tracer),
			strerror(-err));
		goto out;
	}
	if (o->stacks) {
		err = tracer__attach_stacks(s->tracer, STACK_HZ);
		if (!err)
			err = unwinder__new(&s->unwinder);
		if (err) {
			err_msg("cannot sample stacks (--stacks): %s\n", strerror(-err));
			goto out;
		}
		err = ksyms__load(&s->ksyms, NULL);
		if (err)
			warn_msg("the kernel's symbols cannot be read (/proc/kallsyms: %s): "
				 "blocked polls' stacks show no kernel frames\n",
				 err == -EPERM ? "addresses hidden, see kptr_restrict"
					       : strerror(-err));
		err = 0;
	}
	if (s->follow) {
		err = examiner__new(&s->examiner, s, &s->ex_opts);
		if (err) {
			err_msg("cannot start the thread that examines processes: %s\n",
				strerror(-err));
			goto out;
		}
		scan_new(s);
		say_watching(s);
	} else {
		for (size_t i = 0; i < nr_first; i++) {
			struct traced *tr = first[i];

			first[i] = NULL;
			traced_start(s, tr); /* a failure is said, and tr let go */
		}
		if (!s->nr) {
			err = -ENOENT;
			goto out;
		}
	}
	err = confine(s);
	s->started = true;
	for (size_t i = 0; !err && i < s->nr; i++)
		say_found(s, s->targets[i], i == 0);
out:
	for (size_t i = 0; i < nr_first; i++)
		traced__free(first[i]);
	free(first);
	return err;
}

int session__run(const struct options *o)
{
	return session__run_with(o, NULL);
}

int session__run_with(const struct options *o, struct session_hooks *h)
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
	image_cache__init(&s.images);
	s.ex_opts.verbose = o->verbose;
	s.ex_opts.images = s.follow ? &s.images : NULL;
	s.ep = epoll_create1(EPOLL_CLOEXEC);
	if (s.ep >= 0 && start(&s) == 0) {
		if (!s.follow)
			release_root(&s); /* -p: traced by now */
		why = trace_loop(&s, o->duration_ns ? s.start + o->duration_ns : 0);
		/* From here a second Ctrl-C kills us the default way. */
		stop_signal_set(&sigs);
		sigprocmask(SIG_UNBLOCK, &sigs, NULL);
		ret = finish(&s, why);
		if (sandbox__say_refused())
			ret = EXIT_FAIL;
	} else {
		if (s.ep < 0)
			err_msg("epoll failed: %s\n", strerror(errno));
		/* start() may have blocked them and failed: run goes on to wait for its command */
		stop_signal_set(&sigs);
		sigprocmask(SIG_UNBLOCK, &sigs, NULL);
	}
	if (h)
		h->stopped_by = s.stop_signo;
	examiner__free(s.examiner); /* before the tracer: it may hold processes to trace */
	tracer__free(s.tracer);
	for (size_t i = 0; i < s.nr; i++)
		traced__free(s.targets[i]);
	free(s.targets);
	outputs__free(&s.out);
	metrics__close(s.metrics);
	flight__free(s.flight);
	unwinder__free(s.unwinder);
	ksyms__free(s.ksyms);
	capture_writer__free(s.cap);
	u64map__clear(&s.by_pid);
	u64map__clear(&s.seen);
	u64map__clear_free(&s.files);
	image_cache__free(&s.images);
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
