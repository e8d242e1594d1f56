/* SPDX-License-Identifier: MIT */
/*
 * The reactor thread: timers in a min-heap behind one timerfd, and fd
 * readiness through epoll. Everything it wakes goes through task_wake() from
 * a non-worker thread, so it lands on the injection queue.
 *
 * The timerfd is always armed for the earliest deadline in the heap, so the
 * reactor needs no timeout arithmetic and timers get nanosecond precision
 * instead of epoll_wait()'s milliseconds.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "reactor.h"
#include "runtime.h"
#include "util.h"

struct timer {
	uint64_t deadline;
	uint64_t seq;        /* FIFO order among equal deadlines */
	struct task *task;   /* holds a reference */
};

struct io_source {
	int fd;
	bool added;                       /* in the epoll set; owner only */
	_Atomic(struct task *) waiter;    /* holds a reference */
	struct io_source *next_garbage;
};

/*
 * Tags for the reactor's own fds in epoll_event.data.ptr; every other
 * pointer there is a struct io_source.
 */
static char timer_tag, stop_tag;

static struct {
	pthread_t thread;
	int epfd;
	int timerfd;
	int stopfd;              /* eventfd: asks the thread to exit */

	pthread_mutex_t lock;    /* the heap, the armed deadline, garbage */
	struct timer *heap;
	size_t len, cap;
	uint64_t seq;
	uint64_t armed;          /* deadline the timerfd is set for; 0: none */
	struct io_source *garbage;
} r;

/* ---- timers ----------------------------------------------------------- */

static bool timer_before(const struct timer *a, const struct timer *b)
{
	if (a->deadline != b->deadline)
		return a->deadline < b->deadline;
	return a->seq < b->seq;
}

static void heap_swap(size_t i, size_t j)
{
	struct timer tmp = r.heap[i];

	r.heap[i] = r.heap[j];
	r.heap[j] = tmp;
}

static void heap_push(struct timer tm)
{
	size_t i;

	if (r.len == r.cap) {
		r.cap = r.cap ? r.cap * 2 : 256;
		r.heap = realloc(r.heap, r.cap * sizeof(*r.heap));
		if (!r.heap)
			fatal("out of memory");
	}
	i = r.len++;
	r.heap[i] = tm;
	while (i > 0 && timer_before(&r.heap[i], &r.heap[(i - 1) / 2])) {
		heap_swap(i, (i - 1) / 2);
		i = (i - 1) / 2;
	}
}

static struct timer heap_pop(void)
{
	struct timer top = r.heap[0];
	size_t i = 0;

	r.heap[0] = r.heap[--r.len];
	for (;;) {
		size_t l = 2 * i + 1, rr = l + 1, min = i;

		if (l < r.len && timer_before(&r.heap[l], &r.heap[min]))
			min = l;
		if (rr < r.len && timer_before(&r.heap[rr], &r.heap[min]))
			min = rr;
		if (min == i)
			break;
		heap_swap(i, min);
		i = min;
	}
	return top;
}

/* Point the timerfd at @deadline (0 disarms it). Caller holds r.lock. */
static void arm_locked(uint64_t deadline)
{
	struct itimerspec its = {
		.it_value = {
			.tv_sec = (time_t)(deadline / NSEC_PER_SEC),
			.tv_nsec = (long)(deadline % NSEC_PER_SEC),
		},
	};

	if (timerfd_settime(r.timerfd, TFD_TIMER_ABSTIME, &its, NULL) != 0)
		fatal("timerfd_settime: %m");
	r.armed = deadline;
}

void sleep_until(struct task *t, uint64_t deadline_ns)
{
	/* 0 means "disarmed" to the timerfd; no real deadline is that early. */
	if (deadline_ns == 0)
		deadline_ns = 1;
	task_ref(t);
	pthread_mutex_lock(&r.lock);
	heap_push((struct timer){ deadline_ns, r.seq++, t });
	if (r.armed == 0 || deadline_ns < r.armed)
		arm_locked(deadline_ns);
	pthread_mutex_unlock(&r.lock);
}

void sleep_for(uint64_t ns)
{
	sleep_until(task_current(), now_ns() + ns);
}

static void fire_timers(void)
{
	struct task *due[64];
	size_t n;

	do {
		uint64_t now = now_ns();

		/* Wake outside the lock, in batches, so workers never wait
		 * for the heap behind a long list of wakes. */
		n = 0;
		pthread_mutex_lock(&r.lock);
		while (r.len && r.heap[0].deadline <= now &&
		       n < ARRAY_SIZE(due))
			due[n++] = heap_pop().task;
		arm_locked(r.len ? r.heap[0].deadline : 0);
		pthread_mutex_unlock(&r.lock);

		for (size_t i = 0; i < n; i++) {
			task_wake(due[i]);
			task_unref(due[i]);
		}
	} while (n == ARRAY_SIZE(due));
}

/* ---- fds -------------------------------------------------------------- */

struct io_source *io_source_new(int fd)
{
	struct io_source *s = xcalloc(1, sizeof(*s));

	s->fd = fd;
	atomic_init(&s->waiter, NULL);
	return s;
}

void io_wait_readable(struct io_source *s, struct task *t)
{
	struct epoll_event ev = {
		.events = EPOLLIN | EPOLLONESHOT,
		.data.ptr = s,
	};
	struct task *old;

	/* Publish the waiter before arming, so an event always finds it. */
	task_ref(t);
	old = atomic_exchange(&s->waiter, t);
	if (old)
		task_unref(old);

	if (epoll_ctl(r.epfd, s->added ? EPOLL_CTL_MOD : EPOLL_CTL_ADD,
		      s->fd, &ev) != 0)
		fatal("epoll_ctl(fd %d): %m", s->fd);
	s->added = true;
}

void io_source_free(struct io_source *s)
{
	struct task *old;

	if (s->added)
		epoll_ctl(r.epfd, EPOLL_CTL_DEL, s->fd, NULL);
	old = atomic_exchange(&s->waiter, NULL);
	if (old)
		task_unref(old);

	/*
	 * The reactor may be holding @s in the event batch it is working
	 * through, so let the reactor free it once that batch is done.
	 */
	pthread_mutex_lock(&r.lock);
	s->next_garbage = r.garbage;
	r.garbage = s;
	pthread_mutex_unlock(&r.lock);
}

static void io_ready(struct io_source *s)
{
	struct task *t = atomic_exchange(&s->waiter, NULL);

	if (t) {
		task_wake(t);
		task_unref(t);
	}
}

static void free_garbage(struct io_source *s)
{
	while (s) {
		struct io_source *next = s->next_garbage;

		free(s);
		s = next;
	}
}

/* ---- the thread ------------------------------------------------------- */

static void drain(int fd)
{
	uint64_t value;

	/* Both fds are non-blocking; EAGAIN just means someone beat us. */
	if (read(fd, &value, sizeof(value)) < 0 && errno != EAGAIN)
		fatal("reactor read: %m");
}

static void *reactor_main(void *arg)
{
	struct epoll_event events[64];
	bool stopping = false;

	(void)arg;
	while (!stopping) {
		struct io_source *garbage;
		int n;

		/*
		 * Sources freed before this epoll_wait() were already removed
		 * from the set, so they cannot show up in its batch: free
		 * them after it.
		 */
		pthread_mutex_lock(&r.lock);
		garbage = r.garbage;
		r.garbage = NULL;
		pthread_mutex_unlock(&r.lock);

		n = epoll_wait(r.epfd, events, ARRAY_SIZE(events), -1);
		if (n < 0 && errno != EINTR)
			fatal("epoll_wait: %m");
		for (int i = 0; i < n; i++) {
			void *p = events[i].data.ptr;

			if (p == &timer_tag) {
				drain(r.timerfd);
				fire_timers();
			} else if (p == &stop_tag) {
				stopping = true;
			} else {
				io_ready(p);
			}
		}
		free_garbage(garbage);
	}
	return NULL;
}

static void watch(int fd, void *tag)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = tag };

	if (epoll_ctl(r.epfd, EPOLL_CTL_ADD, fd, &ev) != 0)
		fatal("epoll_ctl: %m");
}

void reactor_start(void)
{
	int err;

	pthread_mutex_init(&r.lock, NULL);
	r.epfd = epoll_create1(EPOLL_CLOEXEC);
	if (r.epfd < 0)
		fatal("epoll_create1: %m");
	r.timerfd = timerfd_create(CLOCK_MONOTONIC,
				   TFD_NONBLOCK | TFD_CLOEXEC);
	if (r.timerfd < 0)
		fatal("timerfd_create: %m");
	r.stopfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (r.stopfd < 0)
		fatal("eventfd: %m");
	watch(r.timerfd, &timer_tag);
	watch(r.stopfd, &stop_tag);

	err = pthread_create(&r.thread, NULL, reactor_main, NULL);
	if (err)
		fatal("pthread_create: %s", strerror(err));
	pthread_setname_np(r.thread, "reactor");
}

void reactor_stop(void)
{
	uint64_t one = 1;

	if (write(r.stopfd, &one, sizeof(one)) != sizeof(one))
		fatal("eventfd write: %m");
	pthread_join(r.thread, NULL);
}

void reactor_destroy(void)
{
	while (r.len)
		task_unref(heap_pop().task);
	free(r.heap);
	r.heap = NULL;
	r.cap = 0;
	free_garbage(r.garbage);
	r.garbage = NULL;
	close(r.epfd);
	close(r.timerfd);
	close(r.stopfd);
	pthread_mutex_destroy(&r.lock);
}
