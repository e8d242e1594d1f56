// SPDX-License-Identifier: MIT
#include "source/rings.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <unistd.h>

#include <linux/bpf.h>

#include "asynctraced.h"

/*
 * A BPF ring buffer as the kernel maps it (kernel/bpf/ringbuf.c): a page
 * with the consumer position, which we write; a page with the producer
 * position, then the data, mapped twice in a row so that a record that wraps
 * around reads as one piece. Each record starts with 8 bytes: its length,
 * with a busy bit while it is being written and a discard bit if it was
 * thrown away, then the offset of its page (of no use to us).
 */
struct ring {
	unsigned long *consumer_pos;
	const unsigned long *producer_pos;
	const char *data;
	uint64_t cons;		/* our position, published at the end of a read */
	uint64_t prod;		/* the producer's, as of the start of the read */
	uint64_t head_time;	/* the waiting record's time; UINT64_MAX: none */
	bool head_busy;		/* the next record is still being written */
};

struct rings {
	struct ring *r;
	int n;
	size_t size;
	long page;
	int epfd;
	rings_fn fn;
	void *ctx;
};

/* When a record was made: the end of what it describes, for polls and parks. */
static uint64_t record_time(const void *rec, size_t size)
{
	const struct at_hdr *h = rec;

	if (size < sizeof(*h))
		return 0;
	if (h->kind == AT_EV_POLL && size >= sizeof(struct at_poll))
		return h->ts + ((const struct at_poll *)rec)->duration_ns;
	if (h->kind == AT_EV_PARK && size >= sizeof(struct at_park))
		return h->ts + ((const struct at_park *)rec)->duration_ns;
	return h->ts;
}

static uint32_t record_span(uint32_t len)
{
	return (len + BPF_RINGBUF_HDR_SZ + 7) & ~7u;
}

/*
 * Finds the ring's next record, passing over discarded ones: sets head_time
 * (UINT64_MAX if there is none yet) or head_busy. Returns its length.
 */
static uint32_t ring_head(struct ring *r, size_t mask)
{
	r->head_busy = false;
	r->head_time = UINT64_MAX;
	while (r->cons < r->prod) {
		const uint32_t *hdr = (const uint32_t *)(r->data + (r->cons & mask));
		uint32_t len = __atomic_load_n(hdr, __ATOMIC_ACQUIRE);

		if (len & BPF_RINGBUF_BUSY_BIT) {
			r->head_busy = true;
			return 0;
		}
		if (len & BPF_RINGBUF_DISCARD_BIT) {
			r->cons += record_span(len & ~BPF_RINGBUF_DISCARD_BIT);
			continue;
		}
		r->head_time = record_time(hdr + 2, len);
		return len;
	}
	return 0;
}

static void ring_unmap(struct rings *rs, struct ring *r)
{
	if (r->consumer_pos)
		munmap(r->consumer_pos, (size_t)rs->page);
	if (r->producer_pos)
		munmap((void *)r->producer_pos, (size_t)rs->page + 2 * rs->size);
}

static int ring_map(struct rings *rs, struct ring *r, int fd)
{
	void *p = mmap(NULL, (size_t)rs->page, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);

	if (p == MAP_FAILED)
		return -errno;
	r->consumer_pos = p;
	p = mmap(NULL, (size_t)rs->page + 2 * rs->size, PROT_READ, MAP_SHARED, fd, rs->page);
	if (p == MAP_FAILED)
		return -errno;
	r->producer_pos = p;
	r->data = (const char *)p + rs->page;
	r->cons = __atomic_load_n(r->consumer_pos, __ATOMIC_ACQUIRE);
	return 0;
}

int rings__new(struct rings **rp, const int *fds, int n, size_t size, rings_fn fn, void *ctx)
{
	struct rings *rs = calloc(1, sizeof(*rs));
	int err = 0;

	if (!rs)
		return -ENOMEM;
	rs->r = calloc((size_t)n, sizeof(*rs->r));
	rs->n = n;
	rs->size = size;
	rs->page = sysconf(_SC_PAGESIZE);
	rs->fn = fn;
	rs->ctx = ctx;
	rs->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (!rs->r || rs->epfd < 0)
		err = rs->r ? -errno : -ENOMEM;
	for (int i = 0; !err && i < n; i++) {
		/*
		 * Edge-triggered: records held back for later would otherwise
		 * keep the ring readable and its reader spinning.
		 */
		struct epoll_event ev = { .events = EPOLLIN | EPOLLET, .data.u32 = (uint32_t)i };

		err = ring_map(rs, &rs->r[i], fds[i]);
		if (!err && epoll_ctl(rs->epfd, EPOLL_CTL_ADD, fds[i], &ev))
			err = -errno;
	}
	if (err) {
		rings__free(rs);
		return err;
	}
	*rp = rs;
	return 0;
}

int rings__fd(const struct rings *rs)
{
	return rs->epfd;
}

int rings__consume(struct rings *rs, size_t max, uint64_t until)
{
	size_t mask = rs->size - 1, done = 0;
	struct epoll_event ev[16];
	int err = 0;

	/* Wake-ups seen: the next one makes our descriptor readable again. */
	while (epoll_wait(rs->epfd, ev, 16, 0) == 16)
		;
	for (int i = 0; i < rs->n; i++) {
		struct ring *r = &rs->r[i];

		r->prod = __atomic_load_n(r->producer_pos, __ATOMIC_ACQUIRE);
		ring_head(r, mask);
	}
	while (!max || done < max) {
		struct ring *best = NULL, *r;
		bool busy = false, idle = false;
		const uint32_t *hdr;
		uint32_t len;

		for (int i = 0; i < rs->n; i++) {
			r = &rs->r[i];
			busy |= r->head_busy;
			idle |= r->head_time == UINT64_MAX;
			if (r->head_time != UINT64_MAX && (!best || r->head_time < best->head_time))
				best = r;
		}
		/*
		 * A record still being written may be the earliest; a ring with
		 * nothing waiting may yet get one older than the best we have.
		 */
		if (!best || busy || (idle && best->head_time > until))
			break;
		hdr = (const uint32_t *)(best->data + (best->cons & mask));
		len = *hdr;
		if (len > rs->size || len < sizeof(struct at_hdr)) {
			err = -EINVAL;
			break;
		}
		best->cons += record_span(len);
		done++;
		err = rs->fn(rs->ctx, hdr + 2, len);
		if (err)
			break;
		ring_head(best, mask);
	}
	for (int i = 0; i < rs->n; i++)
		__atomic_store_n(rs->r[i].consumer_pos, rs->r[i].cons, __ATOMIC_RELEASE);
	if (err)
		return err;
	return done > INT32_MAX ? INT32_MAX : (int)done;
}

bool rings__pending(const struct rings *rs)
{
	for (int i = 0; i < rs->n; i++)
		if (rs->r[i].cons < __atomic_load_n(rs->r[i].producer_pos, __ATOMIC_ACQUIRE))
			return true;
	return false;
}

void rings__free(struct rings *rs)
{
	if (!rs)
		return;
	for (int i = 0; rs->r && i < rs->n; i++)
		ring_unmap(rs, &rs->r[i]);
	if (rs->epfd >= 0)
		close(rs->epfd);
	free(rs->r);
	free(rs);
}
