// SPDX-License-Identifier: MIT
/*
 * The analyser's side: it confines itself before it reads a byte of a
 * target's, then answers examinations, one at a time, until its socket
 * closes. Each examination's files come as descriptors and are read
 * through them (lib/file_copy.h); what it found goes back as a plan.
 */
#include "analyser/analyser.h"

#include <errno.h>
#include <fcntl.h>
#include <seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "analyser/plan.h"
#include "analyser/task_reading.h"
#include "analyser/unwinding.h"
#include "analyser/wire.h"
#include "lib/exits.h"
#include "lib/sandbox.h"
#include "lib/util.h"
#include "targets/images.h"

/* Its address space: a binary's copy (FILE_COPY_MAX at most) and what is built from it. */
#define ANALYSER_MEMORY ((rlim_t)2 << 30)

/*
 * What it may call: read its socket and the files it is given, write its
 * socket and stderr, manage its memory (never executable), and end. No
 * open, no socket, no exec, no signal to another process.
 */
static int filter(void)
{
	static const int allowed[] = {
		SCMP_SYS(read), SCMP_SYS(pread64), SCMP_SYS(write), SCMP_SYS(recvfrom),
		SCMP_SYS(recvmsg), SCMP_SYS(sendto), SCMP_SYS(close), SCMP_SYS(fstat),
		SCMP_SYS(newfstatat), SCMP_SYS(lseek), SCMP_SYS(brk), SCMP_SYS(munmap),
		SCMP_SYS(mremap), SCMP_SYS(madvise), SCMP_SYS(poll), SCMP_SYS(ppoll),
		SCMP_SYS(clock_gettime), SCMP_SYS(getpid), SCMP_SYS(gettid),
		SCMP_SYS(rt_sigprocmask), SCMP_SYS(rt_sigreturn), SCMP_SYS(sysinfo),
		SCMP_SYS(futex), SCMP_SYS(getrandom), SCMP_SYS(exit), SCMP_SYS(exit_group),
	};
	scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_KILL_PROCESS);
	int err = ctx ? 0 : -ENOMEM;

	for (size_t i = 0; !err && i < sizeof(allowed) / sizeof(allowed[0]); i++)
		err = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, allowed[i], 0);
	/*
	 * a copy of a descriptor it holds: how a file it was given is read
	 * (file_copy.c, libdwfl's images); libelf asks an open file's flags
	 */
	static const int fcntls[] = { F_DUPFD_CLOEXEC, F_GETFD, F_SETFD, F_GETFL };

	for (size_t i = 0; !err && i < sizeof(fcntls) / sizeof(fcntls[0]); i++)
		err = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(fcntl), 1,
				       SCMP_A1(SCMP_CMP_EQ, (uint64_t)fcntls[i]));
	/*
	 * What the libraries try on their own and do without: a file's name
	 * behind its descriptor (libdw, for debug files beside it), a file
	 * opened by name. They fail; nothing is opened.
	 */
	if (!err)
		err = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOENT), SCMP_SYS(readlink), 0);
	if (!err)
		err = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOENT), SCMP_SYS(readlinkat), 0);
	if (!err)
		err = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EACCES), SCMP_SYS(openat), 0);
	if (!err)
		err = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EACCES), SCMP_SYS(open), 0);
	if (!err)
		err = sandbox__allow_memory(ctx);
	if (!err)
		err = seccomp_load(ctx);
	seccomp_release(ctx);
	return err;
}

/* Before anything of a target's is read: no privilege, bounded memory, the filter. */
static int confine(void)
{
	struct rlimit mem = { ANALYSER_MEMORY, ANALYSER_MEMORY }, none = { 0, 0 };
	int err;

	prctl(PR_SET_NAME, "at-analyser");
	/* no core file, and no ptrace by a process of the same (unprivileged) user */
	prctl(PR_SET_DUMPABLE, 0);
	err = sandbox__drop_privileges(0);
	if (!err && (setrlimit(RLIMIT_AS, &mem) || setrlimit(RLIMIT_FSIZE, &none) ||
		     setrlimit(RLIMIT_CORE, &none)))
		err = -errno;
	if (!err)
		err = filter();
	return err;
}

/* The files of one examination: their names, then their descriptors. */
static int take_files(const struct wire_examine *ex, const uint8_t *body, size_t len,
		      struct target_files *fs)
{
	size_t at = sizeof(*ex);
	int *fds, err;

	fs->f = calloc(ex->nr_files + 1, sizeof(*fs->f));
	if (!fs->f)
		return -ENOMEM;
	for (uint32_t i = 0; i < ex->nr_files; i++) {
		struct target_file *f = &fs->f[i];
		struct wire_file wf;

		if (len - at < sizeof(wf))
			return -EBADMSG;
		memcpy(&wf, body + at, sizeof(wf));
		at += sizeof(wf);
		if (wf.name_len > len - at)
			return -EBADMSG;
		f->target_path = strndup((const char *)body + at, wf.name_len);
		if (!f->target_path)
			return -ENOMEM;
		at += wf.name_len;
		f->fd = -1;
		f->map = (struct target_mapping){ wf.start, wf.end, wf.offset };
		f->dev = (dev_t)wf.dev;
		f->ino = (ino_t)wf.ino;
		fs->nr++;
	}
	fds = calloc(ex->nr_files + 1, sizeof(*fds));
	if (!fds)
		return -ENOMEM;
	err = wire__take_fds(ANALYSER_FD, fds, ex->nr_files, 0);
	for (uint32_t i = 0; !err && i < ex->nr_files; i++) {
		fs->f[i].fd = fds[i];
		snprintf(fs->f[i].path, sizeof(fs->f[i].path), "/proc/self/fd/%d", fds[i]);
	}
	free(fds);
	if (err)
		return err;
	fs->exe = ex->exe >= 0 && (uint32_t)ex->exe < ex->nr_files ? ex->exe : -1;
	return 0;
}

static void say_reading(void *ctx, size_t file)
{
	uint32_t i = (uint32_t)file;

	(void)ctx;
	/* a send that fails is the socket gone: the answer's send says so */
	wire__send(ANALYSER_FD, WIRE_READING, &i, sizeof(i));
}

/* The answer: status (0 or -errno), then the plan when there is one. */
static int answer(int32_t status, const struct plan_buf *b)
{
	size_t len = sizeof(status) + (b ? b->len : 0);
	uint8_t *msg = malloc(len);
	int err;

	if (!msg)
		return -ENOMEM;
	memcpy(msg, &status, sizeof(status));
	if (b && b->len)
		memcpy(msg + sizeof(status), b->data, b->len);
	err = wire__send(ANALYSER_FD, WIRE_PLAN, msg, len);
	free(msg);
	return err;
}

/* One examination, from its header on. 0, or -errno when the socket cannot go on. */
static int examine(const struct wire_hdr *h, struct image_cache *images)
{
	struct discovery d = { 0 };
	struct plan_buf b = { 0 };
	struct wire_examine ex;
	uint8_t *body;
	int err;

	if (h->kind != WIRE_EXAMINE || h->len < sizeof(ex) || h->len > WIRE_EXAMINE_MAX)
		return -EBADMSG;
	body = malloc(h->len);
	if (!body)
		return -ENOMEM;
	err = wire__read(ANALYSER_FD, body, h->len, 0);
	memcpy(&ex, body, sizeof(ex));
	if (!err && ex.nr_files > WIRE_FILES_MAX)
		err = -EBADMSG;
	if (!err)
		err = take_files(&ex, body, h->len, &d.files);
	free(body);
	if (err) {
		target_files__close(&d.files);
		return err;
	}
	d.verbose = ex.flags & WIRE_VERBOSE;
	d.images = ex.flags & WIRE_REMEMBER ? images : NULL;
	d.probe_at_entry = ex.flags & WIRE_PROBE_AT_ENTRY;
	d.rules = ex.flags & WIRE_RULES ? &ex.rules : NULL;
	d.reading = say_reading;
	err = discover_files(&d, ex.pid);
	if (!err)
		err = plan__encode(&d, &b);
	err = answer(err, err ? NULL : &b);
	plan_buf__free(&b);
	discovery__free(&d);
	return err;
}

int analyser__main(void)
{
	struct image_cache images;
	struct stat st;
	int err;

	if (fstat(ANALYSER_FD, &st) || !S_ISSOCK(st.st_mode)) {
		err_msg("%s: for asynctraced itself, which starts its analyser so\n", ANALYSER_ARG);
		return EXIT_USAGE;
	}
	err = confine();
	if (err) {
		err_msg("the analyser cannot confine itself: %s\n", strerror(-err));
		return EXIT_FAIL;
	}
	image_cache__init(&images);
	for (;;) {
		struct wire_hdr h;

		err = wire__read_hdr(ANALYSER_FD, &h, 0);
		if (err <= 0)
			break;
		switch (h.kind) {
		case WIRE_PRIME:
			err = unwinding__prime(&h);
			break;
		case WIRE_UNWIND:
			err = unwinding__unwind(&h);
			break;
		case WIRE_FORGET: {
			int32_t pid;

			err = h.len == sizeof(pid) ? wire__read(ANALYSER_FD, &pid, sizeof(pid), 0)
						   : -EBADMSG;
			if (!err) {
				unwinding__forget(pid);
				task_reading__forget(pid);
			}
			break;
		}
		case WIRE_TASKS:
			err = task_reading__read(&h);
			break;
		default:
			err = examine(&h, &images);
			break;
		}
		if (err)
			break;
	}
	unwinding__end();
	task_reading__end();
	image_cache__free(&images);
	return err < 0 && err != -EPIPE ? EXIT_FAIL : EXIT_OK;
}
