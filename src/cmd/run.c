// SPDX-License-Identifier: MIT
#include "cmd/run.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "gate/gate.h"
#include "gate/launch.h"
#include "lib/outbuf.h"
#include "lib/util.h"
#include "session/session.h"

struct run {
	struct launch launch;
	struct gate gate;
	size_t summaries;	/* processes whose summary was judged */
	bool several;		/* --follow-children: gates name their process */
};

static void release(void *ctx)
{
	struct run *r = ctx;

	launch__release(&r->launch);
}

static void summary(void *ctx, const char *json, size_t len)
{
	struct run *r = ctx;

	(void)len;
	gate__judge(&r->gate, json, r->several);
	r->summaries++;
}

/*
 * --junit FILE, opened (and emptied) before anything runs, as a trace is
 * opened: the tracer's side of run writes nothing it did not open before its
 * seccomp filter. NULL after a message.
 */
static FILE *open_junit(const char *path)
{
	int fd = outbuf__open_file(path);
	FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;

	if (!f) {
		err_msg("cannot write '%s': %s\n", path, outbuf__strerror(fd < 0 ? fd : -errno));
		if (fd >= 0)
			close(fd);
	}
	return f;
}

/* The gates, for CI systems to show. */
static int write_junit(const struct run *r, FILE *f, const char *path, double seconds)
{
	int err = gate__junit(&r->gate, f, seconds);

	if (fclose(f) || err) {
		err_msg("failed to write '%s'\n", path);
		return EXIT_FAIL;
	}
	return EXIT_OK;
}

int run__main(struct options *o, mode_t user_umask)
{
	struct run r = { .several = o->follow_children };
	struct session_hooks hooks = { .release = release, .summary = summary, .ctx = &r };
	struct launch_user user;
	uint64_t begin = now_ns();
	enum gate_verdict verdict;
	FILE *junit = NULL;
	char why[1024];
	int traced, status, err;

	if (launch__user(&user, o->user)) {
		err_msg("invalid --user '%s': no such user\n", o->user);
		return EXIT_USAGE;
	}
	user.umask = user_umask;
	err = gate__init(&r.gate, &o->gate, why, sizeof(why));
	if (err) {
		err_msg("%s\n", why);
		launch__user_free(&user);
		return err == -EINVAL ? EXIT_USAGE : EXIT_FAIL;
	}
	/* a --junit that cannot be written is said before anything runs */
	if (o->junit && !(junit = open_junit(o->junit))) {
		gate__free(&r.gate);
		launch__user_free(&user);
		return EXIT_FAIL;
	}
	/*
	 * Following its children: those whose parent exits (a daemon's double
	 * fork, `server &` in a script) become ours, not init's, and so are still
	 * known as the command's (scan.h's ancestry)
	 */
	if (o->follow_children && prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0))
		warn_msg("cannot adopt the command's orphans: %s\n", strerror(errno));
	status = launch__start(&r.launch, o->cmd, &user);
	launch__user_free(&user);
	if (status) {
		if (junit)
			fclose(junit);
		gate__free(&r.gate);
		return status;
	}
	hooks.root = r.launch.pid;
	if (!o->follow_children) {
		o->session.pids[0] = r.launch.pid;
		o->session.nr_pids = 1;
	}
	traced = session__run_with(&o->session, &hooks);
	/* stopped by a signal (a CI job's timeout): the command, untraced now, goes too */
	if (hooks.stopped_by && r.launch.pid)
		kill(r.launch.pid, hooks.stopped_by);
	if (r.summaries && !o->session.out.quiet)
		info_msg("'%s' was held %.1f ms at its entry point while the probes were attached\n",
			 o->cmd[0], (double)r.launch.held_ns / 1e6);
	/* tracing failed or never began: the command still runs, to its end */
	status = launch__wait(&r.launch);
	if (!r.summaries)
		gate__nothing(&r.gate, "nothing was traced: the command ran no known runtime, or "
				       "tracing it failed (said above)");
	verdict = gate__verdict(&r.gate);
	if (o->gate.given) {
		info_msg("gates for '%s'%s:\n", o->cmd[0],
			 status ? " (the command itself failed)" : "");
		gate__print(&r.gate, stderr);
		if (getenv("GITHUB_ACTIONS") && !strcmp(getenv("GITHUB_ACTIONS"), "true"))
			gate__annotate(&r.gate, stdout);
	}
	if (junit && write_junit(&r, junit, o->junit, (double)(now_ns() - begin) / 1e9))
		traced = EXIT_FAIL;
	gate__free(&r.gate);
	if (status) {
		info_msg("'%s' exited with status %d\n", o->cmd[0], status);
		return status;
	}
	if (o->gate.given && verdict == GATE_UNKNOWN)
		return EXIT_GATE_UNKNOWN;
	if (o->gate.given && verdict == GATE_FAIL)
		return EXIT_GATE_FAILED;
	return traced;
}
