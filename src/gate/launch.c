// SPDX-License-Identifier: MIT
#include "gate/launch.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/exits.h"
#include "lib/util.h"

/* Its exit status as a shell says it: 128 + N when killed by signal N. */
static int shell_status(int st)
{
	if (WIFSIGNALED(st))
		return 128 + WTERMSIG(st);
	return WIFEXITED(st) ? WEXITSTATUS(st) : EXIT_FAIL;
}

#ifdef __x86_64__
/* The program's entry point, from its auxiliary vector. */
static int entry_of(pid_t pid, uint64_t *entry)
{
	char path[64];
	uint64_t av[2];
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/auxv", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	while (read(fd, av, sizeof(av)) == sizeof(av) && av[0] != AT_NULL)
		if (av[0] == AT_ENTRY) {
			*entry = av[1];
			close(fd);
			return 0;
		}
	close(fd);
	return -ENOENT;
}

/*
 * Waits for l's process to stop with SIGTRAP, passing on any other signal.
 * 0, or -ECHILD if it ended (reaped: its status in l->status).
 */
static int until_trap(struct launch *l)
{
	pid_t pid = l->pid;
	int st;

	for (;;) {
		if (waitpid(pid, &st, 0) < 0)
			return -errno;
		if (!WIFSTOPPED(st)) {
			l->status = shell_status(st);
			l->pid = 0;
			l->held = false;
			return -ECHILD;
		}
		if (WSTOPSIG(st) == SIGTRAP)
			return 0;
		/* a signal it was sent meanwhile: delivered as it would have been */
		if (ptrace(PTRACE_CONT, pid, 0, (void *)(long)WSTOPSIG(st)))
			return -errno;
	}
}

/*
 * Stopped just after its execve (PTRACE_TRACEME): on to its entry point, by
 * a breakpoint put there and taken out again, the instruction pointer set
 * back on it. A static program (Go) starts at its entry point; a dynamic one
 * has by then its libraries mapped, and a runtime in one of them is found.
 */
static int to_entry(struct launch *l)
{
	pid_t pid = l->pid;
	struct user_regs_struct regs;
	uint64_t entry = 0;
	long word;
	int err;

	err = entry_of(pid, &entry);
	if (err)
		return err;
	errno = 0;
	word = ptrace(PTRACE_PEEKTEXT, pid, (void *)entry, 0);
	if (errno)
		return -errno;
	if (ptrace(PTRACE_POKETEXT, pid, (void *)entry, (void *)((word & ~0xffl) | 0xcc)) ||
	    ptrace(PTRACE_CONT, pid, 0, 0))
		return -errno;
	err = until_trap(l);
	if (err)
		return err;
	if (ptrace(PTRACE_GETREGS, pid, 0, &regs))
		return -errno;
	if (regs.rip != entry + 1)
		return -EPROTO; /* a trap elsewhere: not ours */
	regs.rip = entry;
	if (ptrace(PTRACE_SETREGS, pid, 0, &regs) ||
	    ptrace(PTRACE_POKETEXT, pid, (void *)entry, (void *)word))
		return -errno;
	return 0;
}
#endif

static bool numeric(const char *s, unsigned long *v)
{
	char *end;

	errno = 0;
	*v = strtoul(s, &end, 10);
	return *s && !*end && !errno && *v < (uid_t)-1;
}

int launch__user(struct launch_user *u, const char *user)
{
	const char *sudo_uid = getenv("SUDO_UID");
	struct passwd *pw;
	unsigned long id;

	memset(u, 0, sizeof(*u));
	if (!user && (!sudo_uid || !numeric(sudo_uid, &id) || id == getuid()))
		return 0; /* as asynctraced runs */
	if (!user || numeric(user, &id)) {
		pw = getpwuid((uid_t)id);
	} else {
		pw = getpwnam(user);
		if (!pw)
			return -ENOENT;
	}
	u->change = true;
	u->uid = (uid_t)id;
	if (pw) {
		u->uid = pw->pw_uid;
		u->gid = pw->pw_gid;
		u->name = strdup(pw->pw_name);
		u->home = strdup(pw->pw_dir);
	} else {
		/* a uid with no passwd entry: sudo's group, else the uid's number */
		const char *g = user ? NULL : getenv("SUDO_GID");

		u->gid = g && numeric(g, &id) ? (gid_t)id : (gid_t)u->uid;
	}
	return 0;
}

void launch__user_free(struct launch_user *u)
{
	free(u->name);
	free(u->home);
	memset(u, 0, sizeof(*u));
}

/*
 * In the child, before its exec: the user it runs as (groups first, while
 * it may still change them), no_new_privs, and the umask the user had. 0 or
 * an errno.
 */
static int become(const struct launch_user *u)
{
	if (u->change) {
		if (u->name ? initgroups(u->name, u->gid) : setgroups(0, NULL))
			return errno;
		if (setresgid(u->gid, u->gid, u->gid) || setresuid(u->uid, u->uid, u->uid))
			return errno;
		if (u->home)
			setenv("HOME", u->home, 1);
		if (u->name) {
			setenv("USER", u->name, 1);
			setenv("LOGNAME", u->name, 1);
		}
	}
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
		return errno;
	umask(u->umask);
	return 0;
}

#ifndef __x86_64__
int launch__start(struct launch *l, char *const argv[], const struct launch_user *u)
{
	(void)argv;
	(void)u;
	l->pid = 0;
	l->held = false;
	err_msg("run holds its command at its entry point by an x86-64 breakpoint: not on this "
		"architecture yet\n");
	return EXIT_FAIL;
}
#else
int launch__start(struct launch *l, char *const argv[], const struct launch_user *u)
{
	/* what the child reports when it cannot become the command: where, and errno */
	struct {
		int becoming;
		int err;
	} fail = { 0, 0 };
	int pfd[2], err = 0;
	ssize_t n;
	pid_t pid;

	memset(l, 0, sizeof(*l));
	if (pipe2(pfd, O_CLOEXEC)) {
		err_msg("cannot start '%s': %s\n", argv[0], strerror(errno));
		return EXIT_FAIL;
	}
	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		err_msg("cannot start '%s': %s\n", argv[0], strerror(errno));
		close(pfd[0]);
		close(pfd[1]);
		return EXIT_FAIL;
	}
	if (!pid) {
		/* the child: traced, then the command (the pipe closes on success) */
		close(pfd[0]);
		nofile_restore(); /* the command gets the limits it would without us */
		fail.err = become(u);
		fail.becoming = fail.err != 0;
		if (!fail.err && !ptrace(PTRACE_TRACEME, 0, 0, 0))
			execvp(argv[0], argv);
		if (!fail.err)
			fail.err = errno;
		if (write(pfd[1], &fail, sizeof(fail)) < 0)
			_exit(EXIT_FAIL);
		_exit(fail.err == ENOENT ? EXIT_NOT_FOUND : EXIT_CANNOT_EXEC);
	}
	close(pfd[1]);
	n = read(pfd[0], &fail, sizeof(fail));
	close(pfd[0]);
	if (n == sizeof(fail)) {
		waitpid(pid, NULL, 0);
		if (fail.becoming) {
			err_msg("cannot run '%s' as uid %u: %s\n", argv[0], (unsigned)u->uid,
				strerror(fail.err));
			return EXIT_FAIL;
		}
		err_msg("cannot run '%s'%s%s: %s\n", argv[0], u->change ? " as " : "",
			u->change ? (u->name ? u->name : "that user") : "",
			fail.err == ENOENT ? "command not found" : strerror(fail.err));
		return fail.err == ENOENT ? EXIT_NOT_FOUND : EXIT_CANNOT_EXEC;
	}
	l->pid = pid;
	l->held = true;
	err = until_trap(l);
	if (!err) {
		/* if asynctraced dies while it holds the command, the command goes too */
		ptrace(PTRACE_SETOPTIONS, pid, 0, (void *)(long)PTRACE_O_EXITKILL);
		err = to_entry(l);
	}
	l->held_at = now_ns();
	if (err == -ECHILD) {
		/* it ended before its own code ran (its dynamic loader failed): its status */
		err_msg("'%s' exited before its entry point, with status %d\n", argv[0], l->status);
		return l->status ? l->status : EXIT_FAIL;
	}
	if (err) {
		err_msg("cannot hold '%s' at its entry point: %s\n", argv[0], strerror(-err));
		l->held = false;
		kill(pid, SIGKILL);
		launch__wait(l);
		return EXIT_FAIL;
	}
	return 0;
}

#endif

void launch__release(struct launch *l)
{
	if (!l->held)
		return;
	l->held = false;
	l->held_ns = now_ns() - l->held_at;
	if (ptrace(PTRACE_DETACH, l->pid, 0, 0))
		warn_msg("cannot let pid %d go: %s\n", l->pid, strerror(errno));
}

int launch__wait(struct launch *l)
{
	int st;

	if (!l->pid)
		return EXIT_FAIL;
	launch__release(l);
	while (waitpid(l->pid, &st, 0) < 0)
		if (errno != EINTR)
			return EXIT_FAIL;
	l->pid = 0;
	return shell_status(st);
}
