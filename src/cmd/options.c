// SPDX-License-Identifier: MIT
#include "cmd/options.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cmd/outfiles.h"
#include "lib/util.h"
#include "sinks/metrics.h"
#include "targets/scan.h"

#define VERSION "0.3.0"

/* Bits of enum command: which commands take an option. */
#define T (1u << CMD_TRACE)
#define R (1u << CMD_RECORD)
#define C (1u << CMD_CONVERT)
#define U (1u << CMD_RUN)
#define K (1u << CMD_PROBE_RULES)
#define S (1u << CMD_TASKS)

static const struct {
	const char *name;
	const char *usage; /* after "usage: " */
	const char *about;
	const char *footer;
} commands[] = {
	[CMD_TRACE] = {
		"trace",
		"asynctraced [trace] [-p PID] [options]\n"
		"       asynctraced record [-p PID] -o CAPTURE [options]\n"
		"       asynctraced convert CAPTURE [-o TRACE] [options]\n"
		"       asynctraced run [options] -- CMD [ARGS...]\n"
		"       asynctraced tasks [-p PID] [--json]\n"
		"       asynctraced probe-rules\n"
		"       asynctraced help [COMMAND]\n",
		"Trace the async executor running as PID (without -p: the one the host\n"
		"runs): every poll, wake, spawn, steal and park, aggregated in BPF maps,\n"
		"with live alerts and a report, and with -o a trace for Perfetto; until\n"
		"Ctrl-C, -d or the target's exit. `record` writes the raw events to a\n"
		"capture as cheaply as possible; `convert` turns a capture into a trace,\n"
		"alerts and the report, exactly as tracing live would have; `run` starts\n"
		"a command, traces it from its first instruction to its exit and gates\n"
		"on what was seen, for CI; `tasks` lists every task of a process and\n"
		"where each one waits. Each has its own options: asynctraced help\n"
		"COMMAND.\n",
		"SIGUSR1 prints the report so far. Exit status: 0 success, 1 failure,\n"
		"2 usage error.\n",
	},
	[CMD_RECORD] = {
		"record",
		"asynctraced record [-p PID] -o CAPTURE [options]\n",
		"Record the async executor running as PID into a capture, as cheaply as\n"
		"possible: every record of the ring buffer, every sample of the maps, and\n"
		"the names only the live target can give. Nothing is modelled or detected\n"
		"while recording: `asynctraced convert CAPTURE` does that later, anywhere.\n",
		"SIGUSR1 says how much is recorded so far. Exit status: 0 success,\n"
		"1 failure, 2 usage error.\n",
	},
	[CMD_CONVERT] = {
		"convert",
		"asynctraced convert CAPTURE [-o TRACE] [options]\n",
		"Turn a capture written by `asynctraced record` into a trace, alerts and\n"
		"the report, exactly as tracing live would have; needs no root and no\n"
		"target.\n",
		"Exit status: 0 success, 1 failure (a damaged capture is converted up to\n"
		"the damage, then says where), 2 usage error.\n",
	},
	[CMD_RUN] = {
		"run",
		"asynctraced run [options] -- CMD [ARGS...]\n",
		"Start CMD and trace it from its first instruction (it waits, stopped at\n"
		"its entry point, until the probes are attached) until it exits; then\n"
		"judge the run by the gates asked for: alert kinds that fail it, limits\n"
		"on its percentiles and counts, a summary saved from an earlier run. A\n"
		"table of the gates goes to stderr; --junit and GitHub annotations (when\n"
		"GITHUB_ACTIONS=true) to CI systems.\n",
		"Exit status: CMD's own when it failed (128+N when killed by signal N);\n"
		"otherwise 0 when every gate passed, 3 when a gate failed, 4 when a gate\n"
		"could not be evaluated (no known runtime, an empty trace), 1 when\n"
		"tracing failed, 2 usage error, 126 CMD cannot be run, 127 CMD not found.\n",
	},
	[CMD_PROBE_RULES] = {
		"probe-rules",
		"asynctraced probe-rules\n",
		"Learn from the running kernel what it does with a uprobe on each\n"
		"instruction form a function probe may be placed on (refused, single-\n"
		"stepped, emulated, or optimized into a trampoline call, and how much of\n"
		"the red zone below the stack pointer a hit overwrites), print it, and\n"
		"keep it for the tracer in /run/asynctraced/uprobe-rules. Tracing learns or\n"
		"reads the same rules by itself: this command shows them.\n",
		"Exit status: 0 success, 1 failure (not root, no uprobes), 2 usage error.\n",
	},
	[CMD_TASKS] = {
		"tasks",
		"asynctraced tasks [-p PID[,PID...]] [--json] [--all] [-o FILE]\n",
		"List every task of each process, like ps for tasks: its id, name and\n"
		"state, how long it has waited, and for one that waits, where: a\n"
		"goroutine's parked stack, function, file and line, innermost first; a\n"
		"tokio task's chain of awaits, each .await's line. Read from the\n"
		"process's memory and executable while it runs: nothing is stopped or\n"
		"attached (docs/tasks.md). Go programs, stripped ones too; tokio programs\n"
		"built with debug = 2.\n",
		"Exit status: 0 success, 1 failure (no such process, not root, no\n"
		"runtime whose tasks it reads), 2 usage error.\n",
	},
};

/* Codes of options with no short form. */
enum {
	OPT_RINGBUF = 256,
	OPT_TASK_SLOTS,
	OPT_BTF,
	OPT_SCHED_HOOK,
	OPT_NO_TRACE,
	OPT_ALERTS,
	OPT_METRICS,
	OPT_METRICS_TASKS,
	OPT_FLIGHT,
	OPT_FLIGHT_SIZE,
	OPT_DUMP_DIR,
	OPT_DUMP_DIR_SIZE,
	OPT_SUMMARY,
	OPT_LIVE,
	OPT_FORMAT,
	OPT_TRACE_COMPRESSION,
	OPT_STACKS,
	OPT_EMPTY_PROGRAMS,
	OPT_PROBE_AT,
	OPT_MODE,
	OPT_SAMPLE_HZ,
	OPT_ESCALATE,
	OPT_ESCALATE_EVERY,
	OPT_EXAMINE_TIMEOUT,
	OPT_WAIT_READS,
	OPT_NO_SANDBOX,
	OPT_COMM,
	OPT_EXCLUDE_COMM,
	OPT_CGROUP,
	OPT_MAX_TARGETS,
	OPT_FOLLOW_CHILDREN,
	OPT_FAIL_ON,
	OPT_MAX,
	OPT_BASELINE,
	OPT_TOLERANCE,
	OPT_JUNIT,
	OPT_UMASK,
	OPT_USER,
	OPT_JSON,
	OPT_ALL,
	/* the detectors' thresholds: OPT_long_poll_ns ... (pipeline/config.h) */
#define X(field, ...) OPT_##field,
	DETECT_THRESHOLDS(X)
#undef X
};

/*
 * The one list of options: getopt's tables, each command's help and the
 * check that an option is for the command it was given to all come from it.
 * An option may have a row per command when its help differs; a row without
 * a name is a heading in the help of the commands it names.
 */
static const struct opt_def {
	int code;	  /* its short letter, or OPT_* */
	const char *name; /* long name; NULL: a heading */
	const char *arg;  /* what it takes, or NULL */
	unsigned cmds;	  /* T, R, C: the commands that take it */
	const char *help; /* lines, each ending in \n */
} opt_defs[] = {
	{ 'p', "pid", "PID[,PID...]", S,
	  "the processes whose tasks to list (default: every\n"
	  "process of the host that runs Go, or tokio built\n"
	  "with debug = 2)\n" },
	{ OPT_JSON, "json", NULL, S,
	  "one JSON object a process, a line each, for tools\n" },
	{ OPT_ALL, "all", NULL, S,
	  "the runtime's own tasks too (Go's garbage collector's\n"
	  "goroutines, ...), as GOTRACEBACK=system shows them\n" },
	{ 'o', "output", "FILE", S, "write the list to FILE (default: standard output)\n" },
	{ 'p', "pid", "PID[,PID...]", T | R,
	  "processes to trace, repeatable (default: every\n"
	  "process of the host that runs a known runtime, those\n"
	  "that start later too, as the options below narrow\n"
	  "them)\n" },
	{ OPT_COMM, "comm", "REGEX", T | R,
	  "without -p: only processes whose name (comm)\n"
	  "matches this extended regular expression\n" },
	{ OPT_EXCLUDE_COMM, "exclude-comm", "REGEX", T | R,
	  "without -p: not processes whose name matches\n" },
	{ OPT_CGROUP, "cgroup", "PATH", T | R,
	  "without -p: only processes in this cgroup v2\n"
	  "subtree (a systemd unit, a container), as\n"
	  "/proc/PID/cgroup names it or under /sys/fs/cgroup\n" },
	{ OPT_MAX_TARGETS, "max-targets", "N", T | R,
	  "without -p: trace at most N processes at once (default\n"
	  "64); the others are counted and named in the log\n" },
	{ 'd', "duration", "SECONDS", T | R,
	  "stop after this long (default: until Ctrl-C or the\n"
	  "target exits)\n" },
	{ 'o', "output", "FILE", T | C | U,
	  "the trace for Perfetto, in the format its name\n"
	  "says (below) or --format says; - is standard output\n" },
	{ 'o', "output", "FILE", R, "the capture to write (required; any name)\n" },
	{ OPT_FORMAT, "format", "FORMAT", T | C | U,
	  "the trace's format whatever its name: json or\n"
	  "perfetto\n" },
	{ OPT_TRACE_COMPRESSION, "trace-compression", "HOW", T | C | U,
	  "a protobuf trace's packets: deflate (the default:\n"
	  "batches deflated, which Perfetto inflates) or none\n" },
	{ OPT_NO_TRACE, "no-trace", NULL, T | U,
	  "maps only: no per-event traffic, only aggregates and\n"
	  "alerts (the production mode)\n" },
	{ OPT_NO_TRACE, "no-trace", NULL, R,
	  "maps only: the aggregates, and only the polls the\n"
	  "detectors must see\n" },
	{ OPT_ALERTS, "alerts", "FILE", T | C | U, "also write every alert as a JSON line to FILE\n" },
	{ OPT_METRICS, "metrics", "[ADDR:]PORT", T | U,
	  "serve Prometheus metrics at http://ADDR:PORT/metrics\n"
	  "(ADDR: 127.0.0.1 unless given; [ADDR] for IPv6); or\n"
	  "unix:PATH: on a unix socket made there (mode 0660)\n" },
	{ OPT_METRICS_TASKS, "metrics-tasks", "N", T | U,
	  "with --metrics: series for each process's N busiest\n"
	  "tasks too, by id and name (default 0: none)\n" },
	{ OPT_FLIGHT, "flight-recorder", "SECONDS", T | U,
	  "keep the last SECONDS of every event in memory; when\n"
	  "an alert begins, and on SIGUSR2, write them (and 2 s\n"
	  "after) as a Perfetto trace into --dump-dir\n" },
	{ OPT_FLIGHT_SIZE, "flight-recorder-size", "SIZE", T | U,
	  "the flight recorder's memory, the oldest events\n"
	  "going first (default 256M)\n" },
	{ OPT_DUMP_DIR, "dump-dir", "DIR", T | U,
	  "where the flight recorder writes its dumps (an\n"
	  "existing directory)\n" },
	{ OPT_DUMP_DIR_SIZE, "dump-dir-size", "SIZE", T | U,
	  "at most this much of dumps in --dump-dir, the oldest\n"
	  "removed first (default 1G)\n" },
	{ OPT_UMASK, "umask", "MASK", T | R | C | U,
	  "the umask of the files it creates, in octal (default\n"
	  "077: only their owner may read them)\n" },
	{ OPT_SUMMARY, "summary", "FORMAT", T | C | U,
	  "the report at exit: text (stderr, default) or json\n"
	  "(stdout)\n" },
	{ OPT_LIVE, "live", NULL, T | U,
	  "redraw a live view every second (default: when\n"
	  "stderr is a terminal)\n" },
	{ 'q', "quiet", NULL, T | C | U, "no live view and no alert lines; the report only\n" },
	{ 'q', "quiet", NULL, R,
	  "accepted as by the other commands: record prints\n"
	  "only its last line anyway\n" },
	{ 0, NULL, NULL, T | U, "detectors (a time takes ns, us, ms or s; 0 turns a detector off):\n" },
	{ 0, NULL, NULL, R,
	  "detectors, kept in the capture as the defaults of convert (a time takes\n"
	  "ns, us, ms or s; 0 turns a detector off):\n" },
	{ 0, NULL, NULL, C,
	  "detectors (a time takes ns, us, ms or s; 0 turns a detector off; each\n"
	  "defaults to the value the capture was recorded with):\n" },
	{ OPT_long_poll_ns, "long-poll", "TIME", T | R | C | U,
	  "a poll that spends at least this long on the CPU or\nasleep (default 10ms)\n" },
	{ OPT_sched_delay_ns, "sched-delay", "TIME", T | R | C | U,
	  "wake-to-poll delay nothing else explains (default\n"
	  "20ms)\n" },
	{ OPT_starve_depth, "starve-depth", "N", T | R | C | U,
	  "a worker's average queue depth, while another worker\n"
	  "is idle, that means starvation (default 16)\n" },
	{ OPT_starve_ns, "starve-time", "TIME", T | R | C | U,
	  "... for at least this long (default 200ms)\n" },
	{ OPT_thrash_rate, "thrash-rate", "N", T | R | C | U,
	  "wakes per second of one task that thrash, when its\n"
	  "own wakes or its wakes per poll dominate (default\n"
	  "1000)\n" },
	{ OPT_lost_waker_ns, "lost-waker", "TIME", T | R | C | U,
	  "a task not woken this long after it returned Pending\n"
	  "(default 10s)\n" },
	{ OPT_episode_gap_ns, "episode-gap", "TIME", T | R | C | U,
	  "quiet this long ends an episode (default 1s)\n" },
	{ 0, NULL, NULL, U, "the command, and the gates (a failed one exits 3; see below):\n" },
	{ OPT_USER, "user", "USER", U,
	  "run CMD as this user, a name or a uid (default: the\n"
	  "user sudo was run by, else asynctraced's own); with\n"
	  "no_new_privs always: setuid bits give it nothing\n" },
	{ OPT_FOLLOW_CHILDREN, "follow-children", NULL, U,
	  "also trace the processes CMD starts (and theirs)\n"
	  "that run a known runtime: a test harness's server\n" },
	{ OPT_FAIL_ON, "fail-on", "KIND[,KIND...]", U,
	  "alert kinds that fail the run: long-poll,\n"
	  "scheduling-delay, starvation, waker-thrash,\n"
	  "lost-waker, or all\n" },
	{ OPT_MAX, "max", "METRIC=VALUE[,...]", U,
	  "limits: poll.p99=5ms, delay.p99=2ms, poll.max=50ms,\n"
	  "dropped=0, ... (help run lists the metrics)\n" },
	{ OPT_BASELINE, "baseline", "SUMMARY", U,
	  "compare with a summary saved from an earlier run\n"
	  "(--summary json): the percentiles, per worker and in\n"
	  "total, the rates, the longest poll and the alert\n"
	  "episodes of each kind\n" },
	{ OPT_TOLERANCE, "tolerance", "PCT", U,
	  "how much worse than the baseline still passes\n"
	  "(default 25)\n" },
	{ OPT_JUNIT, "junit", "FILE", U, "write the gates as JUnit XML, a testcase each\n" },
	{ 0, NULL, NULL, T | R | U, "attaching:\n" },
	{ OPT_MODE, "mode", "MODE", T | R | U,
	  "probes (default): a probe on the runtime's poll,\n"
	  "wake and steal functions, every event seen; or\n"
	  "sample: no probe, the running task read from the\n"
	  "runtime's state --sample-hz times a second and at\n"
	  "each switch (Go, tokio, asynctrace executors;\n"
	  "what it cannot see: docs/modes.md)\n" },
	{ OPT_SAMPLE_HZ, "sample-hz", "HZ", T | R | U,
	  "sample mode's samples a second of each traced\n"
	  "thread's CPU time\n"
	  "(default 997; its --stacks are sampled with them)\n" },
	{ OPT_ESCALATE, "escalate", "SECONDS", T | U,
	  "sample mode: when an alert begins on a process,\n"
	  "attach its full probes for SECONDS (10 is a good\n"
	  "start), its flight recorder's dump holding the\n"
	  "samples that found it and the probes' view after\n"
	  "(needs --flight-recorder)\n" },
	{ OPT_ESCALATE_EVERY, "escalate-every", "SECONDS", T | U,
	  "at most one escalation of a process this often\n"
	  "(default 60)\n" },
	{ OPT_RINGBUF, "ringbuf-size", "SIZE", T | R | U,
	  "ring buffer space, shared out between the CPUs\n"
	  "(default 16M; power of two)\n" },
	{ OPT_TASK_SLOTS, "task-slots", "N", T | R | U,
	  "live tasks kept in place, cheapest to trace; the rest\n"
	  "go to hash maps (default 16384; power of two; 704\n"
	  "bytes each)\n" },
	{ OPT_BTF, "btf", "FILE", T | R | U, "kernel BTF to use instead of /sys/kernel/btf/vmlinux\n" },
	{ OPT_SCHED_HOOK, "sched-hook", "HOOK", T | R | U,
	  "sched_switch via auto, tp_btf or raw_tp (default\n"
	  "auto)\n" },
	{ OPT_PROBE_AT, "probe-at", "WHERE", T | R | U,
	  "function probes (tokio, Go) at the cheapest\n"
	  "equivalent instruction or call (cheapest, default)\n"
	  "or at the entry\n" },
	{ OPT_EXAMINE_TIMEOUT, "examine-timeout", "SECONDS", T | R | U | S,
	  "how long the analyser may read one process's files\n"
	  "(default 30) before it is stopped and that file\n"
	  "left out\n" },
	{ OPT_WAIT_READS, "wait-reads", "PCT", T | U,
	  "Go and tokio (debug = 2), live: at most this\n"
	  "percent of the tracer's time spent reading where\n"
	  "idle tasks wait, for the trace's idle spans, the\n"
	  "report and a long poll's victims (default 1; 0: none)\n" },
	{ OPT_STACKS, "stacks", NULL, T | U,
	  "sample the user stack of a poll that runs long:\n"
	  "its alert says where in the code (function, file,\n"
	  "line), unwound without frame pointers\n" },
	{ OPT_NO_SANDBOX, "no-sandbox", NULL, T | R | C,
	  "no seccomp filter once attached (convert: once its\n"
	  "files are open); capabilities are dropped all the\n"
	  "same (docs/security.md)\n" },
	{ OPT_EMPTY_PROGRAMS, "empty-programs", NULL, T,
	  "benchmarks: attach empty BPF programs to the same\n"
	  "probes and record nothing (the cost floor)\n" },
	{ 0, NULL, NULL, T | R | C | U | K | S, "" },
	{ 'v', "verbose", NULL, T | R | U, "say what is found and attached; show libbpf's log\n" },
	{ 'h', "help", NULL, T | R | C | U | K | S, "this help\n" },
	{ 'V', "version", NULL, T | R | C | U | K | S, "version\n" },
};

/* Where option text starts in the help. */
#define HELP_COLUMN 27

static void print_option(FILE *f, const struct opt_def *d)
{
	char left[64];
	const char *line = d->help, *end;
	int n;

	if (d->code < 128)
		n = snprintf(left, sizeof(left), "  -%c, --%s%s%s", d->code, d->name,
			     d->arg ? " " : "", d->arg ? d->arg : "");
	else
		n = snprintf(left, sizeof(left), "      --%s%s%s", d->name, d->arg ? " " : "",
			     d->arg ? d->arg : "");
	if (n >= HELP_COLUMN - 1)
		fprintf(f, "%s\n%*s", left, HELP_COLUMN, "");
	else
		fprintf(f, "%-*s", HELP_COLUMN, left);
	for (; *line; line = end + 1) {
		end = strchr(line, '\n');
		fprintf(f, "%*s%.*s\n", line == d->help ? 0 : HELP_COLUMN, "", (int)(end - line),
			line);
	}
}

static void print_help(FILE *f, enum command cmd)
{
	fprintf(f, "usage: %s\n%s\n", commands[cmd].usage, commands[cmd].about);
	for (size_t i = 0; i < ARRAY_LEN(opt_defs); i++) {
		const struct opt_def *d = &opt_defs[i];

		if (!(d->cmds & (1u << cmd)))
			continue;
		if (d->name)
			print_option(f, d);
		else
			fprintf(f, "\n%s", d->help);
	}
	if (cmd != CMD_RECORD)
		outfiles__print_names(f);
	if (cmd == CMD_RUN)
		fprintf(f, "\nmetrics of --max (times take ns, us, ms or s):\n  %s\n", gate__metrics());
	fprintf(f, "\n%s", commands[cmd].footer);
}

/* After a usage error that the help answers. */
static int try_help(enum command cmd)
{
	if (cmd == CMD_TRACE)
		fprintf(stderr, "try 'asynctraced --help'\n");
	else
		fprintf(stderr, "try 'asynctraced %s --help'\n", commands[cmd].name);
	return EXIT_USAGE;
}

static const struct opt_def *find_option(int code, enum command cmd)
{
	const struct opt_def *any = NULL;

	for (size_t i = 0; i < ARRAY_LEN(opt_defs); i++) {
		if (!opt_defs[i].name || opt_defs[i].code != code)
			continue;
		if (opt_defs[i].cmds & (1u << cmd))
			return &opt_defs[i];
		any = &opt_defs[i];
	}
	return any;
}

static unsigned option_cmds(int code)
{
	unsigned cmds = 0;

	for (size_t i = 0; i < ARRAY_LEN(opt_defs); i++)
		if (opt_defs[i].name && opt_defs[i].code == code)
			cmds |= opt_defs[i].cmds;
	return cmds;
}

/* Is opt_defs[i] an option's first row (an option may have one per command)? */
static bool first_row(size_t i)
{
	if (!opt_defs[i].name)
		return false;
	for (size_t j = 0; j < i; j++)
		if (opt_defs[j].name && opt_defs[j].code == opt_defs[i].code)
			return false;
	return true;
}

/* getopt's tables, from opt_defs: one entry per option. */
static void getopt_tables(struct option *longopts, char *shortopts, enum command cmd)
{
	size_t n = 0, s = 0;

	/* run: the options end where the command begins (its own are not ours) */
	if (cmd == CMD_RUN)
		shortopts[s++] = '+';
	/* ':' first: a missing argument is told apart from an unknown option */
	shortopts[s++] = ':';
	for (size_t i = 0; i < ARRAY_LEN(opt_defs); i++) {
		const struct opt_def *d = &opt_defs[i];

		if (!first_row(i))
			continue;
		longopts[n++] = (struct option){ d->name, d->arg ? required_argument : no_argument,
						 NULL, d->code };
		if (d->code < 128) {
			shortopts[s++] = (char)d->code;
			if (d->arg)
				shortopts[s++] = ':';
		}
	}
	longopts[n] = (struct option){ NULL, 0, NULL, 0 };
	shortopts[s] = '\0';
}

/* How many options' long names begin with these len characters. */
static int prefix_of(const char *name, int len)
{
	int n = 0;

	for (size_t i = 0; i < ARRAY_LEN(opt_defs); i++)
		n += first_row(i) && !strncmp(opt_defs[i].name, name, len);
	return n;
}

/*
 * getopt's '?' or ':' as one line. arg is the last argument getopt moved past:
 * the option itself when it was long (those are never clustered) or missing
 * its argument (then it was last); an unknown short one may sit inside a
 * cluster getopt has not moved past yet, so optopt names that one.
 */
static int typo(enum command cmd, int c, const char *arg)
{
	int len = (int)strcspn(arg, "=");
	bool given_long = !strncmp(arg, "--", 2);

	if (c == ':' && given_long)
		err_msg("option '%.*s' needs an argument\n", len, arg);
	else if (c == ':')
		err_msg("option '-%c' needs an argument\n", optopt);
	else if (!optopt && given_long && prefix_of(arg + 2, len - 2) > 1)
		err_msg("option '%.*s' is ambiguous: it begins more than one option\n", len, arg);
	else if (!optopt)
		err_msg("unrecognized option '%.*s'\n", len, arg);
	else if (option_cmds(optopt))
		/* a known option in '?' was given an argument it does not take: --live=1 */
		err_msg("option '%.*s' takes no argument\n", len, arg);
	else
		err_msg("unrecognized option '-%c'\n", optopt);
	return try_help(cmd);
}

/* An option the command line has, but its command does not take. */
static int misplaced(enum command cmd, const struct opt_def *d)
{
	char opt[64];

	if (d->code < 128)
		snprintf(opt, sizeof(opt), "-%c", d->code);
	else
		snprintf(opt, sizeof(opt), "--%s", d->name);
	if (cmd == CMD_RECORD && (option_cmds(d->code) & C))
		err_msg("%s is for tracing or converting: record writes only the capture "
			"(asynctraced convert FILE %s ... reads it)\n",
			opt, opt);
	else
		err_msg("%s does not apply to %s\n", opt, commands[cmd].name);
	return try_help(cmd);
}

static int bad(const char *opt, const char *arg, const char *want)
{
	err_msg("invalid %s '%s': want %s\n", opt, arg, want);
	return EXIT_USAGE;
}

static int time_opt(const char *opt, const char *arg, uint64_t *ns)
{
	return parse_duration(arg, 1000000ull, ns) ? bad(opt, arg, "a time, e.g. 10ms") : 0;
}

static int count_opt(const char *opt, const char *arg, uint32_t *v)
{
	int n;

	if (parse_int(arg, 0, 1 << 30, &n))
		return bad(opt, arg, "a whole number");
	*v = (uint32_t)n;
	return 0;
}

static int check(struct options *o)
{
	struct session_opts *s = &o->session;
	struct outputs_opts *out = &s->out;

	if (o->command == CMD_PROBE_RULES)
		return 0;
	if (o->command == CMD_TASKS)
		return 0;
	out->sample_hz = s->sample_mode ? s->sample_hz : 0;
	if (o->command == CMD_RUN) {
		if (!o->cmd || !o->cmd[0][0]) {
			err_msg("run needs a command: asynctraced run [options] -- CMD [ARGS...]\n");
			return try_help(o->command);
		}
		if (o->gate.tolerance_set && !o->gate.baseline) {
			err_msg("--tolerance is how far from --baseline: give --baseline SUMMARY\n");
			return try_help(o->command);
		}
	} else if (o->command == CMD_CONVERT) {
		if (!o->capture) {
			err_msg("convert needs a capture: asynctraced convert FILE [-o TRACE]\n");
			return try_help(o->command);
		}
	} else if (s->nr_pids && (s->comm || s->exclude_comm || s->cgroup)) {
		err_msg("--comm, --exclude-comm and --cgroup choose the target without -p: give "
			"-p or those\n");
		return try_help(o->command);
	} else if (!s->nr_pids) {
		struct scan_filter f;
		char why[256];

		if (scan_filter__init(&f, s->comm, s->exclude_comm, s->cgroup, why, sizeof(why))) {
			err_msg("%s\n", why);
			return try_help(o->command);
		}
		scan_filter__free(&f);
	}
	if (s->nr_pids && s->max_targets) {
		err_msg("--max-targets is for tracing without -p: -p names every process\n");
		return try_help(o->command);
	}
	if (o->command == CMD_RECORD && !out->output) {
		err_msg("record needs a file to write: -o FILE\n");
		return try_help(o->command);
	}
	if (s->empty_programs && out->output) {
		err_msg("--empty-programs records nothing: drop -o %s\n", out->output);
		return EXIT_USAGE;
	}
	if (s->metrics_tasks && !s->metrics) {
		err_msg("--metrics-tasks adds to --metrics: give --metrics [ADDR:]PORT or "
			"unix:PATH\n");
		return EXIT_USAGE;
	}
	if (s->flight_ns && !s->dump_dir) {
		err_msg("--flight-recorder needs --dump-dir DIR: where its dumps go\n");
		return EXIT_USAGE;
	}
	if (!s->flight_ns && (s->dump_dir || s->flight_bytes || s->dump_dir_bytes)) {
		err_msg("--flight-recorder-size, --dump-dir and --dump-dir-size are the flight "
			"recorder's: give --flight-recorder SECONDS\n");
		return EXIT_USAGE;
	}
	if (s->escalate_ns && !s->sample_mode) {
		err_msg("--escalate attaches the probes to a sampled process when it raises an alert: "
			"it needs --mode sample\n");
		return EXIT_USAGE;
	}
	if (s->escalate_ns && !s->flight_ns) {
		err_msg("--escalate keeps what the probes saw in the flight recorder's dump: give "
			"--flight-recorder SECONDS and --dump-dir DIR\n");
		return EXIT_USAGE;
	}
	if (s->escalate_every_set && !s->escalate_ns) {
		err_msg("--escalate-every is --escalate's: give --escalate SECONDS\n");
		return EXIT_USAGE;
	}
	if (s->flight_ns && s->no_trace) {
		err_msg("--flight-recorder keeps every event, which --no-trace turns off: drop one\n");
		return EXIT_USAGE;
	}
	if (o->command != CMD_RECORD && out->output && s->no_trace) {
		err_msg("--no-trace writes no trace: drop -o %s\n", out->output);
		return EXIT_USAGE;
	}
	if (o->command != CMD_RECORD && outfiles__trace_format(out))
		return EXIT_USAGE;
	if (out->trace_compression && (!out->output || out->format != FORMAT_PERFETTO)) {
		err_msg("--trace-compression is for a protobuf trace: give -o FILE.pftrace (or "
			"--format perfetto)\n");
		return EXIT_USAGE;
	}
	return outfiles__distinct(o);
}

static int unknown_command(const char *name)
{
	err_msg("unknown command '%s': the commands are trace, record, convert, run, tasks, probe-rules and help\n", name);
	return try_help(CMD_TRACE);
}

/* asynctraced help [COMMAND] */
static int help_command(int argc, char **argv)
{
	if (argc > 3) {
		err_msg("unexpected argument '%s'\n", argv[3]);
		return try_help(CMD_TRACE);
	}
	if (argc == 2 || !strcmp(argv[2], "help")) {
		print_help(stdout, CMD_TRACE);
		return -1;
	}
	for (size_t i = 0; i < ARRAY_LEN(commands); i++)
		if (!strcmp(argv[2], commands[i].name)) {
			print_help(stdout, (enum command)i);
			return -1;
		}
	return unknown_command(argv[2]);
}

/* The command argv[1] names, taken off argv; trace when it names none. */
static int take_command(int *argc, char ***argv, enum command *cmd)
{
	char **av = *argv;

	*cmd = CMD_TRACE;
	if (*argc < 2 || av[1][0] == '-')
		return 0;
	for (size_t i = 0; i < ARRAY_LEN(commands); i++)
		if (!strcmp(av[1], commands[i].name)) {
			*cmd = (enum command)i;
			av[1] = av[0];
			(*argv)++;
			(*argc)--;
			return 0;
		}
	/* trace takes no argument that is not an option: this was meant as a command */
	return unknown_command(av[1]);
}

static void defaults(struct options *o, enum command cmd)
{
	struct detect_config *d = &o->session.detect;

	memset(o, 0, sizeof(*o));
	o->command = cmd;
	o->session.record = cmd == CMD_RECORD;
	o->session.out.live = -1;
	o->session.ringbuf_bytes = DEFAULT_RINGBUF_BYTES;
	o->session.task_slots = AT_TASK_SLOTS;
	o->session.sample_hz = DEFAULT_SAMPLE_HZ;
	o->session.wait_read_pct = 1;
	o->session.escalate_every_ns = DEFAULT_ESCALATE_EVERY_NS;
	o->umask = 077;
	detect_config__defaults(d);
}

/* -p PID[,PID...]: each pid once, in the order given. */
static int take_pids(struct options *o, const char *arg)
{
	char buf[256], *save = NULL, *tok;
	int n;

	if (strlen(arg) >= sizeof(buf) || !arg[0]) {
		err_msg("invalid pid '%s'\n", arg);
		return EXIT_USAGE;
	}
	strcpy(buf, arg);
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		size_t i;

		if (parse_int(tok, 1, INT32_MAX, &n)) {
			err_msg("invalid pid '%s'\n", tok);
			return EXIT_USAGE;
		}
		for (i = 0; i < o->session.nr_pids && o->session.pids[i] != n; i++)
			;
		if (i < o->session.nr_pids)
			continue;
		if (o->session.nr_pids == SESSION_MAX_PIDS) {
			err_msg("too many pids: at most %d\n", SESSION_MAX_PIDS);
			return EXIT_USAGE;
		}
		o->session.pids[o->session.nr_pids++] = n;
	}
	return 0;
}

/* What an option parser answers when the option is another group's. */
#define NOT_MINE (-2)

/* An option of what a session writes: 0, EXIT_USAGE after a message, or NOT_MINE. */
static int take_output(struct outputs_opts *out, int c, const char *arg)
{
	switch (c) {
	case 'o':
		out->output = arg;
		return 0;
	case OPT_FORMAT:
		out->format = outfiles__format_named(arg);
		if (out->format == FORMAT_AUTO)
			return bad("--format", arg, "json or perfetto");
		return 0;
	case OPT_TRACE_COMPRESSION:
		if (!strcmp(arg, "deflate"))
			out->trace_compression = COMPRESSION_DEFLATE;
		else if (!strcmp(arg, "none"))
			out->trace_compression = COMPRESSION_NONE;
		else
			return bad("--trace-compression", arg, "deflate or none");
		return 0;
	case OPT_ALERTS:
		out->alerts = arg;
		return 0;
	case OPT_SUMMARY:
		if (!strcmp(arg, "text"))
			out->summary = SUMMARY_TEXT;
		else if (!strcmp(arg, "json"))
			out->summary = SUMMARY_JSON;
		else
			return bad("--summary", arg, "text or json");
		return 0;
	case OPT_LIVE:
		out->live = 1;
		return 0;
	case 'q':
		out->quiet = true;
		return 0;
	}
	return NOT_MINE;
}

/* An option of what a session traces and keeps: 0, EXIT_USAGE after a message, or NOT_MINE. */
static int take_tracing(struct session_opts *s, int c, const char *arg)
{
	struct detect_config *d = &s->detect;
	int n;

	switch (c) {
	case OPT_MAX_TARGETS:
		if (parse_int(arg, 1, 1 << 20, &n))
			return bad("--max-targets", arg, "a whole number from 1");
		s->max_targets = (uint32_t)n;
		return 0;
	case OPT_COMM:
		s->comm = arg;
		return 0;
	case OPT_EXCLUDE_COMM:
		s->exclude_comm = arg;
		return 0;
	case OPT_CGROUP:
		s->cgroup = arg;
		return 0;
	case 'd':
		if (parse_duration(arg, 1000000000ull, &s->duration_ns) || !s->duration_ns)
			return bad("duration", arg, "seconds, e.g. 5 or 2.5");
		return 0;
	case OPT_NO_TRACE:
		s->no_trace = true;
		return 0;
#define X(field, type, option, parsed, dflt)                                                       \
	case OPT_##field:                                                                          \
		d->given |= DETECT_GIVEN(field);                                                   \
		return parsed##_opt("--" option, arg, &d->field);
	DETECT_THRESHOLDS(X)
#undef X
	case OPT_STACKS:
		s->stacks = true;
		return 0;
	case 'v':
		s->verbose = true;
		return 0;
	}
	return NOT_MINE;
}

/* An option of what a session keeps beside the trace: 0, EXIT_USAGE, or NOT_MINE. */
static int take_keeping(struct session_opts *s, int c, const char *arg)
{
	int n;

	switch (c) {
	case OPT_METRICS: {
		const char *want = metrics__bad_listen(arg);

		if (want)
			return bad("--metrics", arg, want);
		s->metrics = arg;
		return 0;
	}
	case OPT_METRICS_TASKS:
		if (parse_int(arg, 0, 1000, &n))
			return bad("--metrics-tasks", arg, "a number of tasks from 0 to 1000");
		s->metrics_tasks = (uint32_t)n;
		return 0;
	case OPT_FLIGHT:
		if (parse_duration(arg, 1000000000ull, &s->flight_ns) || !s->flight_ns ||
		    s->flight_ns > 3600 * 1000000000ull)
			return bad("--flight-recorder", arg, "seconds, from a fraction to 3600");
		return 0;
	case OPT_FLIGHT_SIZE:
		if (parse_size(arg, &s->flight_bytes) || s->flight_bytes < (4u << 20))
			return bad("--flight-recorder-size", arg, "a size of 4M or more, e.g. 256M");
		return 0;
	case OPT_DUMP_DIR:
		s->dump_dir = arg;
		return 0;
	case OPT_DUMP_DIR_SIZE:
		if (parse_size(arg, &s->dump_dir_bytes) || s->dump_dir_bytes < (1u << 20))
			return bad("--dump-dir-size", arg, "a size of 1M or more, e.g. 1G");
		return 0;
	}
	return NOT_MINE;
}

/* An option of how a session loads and attaches: 0, EXIT_USAGE after a message, or NOT_MINE. */
static int take_loading(struct session_opts *s, int c, const char *arg)
{
	int n;

	switch (c) {
	case OPT_RINGBUF:
		if (parse_size(arg, &s->ringbuf_bytes) || s->ringbuf_bytes < 4096 ||
		    s->ringbuf_bytes > (1ull << 30) || (s->ringbuf_bytes & (s->ringbuf_bytes - 1)))
			return bad("--ringbuf-size", arg, "a power of two from 4K to 1G");
		return 0;
	case OPT_TASK_SLOTS:
		if (parse_int(arg, 1, 1 << 20, &n) || (n & (n - 1)))
			return bad("--task-slots", arg, "a power of two from 1 to 1048576");
		s->task_slots = (uint32_t)n;
		return 0;
	case OPT_BTF:
		s->btf_path = arg;
		return 0;
	case OPT_SCHED_HOOK:
		if (!strcmp(arg, "auto"))
			s->sched_hook = SCHED_HOOK_AUTO;
		else if (!strcmp(arg, "tp_btf"))
			s->sched_hook = SCHED_HOOK_TP_BTF;
		else if (!strcmp(arg, "raw_tp"))
			s->sched_hook = SCHED_HOOK_RAW_TP;
		else
			return bad("--sched-hook", arg, "auto, tp_btf or raw_tp");
		return 0;
	case OPT_EMPTY_PROGRAMS:
		s->empty_programs = true;
		return 0;
	case OPT_NO_SANDBOX:
		s->no_sandbox = true;
		return 0;
	case OPT_WAIT_READS:
		if (parse_int(arg, 0, 50, &n))
			return bad("--wait-reads", arg, "a percent, from 0 to 50");
		s->wait_read_pct = (uint32_t)n;
		return 0;
	case OPT_EXAMINE_TIMEOUT: {
		uint64_t ns;

		if (parse_duration(arg, 1000000000ull, &ns) || ns < 1000000 || ns > 3600000000000ull)
			return bad("--examine-timeout", arg, "seconds, from 0.001 to 3600");
		s->examine_timeout_ms = (unsigned int)(ns / 1000000);
		return 0;
	}
	case OPT_MODE:
		if (!strcmp(arg, "probes"))
			s->sample_mode = false;
		else if (!strcmp(arg, "sample"))
			s->sample_mode = true;
		else
			return bad("--mode", arg, "probes or sample");
		return 0;
	case OPT_SAMPLE_HZ:
		if (parse_int(arg, 10, 10000, &n))
			return bad("--sample-hz", arg, "from 10 to 10000");
		s->sample_hz = (uint32_t)n;
		return 0;
	case OPT_ESCALATE:
		if (parse_duration(arg, 1000000000ull, &s->escalate_ns) || s->escalate_ns < 100000000 ||
		    s->escalate_ns > 3600 * 1000000000ull)
			return bad("--escalate", arg, "seconds, from 0.1 to 3600");
		return 0;
	case OPT_ESCALATE_EVERY:
		if (parse_duration(arg, 1000000000ull, &s->escalate_every_ns) ||
		    s->escalate_every_ns > 24 * 3600 * 1000000000ull)
			return bad("--escalate-every", arg, "seconds, from 0 to 86400");
		s->escalate_every_set = true;
		return 0;
	case OPT_PROBE_AT:
		if (!strcmp(arg, "cheapest"))
			s->probe_at_entry = false;
		else if (!strcmp(arg, "entry"))
			s->probe_at_entry = true;
		else
			return bad("--probe-at", arg, "cheapest or entry");
		return 0;
	}
	return NOT_MINE;
}

/* An option of run, its command and its gates: 0, EXIT_USAGE after a message, or NOT_MINE. */
static int take_gate(struct options *o, int c, const char *arg)
{
	char why[1024], *end;

	switch (c) {
	case OPT_USER:
		o->user = arg;
		return 0;
	case OPT_FOLLOW_CHILDREN:
		o->follow_children = true;
		return 0;
	case OPT_FAIL_ON:
	case OPT_MAX:
		if ((c == OPT_FAIL_ON ? gate__parse_fail_on : gate__parse_max)(&o->gate, arg, why,
									       sizeof(why))) {
			err_msg("%s\n", why);
			return EXIT_USAGE;
		}
		return 0;
	case OPT_BASELINE:
		o->gate.baseline = arg;
		o->gate.given = true;
		return 0;
	case OPT_TOLERANCE:
		errno = 0;
		o->gate.tolerance_pct = strtod(arg, &end);
		o->gate.tolerance_set = true;
		if (errno || end == arg || *end || !(o->gate.tolerance_pct >= 0) ||
		    o->gate.tolerance_pct > 10000)
			return bad("--tolerance", arg, "a percentage, from 0 to 10000");
		return 0;
	case OPT_JUNIT:
		o->junit = arg;
		return 0;
	}
	return NOT_MINE;
}

/* One option and its argument into o: 0, EXIT_USAGE after a message, or -1 when done. */
static int take_option(struct options *o, int c, const char *arg)
{
	char *end;
	int err;

	if (c == 'p')
		return take_pids(o, arg);
	if (c == OPT_JSON || c == OPT_ALL) {
		*(c == OPT_JSON ? &o->tasks_json : &o->tasks_all) = true;
		return 0;
	}
	if (c == 'h') {
		print_help(stdout, o->command);
		return -1;
	}
	if (c == 'V') {
		printf("asynctraced %s\n", VERSION);
		return -1;
	}
	if (c == OPT_UMASK) {
		unsigned long mask;

		errno = 0;
		mask = strtoul(arg, &end, 8);
		if (errno || end == arg || *end || mask > 0777)
			return bad("--umask", arg, "an octal mask from 0 to 777, e.g. 022");
		o->umask = (mode_t)mask;
		return 0;
	}
	err = take_output(&o->session.out, c, arg);
	if (err == NOT_MINE)
		err = take_tracing(&o->session, c, arg);
	if (err == NOT_MINE)
		err = take_keeping(&o->session, c, arg);
	if (err == NOT_MINE)
		err = take_loading(&o->session, c, arg);
	if (err == NOT_MINE)
		err = take_gate(o, c, arg);
	return err == NOT_MINE ? 0 : err;
}

int options__parse(int argc, char **argv, struct options *o)
{
	struct option longopts[ARRAY_LEN(opt_defs) + 1];
	char shortopts[2 * ARRAY_LEN(opt_defs) + 3];
	enum command cmd;
	int c, err;

	if (argc > 1 && !strcmp(argv[1], "help"))
		return help_command(argc, argv);
	err = take_command(&argc, &argv, &cmd);
	if (err)
		return err;
	defaults(o, cmd);
	getopt_tables(longopts, shortopts, cmd);
	opterr = 0; /* its messages name argv[0], a path: ours say asynctraced */
	while ((c = getopt_long(argc, argv, shortopts, longopts, NULL)) != -1) {
		const struct opt_def *d;

		if (c == '?' || c == ':')
			return typo(cmd, c, argv[optind - 1]);
		d = find_option(c, cmd);
		if (d && !(d->cmds & (1u << cmd)))
			return misplaced(cmd, d);
		err = take_option(o, c, optarg);
		if (err)
			return err;
	}
	if (cmd == CMD_CONVERT && optind < argc)
		o->capture = argv[optind++];
	if (cmd == CMD_RUN && optind < argc) {
		o->cmd = argv + optind;
		optind = argc;
	}
	if (optind < argc) {
		err_msg("unexpected argument '%s'\n", argv[optind]);
		return try_help(cmd);
	}
	return check(o);
}
