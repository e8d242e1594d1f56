/* SPDX-License-Identifier: MIT */
/*
 * Run queues: a bounded FIFO ring per worker and one unbounded injection
 * list. The *caller* takes each queue's lock, because probes that report a
 * queue's depth must fire inside the critical section that changed it (that
 * is what keeps a tracer's view ordered: a task is announced before another
 * thread can pop it). The length is also kept in an atomic so that other
 * threads can peek at it without the lock.
 */
#ifndef SE_QUEUE_H
#define SE_QUEUE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

struct task;

#define LOCAL_QUEUE_CAP 256

struct local_queue {
	pthread_mutex_t lock;
	unsigned head;          /* slot of the oldest task */
	_Atomic unsigned len;   /* written under lock, read anywhere */
	struct task *slot[LOCAL_QUEUE_CAP];
};

struct inject_queue {
	pthread_mutex_t lock;
	struct task *head;
	struct task *tail;
	_Atomic unsigned len;   /* written under lock, read anywhere */
};

void lq_init(struct local_queue *q);
void lq_destroy(struct local_queue *q);

static inline unsigned lq_len(struct local_queue *q)
{
	return atomic_load(&q->len);
}

/* The _locked functions require q->lock to be held. */
static inline bool lq_full_locked(struct local_queue *q)
{
	return atomic_load_explicit(&q->len, memory_order_relaxed) ==
	       LOCAL_QUEUE_CAP;
}

/* Append @t; the queue must not be full. */
void lq_push_locked(struct local_queue *q, struct task *t);
/* Remove the oldest task, or return NULL. */
struct task *lq_pop_locked(struct local_queue *q);
/* Remove up to @n of the oldest tasks into @out; returns how many. */
unsigned lq_take_locked(struct local_queue *q, struct task **out, unsigned n);

void inj_init(struct inject_queue *q);
void inj_destroy(struct inject_queue *q);

static inline unsigned inj_len(struct inject_queue *q)
{
	return atomic_load(&q->len);
}

void inj_push_locked(struct inject_queue *q, struct task *t);
struct task *inj_pop_locked(struct inject_queue *q);

#endif /* SE_QUEUE_H */
