// SPDX-License-Identifier: MIT
#include "options.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util.h"

#define VERSION "0.3.0"

#define err_msg(...) fprintf(stderr, "asynctraced: " __VA_ARGS__)

static const char usage[] =
	"usage: asynctraced -p PID [options]            trace now\n"
	"       asynctraced record -p PID -o FILE [options]  record a capture\n"
	"       asynctraced convert FILE [-o TRACE] [options]  trace it later\n"
	"\n"
	"Trace the async executor running as PID: every poll, wake, spawn, steal\n"
	"and park, aggregated in BPF maps, with live alerts and a report, and with\n"
	"-o a trace for Perfetto. `record` writes the raw events to a capture as\n"
	"cheaply as possible; `convert` turns a capture into a trace, alerts and the\n"
	"report, exactly as tracing live would have.\n"
	"\n"
	"  -p, --pid PID            process to trace (trace, record)\n"
	"  -d, --duration SECONDS   stop after this long (default: until Ctrl-C or exit)\n"
	"  -o, --output FILE        the trace for Perfetto: native protobuf when FILE\n"
	"                           ends in .pftrace or .perfetto-trace, else Chrome\n"
	"                           JSON; for record, the capture (required)\n"
	"      --format FORMAT      the trace's format whatever its name: json or perfetto\n"
	"      --no-trace           maps only: no per-event traffic, only aggregates and\n"
	"                           alerts (the production mode)\n"
	"      --alerts FILE        also write every alert as a JSON line to FILE\n"
	"      --summary FORMAT     the report at exit: text (stderr, default) or json\n"
	"                           (stdout)\n"
	"      --live               redraw a live view every second (default: when\n"
	"                           stderr is a terminal)\n"
	"  -q, --quiet              no live view and no alert lines; the report only\n"
	"\n"
	"detectors (a time takes ns, us, ms or s; 0 turns a detector off; convert\n"
	"defaults to the values the capture was recorded with):\n"
	"      --long-poll TIME     a poll at least this long (default 10ms)\n"
	"      --sched-delay TIME   wake-to-poll delay nothing else explains (default 20ms)\n"
	"      --starve-depth N     a worker's average queue depth, while another worker\n"
	"                           is idle, that means starvation (default 16)\n"
	"      --starve-time TIME   ... for at least this long (default 200ms)\n"
	"      --thrash-rate N      wakes per second of one task that thrash, when its\n"
	"                           own wakes or its wakes per poll dominate (default 1000)\n"
	"      --lost-waker TIME    a task not woken this long after it returned Pending\n"
	"                           (default 10s)\n"
	"      --episode-gap TIME   quiet this long ends an episode (default 1s)\n"
	"\n"
	"      --ringbuf-size SIZE  ring buffer space, shared out between the CPUs\n"
	"                           (default 16M; power of two)\n"
	"      --task-slots N       live tasks kept in place, cheapest to trace; the rest\n"
	"                           go to hash maps (default 16384; power of two; 640\n"
	"                           bytes each)\n"
	"      --btf FILE           kernel BTF to use instead of /sys/kernel/btf/vmlinux\n"
	"      --sched-hook HOOK    sched_switch via auto, tp_btf or raw_tp (default auto)\n"
	"      --probe-at WHERE     function probes (tokio) at the cheapest equivalent\n"
	"                           instruction (cheapest, default) or at the entry\n"
	"      --empty-programs     benchmarks: attach empty BPF programs to the same\n"
	"                           probes and record nothing (the cost floor)\n"
	"  -v, --verbose            say what is found and attached; show libbpf's log\n"
	"  -h, --help               this help\n"
	"  -V, --version            version\n"
	"\n"
	"SIGUSR1 prints the report so far. Exit status: 0 success, 1 failure,\n"
	"2 usage error.\n";

enum {
	OPT_LONG_POLL = 256,
	OPT_SCHED_DELAY,
	OPT_STARVE_DEPTH,
	OPT_STARVE_TIME,
	OPT_THRASH_RATE,
	OPT_LOST_WAKER,
	OPT_EPISODE_GAP,
	OPT_RINGBUF,
	OPT_TASK_SLOTS,
	OPT_BTF,
	OPT_SCHED_HOOK,
	OPT_NO_TRACE,
	OPT_ALERTS,
	OPT_SUMMARY,
	OPT_LIVE,
	OPT_FORMAT,
	OPT_EMPTY_PROGRAMS,
	OPT_PROBE_AT,
	OPT_MAX,
};

static int bad(const char *opt, const char *arg, const char *want)
{
	err_msg("invalid %s '%s': want %s\n", opt, arg, want);
	return EXIT_USAGE;
}

static int time_opt(const char *opt, const char *arg, uint64_t *ns)
{
	return parse_duration(arg, 1000000ull, ns) ? bad(opt, arg, "a time, e.g. 10ms") : 0;
}

static int uint_opt(const char *opt, const char *arg, uint32_t *v)
{
	int n;

	if (parse_int(arg, 0, 1 << 30, &n))
		return bad(opt, arg, "a whole number");
	*v = (uint32_t)n;
	return 0;
}

/* Options that make no sense for a command (indexed by option code). */
static const struct {
	int opt;
	const char *name;
	unsigned not_for; /* 1 << enum command */
} misplaced[] = {
	{ 'p', "-p", 1 << CMD_CONVERT },
	{ 'd', "-d", 1 << CMD_CONVERT },
	{ OPT_NO_TRACE, "--no-trace", 1 << CMD_CONVERT },
	{ OPT_RINGBUF, "--ringbuf-size", 1 << CMD_CONVERT },
	{ OPT_TASK_SLOTS, "--task-slots", 1 << CMD_CONVERT },
	{ OPT_BTF, "--btf", 1 << CMD_CONVERT },
	{ OPT_SCHED_HOOK, "--sched-hook", 1 << CMD_CONVERT },
	{ OPT_EMPTY_PROGRAMS, "--empty-programs", 1 << CMD_CONVERT | 1 << CMD_RECORD },
	{ OPT_PROBE_AT, "--probe-at", 1 << CMD_CONVERT },
	{ OPT_LIVE, "--live", 1 << CMD_CONVERT | 1 << CMD_RECORD },
	{ OPT_ALERTS, "--alerts", 1 << CMD_RECORD },
	{ OPT_SUMMARY, "--summary", 1 << CMD_RECORD },
	{ OPT_FORMAT, "--format", 1 << CMD_RECORD },
};

static const char *const command_names[] = { "trace", "record", "convert" };

static const char *const format_names[] = {
	[FORMAT_JSON] = "json",
	[FORMAT_PERFETTO] = "perfetto",
};

/* What a trace's name says of its format: the one list -o is checked against and cites. */
static const struct {
	const char *ext;
	enum trace_format format;
} trace_exts[] = {
	{ ".json", FORMAT_JSON },
	{ ".pftrace", FORMAT_PERFETTO },
	{ ".perfetto-trace", FORMAT_PERFETTO },
};

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* ".json, .pftrace<last>.perfetto-trace" */
static void list_exts(char *buf, size_t size, const char *last)
{
	size_t len = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < ARRAY_LEN(trace_exts) && len < size; i++)
		len += snprintf(buf + len, size - len, "%s%s",
				i == 0 ? "" : i + 1 < ARRAY_LEN(trace_exts) ? ", " : last,
				trace_exts[i].ext);
}

static enum trace_format format_of(const char *path)
{
	size_t len = strlen(path);

	if (!strcmp(path, "-"))
		return FORMAT_JSON;
	for (size_t i = 0; i < ARRAY_LEN(trace_exts); i++) {
		size_t n = strlen(trace_exts[i].ext);

		if (len >= n && !strcmp(path + len - n, trace_exts[i].ext))
			return trace_exts[i].format;
	}
	return FORMAT_AUTO;
}

/*
 * A name that says no format is refused rather than written as JSON: x.pb or
 * x.json.gz would otherwise hold something else than their name promises.
 */
static int trace_format(struct options *o)
{
	char exts[128];

	if (!o->output || o->format != FORMAT_AUTO)
		return 0;
	o->format = format_of(o->output);
	if (o->format != FORMAT_AUTO)
		return 0;
	list_exts(exts, sizeof(exts), " nor ");
	err_msg("cannot tell the format of trace '%s' from its name: it ends in neither %s: "
		"give --format %s or --format %s to write it under this name\n",
		o->output, exts, format_names[FORMAT_JSON], format_names[FORMAT_PERFETTO]);
	return EXIT_USAGE;
}

/* A file the command line names, and where it leads. */
struct named_file {
	const char *opt;  /* "-o", "--alerts", ... */
	const char *path; /* "-": standard output */
	bool output;
	bool have_id; /* it exists: dev and ino say which file it is */
	dev_t dev;
	ino_t ino;
	char name[PATH_MAX]; /* else its directory made canonical, and its last component */
};

static void identify(struct named_file *f)
{
	const char *slash = strrchr(f->path, '/');
	char dir[PATH_MAX], *real;
	struct stat st;
	int err;

	snprintf(f->name, sizeof(f->name), "%s", f->path);
	if (!strcmp(f->path, "-"))
		err = fstat(STDOUT_FILENO, &st);
	else
		/* an output that is a symlink will be refused, not followed: itself is the file */
		err = f->output ? lstat(f->path, &st) : stat(f->path, &st);
	if (!err) {
		f->have_id = true;
		f->dev = st.st_dev;
		f->ino = st.st_ino;
		return;
	}
	if (!strcmp(f->path, "-") || errno != ENOENT)
		return;
	/* not there yet: ./F and F, or a/../F, are one name once the directory is canonical */
	if (!slash)
		snprintf(dir, sizeof(dir), ".");
	else if (slash == f->path)
		snprintf(dir, sizeof(dir), "/");
	else
		snprintf(dir, sizeof(dir), "%.*s", (int)(slash - f->path), f->path);
	real = realpath(dir, NULL);
	if (real && strlen(real) + strlen(slash ? slash : f->path) + 2 <= sizeof(f->name))
		snprintf(f->name, sizeof(f->name), "%s/%s", strcmp(real, "/") ? real : "",
			 slash ? slash + 1 : f->path);
	free(real);
}

static bool same_file(const struct named_file *a, const struct named_file *b)
{
	if (a->have_id || b->have_id)
		return a->have_id && b->have_id && a->dev == b->dev && a->ino == b->ino;
	return !strcmp(a->name, b->name);
}

/* "-o 'x.json'", "-o -", "--summary json"; stdout: what it is, when the other is not */
static void describe(char *buf, size_t size, const struct named_file *f, bool say_stdout)
{
	if (strcmp(f->path, "-"))
		snprintf(buf, size, "%s '%s'", f->opt, f->path);
	else
		snprintf(buf, size, "%s%s%s", f->opt, strcmp(f->opt, "--summary json") ? " -" : "",
			 say_stdout ? " (standard output)" : "");
}

/*
 * Two outputs that are one file interleave into garbage, and an output that
 * is an input destroys it as it is read (a capture is mapped: convert dies of
 * SIGBUS). Existing files are told apart by device and inode, whatever the
 * names; files still to create by their canonical directory and name.
 */
static int distinct_files(const struct options *o)
{
	struct named_file files[5];
	char a[PATH_MAX + 64], b[PATH_MAX + 64];
	bool both_stdout;
	size_t n = 0;

	memset(files, 0, sizeof(files));
#define NAMED(o, p, out) ((struct named_file){ .opt = (o), .path = (p), .output = (out) })
	if (o->output)
		files[n++] = NAMED("-o", o->output, true);
	if (o->alerts)
		files[n++] = NAMED("--alerts", o->alerts, true);
	if (o->summary == SUMMARY_JSON)
		files[n++] = NAMED("--summary json", "-", true);
	if (o->capture)
		files[n++] = NAMED("the capture", o->capture, false);
	if (o->btf_path)
		files[n++] = NAMED("--btf", o->btf_path, false);
#undef NAMED
	for (size_t i = 0; i < n; i++)
		identify(&files[i]);
	for (size_t i = 0; i < n; i++) {
		for (size_t j = i + 1; j < n; j++) {
			if (!(files[i].output || files[j].output) ||
			    !same_file(&files[i], &files[j]))
				continue;
			both_stdout = !strcmp(files[i].path, "-") && !strcmp(files[j].path, "-");
			describe(a, sizeof(a), &files[i], !both_stdout);
			describe(b, sizeof(b), &files[j], !both_stdout);
			if (both_stdout)
				err_msg("%s and %s both write to standard output\n", a, b);
			else
				err_msg("%s and %s are the same file: %s\n", a, b,
					files[i].output && files[j].output
						? "give each its own"
						: "asynctraced would overwrite what it reads");
			return EXIT_USAGE;
		}
	}
	return 0;
}

static int check(struct options *o, const bool *given)
{
	for (size_t i = 0; i < sizeof(misplaced) / sizeof(misplaced[0]); i++) {
		if (!given[misplaced[i].opt] || !(misplaced[i].not_for & (1u << o->command)))
			continue;
		if (o->command == CMD_RECORD)
			err_msg("%s is for tracing or converting: record writes only the "
				"capture (asynctraced convert FILE %s ... reads it)\n",
				misplaced[i].name, misplaced[i].name);
		else
			err_msg("%s does not apply to %s\n", misplaced[i].name,
				command_names[o->command]);
		return EXIT_USAGE;
	}
	if (o->command == CMD_CONVERT) {
		if (!o->capture) {
			err_msg("convert needs a capture: asynctraced convert FILE [-o TRACE]\n");
			return EXIT_USAGE;
		}
	} else if (!o->pid) {
		err_msg("no target: give -p PID\n");
		fputs(usage, stderr);
		return EXIT_USAGE;
	}
	if (o->command == CMD_RECORD && !o->output) {
		err_msg("record needs a file to write: -o FILE\n");
		return EXIT_USAGE;
	}
	if (o->empty_programs && o->output) {
		err_msg("--empty-programs records nothing: drop -o %s\n", o->output);
		return EXIT_USAGE;
	}
	if (o->command == CMD_TRACE && o->output && o->no_trace) {
		err_msg("--no-trace writes no trace: drop -o %s\n", o->output);
		return EXIT_USAGE;
	}
	if (o->command != CMD_RECORD && trace_format(o))
		return EXIT_USAGE;
	return distinct_files(o);
}

int options__parse(int argc, char **argv, struct options *o)
{
	static const struct option longopts[] = {
		{ "pid", required_argument, NULL, 'p' },
		{ "duration", required_argument, NULL, 'd' },
		{ "output", required_argument, NULL, 'o' },
		{ "format", required_argument, NULL, OPT_FORMAT },
		{ "no-trace", no_argument, NULL, OPT_NO_TRACE },
		{ "alerts", required_argument, NULL, OPT_ALERTS },
		{ "summary", required_argument, NULL, OPT_SUMMARY },
		{ "live", no_argument, NULL, OPT_LIVE },
		{ "quiet", no_argument, NULL, 'q' },
		{ "long-poll", required_argument, NULL, OPT_LONG_POLL },
		{ "sched-delay", required_argument, NULL, OPT_SCHED_DELAY },
		{ "starve-depth", required_argument, NULL, OPT_STARVE_DEPTH },
		{ "starve-time", required_argument, NULL, OPT_STARVE_TIME },
		{ "thrash-rate", required_argument, NULL, OPT_THRASH_RATE },
		{ "lost-waker", required_argument, NULL, OPT_LOST_WAKER },
		{ "episode-gap", required_argument, NULL, OPT_EPISODE_GAP },
		{ "ringbuf-size", required_argument, NULL, OPT_RINGBUF },
		{ "task-slots", required_argument, NULL, OPT_TASK_SLOTS },
		{ "btf", required_argument, NULL, OPT_BTF },
		{ "sched-hook", required_argument, NULL, OPT_SCHED_HOOK },
		{ "empty-programs", no_argument, NULL, OPT_EMPTY_PROGRAMS },
		{ "probe-at", required_argument, NULL, OPT_PROBE_AT },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	struct detect_opts *d = &o->detect;
	bool given[OPT_MAX] = { false };
	int c, pid, err = 0;

	memset(o, 0, sizeof(*o));
	if (argc > 1) {
		for (int i = 0; i < (int)(sizeof(command_names) / sizeof(command_names[0])); i++)
			if (!strcmp(argv[1], command_names[i]))
				o->command = (enum command)i;
		if (o->command != CMD_TRACE || !strcmp(argv[1], "trace")) {
			argv[1] = argv[0];
			argv++;
			argc--;
		}
	}
	o->live = -1;
	o->ringbuf_bytes = DEFAULT_RINGBUF_BYTES;
	o->task_slots = AT_TASK_SLOTS;
	d->long_poll_ns = DEFAULT_LONG_POLL_NS;
	d->sched_delay_ns = DEFAULT_SCHED_DELAY_NS;
	d->starve_depth = DEFAULT_STARVE_DEPTH;
	d->starve_ns = DEFAULT_STARVE_NS;
	d->thrash_rate = DEFAULT_THRASH_RATE;
	d->lost_waker_ns = DEFAULT_LOST_WAKER_NS;
	d->episode_gap_ns = DEFAULT_EPISODE_GAP_NS;
	while (!err && (c = getopt_long(argc, argv, "p:d:o:qvhV", longopts, NULL)) != -1) {
		if (c > 0 && c < OPT_MAX)
			given[c] = true;
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
			    !o->duration_ns)
				err = bad("duration", optarg, "seconds, e.g. 5 or 2.5");
			break;
		case 'o':
			o->output = optarg;
			break;
		case OPT_FORMAT:
			if (!strcmp(optarg, format_names[FORMAT_JSON]))
				o->format = FORMAT_JSON;
			else if (!strcmp(optarg, format_names[FORMAT_PERFETTO]))
				o->format = FORMAT_PERFETTO;
			else
				err = bad("--format", optarg, "json or perfetto");
			break;
		case OPT_NO_TRACE:
			o->no_trace = true;
			break;
		case OPT_ALERTS:
			o->alerts = optarg;
			break;
		case OPT_SUMMARY:
			if (!strcmp(optarg, "text"))
				o->summary = SUMMARY_TEXT;
			else if (!strcmp(optarg, "json"))
				o->summary = SUMMARY_JSON;
			else
				err = bad("--summary", optarg, "text or json");
			break;
		case OPT_LIVE:
			o->live = 1;
			break;
		case 'q':
			o->quiet = true;
			break;
		case OPT_LONG_POLL:
			o->detect_given |= GIVEN_LONG_POLL;
			err = time_opt("--long-poll", optarg, &d->long_poll_ns);
			break;
		case OPT_SCHED_DELAY:
			o->detect_given |= GIVEN_SCHED_DELAY;
			err = time_opt("--sched-delay", optarg, &d->sched_delay_ns);
			break;
		case OPT_STARVE_DEPTH:
			o->detect_given |= GIVEN_STARVE_DEPTH;
			err = uint_opt("--starve-depth", optarg, &d->starve_depth);
			break;
		case OPT_STARVE_TIME:
			o->detect_given |= GIVEN_STARVE_TIME;
			err = time_opt("--starve-time", optarg, &d->starve_ns);
			break;
		case OPT_THRASH_RATE:
			o->detect_given |= GIVEN_THRASH_RATE;
			err = uint_opt("--thrash-rate", optarg, &d->thrash_rate);
			break;
		case OPT_LOST_WAKER:
			o->detect_given |= GIVEN_LOST_WAKER;
			err = time_opt("--lost-waker", optarg, &d->lost_waker_ns);
			break;
		case OPT_EPISODE_GAP:
			o->detect_given |= GIVEN_EPISODE_GAP;
			err = time_opt("--episode-gap", optarg, &d->episode_gap_ns);
			break;
		case OPT_RINGBUF:
			if (parse_size(optarg, &o->ringbuf_bytes) || o->ringbuf_bytes < 4096 ||
			    o->ringbuf_bytes > (1ull << 30) ||
			    (o->ringbuf_bytes & (o->ringbuf_bytes - 1)))
				err = bad("--ringbuf-size", optarg, "a power of two from 4K to 1G");
			break;
		case OPT_TASK_SLOTS: {
			int n;

			if (parse_int(optarg, 1, 1 << 20, &n) || (n & (n - 1)))
				err = bad("--task-slots", optarg, "a power of two from 1 to 1048576");
			else
				o->task_slots = (uint32_t)n;
		}
			break;
		case OPT_BTF:
			o->btf_path = optarg;
			break;
		case OPT_SCHED_HOOK:
			if (!strcmp(optarg, "auto"))
				o->sched_hook = SCHED_HOOK_AUTO;
			else if (!strcmp(optarg, "tp_btf"))
				o->sched_hook = SCHED_HOOK_TP_BTF;
			else if (!strcmp(optarg, "raw_tp"))
				o->sched_hook = SCHED_HOOK_RAW_TP;
			else
				err = bad("--sched-hook", optarg, "auto, tp_btf or raw_tp");
			break;
		case OPT_EMPTY_PROGRAMS:
			o->empty_programs = true;
			break;
		case OPT_PROBE_AT:
			if (!strcmp(optarg, "cheapest"))
				o->probe_at_entry = false;
			else if (!strcmp(optarg, "entry"))
				o->probe_at_entry = true;
			else
				err = bad("--probe-at", optarg, "cheapest or entry");
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
	if (err)
		return err;
	if (o->command == CMD_CONVERT && optind < argc)
		o->capture = argv[optind++];
	if (optind < argc) {
		err_msg("unexpected argument '%s'\n", argv[optind]);
		return EXIT_USAGE;
	}
	return check(o, given);
}
