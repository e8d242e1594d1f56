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
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
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
	CHECK(15, sandbox__filter(0, -1, 0) == 0);
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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sandbox_refuses_loudly),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
