// SPDX-License-Identifier: MIT
/*
 * The sandbox, entered in a child process (it cannot be left): capabilities
 * gone and no_new_privs set; what the loop needs still works (threads, reads,
 * read-only opens, memory); what it does not need fails with EPERM, is said
 * on stderr and counted by name. Needs no root: an unprivileged process may
 * drop what it has and filter itself once no_new_privs is set.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <unistd.h>

#include <cmocka.h>

#include "lib/sandbox.h"

/* A line of /proc/self/status, e.g. "CapEff:\t0000000000000000". */
static int status_line(const char *key, char *out, size_t len)
{
	char line[256];
	FILE *f = fopen("/proc/self/status", "re");
	int found = -1;

	if (!f)
		return -1;
	while (found && fgets(line, sizeof(line), f))
		if (!strncmp(line, key, strlen(key)) && line[strlen(key)] == ':') {
			snprintf(out, len, "%s", line + strlen(key) + 1);
			out[strcspn(out, "\n")] = '\0';
			found = 0;
		}
	fclose(f);
	return found;
}

static void *thread_fn(void *arg)
{
	return arg;
}

/* Each check in the child: its number is the exit status when it fails. */
#define CHECK(n, cond)                                                                             \
	do {                                                                                       \
		if (!(cond))                                                                       \
			_exit(n);                                                                  \
	} while (0)

/* fn, run in a child (which it ends with _exit), exits 0: its CHECKs all held. */
static void passes_in_a_child(void (*fn)(void))
{
	int status;
	pid_t pid = fork();

	assert_true(pid >= 0);
	if (pid == 0)
		fn();
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

static void sandboxed_child(void)
{
	char v[64], names[256], path[] = "/tmp/at-sandbox-XXXXXX";
	struct winsize ws;
	pthread_t th;
	void *ret = NULL, *p;
	int fd;

	CHECK(10, sandbox__drop_privileges(0) == 0);
	CHECK(11, status_line("CapEff", v, sizeof(v)) == 0 && !strcmp(v, "\t0000000000000000"));
	CHECK(12, status_line("CapPrm", v, sizeof(v)) == 0 && !strcmp(v, "\t0000000000000000"));
	CHECK(13, status_line("NoNewPrivs", v, sizeof(v)) == 0 && !strcmp(v, "\t1"));
	fd = mkstemp(path); /* made before the filter, written after */
	CHECK(14, fd >= 0);
	CHECK(15, sandbox__filter(0, -1, 0, 0) == 0);
	CHECK(16, status_line("Seccomp", v, sizeof(v)) == 0 && !strcmp(v, "\t2"));

	/* what the loop and the shutdown do */
	CHECK(20, pthread_create(&th, NULL, thread_fn, path) == 0);
	CHECK(21, pthread_join(th, &ret) == 0 && ret == path);
	CHECK(22, write(fd, "x", 1) == 1);
	p = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(23, p != MAP_FAILED);
	CHECK(24, munmap(p, 1 << 20) == 0);
	/* a terminal and its size, for the live view and the report (a file is none) */
	CHECK(25, ioctl(fd, TIOCGWINSZ, &ws) < 0 && errno == ENOTTY);
	CHECK(26, !isatty(fd) && errno == ENOTTY);

	/* what it does not: each refused with EPERM, and counted */
	CHECK(30, socket(AF_INET, SOCK_STREAM, 0) < 0 && errno == EPERM);
	CHECK(31, open(path, O_WRONLY) < 0 && errno == EPERM);
	CHECK(32, open("/tmp/at-sandbox-new", O_RDONLY | O_CREAT, 0600) < 0 && errno == EPERM);
	CHECK(33, mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) ==
			  MAP_FAILED &&
		  errno == EPERM);
	CHECK(34, fork() < 0 && errno == EPERM);
	CHECK(35, socket(AF_UNIX, SOCK_STREAM, 0) < 0 && errno == EPERM);
	CHECK(36, sandbox__refused(names, sizeof(names)) == 6);
	CHECK(37, strstr(names, "socket x2") && strstr(names, "openat x2") &&
			  strstr(names, "mmap x1") && strstr(names, "clone x1"));
	close(fd);
	_exit(0);
}

static void test_sandbox_refuses_loudly(void **state)
{
	char err[4096] = "", want[160], path[] = "/tmp/at-sandbox-err-XXXXXX";
	int fd = mkstemp(path), status;
	pid_t pid;
	ssize_t n;

	(void)state;
	assert_true(fd >= 0);
	unlink(path);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		dup2(fd, STDERR_FILENO);
		sandboxed_child();
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	n = pread(fd, err, sizeof(err) - 1, 0);
	assert_true(n > 0);
	err[n] = '\0';
	/* said once per call, as it happened */
	snprintf(want, sizeof(want),
		 "asynctraced: the sandbox refused system call %d (a bug: please report it; "
		 "--no-sandbox turns the sandbox off)\n",
		 SYS_socket);
	assert_non_null(strstr(err, want));
	assert_null(strstr(strstr(err, want) + 1, want));
	close(fd);
}

/*
 * --metrics (SANDBOX_SERVE): what libmicrohttpd's epoll thread does on
 * sockets made before the filter works (accept, read, answer, TCP_NODELAY,
 * shut down, epoll); making, binding, connecting or listening on a socket,
 * any socket option but TCP's, fcntl, and removing the unix socket do not.
 */
static void serving_child(void)
{
	struct sockaddr_un un = { .sun_family = AF_UNIX };
	struct sockaddr_in in = { .sin_family = AF_INET,
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct epoll_event ev = { .events = EPOLLIN }, got;
	socklen_t in_len = sizeof(in);
	char names[256], buf[8];
	int lu, cu, lt, ct, spare, su, st, ep, one = 1;

	/* before the filter: a unix and a TCP listener, each with a client queued */
	snprintf(un.sun_path, sizeof(un.sun_path), "/tmp/at-sandbox-%d.sock", (int)getpid());
	lu = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	cu = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	CHECK(40, lu >= 0 && cu >= 0 && !bind(lu, (struct sockaddr *)&un, sizeof(un)) &&
			  !listen(lu, 4) && !connect(cu, (struct sockaddr *)&un, sizeof(un)));
	lt = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	ct = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	CHECK(41, lt >= 0 && ct >= 0 && !bind(lt, (struct sockaddr *)&in, sizeof(in)) &&
			  !listen(lt, 4) && !getsockname(lt, (struct sockaddr *)&in, &in_len) &&
			  !connect(ct, (struct sockaddr *)&in, sizeof(in)));
	spare = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	CHECK(42, spare >= 0 && sandbox__drop_privileges(0) == 0);
	CHECK(43, sandbox__filter(SANDBOX_SERVE, -1, 0, 0) == 0);

	ep = epoll_create1(EPOLL_CLOEXEC);
	CHECK(50, ep >= 0 && !epoll_ctl(ep, EPOLL_CTL_ADD, lu, &ev) &&
			  epoll_wait(ep, &got, 1, 1000) == 1);
	su = accept4(lu, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	st = accept4(lt, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	CHECK(51, su >= 0 && st >= 0);
	CHECK(52, write(cu, "GET", 3) == 3 && recv(su, buf, sizeof(buf), 0) == 3);
	CHECK(53, send(su, "200", 3, MSG_NOSIGNAL) == 3 && read(cu, buf, sizeof(buf)) == 3);
	CHECK(54, !setsockopt(st, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)));
	CHECK(55, !shutdown(su, SHUT_WR) && !shutdown(st, SHUT_WR));

	CHECK(60, socket(AF_UNIX, SOCK_STREAM, 0) < 0 && errno == EPERM);
	CHECK(61, bind(spare, (struct sockaddr *)&un, sizeof(un)) < 0 && errno == EPERM);
	CHECK(62, connect(spare, (struct sockaddr *)&un, sizeof(un)) < 0 && errno == EPERM);
	CHECK(63, listen(spare, 4) < 0 && errno == EPERM);
	CHECK(64, setsockopt(st, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 &&
			  errno == EPERM);
	CHECK(65, fcntl(su, F_GETFL) < 0 && errno == EPERM);
	CHECK(66, unlink(un.sun_path) < 0 && errno == EPERM);
	CHECK(67, sandbox__refused(names, sizeof(names)) == 7);
	CHECK(68, strstr(names, "socket x1") && strstr(names, "bind x1") &&
			  strstr(names, "connect x1") && strstr(names, "listen x1") &&
			  strstr(names, "setsockopt x1") && strstr(names, "fcntl x1") &&
			  strstr(names, "unlink x1"));
	_exit(0);
}

static void test_sandbox_serves_metrics_only(void **state)
{
	char path[64];
	int status;
	pid_t pid;

	(void)state;
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		int null = open("/dev/null", O_WRONLY);

		dup2(null, STDERR_FILENO); /* the refusals are said: not here */
		serving_child();
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	snprintf(path, sizeof(path), "/tmp/at-sandbox-%d.sock", (int)pid);
	unlink(path);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

/*
 * run's rules: its command (a child made before the filter) may be let go,
 * signalled and waited for; no other process may be signalled or waited for.
 */
static void run_child(void)
{
	char names[256];
	pid_t parent = getppid(), cmd = fork();
	int status;

	if (!cmd) { /* the command: waits to be killed */
		pause();
		_exit(0);
	}
	CHECK(50, cmd > 0);
	CHECK(51, sandbox__drop_privileges(0) == 0);
	CHECK(52, sandbox__filter(SANDBOX_CHILD, -1, cmd, 0) == 0);
	CHECK(53, kill(cmd, 0) == 0);
	CHECK(54, kill(parent, 0) < 0 && errno == EPERM);
	CHECK(55, waitpid(-1, NULL, WNOHANG) < 0 && errno == EPERM);
	CHECK(56, kill(cmd, SIGKILL) == 0 && waitpid(cmd, &status, 0) == cmd);
	CHECK(57, WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	CHECK(58, sandbox__refused(names, sizeof(names)) == 2);
	CHECK(59, strstr(names, "kill x1") && strstr(names, "wait4 x1"));
	_exit(0);
}

static void test_sandbox_run_reaches_its_command_alone(void **state)
{
	(void)state;
	passes_in_a_child(run_child);
}

/*
 * --stacks' rules: the analyser that unwinds (a child made before the
 * filter) is talked to over its socket, killed and waited for; no other
 * process is, and no file outside /proc is read (the analyser reads them).
 */
static void stacks_child(void)
{
	char names[256], got[4];
	pid_t parent = getppid(), ana;
	long landlock = syscall(SYS_landlock_create_ruleset, NULL, 0, 1 /* the version */);
	int sv[2], status;

	CHECK(70, socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
	ana = fork();
	if (!ana) { /* the analyser: echoes, then waits to be killed */
		CHECK(71, read(sv[1], got, 4) == 4 && write(sv[1], got, 4) == 4);
		pause();
		_exit(0);
	}
	CHECK(72, ana > 0);
	CHECK(73, sandbox__drop_privileges(0) == 0);
	CHECK(74, sandbox__filter(SANDBOX_STACKS, -1, 0, ana) == 0);
	CHECK(75, send(sv[0], "ping", 4, MSG_NOSIGNAL) == 4);
	CHECK(76, recv(sv[0], got, 4, 0) == 4 && !memcmp(got, "ping", 4));
	CHECK(77, poll(&(struct pollfd){ .fd = sv[0], .events = POLLOUT }, 1, 0) == 1);
	CHECK(78, kill(parent, 0) < 0 && errno == EPERM);
	/* refused by Landlock, where the kernel has it */
	CHECK(79, landlock < 1 || open("/usr/lib/os-release", O_RDONLY | O_CLOEXEC) < 0);
	CHECK(80, kill(ana, SIGKILL) == 0 && waitpid(ana, &status, 0) == ana);
	CHECK(81, WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	CHECK(82, sandbox__refused(names, sizeof(names)) == 1);
	CHECK(83, strstr(names, "kill x1") != NULL);
	_exit(0);
}

static void test_sandbox_stacks_reach_their_analyser_alone(void **state)
{
	(void)state;
	passes_in_a_child(stacks_child);
}

/*
 * --dump-dir's rules: files made, written, renamed and removed in the dump
 * directory, through its descriptor; an absolute path passes the seccomp
 * rule (it sees the descriptor, not the path), and Landlock refuses it, as
 * it refuses reading anything but /proc.
 */
static char dump_dir[] = "/tmp/at-sandbox-dumps-XXXXXX";

static void dumps_child(void)
{
	char outside[64];
	int dirfd = open(dump_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), fd;

	snprintf(outside, sizeof(outside), "/tmp/at-sandbox-outside-%d", (int)getpid());
	CHECK(60, dirfd >= 0);
	CHECK(61, sandbox__drop_privileges(0) == 0);
	CHECK(62, sandbox__filter(SANDBOX_DUMPS, dirfd, 0, 0) == 0);
	fd = openat(dirfd, ".d.tmp", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	CHECK(63, fd >= 0 && write(fd, "x", 1) == 1);
	close(fd);
	CHECK(64, renameat(dirfd, ".d.tmp", dirfd, "d") == 0);
	CHECK(65, unlinkat(dirfd, "d", 0) == 0);
	CHECK(66, openat(dirfd, outside, O_WRONLY | O_CREAT | O_CLOEXEC, 0600) < 0 &&
			  errno == EACCES);
	CHECK(67, access(outside, F_OK) < 0);
	CHECK(68, openat(dirfd, "/etc/passwd", O_RDONLY | O_CLOEXEC) < 0 && errno == EACCES);
	fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
	CHECK(69, fd >= 0);
	close(fd);
	_exit(0);
}

static void test_sandbox_dumps_stay_in_their_directory(void **state)
{
	long abi = syscall(SYS_landlock_create_ruleset, NULL, 0, 1 /* the version */);

	(void)state;
	if (abi < 1)
		skip(); /* no Landlock in this kernel: the seccomp rule alone (docs/security.md) */
	assert_non_null(mkdtemp(dump_dir));
	passes_in_a_child(dumps_child);
	rmdir(dump_dir);
}

/* Every option's rules together: libseccomp takes the overlapping fcntl rules. */
static void test_sandbox_every_option(void **state)
{
	int status;
	pid_t pid;

	(void)state;
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(sandbox__drop_privileges(0) ||
		      sandbox__filter(SANDBOX_SERVE | SANDBOX_DUMPS | SANDBOX_STACKS | SANDBOX_CHILD,
				      open("/tmp", O_RDONLY | O_DIRECTORY), getppid(), getpid()) ||
		      fcntl(0, F_GETFD) < 0);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sandbox_refuses_loudly),
		cmocka_unit_test(test_sandbox_serves_metrics_only),
		cmocka_unit_test(test_sandbox_run_reaches_its_command_alone),
		cmocka_unit_test(test_sandbox_stacks_reach_their_analyser_alone),
		cmocka_unit_test(test_sandbox_dumps_stay_in_their_directory),
		cmocka_unit_test(test_sandbox_every_option),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
