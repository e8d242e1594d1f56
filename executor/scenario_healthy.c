/* SPDX-License-Identifier: MIT */
/*
 * The healthy background load: a "spawner" spawns "request" tasks at a fixed
 * rate; each one computes a little, sleeps on a timer, then does a real I/O
 * round trip through the reactor with an "echo" task. A "ticker" runs every
 * 10 ms. No poll here should take more than a few tens of microseconds.
 *
 * The round trip: a request makes its own reply pipe, arms the reactor on
 * its read end, and writes the number of the write end (one 4-byte message;
 * pipe writes that small are atomic) into an echo's request pipe. The echo,
 * woken by the reactor, reads the messages and writes one byte into each
 * reply pipe, which makes the reactor wake the request.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include "reactor.h"
#include "runtime.h"
#include "scenario.h"
#include "util.h"

#define NUM_ECHO 2
#define TICKER_PERIOD (10 * NSEC_PER_MSEC)
#define SPAWN_PERIOD NSEC_PER_MSEC
/* Requests spawned by one spawner poll at most; the rest is forgiven. */
#define SPAWN_BURST_MAX 64
/* Messages one echo poll handles before yielding. */
#define ECHO_BATCH 256

/* [0] is read by an echo task, [1] written by requests. */
static int echo_pipe[NUM_ECHO][2] = { { -1, -1 }, { -1, -1 } };

/* ---- request ---------------------------------------------------------- */

enum request_phase {
	REQ_WORK,
	REQ_SLEEP,
	REQ_SEND,
	REQ_REPLY,
};

struct request {
	enum request_phase phase;
	uint64_t wake_at;
	int reply[2];
	struct io_source *reply_src;
};

/* Ask an echo to answer on @fd. False if its pipe is full. */
static bool echo_send(uint64_t id, int fd)
{
	ssize_t n = write(echo_pipe[id % NUM_ECHO][1], &fd, sizeof(fd));

	if (n == sizeof(fd))
		return true;
	if (n < 0 && errno == EAGAIN)
		return false;
	fatal("request write: %m");
}

static enum poll request_poll(struct task *self, void *data)
{
	struct request *rq = data;
	struct prng rng;
	char byte;
	ssize_t n;

	switch (rq->phase) {
	case REQ_WORK:
		/* Seeded by id: the same request draws the same numbers. */
		prng_seed(&rng, task_id(self));
		burn_cpu_ns(prng_range(&rng, 10, 20) * NSEC_PER_USEC);
		rq->wake_at = now_ns() +
			      prng_range(&rng, 1000, 5000) * NSEC_PER_USEC;
		sleep_until(self, rq->wake_at);
		rq->phase = REQ_SLEEP;
		return POLL_PENDING;

	case REQ_SLEEP:
		if (now_ns() < rq->wake_at)
			return POLL_PENDING; /* early; the timer is still set */
		if (pipe2(rq->reply, O_NONBLOCK | O_CLOEXEC) != 0)
			fatal("pipe2: %m");
		rq->reply_src = io_source_new(rq->reply[0]);
		io_wait_readable(rq->reply_src, self);
		rq->phase = REQ_SEND;
		/* fall through */
	case REQ_SEND:
		if (!echo_send(task_id(self), rq->reply[1])) {
			/* The echo is behind: yield and try again. */
			task_wake(self);
			return POLL_PENDING;
		}
		rq->phase = REQ_REPLY;
		return POLL_PENDING;

	case REQ_REPLY:
		n = read(rq->reply[0], &byte, 1);
		if (n == 1)
			return POLL_READY;
		if (n < 0 && errno == EAGAIN) {
			io_wait_readable(rq->reply_src, self);
			return POLL_PENDING;
		}
		fatal("request read: %m");
	}
	return POLL_PENDING;
}

static void request_drop(void *data)
{
	struct request *rq = data;

	if (rq->reply_src)
		io_source_free(rq->reply_src);
	if (rq->reply[0] >= 0) {
		close(rq->reply[0]);
		close(rq->reply[1]);
	}
	free(rq);
}

static void spawn_request(void)
{
	struct request *rq = xcalloc(1, sizeof(*rq));

	rq->phase = REQ_WORK;
	rq->reply[0] = rq->reply[1] = -1;
	task_spawn("request", request_poll, rq, request_drop, NULL);
}

/* ---- spawner ---------------------------------------------------------- */

struct spawner {
	unsigned rate;
	uint64_t start;
	uint64_t spawned;
};

static enum poll spawner_poll(struct task *self, void *data)
{
	struct spawner *sp = data;
	uint64_t now = now_ns(), elapsed, due;

	if (!sp->start)
		sp->start = now;
	/* Spawn by elapsed time, not by tick count, so timer lateness does
	 * not lower the rate; split to avoid overflowing 64 bits. */
	elapsed = now - sp->start;
	due = elapsed / NSEC_PER_SEC * sp->rate +
	      elapsed % NSEC_PER_SEC * sp->rate / NSEC_PER_SEC;
	if (due - sp->spawned > SPAWN_BURST_MAX)
		sp->spawned = due - SPAWN_BURST_MAX;
	for (; sp->spawned < due; sp->spawned++)
		spawn_request();

	sleep_until(self, now + SPAWN_PERIOD);
	return POLL_PENDING;
}

/* ---- echo ------------------------------------------------------------- */

struct echo {
	unsigned index;
	struct io_source *src;
};

static void echo_reply(int fd)
{
	if (write(fd, "!", 1) != 1)
		fatal("echo write: %m");
}

static enum poll echo_poll(struct task *self, void *data)
{
	struct echo *e = data;
	int fds[64];
	unsigned handled = 0;

	while (handled < ECHO_BATCH) {
		ssize_t n = read(echo_pipe[e->index][0], fds, sizeof(fds));

		if (n < 0 && errno == EAGAIN) {
			io_wait_readable(e->src, self);
			return POLL_PENDING;
		}
		if (n < 0)
			fatal("echo read: %m");
		if (n == 0)
			fatal("echo read: unexpected end of file");
		/* Messages are written whole, so reads return whole ones. */
		for (size_t i = 0; i < (size_t)n / sizeof(int); i++)
			echo_reply(fds[i]);
		handled += (unsigned)((size_t)n / sizeof(int));
	}
	/* More may be queued; let other tasks run first. */
	task_wake(self);
	return POLL_PENDING;
}

static void echo_drop(void *data)
{
	struct echo *e = data;

	io_source_free(e->src);
	free(e);
}

/* ---- ticker ----------------------------------------------------------- */

struct ticker {
	struct period period;
	uint64_t ticks;
};

static enum poll ticker_poll(struct task *self, void *data)
{
	struct ticker *tk = data;

	(void)self;
	if (period_due(&tk->period, TICKER_PERIOD))
		tk->ticks++;
	return POLL_PENDING;
}

void spawn_ticker(void)
{
	task_spawn("ticker", ticker_poll, xcalloc(1, sizeof(struct ticker)),
		   free, NULL);
}

/* ---- setup ------------------------------------------------------------ */

void background_start(unsigned rate)
{
	struct spawner *sp;

	for (unsigned i = 0; i < NUM_ECHO; i++) {
		struct echo *e = xcalloc(1, sizeof(*e));

		if (pipe2(echo_pipe[i], O_NONBLOCK | O_CLOEXEC) != 0)
			fatal("pipe2: %m");
		e->index = i;
		e->src = io_source_new(echo_pipe[i][0]);
		task_spawn("echo", echo_poll, e, echo_drop, NULL);
	}
	spawn_ticker();

	sp = xcalloc(1, sizeof(*sp));
	sp->rate = rate;
	task_spawn("spawner", spawner_poll, sp, free, NULL);
}

void background_cleanup(void)
{
	for (unsigned i = 0; i < NUM_ECHO; i++) {
		for (unsigned end = 0; end < 2; end++) {
			if (echo_pipe[i][end] >= 0)
				close(echo_pipe[i][end]);
			echo_pipe[i][end] = -1;
		}
	}
}
