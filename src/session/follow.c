// SPDX-License-Identifier: MIT
/*
 * Following the host (no -p): the processes that start or exec later are
 * looked at (the BPF side's births, and a scan of /proc now and then),
 * examined off the loop (examiner.h), and traced when they run a known
 * runtime. With no filter, a file's probes are attached once for every
 * process that maps it, and let go with the last of them.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "lib/util.h"
#include "session/session_priv.h"

/*
 * A process that exec'd (or that a traced one forked) is looked at this long
 * after, once its dynamic loader has mapped its libraries.
 */
#define BIRTH_SETTLE_NS (100 * 1000 * 1000ull)

/* A file whose probes are attached once for every process that maps it. */
struct shared_file {
	long owner;		/* of its probes (tracer.h) */
	unsigned int refs;	/* processes traced that share them */
};

/*
 * Following the host: a file whose probes process tr shares (attach.h). The
 * first process to map it attaches them, for every process, as a new owner;
 * the others take a share. 1: attach now, 0: attached already, -errno.
 */
int follow__share_file(void *ctx, const char *path, long *owner)
{
	struct traced *tr = ctx;
	struct session *s = tr->s;
	struct shared_file *f;
	struct stat st;
	uint64_t key, *keys;

	if (stat(path, &st))
		return -errno;
	/*
	 * A file someone but root may change: its probes are its process's
	 * alone. Shared, they would sit at offsets read from its bytes in every
	 * process that maps it, root's too, and its owner could move the code
	 * under them (a breakpoint inside an instruction corrupts it).
	 */
	if (st.st_uid != 0 || (st.st_mode & (S_IWGRP | S_IWOTH)))
		return SHARE_ALONE;
	key = ((uint64_t)st.st_dev << 40 ^ (uint64_t)st.st_ino) | 1;
	keys = realloc(tr->files, (tr->nr_files + 1) * sizeof(*keys));
	if (!keys)
		return -ENOMEM;
	tr->files = keys;
	f = u64map__get(&s->files, key);
	if (f) {
		f->refs++;
		tr->files[tr->nr_files++] = key;
		*owner = f->owner;
		return 0;
	}
	f = calloc(1, sizeof(*f));
	if (!f || u64map__set(&s->files, key, f)) {
		free(f);
		return -ENOMEM;
	}
	f->refs = 1;
	f->owner = --s->last_owner; /* below 0: never a pid */
	tr->files[tr->nr_files++] = key;
	*owner = f->owner;
	return 1;
}

/* Process tr's shares of files let go: the last one's probes detached. */
void follow__release_files(struct session *s, struct traced *tr)
{
	for (size_t i = 0; i < tr->nr_files; i++) {
		struct shared_file *f = u64map__get(&s->files, tr->files[i]);

		if (f && !--f->refs) {
			tracer__detach_owner(s->tracer, f->owner);
			u64map__del(&s->files, tr->files[i]);
			free(f);
		}
	}
	tr->nr_files = 0;
}

/* Following the host: no process traced yet, and none being looked at. Said once. */
void follow__say_watching(struct session *s)
{
	const struct session_opts *o = s->o;

	if (s->said_watching || s->ever || examiner__pending(s->examiner))
		return;
	s->said_watching = true;
	if (s->hooks) {
		info_msg("no process of the command runs a known runtime yet: watching those it "
			 "starts\n");
		return;
	}
	err_msg("no process %s runs a known runtime (%s USDT probes, tokio or Go) yet: %zu looked "
		"at; watching for one, Ctrl-C to stop\n",
		o->comm || o->exclude_comm || o->cgroup
			? "that --comm, --exclude-comm and --cgroup let through"
			: "on this host",
		AT_USDT_PROVIDER, s->seen.len);
}

/* Following the host: a process found that may run a known runtime. */
static int on_new_process(void *ctx, pid_t pid, const char *comm)
{
	struct session *s = ctx;
	struct traced *tr = u64map__get(&s->by_pid, (uint64_t)pid);

	if (tr) {
		/* it exec'd: what it ran is gone, what it runs now is looked at anew */
		traced__confirm_waits(s, tr, true);
		traced__end(s, tr, "target exec'd", now_ns());
		traced__drop(s, tr);
	}
	if (s->o->verbose)
		info_msg("looking at pid %d (%s)\n", pid, comm);
	return examiner__ask(s->examiner, pid) == -ENOMEM ? -ENOMEM : 0;
}

/* Following the host: the processes examined meanwhile, traced if they run a known runtime. */
void follow__take_examined(struct session *s)
{
	struct traced *tr;
	pid_t pid;

	while (examiner__take(s->examiner, &pid, &tr)) {
		bool root = s->hooks && pid == s->hooks->root;

		if (!tr) {
			if (s->o->verbose || root)
				info_msg("pid %d: no known runtime, or gone\n", pid);
			if (root)
				session__release_root(s);
			continue;
		}
		if (u64map__get(&s->by_pid, (uint64_t)pid)) {
			traced__free(tr); /* traced already */
		} else if (s->nr >= s->max_targets) {
			s->over_max++;
			warn_msg("pid %d (%s) runs %s, not traced: --max-targets %u processes are "
				"traced already%s\n",
				pid, tr->target.comm,
				tr->disc.kind == RUNTIME_USDT ? "asynctrace probes"
							       : say__runtime_name(tr->disc.kind),
				s->max_targets,
				s->share_files && tr->disc.kind == RUNTIME_USDT
					? " (a probe of its files attached for a process traced "
					  "still stops it, for nothing)"
					: "");
			traced__free(tr);
		} else {
			traced__start(s, tr); /* a failure is said, and tr let go */
		}
		if (root)
			session__release_root(s);
	}
	follow__say_watching(s);
}

/* Following the host: the processes that started (or exec'd) since the last look. */
void follow__scan_new(struct session *s)
{
	int err = scan__new_processes(&s->filter, &s->seen, on_new_process, s);

	if (err)
		err_msg("cannot look through the host's processes: %s\n", strerror(-err));
}

/* The BPF side saw process pid exec, or a traced process fork it: to look at soon. */
void follow__on_birth(void *ctx, pid_t pid)
{
	struct session *s = ctx;

	if (s->o->verbose)
		info_msg("pid %d exec'd, or a process traced forked it\n", pid);
	if (s->nr_births == s->cap_births) {
		size_t cap = s->cap_births ? s->cap_births * 2 : 64;
		struct birth *b = realloc(s->births, cap * sizeof(*b));

		if (!b)
			return; /* the next full scan finds it */
		s->births = b;
		s->cap_births = cap;
	}
	s->births[s->nr_births++] = (struct birth){ .pid = pid, .due = now_ns() + BIRTH_SETTLE_NS };
}

/* The processes born a while ago, looked at. */
void follow__look_at_births(struct session *s, uint64_t now)
{
	size_t n = 0;

	for (size_t i = 0; i < s->nr_births; i++) {
		if (s->births[i].due > now) {
			s->births[n++] = s->births[i];
			continue;
		}
		if (scan__process(&s->filter, &s->seen, s->births[i].pid, on_new_process, s) ==
		    -ENOMEM)
			err_msg("out of memory looking at pid %d\n", s->births[i].pid);
	}
	s->nr_births = n;
}
