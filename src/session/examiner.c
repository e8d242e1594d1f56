// SPDX-License-Identifier: MIT
#include "session/examiner.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "lib/u64map.h"

struct result {
	pid_t pid;
	struct traced *tr;
};

struct examiner {
	struct session *s;
	struct examine_opts opts;
	pthread_t thread;
	bool started;
	int efd;
	pthread_mutex_t lock;
	pthread_cond_t more;
	/* under lock: */
	bool stop;
	pid_t *asked;		/* a FIFO of pids to examine */
	size_t head, nr_asked, cap_asked;
	struct result *done;	/* examined, not yet taken */
	size_t nr_done, cap_done;
	struct u64map pending;	/* pid -> 1: asked, not yet taken */
};

static bool push_result(struct examiner *e, pid_t pid, struct traced *tr)
{
	if (e->nr_done == e->cap_done) {
		size_t cap = e->cap_done ? e->cap_done * 2 : 16;
		struct result *r = realloc(e->done, cap * sizeof(*r));

		if (!r)
			return false;
		e->done = r;
		e->cap_done = cap;
	}
	e->done[e->nr_done++] = (struct result){ .pid = pid, .tr = tr };
	return true;
}

static void *run(void *arg)
{
	struct examiner *e = arg;
	const uint64_t one = 1;

	pthread_mutex_lock(&e->lock);
	for (;;) {
		struct traced *tr = NULL;
		pid_t pid;

		while (!e->stop && e->head == e->nr_asked)
			pthread_cond_wait(&e->more, &e->lock);
		if (e->stop)
			break;
		pid = e->asked[e->head++];
		if (e->head == e->nr_asked)
			e->head = e->nr_asked = 0;
		pthread_mutex_unlock(&e->lock);
		traced__examine(&tr, e->s, pid, &e->opts, true);
		pthread_mutex_lock(&e->lock);
		if (!push_result(e, pid, tr)) {
			traced__free(tr);
			u64map__del(&e->pending, (uint64_t)pid); /* the next scan asks again */
			continue;
		}
		if (write(e->efd, &one, sizeof(one)) < 0) {
			/* the counter is full: the loop is woken already */
		}
	}
	pthread_mutex_unlock(&e->lock);
	return NULL;
}

int examiner__new(struct examiner **ep, struct session *s, const struct examine_opts *o)
{
	struct examiner *e = calloc(1, sizeof(*e));
	int err;

	if (!e)
		return -ENOMEM;
	e->s = s;
	e->opts = *o;
	u64map__init(&e->pending);
	pthread_mutex_init(&e->lock, NULL);
	pthread_cond_init(&e->more, NULL);
	e->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (e->efd < 0) {
		err = -errno;
		examiner__free(e);
		return err;
	}
	err = -pthread_create(&e->thread, NULL, run, e);
	if (err) {
		examiner__free(e);
		return err;
	}
	e->started = true;
	*ep = e;
	return 0;
}

void examiner__free(struct examiner *e)
{
	if (!e)
		return;
	if (e->started) {
		pthread_mutex_lock(&e->lock);
		e->stop = true;
		pthread_cond_signal(&e->more);
		pthread_mutex_unlock(&e->lock);
		pthread_join(e->thread, NULL);
	}
	for (size_t i = 0; i < e->nr_done; i++)
		traced__free(e->done[i].tr);
	free(e->done);
	free(e->asked);
	u64map__clear(&e->pending);
	if (e->efd >= 0)
		close(e->efd);
	pthread_cond_destroy(&e->more);
	pthread_mutex_destroy(&e->lock);
	free(e);
}

int examiner__ask(struct examiner *e, pid_t pid)
{
	int err = 0;

	pthread_mutex_lock(&e->lock);
	if (u64map__get(&e->pending, (uint64_t)pid))
		goto out;
	if (e->nr_asked == e->cap_asked) {
		size_t cap = e->cap_asked ? e->cap_asked * 2 : 64;
		pid_t *a = realloc(e->asked, cap * sizeof(*a));

		if (!a) {
			err = -ENOMEM;
			goto out;
		}
		e->asked = a;
		e->cap_asked = cap;
	}
	err = u64map__set(&e->pending, (uint64_t)pid, (void *)1);
	if (err)
		goto out;
	e->asked[e->nr_asked++] = pid;
	pthread_cond_signal(&e->more);
out:
	pthread_mutex_unlock(&e->lock);
	return err;
}

int examiner__fd(const struct examiner *e)
{
	return e->efd;
}

bool examiner__take(struct examiner *e, pid_t *pid, struct traced **tr)
{
	uint64_t n;
	bool got = false;

	pthread_mutex_lock(&e->lock);
	if (e->nr_done) {
		/* oldest first: the order they were asked in */
		*pid = e->done[0].pid;
		*tr = e->done[0].tr;
		memmove(e->done, e->done + 1, --e->nr_done * sizeof(*e->done));
		u64map__del(&e->pending, (uint64_t)*pid);
		got = true;
	} else if (read(e->efd, &n, sizeof(n)) < 0) {
		/* drained already: the next result writes it again */
	}
	pthread_mutex_unlock(&e->lock);
	return got;
}

size_t examiner__pending(struct examiner *e)
{
	size_t n;

	pthread_mutex_lock(&e->lock);
	n = e->pending.len;
	pthread_mutex_unlock(&e->lock);
	return n;
}
