/* SPDX-License-Identifier: MIT */
/*
 * sample-executor: run one scenario on the work-stealing runtime for a
 * while, then print what the runtime counted, in a form tests can compare
 * with what a tracer saw.
 *
 * Exit codes: 0 success, 1 runtime failure (including --wait-traced timing
 * out), 2 usage error.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime.h"
#include "scenario.h"
#include "semaphores.h"
#include "util.h"

#define EXIT_USAGE 2
#define DEFAULT_WAIT_TIMEOUT 30.0
#define MAX_SECONDS 1e6
#define MAX_WORKERS 1024
/* fds the table has room for from the start; see grow_fd_table(). */
#define FD_TABLE_PREGROW 1024

struct options {
	const char *scenario;
	double duration;
	unsigned workers;     /* 0: one per online CPU */
	unsigned rate;        /* 0: the scenario's default */
	bool wait_traced;
	double wait_timeout;
	double thread_churn;  /* seconds; 0: workers keep their threads */
	unsigned forks;       /* 0: run the workload; N: N children run it */
	double time_polls;    /* seconds; 0: polls are not timed */
};

static void usage(FILE *out)
{
	fprintf(out,
		"Usage: sample-executor --scenario NAME --duration SECONDS [options]\n"
		"\n"
		"Run a workload on a work-stealing executor that emits asynctrace USDT\n"
		"probes, then print one line of counts on stdout.\n"
		"\n"
		"Options:\n"
		"  --scenario NAME         workload to run (see below)\n"
		"  --duration SECONDS      how long to run; fractions allowed (2.5)\n"
		"  --workers N             worker threads (default: online CPUs)\n"
		"  --rate R                scenario load knob, integer > 0 (see below);\n"
		"                          max: as fast as the scenario can go\n"
		"  --wait-traced [TIMEOUT] before the workload, wait until a tracer\n"
		"                          has attached all 7 probes (default 30 s)\n"
		"  --thread-churn SECONDS  a busy worker hands its work to a new thread\n"
		"                          this often and its old thread exits (runtimes\n"
		"                          whose threads come and go); prints each\n"
		"                          thread's polls before the counts\n"
		"  --fork N                a pre-forking server: the process (once\n"
		"                          traced, with --wait-traced) forks N children\n"
		"                          that each run the workload and print their\n"
		"                          counts, and waits for them\n"
		"  --time-polls SECONDS    time every poll on the wall clock and, at the\n"
		"                          end, name the tasks whose polls took this\n"
		"                          long or longer (what a tracer should find)\n"
		"  -h, --help              show this help\n"
		"\n"
		"Scenarios (--rate meaning, default):\n");
	for (unsigned i = 0; i < nscenarios; i++)
		fprintf(out, "  %-9s %s\n  %9s (rate: %s, default %u)\n",
			scenarios[i].name, scenarios[i].summary, "",
			scenarios[i].rate_help, scenarios[i].default_rate);
	fprintf(out,
		"\n"
		"Output: sample-executor: scenario=NAME workers=N duration=S.SS tasks=T\n"
		"        polls=P wakes=W steals=S stolen=X parks=K unpolled=U\n"
		"        polls_per_s=R\n"
		"        (--thread-churn: first, sample-executor: thread TID worker W polls P)\n"
		"        (--time-polls: first, sample-executor: long polls NAME=N longest=MSms)\n"
		"Exit status: 0 ok, 1 runtime failure, 2 usage error.\n");
}

__attribute__((noreturn, format(printf, 1, 2)))
static void usage_error(const char *fmt, ...)
{
	va_list ap;

	fputs("sample-executor: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs("\nTry 'sample-executor --help'.\n", stderr);
	exit(EXIT_USAGE);
}

/* A decimal integer in [1, max], nothing else (no sign, no spaces). */
static unsigned parse_count(const char *opt, const char *s, unsigned max)
{
	unsigned long v;
	char *end;

	if (*s < '0' || *s > '9')
		usage_error("%s: '%s' is not a positive integer", opt, s);
	errno = 0;
	v = strtoul(s, &end, 10);
	if (*end || errno)
		usage_error("%s: '%s' is not a positive integer", opt, s);
	if (v == 0)
		usage_error("%s: must be at least 1", opt);
	if (v > max)
		usage_error("%s: %s is too large (at most %u)", opt, s, max);
	return (unsigned)v;
}

/* A positive, finite number of seconds, fractions allowed. */
static double parse_seconds(const char *opt, const char *s)
{
	double v;
	char *end;

	if ((*s < '0' || *s > '9') && *s != '.')
		usage_error("%s: '%s' is not a number of seconds", opt, s);
	errno = 0;
	v = strtod(s, &end);
	if (*end || errno || !isfinite(v))
		usage_error("%s: '%s' is not a number of seconds", opt, s);
	if (v <= 0 || v > MAX_SECONDS)
		usage_error("%s: must be more than 0 and at most %g seconds",
			    opt, MAX_SECONDS);
	return v;
}

static void parse_args(int argc, char **argv, struct options *o)
{
	bool have_duration = false;

	for (int i = 1; i < argc; i++) {
		char *arg = argv[i];
		char *value = NULL;
		char *eq = NULL;

		if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) {
			usage(stdout);
			exit(0);
		}
		if (strncmp(arg, "--", 2) != 0)
			usage_error("unexpected argument '%s'", arg);
		eq = strchr(arg, '=');
		if (eq) {
			*eq = '\0';
			value = eq + 1;
		}

		if (strcmp(arg, "--wait-traced") == 0) {
			/* The timeout is optional: take the next word only if
			 * it is not an option. */
			if (!value && i + 1 < argc && argv[i + 1][0] != '-')
				value = argv[++i];
			o->wait_traced = true;
			if (value)
				o->wait_timeout = parse_seconds(arg, value);
			continue;
		}

		if (strcmp(arg, "--scenario") && strcmp(arg, "--duration") &&
		    strcmp(arg, "--workers") && strcmp(arg, "--rate") &&
		    strcmp(arg, "--thread-churn") && strcmp(arg, "--fork") &&
		    strcmp(arg, "--time-polls"))
			usage_error("unknown option '%s'", arg);
		if (!value) {
			if (i + 1 >= argc)
				usage_error("%s needs a value", arg);
			value = argv[++i];
		}

		if (strcmp(arg, "--scenario") == 0) {
			o->scenario = value;
		} else if (strcmp(arg, "--duration") == 0) {
			o->duration = parse_seconds(arg, value);
			have_duration = true;
		} else if (strcmp(arg, "--workers") == 0) {
			o->workers = parse_count(arg, value, MAX_WORKERS);
		} else if (strcmp(arg, "--thread-churn") == 0) {
			o->thread_churn = parse_seconds(arg, value);
		} else if (strcmp(arg, "--time-polls") == 0) {
			o->time_polls = parse_seconds(arg, value);
		} else if (strcmp(arg, "--fork") == 0) {
			o->forks = parse_count(arg, value, 64);
		} else if (strcmp(value, "max") == 0) {
			o->rate = RATE_MAX;
		} else {
			o->rate = parse_count(arg, value, UINT32_MAX - 1);
		}
	}

	if (!o->scenario)
		usage_error("--scenario is required");
	if (!have_duration)
		usage_error("--duration is required");
}

static unsigned online_cpus(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	if (n < 1)
		return 1;
	return n > MAX_WORKERS ? MAX_WORKERS : (unsigned)n;
}

/*
 * Requests hold a pipe each while they wait, and a slow run (sanitizers,
 * valgrind) can have many waiting at once: ask for all the fds we may have.
 */
static void raise_fd_limit(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
		return;
	rl.rlim_cur = rl.rlim_max == RLIM_INFINITY ? 1 << 20 : rl.rlim_max;
	setrlimit(RLIMIT_NOFILE, &rl);
}

/*
 * Grow the fd table now, while we are the only thread. The kernel grows it
 * by doubling when an fd beyond it is opened, and in a threaded process it
 * then waits for an RCU grace period: a few ms inside whichever request poll
 * happened to call pipe2(), which would look like a long poll to a tracer.
 * Scenarios that keep many requests waiting (delay) hit several doublings.
 */
static void grow_fd_table(void)
{
	int fd = fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, FD_TABLE_PREGROW - 1);

	/* Best effort: with a low fd limit it just stays small. */
	if (fd >= 0)
		close(fd);
}

/*
 * Wait up to @ns for SIGINT or SIGTERM, which every thread blocks so that
 * only this sigtimedwait() ever sees them. True if one arrived.
 */
static bool wait_signal(const sigset_t *set, uint64_t ns)
{
	struct timespec ts = {
		.tv_sec = (time_t)(ns / NSEC_PER_SEC),
		.tv_nsec = (long)(ns % NSEC_PER_SEC),
	};

	return sigtimedwait(set, NULL, &ts) > 0;
}

enum traced_result {
	TRACED,
	TRACE_TIMEOUT,
	TRACE_INTERRUPTED,
};

/*
 * Wait until a tracer has attached all 7 probes: one still attaching does
 * not count yet, so the workload never starts with it seeing only a part.
 */
static enum traced_result wait_for_tracer(const sigset_t *set, double timeout)
{
	uint64_t deadline = now_ns() + (uint64_t)(timeout * NSEC_PER_SEC);

	while (!probes_attached()) {
		if (now_ns() >= deadline)
			return TRACE_TIMEOUT;
		if (wait_signal(set, NSEC_PER_MSEC))
			return TRACE_INTERRUPTED;
	}
	fprintf(stderr, "sample-executor: traced\n");
	return TRACED;
}

/*
 * --fork: this process (traced first, with --wait-traced) forks the
 * children that run the workload, before any thread exists, and waits for
 * them. Returns -1 in each child (which goes on to run it), else the exit
 * status: 0 when every child exited 0.
 */
static int fork_children(struct options *o, const sigset_t *set)
{
	int status, ret = 0;
	unsigned n = 0;

	if (o->wait_traced && wait_for_tracer(set, o->wait_timeout) != TRACED)
		fatal("--wait-traced: no tracer attached all 7 probes within %g s",
		      o->wait_timeout);
	for (; n < o->forks; n++) {
		pid_t pid = fork();

		if (pid < 0)
			fatal("fork: %s", strerror(errno));
		if (pid == 0) {
			/*
			 * A tracer attaches to it as to any process forked; it
			 * does not wait: the semaphores it inherited are raised
			 * already, whether or not its own probes are attached.
			 */
			o->forks = 0;
			o->wait_traced = false;
			return -1;
		}
	}
	while (n--) {
		if (wait(&status) < 0)
			fatal("wait: %s", strerror(errno));
		if (!WIFEXITED(status) || WEXITSTATUS(status))
			ret = 1;
	}
	return ret;
}

/* Run until the duration is over or a signal asks us to stop. */
static void run_for(const sigset_t *set, double duration)
{
	uint64_t end = now_ns() + (uint64_t)(duration * NSEC_PER_SEC);
	uint64_t now;

	while ((now = now_ns()) < end)
		if (wait_signal(set, end - now))
			return;
}

int main(int argc, char **argv)
{
	struct options o = { .wait_timeout = DEFAULT_WAIT_TIMEOUT };
	const struct scenario *sc;
	struct runtime_config cfg;
	struct runtime_stats st;
	uint64_t start, elapsed = 0;
	bool run = true;
	sigset_t stop_signals;

	parse_args(argc, argv, &o);
	sc = scenario_find(o.scenario);
	if (!sc) {
		fprintf(stderr,
			"sample-executor: unknown scenario '%s'; one of:",
			o.scenario);
		for (unsigned i = 0; i < nscenarios; i++)
			fprintf(stderr, " %s", scenarios[i].name);
		fputc('\n', stderr);
		return EXIT_USAGE;
	}
	if (!o.rate)
		o.rate = sc->default_rate;
	if (o.rate == RATE_MAX)
		o.rate = sc->max_rate;
	if (o.rate > sc->max_rate)
		usage_error("--rate: %u is out of range for %s (1..%u: %s)",
			    o.rate, sc->name, sc->max_rate, sc->rate_help);
	if (!o.workers)
		o.workers = online_cpus();

	raise_fd_limit();
	grow_fd_table();
	signal(SIGPIPE, SIG_IGN);
	/* Block before any thread exists, so all of them inherit the mask. */
	sigemptyset(&stop_signals);
	sigaddset(&stop_signals, SIGINT);
	sigaddset(&stop_signals, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &stop_signals, NULL);
	if (o.forks) {
		int ret = fork_children(&o, &stop_signals);

		if (ret >= 0)
			return ret;
	}

	cfg = (struct runtime_config){
		.workers = o.workers,
		.steal = sc->steal,
		.unpark_on_local_push = sc->unpark_on_local_push,
		.lazy_unpark_ns = sc->lazy_unpark_ns,
		.thread_churn_ns = (uint64_t)(o.thread_churn * NSEC_PER_SEC),
		.time_polls_ns = (uint64_t)(o.time_polls * NSEC_PER_SEC),
	};
	rt_start(&cfg);
	fprintf(stderr, "sample-executor: pid %d scenario %s workers %u\n",
		(int)getpid(), sc->name, o.workers);

	if (o.wait_traced) {
		switch (wait_for_tracer(&stop_signals, o.wait_timeout)) {
		case TRACED:
			break;
		case TRACE_TIMEOUT:
			rt_stop();
			rt_destroy();
			fatal("--wait-traced: no tracer attached all 7 probes within %g s",
			      o.wait_timeout);
		case TRACE_INTERRUPTED:
			run = false;
			break;
		}
	}

	if (run) {
		rt_go();
		start = now_ns();
		sc->start(o.rate);
		run_for(&stop_signals, o.duration);
		elapsed = now_ns() - start;
	}

	rt_stop();
	if (run && sc->stop)
		sc->stop();
	rt_destroy();
	if (run && sc->cleanup)
		sc->cleanup();

	rt_get_stats(&st);
	if (cfg.thread_churn_ns)
		rt_print_threads(stdout);
	rt_print_long_polls(stdout);
	printf("sample-executor: scenario=%s workers=%u duration=%.2f "
	       "tasks=%llu polls=%llu wakes=%llu steals=%llu stolen=%llu "
	       "parks=%llu unpolled=%llu polls_per_s=%.0f\n",
	       sc->name, o.workers, (double)elapsed / NSEC_PER_SEC,
	       (unsigned long long)st.tasks, (unsigned long long)st.polls,
	       (unsigned long long)st.wakes, (unsigned long long)st.steals,
	       (unsigned long long)st.stolen, (unsigned long long)st.parks,
	       (unsigned long long)st.unpolled,
	       elapsed ? (double)st.polls * NSEC_PER_SEC / (double)elapsed : 0.0);
	return fflush(stdout) == 0 ? 0 : 1;
}
