// SPDX-License-Identifier: MIT
/*
 * The privileged side of the analyser: starts it (fork, then exec of our
 * own executable as another user), hands it a process's files, and takes
 * back a plan, under a watchdog. An analyser that dies or hangs is killed
 * and started again, and the file it was reading is left out.
 */
#include "analyser/analyser.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "analyser/plan.h"
#include "analyser/wire.h"
#include "lib/util.h"

/* Tries at one process: each failure leaves one file out. */
#define ATTEMPTS 4

/* Who it runs as, when started by root: its own user if made, else nobody. */
static void pick_user(struct analyser *a)
{
	static const char *const users[] = { "asynctraced", "nobody" };

	a->uid = (uid_t)-1;
	a->gid = (gid_t)-1;
	if (geteuid() != 0)
		return; /* not root: it runs as we do, without our capabilities */
	for (size_t i = 0; i < sizeof(users) / sizeof(users[0]); i++) {
		const struct passwd *pw = getpwnam(users[i]);

		if (pw && pw->pw_uid != 0) {
			a->uid = pw->pw_uid;
			a->gid = pw->pw_gid;
			return;
		}
	}
	a->uid = 65534; /* nobody's number, when no passwd names it */
	a->gid = 65534;
}

/* In the child, between fork and exec: only calls safe there. */
static void become_analyser(const struct analyser *a, int sock, int devnull)
{
	static char *const argv[] = { "asynctraced", ANALYSER_ARG, NULL };
	static char *const envp[] = { NULL };

	/* stderr stays: its warnings (a file it skips, with -v why) are ours */
	if (dup2(devnull, STDIN_FILENO) < 0 || dup2(devnull, STDOUT_FILENO) < 0)
		_exit(127);
	if (sock == ANALYSER_FD ? fcntl(sock, F_SETFD, 0) : dup2(sock, ANALYSER_FD) < 0)
		_exit(127);
	/* nothing else of ours: no ring, no map, no target's file, no output */
	if (close_range(ANALYSER_FD + 1, ~0U, 0))
		_exit(127);
	/* a bounding set with nothing in it, where we may empty it (CAP_SETPCAP) */
	for (int cap = 0; cap <= CAP_LAST_CAP; cap++)
		prctl(PR_CAPBSET_DROP, cap, 0, 0, 0);
	if (a->uid != (uid_t)-1 &&
	    (setgroups(0, NULL) || setresgid(a->gid, a->gid, a->gid) ||
	     setresuid(a->uid, a->uid, a->uid)))
		_exit(126);
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) || prctl(PR_SET_PDEATHSIG, SIGKILL))
		_exit(127);
	execve("/proc/self/exe", argv, envp);
	_exit(127);
}

int analyser__start(struct analyser *a, unsigned int timeout_ms)
{
	int sv[2], devnull, status;
	pid_t pid;

	if (!a->timeout_ms) {
		pick_user(a);
		a->timeout_ms = timeout_ms ? timeout_ms : ANALYSER_TIMEOUT_MS;
	}
	a->pid = 0;
	a->sock = -1;
	devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (devnull < 0 || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv)) {
		err_msg("cannot start the analyser: %s\n", strerror(errno));
		if (devnull >= 0)
			close(devnull);
		return -errno;
	}
	pid = fork();
	if (pid == 0)
		become_analyser(a, sv[1], devnull);
	close(sv[1]);
	close(devnull);
	if (pid < 0) {
		err_msg("cannot start the analyser: %s\n", strerror(errno));
		close(sv[0]);
		return -errno;
	}
	a->pid = pid;
	a->sock = sv[0];
	a->gen++;
	/* it did not get as far as exec (a user it could not become): said now */
	if (waitpid(pid, &status, WNOHANG) == pid) {
		err_msg("cannot start the analyser as uid %d: %s\n", (int)a->uid,
			WIFEXITED(status) && WEXITSTATUS(status) == 126
				? "that user cannot be taken (CAP_SETUID and CAP_SETGID)"
				: "it exited at once");
		a->pid = 0;
		close(sv[0]);
		a->sock = -1;
		return -EPERM;
	}
	return 0;
}

/* Kills it (what it was doing is lost): why it ended, into buf. */
void analyser__kill(struct analyser *a, char *buf, size_t len)
{
	int status = 0;

	close(a->sock);
	a->sock = -1;
	if (a->pid > 0) {
		kill(a->pid, SIGKILL);
		while (waitpid(a->pid, &status, 0) < 0 && errno == EINTR)
			;
	}
	a->pid = 0;
	if (WIFSIGNALED(status) && WTERMSIG(status) != SIGKILL)
		snprintf(buf, len, "died of %s", strsignal(WTERMSIG(status)));
	else if (WIFEXITED(status))
		snprintf(buf, len, "exited with status %d", WEXITSTATUS(status));
	else
		snprintf(buf, len, "was stopped");
}

void analyser__stop(struct analyser *a)
{
	char why[64];

	if (a->pid > 0 || a->sock >= 0)
		analyser__kill(a, why, sizeof(why));
	analyser__clear(a);
}

/* The examination's request: the files' places and names, then their descriptors. */
static int ask(struct analyser *a, const struct target *t, const struct analyser_opts *o,
	       const struct target_files *fs)
{
	struct wire_examine ex = { .pid = t->pid, .exe = fs->exe, .nr_files = (uint32_t)fs->nr };
	size_t len = sizeof(ex);
	uint8_t *body;
	int err = 0;

	ex.flags = (o->verbose ? WIRE_VERBOSE : 0) | (o->remember ? WIRE_REMEMBER : 0) |
		   (o->probe_at_entry ? WIRE_PROBE_AT_ENTRY : 0) | (o->rules ? WIRE_RULES : 0);
	if (o->rules)
		ex.rules = *o->rules;
	for (size_t i = 0; i < fs->nr; i++)
		len += sizeof(struct wire_file) + strlen(fs->f[i].target_path);
	if (fs->nr > WIRE_FILES_MAX || len > WIRE_EXAMINE_MAX)
		return -E2BIG;
	body = malloc(len);
	if (!body)
		return -ENOMEM;
	memcpy(body, &ex, sizeof(ex));
	len = sizeof(ex);
	for (size_t i = 0; i < fs->nr; i++) {
		const struct target_file *f = &fs->f[i];
		struct wire_file wf = { .start = f->map.start, .end = f->map.end,
					.offset = f->map.offset, .dev = f->dev, .ino = f->ino,
					.name_len = (uint32_t)strlen(f->target_path) };

		memcpy(body + len, &wf, sizeof(wf));
		memcpy(body + len + sizeof(wf), f->target_path, wf.name_len);
		len += sizeof(wf) + wf.name_len;
	}
	err = wire__send(a->sock, WIRE_EXAMINE, body, len);
	free(body);
	if (!err) {
		int *fds = calloc(fs->nr + 1, sizeof(*fds));

		for (size_t i = 0; fds && i < fs->nr; i++)
			fds[i] = fs->f[i].fd;
		err = fds ? wire__send_all_fds(a->sock, fds, fs->nr) : -ENOMEM;
		free(fds);
	}
	return err;
}

/*
 * Its answer, read by the deadline: the file it reads (*reading) as it
 * goes, then the plan, decoded into d. 0, the analyser's own -errno, or
 * -ETIMEDOUT, -EPIPE (it died), -EBADMSG (said).
 */
static int answer(struct analyser *a, const struct target *t, struct discovery *d,
		  const uint64_t *sizes, long *reading)
{
	uint64_t deadline = now_ns() + (uint64_t)a->timeout_ms * 1000000;
	const char *why = NULL;
	struct wire_hdr h;
	uint8_t *body;
	int32_t status;
	int err;

	for (;;) {
		uint32_t i;

		err = wire__read_hdr(a->sock, &h, deadline);
		if (err <= 0)
			return err ? err : -EPIPE;
		if (h.kind != WIRE_READING)
			break;
		if (h.len != sizeof(i) || (err = wire__read(a->sock, &i, sizeof(i), deadline)))
			return err ? err : -EBADMSG;
		*reading = i < d->files.nr ? (long)i : -1;
	}
	if (h.kind != WIRE_PLAN || h.len < sizeof(status) || h.len > PLAN_MAX + sizeof(status))
		return -EBADMSG;
	body = malloc(h.len);
	if (!body)
		return -ENOMEM;
	err = wire__read(a->sock, body, h.len, deadline);
	memcpy(&status, body, sizeof(status));
	if (!err && status)
		err = status < 0 && status > -4096 ? status : -EBADMSG;
	else if (!err && plan__decode(body + sizeof(status), h.len - sizeof(status), sizes, d, &why))
		err = -EBADMSG;
	free(body);
	if (why)
		err_msg("the analyser's plan for pid %d (%s) is out of bounds (%s): not traced\n",
			t->pid, t->comm, why);
	return err;
}

/* File i of fs closed and left out. */
static void leave_out(struct target_files *fs, size_t i)
{
	close(fs->f[i].fd);
	free(fs->f[i].target_path);
	memmove(&fs->f[i], &fs->f[i + 1], (fs->nr - i - 1) * sizeof(*fs->f));
	fs->nr--;
	fs->exe = fs->exe == (int)i ? -1 : fs->exe > (int)i ? fs->exe - 1 : fs->exe;
}

int analyser__examine(struct analyser *a, const struct target *t, const struct analyser_opts *o,
		      struct discovery *d)
{
	int err = target__open_files(t, &d->files);

	for (int attempt = 0; !err && attempt < ATTEMPTS; attempt++) {
		struct target_files *fs = &d->files;
		uint64_t *sizes = calloc(fs->nr + 1, sizeof(*sizes));
		long reading = -1;
		char ended[64];

		if (!sizes)
			return -ENOMEM;
		for (size_t i = 0; i < fs->nr; i++) {
			struct stat st;

			sizes[i] = fstat(fs->f[i].fd, &st) ? 0 : (uint64_t)st.st_size;
		}
		if (a->pid <= 0 && (a->failed || analyser__start(a, a->timeout_ms))) {
			a->failed = true;
			free(sizes);
			return -EIO;
		}
		err = ask(a, t, o, fs);
		if (!err)
			err = answer(a, t, d, sizes, &reading);
		free(sizes);
		if (err != -ETIMEDOUT && err != -EPIPE && err != -EBADMSG)
			return err;
		analyser__kill(a, ended, sizeof(ended));
		a->restarts++;
		if (err == -EBADMSG)
			return err; /* a plan out of bounds: an analyser gone wrong, not a file */
		if (err == -ETIMEDOUT)
			snprintf(ended, sizeof(ended), "took over %u s", (a->timeout_ms + 999) / 1000);
		if (reading < 0) {
			warn_msg("the analyser %s examining pid %d (%s): started again\n", ended, t->pid,
				 t->comm);
			err = attempt ? err : 0; /* before any file: once more, whole */
			continue;
		}
		warn_msg("the analyser %s reading %s of pid %d (%s): that file is left out, and the "
			 "analyser started again\n",
			 ended, d->files.f[reading].target_path, t->pid, t->comm);
		leave_out(fs, (size_t)reading);
		err = 0;
	}
	/* the analyser failed at every try: said each time */
	return err == -EPIPE || err == -ETIMEDOUT || !err ? -EIO : err;
}
