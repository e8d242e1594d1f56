/* SPDX-License-Identifier: MIT */
/*
 * The scheduler: worker threads, run queues, stealing, parking, wakes, and
 * the probes that describe all of it (docs/sample-executor.md has the big
 * picture).
 *
 * Lock order: a worker may take the injection queue lock while holding its
 * own local queue lock (spilling), never the reverse, and no thread ever
 * holds two local queue locks at once (a steal copies tasks out under the
 * victim's lock, then pushes them under the thief's).
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "probes.h"
#include "queue.h"
#include "reactor.h"
#include "task.h"
#include "util.h"

/*
 * Every 61st pop looks at the injection queue before the local queue, so a
 * worker whose tasks keep feeding its own queue still picks up the wakes from
 * the reactor. 61 is prime to avoid falling into step with periodic work;
 * Go and tokio use the same number.
 */
#define FAIRNESS_INTERVAL 61

struct worker {
	unsigned index;
	pthread_t thread;
	struct local_queue lq;
	uint64_t polls;            /* polls run; drives the fairness check */
	struct prng rng;           /* picks the first steal victim */

	/*
	 * A parked worker sleeps on its own condvar until notified (or, with
	 * lazy_unpark_ns, until its nap is over).
	 */
	pthread_mutex_t park_lock;
	pthread_cond_t park_cond;
	bool notified;             /* under park_lock */
	bool idle;                 /* on the idle stack; under rt.idle_lock */

	/* thread changes hands under this (--thread-churn) */
	pthread_mutex_t thread_lock;
};

/* A worker thread that has ended, for rt_print_threads(). */
struct thread_record {
	pid_t tid;
	unsigned worker;
	uint64_t polls;
};

static struct {
	struct runtime_config cfg;
	struct worker *workers;
	struct inject_queue inject;

	/* Workers that are parked or about to park, most recent on top. */
	pthread_mutex_t idle_lock;
	unsigned *idle;
	unsigned nidle;            /* under idle_lock */
	_Atomic unsigned nparked;  /* copy of nidle, read without the lock */

	pthread_mutex_t gate_lock;
	pthread_cond_t gate_cond;
	bool gate_open;

	_Atomic bool stop;

	/* One per probe; see struct runtime_stats. */
	_Atomic uint64_t tasks, polls, wakes, steals, stolen, parks;
	_Atomic uint64_t first_polls;
} rt;

static __thread struct worker *cur_worker;
static __thread struct task *cur_task;
static __thread uint64_t thread_polls;

static struct {
	pthread_mutex_t lock;
	struct thread_record *v;
	size_t n;
} ended = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* --time-polls: the long polls, by task name (few: a list will do). */
#define MAX_LONG_NAMES 32
static struct {
	pthread_mutex_t lock;
	struct long_polls {
		const char *name;
		uint64_t n, longest_ns;
	} v[MAX_LONG_NAMES];
	size_t n;
	uint64_t unnamed; /* names past MAX_LONG_NAMES */
} long_polls = { .lock = PTHREAD_MUTEX_INITIALIZER };

static void keep_long_poll(const char *name, uint64_t took_ns)
{
	size_t i;

	pthread_mutex_lock(&long_polls.lock);
	for (i = 0; i < long_polls.n && strcmp(long_polls.v[i].name, name); i++)
		;
	if (i == long_polls.n && i < MAX_LONG_NAMES)
		long_polls.v[long_polls.n++] = (struct long_polls){ .name = name };
	if (i < long_polls.n) {
		long_polls.v[i].n++;
		if (took_ns > long_polls.v[i].longest_ns)
			long_polls.v[i].longest_ns = took_ns;
	} else {
		long_polls.unnamed++;
	}
	pthread_mutex_unlock(&long_polls.lock);
}

void rt_print_long_polls(FILE *out)
{
	for (size_t i = 0; i < long_polls.n; i++)
		fprintf(out, "sample-executor: long polls %s=%llu longest=%.2fms\n",
			long_polls.v[i].name, (unsigned long long)long_polls.v[i].n,
			(double)long_polls.v[i].longest_ns / 1e6);
	if (long_polls.unnamed)
		fprintf(out, "sample-executor: long polls of more than %d names: %llu more\n",
			MAX_LONG_NAMES, (unsigned long long)long_polls.unnamed);
}

static void stat_add(_Atomic uint64_t *counter, uint64_t n)
{
	atomic_fetch_add_explicit(counter, n, memory_order_relaxed);
}

/*
 * Each probe is emitted from exactly one noinline function, so the binary has
 * exactly one stapsdt note per probe: inlining would copy the note into every
 * caller. Call sites test the semaphore first, so an untraced run never even
 * makes the call, and never computes a queue depth.
 *
 * The shared-library build inlines them (SAMPLE_EXECUTOR_INLINE_PROBES): a
 * probe there has a site in every caller, each with its arguments where the
 * compiler left them, as in runtimes whose probes sit in inline functions.
 */
#if defined(SAMPLE_EXECUTOR_INLINE_PROBES)
#define PROBE_FN static inline __attribute__((always_inline))
#elif defined(__clang__)
#define PROBE_FN static __attribute__((noinline))
#else
#define PROBE_FN static __attribute__((noinline, noclone))
#endif

PROBE_FN void probe_task_spawn(const struct task *t, int queue, unsigned depth)
{
	ASYNCTRACE_TASK_SPAWN(t->id, t->parent, t->name, queue, depth);
}

PROBE_FN void probe_poll_begin(const struct task *t, struct worker *w)
{
	ASYNCTRACE_POLL_BEGIN(t->id, w->index, lq_len(&w->lq), t->name);
}

PROBE_FN void probe_poll_end(uint64_t task_id, const struct worker *w,
			     int ready, int queue, unsigned depth)
{
	ASYNCTRACE_POLL_END(task_id, w->index, ready, queue, depth);
}

PROBE_FN void probe_wake(const struct task *t, int queue, unsigned depth)
{
	uint64_t waker = cur_task ? cur_task->id : 0;
	int worker = cur_worker ? (int)cur_worker->index : -1;

	ASYNCTRACE_WAKE(t->id, waker, worker, queue, depth);
}

PROBE_FN void probe_steal(unsigned thief, unsigned victim, unsigned count,
			  unsigned thief_depth, unsigned victim_depth)
{
	ASYNCTRACE_STEAL(thief, victim, count, thief_depth, victim_depth);
}

PROBE_FN void probe_worker_park(unsigned worker)
{
	ASYNCTRACE_WORKER_PARK(worker);
}

PROBE_FN void probe_worker_unpark(unsigned worker)
{
	ASYNCTRACE_WORKER_UNPARK(worker);
}

/* ---- parking ---------------------------------------------------------- */

static void notify(struct worker *w)
{
	pthread_mutex_lock(&w->park_lock);
	w->notified = true;
	pthread_cond_signal(&w->park_cond);
	pthread_mutex_unlock(&w->park_lock);
}

/*
 * Wake one parked worker, if any, for work just pushed. The unlocked check
 * keeps the common case (everybody busy) free of locks. It cannot miss a
 * worker that is about to sleep: the pusher stores the queue length and then
 * loads nparked, the parker stores nparked and then loads the queue lengths,
 * all seq_cst, so at least one of the two sees the other (see park()).
 *
 * With lazy_unpark_ns it wakes nobody: that is the regression the option
 * models. Parked workers find the work when their nap ends.
 */
static void unpark_one(void)
{
	struct worker *w;

	if (rt.cfg.lazy_unpark_ns || atomic_load(&rt.nparked) == 0)
		return;
	pthread_mutex_lock(&rt.idle_lock);
	if (rt.nidle == 0) {
		pthread_mutex_unlock(&rt.idle_lock);
		return;
	}
	w = &rt.workers[rt.idle[--rt.nidle]];
	w->idle = false;
	atomic_store(&rt.nparked, rt.nidle);
	pthread_mutex_unlock(&rt.idle_lock);
	notify(w);
}

/* Could @w find something to run if it stayed awake? */
static bool work_available(struct worker *w)
{
	if (lq_len(&w->lq) || inj_len(&rt.inject))
		return true;
	if (!rt.cfg.steal)
		return false;
	for (unsigned i = 0; i < rt.cfg.workers; i++)
		if (lq_len(&rt.workers[i].lq))
			return true;
	return false;
}

static void enter_idle(struct worker *w)
{
	pthread_mutex_lock(&rt.idle_lock);
	if (w->idle || rt.nidle == rt.cfg.workers)
		fatal("bug: worker-%u parks twice", w->index);
	rt.idle[rt.nidle++] = w->index;
	w->idle = true;
	atomic_store(&rt.nparked, rt.nidle);
	pthread_mutex_unlock(&rt.idle_lock);
}

/* Take @w off the idle stack, unless a notifier already did. */
static void leave_idle(struct worker *w)
{
	pthread_mutex_lock(&rt.idle_lock);
	if (w->idle) {
		for (unsigned i = 0; i < rt.nidle; i++) {
			if (rt.idle[i] == w->index) {
				rt.idle[i] = rt.idle[--rt.nidle];
				break;
			}
		}
		w->idle = false;
		atomic_store(&rt.nparked, rt.nidle);
	}
	pthread_mutex_unlock(&rt.idle_lock);
}

/*
 * Sleep until notified or, with lazy_unpark_ns, until the nap is over,
 * whichever comes first. Caller holds w->park_lock.
 */
static void park_sleep_locked(struct worker *w)
{
	struct timespec until;
	uint64_t deadline;

	if (!rt.cfg.lazy_unpark_ns) {
		while (!w->notified)
			pthread_cond_wait(&w->park_cond, &w->park_lock);
		return;
	}

	/* park_cond runs on CLOCK_MONOTONIC, the clock of now_ns(). */
	deadline = now_ns() + rt.cfg.lazy_unpark_ns;
	until.tv_sec = (time_t)(deadline / NSEC_PER_SEC);
	until.tv_nsec = (long)(deadline % NSEC_PER_SEC);
	while (!w->notified) {
		int err = pthread_cond_timedwait(&w->park_cond, &w->park_lock,
						 &until);

		if (err == ETIMEDOUT)
			break;
		if (err)
			fatal("pthread_cond_timedwait: %s", strerror(err));
	}
}

static void park(struct worker *w)
{
	bool slept = false;

	enter_idle(w);
	/*
	 * Work pushed before we got on the idle stack saw nobody to wake, so
	 * look once more now that pushers can see us.
	 */
	if (!work_available(w) && !atomic_load(&rt.stop)) {
		pthread_mutex_lock(&w->park_lock);
		/* Already notified (possibly stale): skip the sleep. */
		if (!w->notified) {
			slept = true;
			stat_add(&rt.parks, 1);
			if (ASYNCTRACE_ENABLED(worker_park))
				probe_worker_park(w->index);
			park_sleep_locked(w);
		}
		pthread_mutex_unlock(&w->park_lock);
	}

	/*
	 * However we got here (notified, nap over, or never slept), we are
	 * awake and about to look for work: never stay on the idle stack (we
	 * would be pushed twice next time), and drop the notification, which
	 * has done its job or is stale.
	 */
	leave_idle(w);
	pthread_mutex_lock(&w->park_lock);
	w->notified = false;
	pthread_mutex_unlock(&w->park_lock);
	if (slept && ASYNCTRACE_ENABLED(worker_unpark))
		probe_worker_unpark(w->index);
}

/* ---- pushing ---------------------------------------------------------- */

/* What a push is part of; it decides which probe announces it. */
enum push_reason {
	PUSH_SPAWN,
	PUSH_WAKE,
	PUSH_REQUEUE,
};

/* Called inside the queue's critical section, right after the push. */
static void announce_push(enum push_reason why, struct task *t, int queue,
			  unsigned depth)
{
	switch (why) {
	case PUSH_SPAWN:
		if (ASYNCTRACE_ENABLED(task_spawn))
			probe_task_spawn(t, queue, depth);
		break;
	case PUSH_WAKE:
		if (ASYNCTRACE_ENABLED(wake))
			probe_wake(t, queue, depth);
		break;
	case PUSH_REQUEUE:
		if (ASYNCTRACE_ENABLED(poll_end))
			probe_poll_end(t->id, cur_worker, 0, queue, depth);
		break;
	}
}

/*
 * A full local queue moves its older half to the injection queue, as tokio
 * does: the backlog becomes visible to every worker instead of piling up
 * behind one. Caller holds w->lq.lock.
 */
static void spill_half_locked(struct worker *w)
{
	struct task *batch[LOCAL_QUEUE_CAP / 2];
	unsigned n = lq_take_locked(&w->lq, batch, ARRAY_SIZE(batch));

	pthread_mutex_lock(&rt.inject.lock);
	for (unsigned i = 0; i < n; i++)
		inj_push_locked(&rt.inject, batch[i]);
	pthread_mutex_unlock(&rt.inject.lock);
}

/*
 * Queue a SCHEDULED task: on the current worker's local queue when called
 * from a worker thread, else on the injection queue.
 */
static void schedule(struct task *t, enum push_reason why)
{
	struct worker *w = cur_worker;
	bool spilled = false;

	if (!w) {
		pthread_mutex_lock(&rt.inject.lock);
		inj_push_locked(&rt.inject, t);
		announce_push(why, t, ASYNCTRACE_QUEUE_INJECT,
			      inj_len(&rt.inject));
		pthread_mutex_unlock(&rt.inject.lock);
		unpark_one();
		return;
	}

	pthread_mutex_lock(&w->lq.lock);
	if (lq_full_locked(&w->lq)) {
		spill_half_locked(w);
		spilled = true;
	}
	lq_push_locked(&w->lq, t);
	announce_push(why, t, (int)w->index, lq_len(&w->lq));
	pthread_mutex_unlock(&w->lq.lock);
	/*
	 * A requeue wakes nobody: this worker is awake and will run the task
	 * soon, and waking an idle worker only makes it steal the task back
	 * and forth (each round trip costs two futex calls), which turns a
	 * yield loop into a storm of steals and parks.
	 */
	if (spilled || (rt.cfg.unpark_on_local_push && why != PUSH_REQUEUE))
		unpark_one();
}

/* ---- spawning and waking ---------------------------------------------- */

void task_spawn(const char *name, task_poll_fn poll, void *data,
		task_drop_fn drop, struct join *join)
{
	struct task *t = task_alloc(name, poll, data, drop, join,
				    cur_task ? cur_task->id : 0);

	atomic_store(&t->state, TASK_SCHEDULED);
	stat_add(&rt.tasks, 1);
	schedule(t, PUSH_SPAWN);
}

void task_wake(struct task *t)
{
	int s = atomic_load(&t->state);

	stat_add(&rt.wakes, 1);
	for (;;) {
		if (s == TASK_IDLE) {
			if (atomic_compare_exchange_weak(&t->state, &s,
							 TASK_SCHEDULED)) {
				schedule(t, PUSH_WAKE);
				return;
			}
		} else if (s == TASK_RUNNING) {
			/* Its worker requeues it when the poll returns. */
			if (atomic_compare_exchange_weak(&t->state, &s,
						TASK_RUNNING_NOTIFIED))
				break;
		} else {
			/* Already queued, already notified, or complete. */
			break;
		}
	}
	if (ASYNCTRACE_ENABLED(wake))
		probe_wake(t, ASYNCTRACE_QUEUE_NONE, 0);
}

struct task *task_current(void)
{
	return cur_task;
}

unsigned rt_local_queue_len(void)
{
	return cur_worker ? lq_len(&cur_worker->lq) : 0;
}

/* ---- the worker loop -------------------------------------------------- */

static struct task *local_pop(struct worker *w)
{
	struct task *t;

	pthread_mutex_lock(&w->lq.lock);
	t = lq_pop_locked(&w->lq);
	pthread_mutex_unlock(&w->lq.lock);
	return t;
}

static struct task *inject_pop(void)
{
	struct task *t;

	if (inj_len(&rt.inject) == 0)
		return NULL;
	pthread_mutex_lock(&rt.inject.lock);
	t = inj_pop_locked(&rt.inject);
	pthread_mutex_unlock(&rt.inject.lock);
	return t;
}

/*
 * Take half (rounded up) of the first non-empty victim's queue, starting at a
 * random worker so thieves spread out. The oldest stolen task is returned to
 * run now, the rest go on the thief's queue. The thief's queue has room: it
 * was empty when we decided to steal, and only its owner pushes to it.
 */
static struct task *steal(struct worker *thief)
{
	unsigned n = rt.cfg.workers;
	unsigned start = (unsigned)prng_range(&thief->rng, 0, n - 1);

	for (unsigned i = 0; i < n; i++) {
		struct worker *victim = &rt.workers[(start + i) % n];
		struct task *batch[LOCAL_QUEUE_CAP / 2];
		unsigned len, count, victim_depth, thief_depth;

		if (victim == thief || lq_len(&victim->lq) == 0)
			continue;

		pthread_mutex_lock(&victim->lq.lock);
		len = lq_len(&victim->lq);
		count = lq_take_locked(&victim->lq, batch, len - len / 2);
		victim_depth = lq_len(&victim->lq);
		pthread_mutex_unlock(&victim->lq.lock);
		if (count == 0)
			continue;

		pthread_mutex_lock(&thief->lq.lock);
		for (unsigned j = 1; j < count; j++)
			lq_push_locked(&thief->lq, batch[j]);
		thief_depth = lq_len(&thief->lq);
		stat_add(&rt.steals, 1);
		stat_add(&rt.stolen, count);
		if (ASYNCTRACE_ENABLED(steal))
			probe_steal(thief->index, victim->index, count,
				    thief_depth, victim_depth);
		pthread_mutex_unlock(&thief->lq.lock);
		return batch[0];
	}
	return NULL;
}

static struct task *next_task(struct worker *w)
{
	struct task *t = NULL;

	if ((w->polls + 1) % FAIRNESS_INTERVAL == 0)
		t = inject_pop();
	if (!t)
		t = local_pop(w);
	if (!t)
		t = inject_pop();
	if (!t && rt.cfg.steal && rt.cfg.workers > 1)
		t = steal(w);
	return t;
}

static void run_task(struct worker *w, struct task *t)
{
	uint64_t id = t->id; /* t may be freed before poll_end */
	const char *name = t->name;
	uint64_t began = rt.cfg.time_polls_ns ? now_ns() : 0;
	enum poll result;
	int expected = TASK_RUNNING;

	w->polls++;
	thread_polls++;
	stat_add(&rt.polls, 1);
	if (!t->polled) {
		t->polled = true;
		stat_add(&rt.first_polls, 1);
	}
	if (ASYNCTRACE_ENABLED(poll_begin))
		probe_poll_begin(t, w);

	/* Only the popping worker leaves SCHEDULED: a plain store will do. */
	atomic_store(&t->state, TASK_RUNNING);
	cur_task = t;
	ASYNCTRACE_CURRENT_BEGIN(t->id, t->name);
	result = t->poll(t, t->data);
#ifdef SLOW_POLL_NS
	/* the deliberately slowed build (make sample-executor-slow): a regression to catch */
	burn_cpu_ns(SLOW_POLL_NS);
#endif

	if (result == POLL_READY) {
		atomic_store(&t->state, TASK_COMPLETE);
		/*
		 * Completing is part of the poll, as in tokio: a join parent
		 * is woken inside it, with this child as the waker.
		 */
		task_finish(t); /* may free t */
		if (ASYNCTRACE_ENABLED(poll_end))
			probe_poll_end(id, w, 1, ASYNCTRACE_QUEUE_NONE, 0);
	} else if (!atomic_compare_exchange_strong(&t->state, &expected,
						   TASK_IDLE)) {
		/* Woken while running: run it again, after what is queued. */
		atomic_store(&t->state, TASK_SCHEDULED);
		schedule(t, PUSH_REQUEUE);
	} else {
		/*
		 * Idle now: a wake may already have queued the task and
		 * another worker begun its next poll (and even freed it).
		 * That is fine, tracers pair poll_begin and poll_end per
		 * thread, so only the id is used from here.
		 */
		if (ASYNCTRACE_ENABLED(poll_end))
			probe_poll_end(id, w, 0, ASYNCTRACE_QUEUE_NONE, 0);
	}
	ASYNCTRACE_CURRENT_END();
	cur_task = NULL;
	if (began) {
		uint64_t took = now_ns() - began;

		if (took >= rt.cfg.time_polls_ns)
			keep_long_poll(name, took);
	}
}

static void wait_at_gate(void)
{
	pthread_mutex_lock(&rt.gate_lock);
	while (!rt.gate_open)
		pthread_cond_wait(&rt.gate_cond, &rt.gate_lock);
	pthread_mutex_unlock(&rt.gate_lock);
}

static void thread_ended(const struct worker *w)
{
	pthread_mutex_lock(&ended.lock);
	ended.v = xrealloc(ended.v, (ended.n + 1) * sizeof(*ended.v));
	ended.v[ended.n++] = (struct thread_record){ gettid(), w->index, thread_polls };
	pthread_mutex_unlock(&ended.lock);
}

static void *worker_main(void *arg);

static void name_worker(pthread_t thread, unsigned index)
{
	/* The kernel keeps 15 chars; "worker-1023" fits. */
	char name[32];

	snprintf(name, sizeof(name), "worker-%u", index);
	pthread_setname_np(thread, name);
}

/*
 * --thread-churn: a new thread takes over this worker, and this one ends.
 * rt_stop() joins whichever thread the worker has when it stops: once stop
 * is set no worker changes hands.
 */
static bool hand_over(struct worker *w)
{
	pthread_t next;
	bool handed = false;

	pthread_mutex_lock(&w->thread_lock);
	if (!atomic_load(&rt.stop) && pthread_create(&next, NULL, worker_main, w) == 0) {
		name_worker(next, w->index);
		pthread_detach(pthread_self());
		w->thread = next;
		thread_ended(w);
		handed = true;
	}
	pthread_mutex_unlock(&w->thread_lock);
	return handed;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	uint64_t born;

	cur_worker = w;
	asynctrace_current.worker = w->index;
	asynctrace_current.version = ASYNCTRACE_CURRENT_VERSION;
	wait_at_gate();
	born = now_ns();
	while (!atomic_load(&rt.stop)) {
		struct task *t = next_task(w);

		if (!t) {
			park(w);
			continue;
		}
		run_task(w, t);
		if (rt.cfg.thread_churn_ns && now_ns() - born >= rt.cfg.thread_churn_ns &&
		    hand_over(w))
			return NULL;
	}
	thread_ended(w);
	return NULL;
}

void rt_print_threads(FILE *out)
{
	for (size_t i = 0; i < ended.n; i++)
		fprintf(out, "sample-executor: thread %d worker %u polls %llu\n", (int)ended.v[i].tid,
			ended.v[i].worker, (unsigned long long)ended.v[i].polls);
	free(ended.v);
	ended.v = NULL;
	ended.n = 0;
}

/* ---- lifecycle -------------------------------------------------------- */

void rt_start(const struct runtime_config *cfg)
{
	pthread_condattr_t park_attr;

	rt.cfg = *cfg;
	/* sample mode's readers find each worker's asynctrace_current from it */
	asynctrace_current_tpoff =
		(long)((char *)&asynctrace_current - (char *)__builtin_thread_pointer());
	rt.workers = xcalloc(cfg->workers, sizeof(*rt.workers));
	rt.idle = xcalloc(cfg->workers, sizeof(*rt.idle));
	inj_init(&rt.inject);
	pthread_mutex_init(&rt.idle_lock, NULL);
	pthread_mutex_init(&rt.gate_lock, NULL);
	pthread_cond_init(&rt.gate_cond, NULL);
	/* Timed parks (lazy_unpark_ns) count in now_ns() time. */
	pthread_condattr_init(&park_attr);
	pthread_condattr_setclock(&park_attr, CLOCK_MONOTONIC);

	for (unsigned i = 0; i < cfg->workers; i++) {
		struct worker *w = &rt.workers[i];

		w->index = i;
		lq_init(&w->lq);
		prng_seed(&w->rng, i + 1);
		pthread_mutex_init(&w->park_lock, NULL);
		pthread_cond_init(&w->park_cond, &park_attr);
		pthread_mutex_init(&w->thread_lock, NULL);
	}
	pthread_condattr_destroy(&park_attr);

	reactor_start();

	for (unsigned i = 0; i < cfg->workers; i++) {
		struct worker *w = &rt.workers[i];
		int err;

		err = pthread_create(&w->thread, NULL, worker_main, w);
		if (err)
			fatal("pthread_create: %s", strerror(err));
		name_worker(w->thread, i);
	}
}

static void open_gate(void)
{
	pthread_mutex_lock(&rt.gate_lock);
	rt.gate_open = true;
	pthread_cond_broadcast(&rt.gate_cond);
	pthread_mutex_unlock(&rt.gate_lock);
}

void rt_go(void)
{
	open_gate();
}

void rt_stop(void)
{
	atomic_store(&rt.stop, true);
	open_gate();
	for (unsigned i = 0; i < rt.cfg.workers; i++)
		notify(&rt.workers[i]);
	for (unsigned i = 0; i < rt.cfg.workers; i++) {
		struct worker *w = &rt.workers[i];
		pthread_t thread;

		pthread_mutex_lock(&w->thread_lock);
		thread = w->thread;
		pthread_mutex_unlock(&w->thread_lock);
		pthread_join(thread, NULL);
	}
	reactor_stop();
}

void rt_destroy(void)
{
	/*
	 * Tasks still queued or waiting are simply dropped: their data is
	 * released and they are freed without another poll. The queues hold
	 * no references of their own, so they need no draining.
	 */
	tasks_pin_all();
	tasks_drop_unfinished();
	reactor_destroy();
	tasks_free_all();

	for (unsigned i = 0; i < rt.cfg.workers; i++) {
		struct worker *w = &rt.workers[i];

		lq_destroy(&w->lq);
		pthread_mutex_destroy(&w->park_lock);
		pthread_cond_destroy(&w->park_cond);
		pthread_mutex_destroy(&w->thread_lock);
	}
	inj_destroy(&rt.inject);
	pthread_mutex_destroy(&rt.idle_lock);
	pthread_mutex_destroy(&rt.gate_lock);
	pthread_cond_destroy(&rt.gate_cond);
	free(rt.workers);
	free(rt.idle);
	rt.workers = NULL;
	rt.idle = NULL;
}

void rt_get_stats(struct runtime_stats *out)
{
	out->tasks = atomic_load(&rt.tasks);
	out->polls = atomic_load(&rt.polls);
	out->wakes = atomic_load(&rt.wakes);
	out->steals = atomic_load(&rt.steals);
	out->stolen = atomic_load(&rt.stolen);
	out->parks = atomic_load(&rt.parks);
	out->unpolled = out->tasks - atomic_load(&rt.first_polls);
}
