/* SPDX-License-Identifier: MIT */
#include <stddef.h>

#include "queue.h"
#include "task.h"

/*
 * Lengths are stored with seq_cst atomics on purpose: the parking protocol in
 * runtime.c relies on "push, then read the parked count" and "announce
 * parking, then read the lengths" being ordered with each other.
 */

void lq_init(struct local_queue *q)
{
	pthread_mutex_init(&q->lock, NULL);
	q->head = 0;
	atomic_init(&q->len, 0);
}

void lq_destroy(struct local_queue *q)
{
	pthread_mutex_destroy(&q->lock);
}

void lq_push_locked(struct local_queue *q, struct task *t)
{
	unsigned len = atomic_load_explicit(&q->len, memory_order_relaxed);

	q->slot[(q->head + len) % LOCAL_QUEUE_CAP] = t;
	atomic_store(&q->len, len + 1);
}

struct task *lq_pop_locked(struct local_queue *q)
{
	unsigned len = atomic_load_explicit(&q->len, memory_order_relaxed);
	struct task *t;

	if (len == 0)
		return NULL;
	t = q->slot[q->head];
	q->head = (q->head + 1) % LOCAL_QUEUE_CAP;
	atomic_store(&q->len, len - 1);
	return t;
}

unsigned lq_take_locked(struct local_queue *q, struct task **out, unsigned n)
{
	unsigned len = atomic_load_explicit(&q->len, memory_order_relaxed);

	if (n > len)
		n = len;
	for (unsigned i = 0; i < n; i++)
		out[i] = q->slot[(q->head + i) % LOCAL_QUEUE_CAP];
	q->head = (q->head + n) % LOCAL_QUEUE_CAP;
	atomic_store(&q->len, len - n);
	return n;
}

void inj_init(struct inject_queue *q)
{
	pthread_mutex_init(&q->lock, NULL);
	q->head = NULL;
	q->tail = NULL;
	atomic_init(&q->len, 0);
}

void inj_destroy(struct inject_queue *q)
{
	pthread_mutex_destroy(&q->lock);
}

void inj_push_locked(struct inject_queue *q, struct task *t)
{
	t->next = NULL;
	if (q->tail)
		q->tail->next = t;
	else
		q->head = t;
	q->tail = t;
	atomic_store(&q->len, atomic_load_explicit(&q->len,
						   memory_order_relaxed) + 1);
}

struct task *inj_pop_locked(struct inject_queue *q)
{
	struct task *t = q->head;

	if (!t)
		return NULL;
	q->head = t->next;
	if (!q->head)
		q->tail = NULL;
	t->next = NULL;
	atomic_store(&q->len, atomic_load_explicit(&q->len,
						   memory_order_relaxed) - 1);
	return t;
}
