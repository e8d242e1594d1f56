// SPDX-License-Identifier: MIT
/* What a session tells the console: what it traces, and what it did. */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "lib/util.h"
#include "session/session_priv.h"

const char *say__runtime_name(enum runtime_kind kind)
{
	return kind == RUNTIME_TOKIO ? "tokio" : kind == RUNTIME_GO ? "go" : "usdt";
}

static const char *mode_str(const struct session_opts *o)
{
	if (o->empty_programs)
		return "empty programs (the floor: nothing is recorded)";
	if (o->record)
		return o->no_trace ? "maps only" : "every event";
	return o->no_trace ? "maps only" : "full trace";
}

/* "tracing pid 42 (server)", or where record puts what it records */
static void say_what(const struct session *s, const struct traced *tr, char *buf, size_t len)
{
	if (s->cap)
		snprintf(buf, len, "recording pid %d (%s) to %s", tr->target.pid, tr->target.comm,
			 s->o->out.output);
	else
		snprintf(buf, len, "tracing pid %d (%s)", tr->target.pid, tr->target.comm);
}

/* One line: what was found, and what was attached. */
void say__found(const struct session *s, const struct traced *tr, bool first)
{
	const struct tokio_runtime *rt = &tr->disc.tokio.rt;
	const char *ctrl_c = first ? "; Ctrl-C to stop" : "";
	char moved[96] = "", stepped[96] = "", lost[96] = "", what[PATH_MAX + 64];
	size_t nr_lost = tr->probes.lost_go;

	say_what(s, tr, what, sizeof(what));
	if (tr->disc.kind == RUNTIME_USDT && s->o->sample_mode) {
		info_msg("%s: the asynctrace executor in %s: sample mode, no probe: each worker's "
			 "asynctrace_current read %u times a second of its CPU time and at each "
			 "switch; sched_switch via %s, %s%s\n", what, tr->disc.sites[0].target_path,
			 s->o->sample_hz, tracer__sched_hook(s->tracer), mode_str(s->o), ctrl_c);
		return;
	}
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
	if (tr->disc.kind == RUNTIME_GO && s->o->sample_mode) {
		info_msg("%s: Go %s in %s (offsets from %s): sample mode, no probe: the running "
			 "goroutine read %u times a second of each thread's CPU time and at each "
			 "switch; sched_switch via %s, %s%s\n",
			 what, tr->disc.go.version, tr->disc.go_target_path,
			 tr->disc.go.has_dwarf ? "DWARF" : "the version table", s->o->sample_hz,
			 tracer__sched_hook(s->tracer), mode_str(s->o), ctrl_c);
		return;
	}
	if (tr->disc.kind == RUNTIME_GO) {
		char casg[96] = "casgstatus at its entry";

		if (tr->disc.nr_go_sites > 0)
			snprintf(casg, sizeof(casg), "%d calls of casgstatus (%u let be: system calls)",
				 tr->disc.nr_go_sites, tr->disc.go_sites_skipped);
		info_msg("%s: Go %s in %s (offsets from %s): %s, newproc1's returns, "
			"runqsteal%s%s%s%s%s; sched_switch via %s, %s%s\n",
			what, tr->disc.go.version, tr->disc.go_target_path,
			tr->disc.go.has_dwarf ? "DWARF" : "the version table", casg,
			tr->probes.go_steals_taken ? "'s steals that took something" : " at its entry",
			tr->probes.go_handoffs ? ", handoffp and stopTheWorldWithSema" : "", moved,
			stepped, lost,
			tracer__sched_hook(s->tracer), mode_str(s->o), ctrl_c);
		return;
	}
	if (s->o->sample_mode) {
		info_msg("%s: tokio in %s (%s mangling): sample mode, no probe: each thread's "
			 "CONTEXT (at the thread pointer %+lld: task id at +%d, coop budget at +%d) "
			 "read %u times a second of its CPU time and at each switch; sched_switch "
			 "via %s, %s%s\n",
			 what, tr->disc.tokio.target_path, rt->v0 ? "v0" : "legacy",
			 (long long)rt->current.tpoff, rt->current.task_id, rt->current.budget,
			 s->o->sample_hz, tracer__sched_hook(s->tracer), mode_str(s->o), ctrl_c);
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

/* Several processes traced: one line for the whole session. */
void say__totals(const struct session *s, const char *why)
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

/* record: the end record; one line to say what was written. */
int say__capture_written(struct session *s, const char *why)
{
	const struct session_opts *o = s->o;
	char who[64];
	int err;

	if (!s->ever) {
		err_msg("recorded nothing in '%s': no process ran a known runtime (%s)\n", o->out.output,
			why);
		return EXIT_FAIL;
	}
	capture__end(s->cap, s->stop, why);
	err = capture_writer__flush(s->cap);
	if (err) {
		err_msg("failed to write '%s': %s\n", o->out.output, strerror(-err));
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
		(double)capture_writer__bytes(s->cap) / 1e6, o->out.output,
		(unsigned long long)s->dropped);
	return EXIT_OK;
}
