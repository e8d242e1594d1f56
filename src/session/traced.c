// SPDX-License-Identifier: MIT
/*
 * One process a session traces, from found to let go: examined (its
 * runtime found, or why it cannot be traced said), started (its pipeline
 * and sinks, or the capture; its probes), fed its records and samples of
 * the maps, ended (its report) and dropped.
 */
#include "session/traced.h"

#include <errno.h>
#include <linux/capability.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>

#include "asynctraced.h"
#include "lib/sandbox.h"
#include "lib/util.h"
#include "session/session_priv.h"
#include "sinks/flight.h"
#include "sinks/metrics.h"
#include "source/thread_ptrs.h"
#include "tasks/tasks.h"
#include "stacks/ksyms.h"
#include "stacks/unwind.h"

void traced__free(struct traced *tr)
{
	if (!tr)
		return;
	if (tr->piped) {
		pipeline__free(&tr->pipe);
		sampler__free(&tr->sampler);
	}
	stats__free(&tr->snap);
	thread_ptrs__close(tr->threads);
	u64map__clear_free(&tr->dumps);
	free(tr->files);
	discovery__free(&tr->disc);
	target__close(&tr->target);
	free(tr);
}

/* Why pid cannot be traced, when its runtime is none or lacks what we need. */
static int check_runtime(const struct traced *tr, pid_t pid, bool quiet)
{
	const struct discovery *d = &tr->disc;

	if (d->kind == RUNTIME_NONE && quiet)
		return -ENOENT;
	if (d->kind == RUNTIME_NONE && d->is_go) {
		err_msg("pid %d (%s) is a Go program (%s), but its runtime is not one this "
			"version can trace: %s\n",
			pid, tr->target.comm, d->go.version,
			d->go_err == -ENOTSUP
				? "a scheduler function is missing, or the binary has no DWARF and "
				  "its Go version's layout is not in the table (docs/go.md)"
				: strerror(-d->go_err));
		return -ENOENT;
	}
	if (d->kind == RUNTIME_NONE && d->stripped) {
		err_msg("no known runtime in pid %d (%s): no %s USDT probes, and its binary is "
			"stripped (no symbol table), so tokio cannot be looked for: asynctraced "
			"finds tokio by its function symbols; rebuild without `strip = true` "
			"(strip = \"debuginfo\" keeps them)\n",
			pid, tr->target.comm, AT_USDT_PROVIDER);
		return -ENOENT;
	}
	if (d->kind == RUNTIME_NONE) {
		err_msg("no known runtime in pid %d (%s): no %s USDT probes (see "
			"docs/usdt-abi.md), no tokio symbols and no Go runtime in its %zu mapped ELF "
			"files\n",
			pid, tr->target.comm, AT_USDT_PROVIDER, d->scanned);
		return -ENOENT;
	}
	if (d->kind == RUNTIME_USDT &&
	    (!discovered(d, "poll_begin") || !discovered(d, "poll_end"))) {
		err_msg("pid %d (%s) has %s probes but not poll_begin and poll_end: nothing to "
			"trace\n",
			pid, tr->target.comm, AT_USDT_PROVIDER);
		return -ENOENT;
	}
	return 0;
}

int traced__examine(struct traced **out, struct session *s, pid_t pid,
		    const struct examine_opts *o, bool quiet)
{
	struct traced *tr = calloc(1, sizeof(*tr));
	int err;

	*out = NULL;
	if (!tr)
		return -ENOMEM;
	tr->s = s;
	err = target__open(&tr->target, pid);
	if (err) {
		if (err == -ESRCH && !quiet)
			err_msg("no process with pid %d\n", pid);
		else if (err != -ESRCH)
			err_msg("cannot inspect pid %d: %s\n", pid, strerror(-err));
		goto fail;
	}
	err = analyser__examine(&s->ana, &tr->target,
				&(struct analyser_opts){ .verbose = o->verbose, .remember = o->remember,
							 .probe_at_entry = o->probe_at_entry,
							 .rules = o->rules },
				&tr->disc);
	if (err == -EIO || err == -EBADMSG || err == -ETIMEDOUT) /* said */
		goto fail;
	if (err) {
		if (!quiet || target__alive(&tr->target))
			err_msg("cannot read the mappings of pid %d: %s%s\n", pid, strerror(-err),
				(err == -EACCES || err == -EPERM) &&
						!sandbox__has_cap(CAP_SYS_PTRACE)
					? ": a process of another user needs CAP_SYS_PTRACE"
					: "");
		goto fail;
	}
	err = check_runtime(tr, pid, quiet);
	if (err)
		goto fail;
	*out = tr;
	return 0;
fail:
	traced__free(tr);
	return err;
}

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
	struct traced *tr = ctx;
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

	int k = kernel_frames(tr->s->ksyms, st, frames, max);
	int u = analyser__unwind(&tr->s->stacks, &tr->target, &s, frames + k, max - k, by_fp);

	/* a wait with no user frames to say who made it is not worth showing */
	return u > 0 ? k + u : 0;
}

/*
 * tokio, sampled (--stacks): the innermost frame in code only one raw::poll
 * instance's polls run (the instance, its Harness::poll, its Core::poll:
 * struct tokio_site's code) names the task as that instance's probe would
 * (its file offset, named by its future type: name_tokio_tasks()); 0 if no
 * frame is in such code.
 */
static uint64_t tokio_stack_name(void *ctx, const struct stack_frame *f, int n)
{
	const struct traced *tr = ctx;
	const struct tokio_binary *tb = &tr->disc.tokio;

	for (int i = 0; i < n; i++) {
		uint64_t off;

		if (f[i].kernel || f[i].pc < tb->map.start || f[i].pc >= tb->map.end)
			continue;
		off = f[i].pc - tb->map.start + tb->map.offset;
		for (size_t k = 0; k < tb->rt.nr; k++) {
			const struct tokio_site *site = &tb->rt.sites[k];

			if (site->kind != TOKIO_POLL || site->internal)
				continue;
			for (int c = 0; c < 1 + TOKIO_LAYERS; c++)
				if (site->code_len[c] && off >= site->code_off[c] &&
				    off - site->code_off[c] < site->code_len[c])
					return site->offset;
		}
	}
	return 0;
}

/* A goroutine's name: the function it started in, at addr in the target. */
static const char *go_code_name(void *ctx, uint64_t addr)
{
	const struct discovery *d = ctx; /* RUNTIME_GO: its functions are read */

	return addr > d->go_bias ? golang__goroutine_name(&d->go, addr - d->go_bias) : NULL;
}

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
void traced__record(struct traced *tr, const void *data, size_t size)
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

/*
 * Sample mode's alert on process tr, or a run that may hide a long poll
 * (cause says which, "after ..."), with --escalate: its probes attached for
 * --escalate seconds, samples letting it be meanwhile, at most once every
 * --escalate-every. Whether they were.
 */
static bool escalate(struct session *s, struct traced *tr, const char *cause)
{
	const struct session_opts *o = s->o;
	struct attach_opts ao = {
		.pid = tr->target.pid,
		.probe_at_entry = o->probe_at_entry,
		.verbose = o->verbose,
		.memfd = tr->target.memfd,
	};
	uint64_t now = now_ns();
	int err;

	if (!o->escalate_ns || tr->escalated_until || now < tr->next_escalation)
		return false;
	tr->next_escalation = now + (o->escalate_every_ns > o->escalate_ns ? o->escalate_every_ns
									    : o->escalate_ns);
	/* samples let it be first: a run they have open ends where they last saw it */
	tracer__escalate(s->tracer, tr->target.pid, true);
	memset(&tr->probes, 0, sizeof(tr->probes));
	err = attach__probes(s->tracer, &tr->disc, &ao, &tr->probes);
	if (err) {
		tracer__escalate(s->tracer, tr->target.pid, false);
		tracer__detach_owner(s->tracer, tr->target.pid);
		warn_msg("pid %d (%s): its probes could not be attached %s: %s; sampled still\n",
			 tr->target.pid, tr->target.comm, cause,
			 err == -ENOTSUPP_KERNEL ? "the kernel refused a probe" : strerror(-err));
		return false;
	}
	tr->escalated_until = now + o->escalate_ns;
	tr->pipe.detector.wakes_unseen = false;
	tr->escalations++;
	info_msg("pid %d (%s): probes attached for %.1f s %s (escalation %u)\n", tr->target.pid,
		 tr->target.comm, (double)o->escalate_ns / 1e9, cause, tr->escalations);
	return true;
}

/*
 * A sampled run of process tr that held a worker past --long-poll on the
 * CPU in polls of one task, one long poll or many short ones (tokio keeps
 * no count the samples read): --escalate's probes tell; without them, it is
 * said once.
 */
static void on_suspect(void *ctx, const struct at_poll *p, const char *task_name)
{
	struct traced *tr = ctx;
	struct session *s = tr->s;
	char cause[AT_TASK_NAME_LEN + 160];

	snprintf(cause, sizeof(cause),
		 "after task '%s' #%llu held worker %u for %.2f ms in polls of its own "
		 "(samples tell no tokio poll from the next)",
		 task_name, (unsigned long long)p->task, p->worker, (double)p->duration_ns / 1e6);
	if (s->o->escalate_ns) {
		escalate(s, tr, cause);
		return;
	}
	if (tr->said_suspect)
		return;
	tr->said_suspect = true;
	info_msg("pid %d (%s): task '%s' #%llu held worker %u for %.2f ms in polls of its own: "
		 "one long poll or a loop of short ones, which samples do not tell apart in "
		 "tokio; no alert (--escalate measures them with probes; said once)\n",
		 tr->target.pid, tr->target.comm, task_name, (unsigned long long)p->task,
		 p->worker, (double)p->duration_ns / 1e6);
}

/* --escalate: process tr's probes detached once their time is up (or it ends). */
void traced__deescalate(struct session *s, struct traced *tr, uint64_t now)
{
	if (!tr->escalated_until || now < tr->escalated_until)
		return;
	tr->escalated_until = 0;
	tr->pipe.detector.wakes_unseen = true;
	/*
	 * Its bit first: the links close off the loop's thread (tracer.c), and a
	 * probe that still fires meanwhile counts nothing (bpf: thread_self());
	 * a poll the probes began and will not end, the next sighting drops
	 * (sample_observe()).
	 */
	tracer__escalate(s->tracer, tr->target.pid, false);
	tracer__detach_owner(s->tracer, tr->target.pid);
	info_msg("pid %d (%s): probes detached, sampled again\n", tr->target.pid, tr->target.comm);
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
		char cause[64];

		if (a->sampled_ns) {
			snprintf(cause, sizeof(cause), "after a %s alert", alert_kind_str(a->kind));
			if (escalate(s, tr, cause))
				a->escalated_ns = s->o->escalate_ns;
		}
		/* an escalation's dump holds what its probes saw, to their end */
		if (flight__alert(s->flight, (uint32_t)tr->target.pid, alert_kind_str(a->kind),
				  a->ts, a->escalated_ns ? a->escalated_ns + FLIGHT_AFTER_NS : 0,
				  a->dump, sizeof(a->dump)) &&
		    (path = strdup(a->dump)) && u64map__set(&tr->dumps, a->episode, path))
			free(path);
	} else if ((path = u64map__del(&tr->dumps, a->episode))) {
		snprintf(a->dump, sizeof(a->dump), "%s", path);
		free(path);
	}
}

static void on_sample(void *ctx, const void *rec, size_t size)
{
	traced__record(ctx, rec, size);
}

/* Where the Go probes find goid, m, p and the run queue in process tr (bpf side). */
static int go_layout(struct tracer *t, const struct traced *tr)
{
	const struct go_offsets *o = &tr->disc.go.off;
	struct at_go_layout l = { .g_goid = o->g_goid, .g_m = o->g_m, .g_startpc = o->g_startpc,
				  .g_preempt = o->g_preempt, .g_waitreason = o->g_waitreason,
				  .m_p = o->m_p, .p_id = o->p_id,
				  .p_runqhead = o->p_runqhead, .p_runqtail = o->p_runqtail,
				  .p_runq = o->p_runq,
				  .tls_g = tr->disc.go.tls_g, .g_status = o->g_atomicstatus,
				  .g_seq = o->g_tracking_seq, .m_curg = o->m_curg,
				  .p_schedtick = o->p_schedtick };

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

/* The capture's first records: the process, its thresholds, tokio's task names. */
static void begin_capture(struct session *s, struct traced *tr)
{
	struct cap_process proc = {
		.hdr.ts = tr->start,
		.pid = (uint32_t)tr->target.pid,
		.runtime = tr->disc.kind == RUNTIME_TOKIO ? CAPTURE_RUNTIME_TOKIO
			   : tr->disc.kind == RUNTIME_GO  ? CAPTURE_RUNTIME_GO
							  : CAPTURE_RUNTIME_USDT,
		.realtime_offset = tr->pipe.model.realtime_offset,
		.maps_only = s->o->no_trace,
		.sample_hz = s->o->sample_mode ? s->o->sample_hz : 0,
	};

	snprintf(proc.comm, sizeof(proc.comm), "%s", tr->target.comm);
	cap_process__set_config(&proc, &s->o->detect);
	capture__begin(s->cap, &proc);
	if (tr->disc.kind == RUNTIME_TOKIO)
		name_tokio_tasks(s, tr);
	capture_writer__flush(s->cap);
}

/*
 * Samples process tr's maps into its pipeline: the workers every tick, the
 * tasks (and a snapshot for the live view) every TASK_SAMPLE_TICKS. at: the
 * time the sample stands for (0: now).
 */
void traced__sample(struct session *s, struct traced *tr, bool tasks, bool show, uint64_t at)
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
			.runtime = say__runtime_name(tr->disc.kind),
			.snap = &tr->snap,
			.det = &tr->pipe.detector,
			.model = &tr->pipe.model,
			.top_tasks = s->o->metrics_tasks,
			.sample_hz = s->o->sample_mode ? s->o->sample_hz : 0,
		};

		metrics__update(s->metrics, &mt);
	}
}

void traced__run_info(struct session *s, struct traced *tr, struct run_info *info,
		      const char *why, uint64_t end)
{
	memset(info, 0, sizeof(info[0]));
	info->seconds = (double)((end ? end : now_ns()) - tr->start) / 1e9;
	info->end_reason = why;
	info->maps_only = s->o->no_trace;
	info->sample_hz = s->o->sample_mode ? s->o->sample_hz : 0;
	info->runtime = say__runtime_name(tr->disc.kind);
	tracer__stats(s->tracer, info->stats);
}

/* Lets process tr go: its probes, its state in the maps, its place in the session. */
void traced__drop(struct session *s, struct traced *tr)
{
	size_t i;

	if (tr->target.pidfd >= 0)
		epoll_ctl(s->ep, EPOLL_CTL_DEL, tr->target.pidfd, NULL);
	tracer__detach_owner(s->tracer, tr->target.pid);
	follow__release_files(s, tr);
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
	if (s->stacks.pid > 0)
		analyser__forget(&s->stacks, tr->target.pid);
	traced__free(tr);
}

/*
 * Where task of process ctx waits now, from the live analyser (places). A
 * tokio program primed before its runtime ran: its threads read again and
 * handed over with each question, until one is answered (its list found).
 */
static int traced_where(void *ctx, uint64_t task, unsigned int bound_ms,
			struct stack_frame *frames, int max, bool *waits)
{
	struct traced *tr = ctx;
	uint64_t *fsbase = NULL;
	size_t nr = 0;
	int n;

	if (tr->threads && thread_ptrs__take(tr->threads, &fsbase, &nr))
		nr = 0;
	n = analyser__task_where(&tr->s->stacks, &tr->target, task,
				 &(struct where_opts){ .fsbase = fsbase, .nr_threads = (uint32_t)nr,
						       .bound_ms = bound_ms },
				 frames, max, waits);
	free(fsbase);
	/* an answer from its list: its threads are not needed again */
	if (n != -EAGAIN && n != -EIO && tr->threads) {
		thread_ptrs__close(tr->threads);
		tr->threads = NULL;
	}
	return n > 0 || n == -ETIMEDOUT ? n : 0;
}

/*
 * Go and tokio: the process's executable and memory (and tokio's threads'
 * pointers) handed to the live analyser (the one --stacks unwinds with,
 * started for this when it is not), so that a lost waker's alert says where
 * the task waits (docs/tasks.md). Once confined (-p), no analyser is
 * started: this happens before.
 */
static void begin_places(struct session *s, struct traced *tr)
{
	uint64_t *fsbase = NULL;
	size_t nr = 0;
	char why[256];
	bool started = s->stacks.pid <= 0;
	int err;

	if (s->stacks.pid <= 0 &&
	    (s->stacks.failed || s->stacks.no_restart ||
	     analyser__start(&s->stacks, s->o->examine_timeout_ms))) {
		s->stacks.failed = true;
		return;
	}
	/* tokio: its threads' pointers, where CONTEXT leads to its task list */
	if (tr->disc.kind == RUNTIME_TOKIO && !thread_ptrs__open(tr->target.pid, &tr->threads) &&
	    thread_ptrs__take(tr->threads, &fsbase, &nr))
		nr = 0;
	err = analyser__tasks_prime(&s->stacks, &tr->target, fsbase, (uint32_t)nr, why, sizeof(why));
	free(fsbase);
	/* its runtime not running yet (run: held at its entry): asked again with each question */
	if (err || strcmp(why, TASKS_NOTE_NO_RUNTIME_YET)) {
		thread_ptrs__close(tr->threads);
		tr->threads = NULL;
	}
	if (err) {
		/* tokio without type debug info: said at -v (most release builds have none) */
		if (err != -EIO && (tr->disc.kind == RUNTIME_GO || s->o->verbose))
			warn_msg("pid %d: where its tasks wait will not be said: %s\n",
				 tr->target.pid, why);
		/* started for this alone, and of no use: it goes (and with it, CAP_KILL) */
		if (started && !s->unwinding && !s->placing)
			analyser__stop(&s->stacks);
		return;
	}
	s->placing++;
	tr->pipe.model.where = traced_where;
	tr->pipe.model.where_ctx = tr;
	/* a read at a time: the rings drained between, the loop never held for more than one */
	tr->pipe.model.after_read = session__drain;
	tr->pipe.model.after_read_ctx = s;
}

/*
 * Process tr's pipeline (model -> detectors -> sinks) set up for its
 * runtime, and its sinks added to the session's outputs (record: none, its
 * records go to the capture). 0, or -errno.
 */
static int begin_pipeline(struct session *s, struct traced *tr)
{
	const struct session_opts *o = s->o;
	int err;

	err = pipeline__init(&tr->pipe, (uint32_t)tr->target.pid, tr->target.comm, now_ns(),
			     &o->detect);
	tr->piped = true;
	tr->pipe.runtime = say__runtime_name(tr->disc.kind);
	if (s->flight) {
		tr->pipe.on_alert = on_alert;
		tr->pipe.on_alert_ctx = tr;
	}
	/* tokio parks a task woken by a poll in that worker's LIFO slot */
	tr->pipe.detector.lifo_slot = tr->disc.kind == RUNTIME_TOKIO;
	tr->pipe.detector.sample_period_ns = session__sample_period_ns(s->o);
	tr->pipe.detector.wakes_unseen = s->o->sample_mode;
	/*
	 * A goroutine parked on a channel for long is as often meant to (a
	 * worker waiting for a job, a ticker's loop) as leaked: Go's lost
	 * wakers are the nil channels' unless --lost-waker asks for more.
	 */
	if (tr->disc.kind == RUNTIME_GO)
		tr->pipe.detector.lost_waker_exact_only = !(o->detect.given & DETECT_GIVEN(lost_waker_ns));
	/* its GC's workers, sweeper and scavenger hold Ps by design: never alerted on */
	if (tr->disc.kind == RUNTIME_GO)
		tr->pipe.detector.runtime_tasks = "runtime.";
	/* tokio's sampled runs may be several polls: a long one is looked at closer */
	if (tr->disc.kind == RUNTIME_TOKIO && o->sample_mode) {
		tr->pipe.detector.suspect = on_suspect;
		tr->pipe.detector.suspect_ctx = tr;
	}
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
	if (s->unwinding) {
		tr->pipe.model.unwind = unwind_stack;
		tr->pipe.model.unwind_ctx = tr;
		/* sampled, tokio's tasks have no name until a stack (or an escalation) gives one */
		if (tr->disc.kind == RUNTIME_TOKIO && o->sample_mode)
			tr->pipe.model.stack_name = tokio_stack_name;
		tr->pipe.model.stack_period_ns = 1000000000ull / session__sample_hz(s->o);
		/* its images now: once attached, the tracer may no longer read its maps */
		int unreadable = analyser__prime(&s->stacks, &tr->target);

		if (unreadable && unreadable != -EIO) /* -EIO: said */
			warn_msg("pid %d: its stacks cannot be unwound (its images could not be "
				 "read: %s)\n", tr->target.pid, strerror(-unreadable));
	}
	if (!err && !s->cap) {
		if (tr->disc.kind == RUNTIME_TOKIO)
			name_tokio_tasks(s, tr);
		if (tr->disc.kind == RUNTIME_GO || tr->disc.kind == RUNTIME_TOKIO)
			begin_places(s, tr);
		/* one process's live view, or (several) its line on the board */
		err = outputs__add_sinks(&s->out, &tr->pipe, true);
	}
	return err;
}

/*
 * Why sample mode cannot read process tr's runtime (NULL: it can): Go's g
 * and its run counters, tokio's CONTEXT, an executor's asynctrace_current.
 */
static const char *unsampled(const struct traced *tr)
{
	const struct go_binary *g = &tr->disc.go;

	if (tr->disc.kind == RUNTIME_USDT)
		return tr->disc.usdt_current ? NULL
					     : "its executor keeps no asynctrace_current thread-local "
					       "(docs/usdt-abi.md)";
	if (tr->disc.kind == RUNTIME_TOKIO && tr->disc.tokio.rt.current.why[0])
		return tr->disc.tokio.rt.current.why;
	if (tr->disc.kind == RUNTIME_TOKIO)
		return tr->disc.tokio.rt.current.tpoff ? NULL : "tokio's CONTEXT was not found";
	if (tr->disc.kind != RUNTIME_GO)
		return "no runtime sample mode reads";
	if (!g->tls_g)
		return "where Go keeps the running goroutine (its thread-local slot) was not found "
		       "in its code";
	if (g->off.g_tracking_seq < 0 || g->off.p_schedtick < 0)
		return "its runtime has no g.trackingSeq or p.schedtick";
	return NULL;
}

/*
 * Process tr, examined, is traced from now: its pipeline and sinks (or the
 * capture), then its probes. 0, or -errno after a message (tr is then freed).
 */
int traced__start(struct session *s, struct traced *tr)
{
	const struct session_opts *o = s->o;
	struct attach_opts ao = {
		.pid = tr->target.pid,
		.share = s->share_files ? follow__share_file : NULL,
		.share_ctx = tr,
		.probe_at_entry = o->probe_at_entry,
		.verbose = o->verbose,
		.memfd = tr->target.memfd,
	};
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = tr };
	const char *unread = o->sample_mode ? unsampled(tr) : NULL;
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
	/* following the host, one such process is no failure of the session */
	if (unread) {
		if (s->follow)
			warn_msg("pid %d (%s) not traced: sample mode cannot read it: %s\n",
				 tr->target.pid, tr->target.comm, unread);
		else
			err_msg("cannot trace pid %d (%s) in sample mode: %s (--mode probes "
				"traces it)\n", tr->target.pid, tr->target.comm, unread);
		s->failed += !s->follow;
		traced__drop(s, tr);
		return -ENOTSUP;
	}
	err = begin_pipeline(s, tr);
	if (!err)
		err = tracer__follow(s->tracer, tr->target.pid, target_flags(&tr->disc, NULL));
	if (!err && tr->disc.kind == RUNTIME_GO)
		err = go_layout(s->tracer, tr);
	if (!err && tr->disc.kind == RUNTIME_USDT && o->sample_mode)
		err = tracer__usdt_current(s->tracer, tr->target.pid, tr->disc.usdt_current);
	if (!err && tr->disc.kind == RUNTIME_TOKIO)
		err = tracer__tokio_base(s->tracer, tr->target.pid,
					 discovery__tokio_addr(&tr->disc, 0), tr->disc.tokio.rt.defer_ret,
					 tr->disc.tokio.rt.nr_defer);
	if (!err && tr->disc.kind == RUNTIME_TOKIO && o->sample_mode)
		err = tracer__tokio_current(s->tracer, tr->target.pid, tr->disc.tokio.rt.current.tpoff,
					    (uint32_t)tr->disc.tokio.rt.current.task_id,
					    (uint32_t)tr->disc.tokio.rt.current.budget);
	if (err) {
		if (err == -E2BIG || err == -ENOSPC)
			err_msg("cannot follow pid %d: the BPF maps hold no more processes\n",
				tr->target.pid);
		else
			err_msg("cannot trace pid %d (%s): %s\n", tr->target.pid, tr->target.comm,
				strerror(-err));
		s->failed++;
		traced__drop(s, tr);
		return err;
	}
	/* Its time zero: nothing can happen before its first probe is attached. */
	tr->start = now_ns();
	clock_gettime(CLOCK_REALTIME, &rt);
	tr->pipe.model.t0 = tr->start;
	tr->pipe.model.last_ts = tr->start;
	tr->pipe.model.realtime_offset =
		(uint64_t)rt.tv_sec * 1000000000ull + (uint64_t)rt.tv_nsec - tr->start;
	/*
	 * Probes go into the very files that were read (attach.h), whatever
	 * the process runs now; one that exec'd since is not the program read.
	 */
	if (!target__same_program(&tr->target)) {
		if (!target__alive(&tr->target))
			err_msg("pid %d exited while attaching\n", tr->target.pid);
		else if (!s->examiner)
			err_msg("pid %d (%s) ran another program (exec) while it was examined: "
				"not traced\n", tr->target.pid, tr->target.comm);
		else if (s->o->verbose)
			info_msg("pid %d ran another program since it was examined: looked at "
				 "again\n", tr->target.pid);
		if (target__alive(&tr->target) && s->examiner)
			examiner__ask(s->examiner, tr->target.pid);
		s->failed += !s->examiner;
		traced__drop(s, tr);
		return -ESRCH;
	}
	if (s->cap)
		begin_capture(s, tr);
	/* sample mode: followed (above) is all; its threads are read where they run */
	err = o->sample_mode ? 0 : attach__probes(s->tracer, &tr->disc, &ao, &tr->probes);
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
				tr->target.comm,
				err == -ENOTSUPP_KERNEL ? "the kernel refused a probe (said above)"
							: strerror(-err));
		s->failed++;
		traced__drop(s, tr);
		return err;
	}
	s->ever++;
	/* those attached at the start are said once confined (session__start()) */
	if (s->started)
		say__found(s, tr, s->ever == 1 && !s->said_watching);
	return 0;
}

/*
 * Process tr's tracing ends (it exited at `at`, or the session stops): a
 * last sample, its pipeline finished, its report.
 */
void traced__confirm_waits(struct session *s, struct traced *tr, bool gone)
{
	uint64_t budget = (now_ns() - tr->start) / 100;

	if (s->cap || !tr->pipe.model.where || s->o->sample_mode || !s->o->wait_read_pct)
		return;
	budget = budget < 100000000ull ? 100000000ull : budget > 1000000000ull ? 1000000000ull
										: budget;
	model__confirm_waits(&tr->pipe.model, gone, budget);
}

void traced__end(struct session *s, struct traced *tr, const char *why, uint64_t at)
{
	struct run_info info;

	traced__sample(s, tr, true, false, at);
	/* gone: its tasks waited where they were until it went (alive: read before detaching) */
	if (tr->exited)
		traced__confirm_waits(s, tr, true);
	traced__run_info(s, tr, &info, why, at);
	if (s->flight) /* its dumps still due, while its names are known */
		flight__tick(s->flight, now_ns(), (uint32_t)tr->target.pid, session__live_model, s);
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
