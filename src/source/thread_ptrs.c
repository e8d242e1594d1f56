// SPDX-License-Identifier: MIT
/*
 * The iterator is loaded, attached to one process (bpf_iter_link_info's
 * task.pid: its threads alone are walked), read through the file it
 * creates, and let go: a few milliseconds, once a snapshot.
 */
#include "source/thread_ptrs.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "threads.skel.h"

/* A record of the iterator's (bpf/threads.bpf.c) */
struct thread_ptr {
	uint32_t tid;
	uint32_t pad;
	uint64_t fsbase;
};

struct thread_ptrs {
	struct threads_bpf *skel;
	struct bpf_link *link;
};

int thread_ptrs__open(pid_t pid, struct thread_ptrs **h)
{
	union bpf_iter_link_info info = { .task.pid = (__u32)pid };
	LIBBPF_OPTS(bpf_iter_attach_opts, opts, .link_info = &info, .link_info_len = sizeof(info));
	struct thread_ptrs *t = calloc(1, sizeof(*t));
	int err;

	*h = NULL;
	if (!t)
		return -ENOMEM;
	t->skel = threads_bpf__open_and_load();
	err = t->skel ? 0 : -errno;
	if (!err) {
		t->link = bpf_program__attach_iter(t->skel->progs.thread_pointers, &opts);
		err = t->link ? 0 : -errno;
	}
	if (err) {
		thread_ptrs__close(t);
		return err;
	}
	*h = t;
	return 0;
}

void thread_ptrs__close(struct thread_ptrs *h)
{
	if (!h)
		return;
	bpf_link__destroy(h->link);
	threads_bpf__destroy(h->skel);
	free(h);
}

int thread_ptrs__take(struct thread_ptrs *h, uint64_t **fsbase, size_t *n)
{
	struct thread_ptr *recs = NULL;
	size_t len = 0, cap = 0;	/* bytes: a read may end inside a record */
	int fd = bpf_iter_create(bpf_link__fd(h->link));
	int err = fd >= 0 ? 0 : -errno;

	*fsbase = NULL;
	*n = 0;
	while (!err) {
		ssize_t got;

		if (len == cap) {
			struct thread_ptr *more;

			cap = cap ? cap * 2 : 64 * sizeof(*recs);
			if (cap > THREAD_PTRS_MAX * sizeof(*recs) || !(more = realloc(recs, cap))) {
				err = cap > THREAD_PTRS_MAX * sizeof(*recs) ? -E2BIG : -ENOMEM;
				break;
			}
			recs = more;
		}
		got = read(fd, (char *)recs + len, cap - len);
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0)
			err = -errno;
		else if (!got)
			break;
		else
			len += (size_t)got;
	}
	if (fd >= 0)
		close(fd);
	if (err) {
		free(recs);
		return err;
	}
	/* the pointers alone, in place: each record's fsbase to the front */
	*n = len / sizeof(*recs);
	*fsbase = (uint64_t *)recs;
	for (size_t i = 0; i < *n; i++)
		(*fsbase)[i] = recs[i].fsbase;
	return 0;
}

int thread_ptrs__read(pid_t pid, uint64_t **fsbase, size_t *n)
{
	struct thread_ptrs *h;
	int err = thread_ptrs__open(pid, &h);

	*fsbase = NULL;
	*n = 0;
	if (err)
		return err;
	err = thread_ptrs__take(h, fsbase, n);
	thread_ptrs__close(h);
	return err;
}
