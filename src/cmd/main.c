// SPDX-License-Identifier: MIT
/*
 * asynctraced: trace an async executor from the outside.
 *
 *   sudo asynctraced -p PID [-d SECONDS] [-o FILE] [--no-trace]
 *   sudo asynctraced record -p PID -o CAPTURE       (src/session/)
 *        asynctraced convert CAPTURE [-o FILE]     (src/cmd/convert.c)
 *   sudo asynctraced run [options] -- CMD [ARGS]   (src/cmd/run.c)
 *   sudo asynctraced probe-rules                   (src/source/probe_learn.c)
 *   sudo asynctraced tasks [-p PID] [--json]       (src/cmd/tasks.c)
 *
 * Only parses the command line and hands it to the command.
 */
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include <bpf/libbpf.h>

#include "analyser/analyser.h"
#include "cmd/convert.h"
#include "cmd/options.h"
#include "cmd/run.h"
#include "cmd/tasks.h"
#include "lib/util.h"
#include "session/session.h"
#include "source/probe_learn.h"

static bool verbose;

static int libbpf_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	if (!verbose || level == LIBBPF_DEBUG)
		return 0;
	return vfprintf(stderr, fmt, ap);
}

int main(int argc, char **argv)
{
	struct options o;
	mode_t user_umask;
	int err;

	log_init();
	/* asynctraced's own analyser (analyser.h), started by it with its socket */
	if (argc == 2 && !strcmp(argv[1], ANALYSER_ARG))
		return analyser__main();
	err = options__parse(argc, argv, &o);

	if (err)
		return err < 0 ? EXIT_OK : err;
	/* every file it creates: 0600 unless --umask says otherwise (run's command keeps its own) */
	user_umask = umask(o.umask);
	if (o.command == CMD_CONVERT)
		return convert__run(&o);
	if (o.command == CMD_PROBE_RULES)
		return probe_learn__print(stdout) ? EXIT_FAIL : EXIT_OK;
	if (o.command == CMD_TASKS)
		return tasks__main(&o);
	nofile_raise(); /* a uprobe is a file descriptor, and tokio has many */
	verbose = o.session.verbose;
	libbpf_set_print(libbpf_print);
	if (o.command == CMD_RUN)
		return run__main(&o, user_umask);
	return session__run(&o.session);
}
