// SPDX-License-Identifier: MIT
#include "capture/capture.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <libdeflate.h>
#include <unistd.h>
#include <zlib.h>

#include "capture/capture_v1.h"
#include "capture/capture_v2.h"
#include "lib/outbuf.h"
#include "lib/u64map.h"

/*
 * Tasks kept in the final snapshot, the most poll time first: the report
 * shows the top 50; all of them (up to 16384 histograms) would dwarf a
 * short capture.
 */
#define CAPTURE_TOP_TASKS 256
/* The reader gives the pages it read back to the kernel this often. */
#define RELEASE_BYTES (8u << 20)
/* Distinct names and threads a capture resolves; beyond, they stay unnamed. */
#define CAPTURE_MAX_NAMES 65536
#define CAPTURE_MAX_THREADS 65536

/* A whole record of any size (hdr.size is 16 bits) fits in a chunk. */
_Static_assert(CAPTURE_CHUNK_BYTES >= 65535, "a chunk must hold the largest record");
_Static_assert(CAPTURE_CHUNK_MAX >= CAPTURE_CHUNK_BYTES, "readers take what writers write");

/* The smallest whole record of each capture kind. */
static const uint16_t min_size[AT_CAP_KIND_MAX - AT_CAP_BASE] = {
	[AT_CAP_PROCESS - AT_CAP_BASE] = sizeof(struct cap_process),
	[AT_CAP_NAME - AT_CAP_BASE] = sizeof(struct cap_name) + 1,
	[AT_CAP_THREAD - AT_CAP_BASE] = sizeof(struct cap_thread),
	[AT_CAP_TICK - AT_CAP_BASE] = sizeof(struct at_hdr),
	[AT_CAP_RUNTIME_STATS - AT_CAP_BASE] = sizeof(struct cap_runtime_stats),
	[AT_CAP_WORKER_STATS - AT_CAP_BASE] = sizeof(struct cap_worker_stats),
	[AT_CAP_TASK_STATS - AT_CAP_BASE] = sizeof(struct cap_task_stats),
	[AT_CAP_IDLE_TASK - AT_CAP_BASE] = sizeof(struct cap_idle_task),
	[AT_CAP_STEAL_STATS - AT_CAP_BASE] = sizeof(struct cap_steal_stats),
	[AT_CAP_END - AT_CAP_BASE] = sizeof(struct cap_end),
	[AT_CAP_PROCESS_END - AT_CAP_BASE] = sizeof(struct cap_end),
};

static uint32_t crc(const void *data, size_t len)
{
	return (uint32_t)crc32(crc32(0, Z_NULL, 0), data, (uInt)len);
}

/* --- the snapshot, map values <-> capture records ---------------------------- */

static void queue_to_cap(struct cap_queue *c, const struct at_queue_stats *q)
{
	c->area = q->area;
	c->ts = q->ts;
	c->depth = q->depth;
	c->peak = q->peak;
}

static void queue_from_cap(struct at_queue_stats *q, const struct cap_queue *c)
{
	q->area = c->area;
	q->ts = c->ts;
	q->depth = c->depth;
	q->peak = c->peak;
}

static void hist_to_cap(struct cap_hist *c, const struct at_hist *h)
{
	for (int i = 0; i < CAP_HIST_SLOTS; i++)
		c->slot[i] = h->slot[i];
}

static void hist_from_cap(struct at_hist *h, const struct cap_hist *c)
{
	for (int i = 0; i < CAP_HIST_SLOTS; i++)
		h->slot[i] = c->slot[i];
}

static void hist32_to_cap(struct cap_hist32 *c, const struct at_hist32 *h)
{
	for (int i = 0; i < CAP_HIST_SLOTS; i++)
		c->slot[i] = h->slot[i];
}

static void hist32_from_cap(struct at_hist32 *h, const struct cap_hist32 *c)
{
	for (int i = 0; i < CAP_HIST_SLOTS; i++)
		h->slot[i] = c->slot[i];
}

static void runtime_to_cap(struct cap_runtime_stats *c, const struct at_runtime_stats *rt)
{
	c->spawns = rt->spawns;
	c->completed = rt->completed;
	c->wakes = rt->wakes;
	c->self_wakes = rt->self_wakes;
	c->outside_wakes = rt->outside_wakes;
	c->unknown_workers = rt->unknown_workers;
	queue_to_cap(&c->inject, &rt->inject);
}

void cap_runtime_stats__get(const struct cap_runtime_stats *c, struct at_runtime_stats *rt)
{
	memset(rt, 0, sizeof(*rt));
	rt->spawns = c->spawns;
	rt->completed = c->completed;
	rt->wakes = c->wakes;
	rt->self_wakes = c->self_wakes;
	rt->outside_wakes = c->outside_wakes;
	rt->unknown_workers = c->unknown_workers;
	queue_from_cap(&rt->inject, &c->inject);
}

static void worker_to_cap(struct cap_worker_stats *c, uint32_t id, const struct at_worker_stats *w)
{
	c->worker = id;
	c->polls = w->polls;
	c->busy_ns = w->busy_ns;
	c->oncpu_ns = w->oncpu_ns;
	c->max_poll_ns = w->max_poll_ns;
	c->wakes = w->wakes;
	c->self_wakes = w->self_wakes;
	c->steals = w->steals;
	c->stolen = w->stolen;
	c->parks = w->parks;
	c->park_ns = w->park_ns;
	c->park_since = w->park_since;
	c->tid = w->tid;
	queue_to_cap(&c->queue, &w->queue);
	hist_to_cap(&c->poll, &w->poll);
	hist_to_cap(&c->oncpu, &w->oncpu);
	hist_to_cap(&c->delay, &w->delay);
}

void cap_worker_stats__get(const struct cap_worker_stats *c, struct at_worker_stats *w)
{
	memset(w, 0, sizeof(*w));
	w->polls = c->polls;
	w->busy_ns = c->busy_ns;
	w->oncpu_ns = c->oncpu_ns;
	w->max_poll_ns = c->max_poll_ns;
	w->wakes = c->wakes;
	w->self_wakes = c->self_wakes;
	w->steals = c->steals;
	w->stolen = c->stolen;
	w->parks = c->parks;
	w->park_ns = c->park_ns;
	w->park_since = c->park_since;
	w->tid = c->tid;
	queue_from_cap(&w->queue, &c->queue);
	hist_from_cap(&w->poll, &c->poll);
	hist_from_cap(&w->oncpu, &c->oncpu);
	hist_from_cap(&w->delay, &c->delay);
}

static void task_to_cap(struct cap_task_stats *c, const struct task_entry *e)
{
	c->task = e->id;
	c->polls = e->s.polls;
	c->wakes = e->s.wakes;
	c->self_wakes = e->s.self_wakes;
	c->poll_ns = e->s.poll_ns;
	c->oncpu_ns = e->s.oncpu_ns;
	c->max_poll_ns = e->s.max_poll_ns;
	c->name_addr = e->s.name_addr;
	c->first_ts = e->s.first_ts;
	c->done = e->s.done;
	hist32_to_cap(&c->poll, &e->s.poll);
	hist32_to_cap(&c->oncpu, &e->s.oncpu);
	hist32_to_cap(&c->delay, &e->s.delay);
}

void cap_task_stats__get(const struct cap_task_stats *c, struct task_entry *e)
{
	memset(e, 0, sizeof(*e));
	e->id = c->task;
	e->s.polls = c->polls;
	e->s.wakes = c->wakes;
	e->s.self_wakes = c->self_wakes;
	e->s.poll_ns = c->poll_ns;
	e->s.oncpu_ns = c->oncpu_ns;
	e->s.max_poll_ns = c->max_poll_ns;
	e->s.name_addr = c->name_addr;
	e->s.first_ts = c->first_ts;
	e->s.done = c->done;
	hist32_from_cap(&e->s.poll, &c->poll);
	hist32_from_cap(&e->s.oncpu, &c->oncpu);
	hist32_from_cap(&e->s.delay, &c->delay);
}

void cap_idle_task__get(const struct cap_idle_task *c, struct idle_entry *e)
{
	e->id = c->task;
	e->idle_since = c->idle_since;
	e->name_addr = c->name_addr;
}

void cap_steal_stats__get(const struct cap_steal_stats *c, struct steal_entry *e)
{
	e->key.thief = c->thief;
	e->key.victim = c->victim;
	e->s.ops = c->ops;
	e->s.tasks = c->tasks;
}

/* --- writing -------------------------------------------------------------- */

struct capture_writer {
	struct outbuf *ob;
	uint64_t records;
	uint8_t *chunk;		/* records not yet written out: the open chunk */
	uint32_t chunk_len;
	uint32_t chunk_records;
	struct u64map names;	/* (pid, address) already named */
	struct u64map threads;	/* tids already named */
	bool begun;		/* the file header is written */
	bool store;		/* chunks go out as they are */
	struct libdeflate_compressor *z;
	uint8_t *zbuf;		/* a chunk deflated; CAPTURE_CHUNK_BYTES: larger is stored */
};

/* A name's key: its process and its address (two processes map the same addresses). */
static uint64_t name_key(uint32_t pid, uint64_t addr)
{
	return (addr ^ (uint64_t)pid * AT_HASH_MULT) | 1ull << 63;
}

/*
 * The open chunk deflated into w->zbuf: its length, or 0 when deflating
 * does not make it smaller (or cannot run): then it is stored as it is.
 */
static uint32_t deflate_chunk(struct capture_writer *w)
{
	if (w->store)
		return 0;
	if (!w->z) {
		w->zbuf = malloc(CAPTURE_CHUNK_BYTES);
		w->z = w->zbuf ? libdeflate_alloc_compressor(CAPTURE_DEFLATE_LEVEL) : NULL;
		if (!w->z) {
			w->store = true;
			return 0;
		}
	}
	/* 0 when it does not fit in fewer bytes than the records */
	return (uint32_t)libdeflate_deflate_compress(w->z, w->chunk, w->chunk_len, w->zbuf,
						     w->chunk_len - 1);
}

/* Closes the open chunk: its header, checksums, and records go to the file. */
static void seal(struct capture_writer *w)
{
	const uint8_t *data;
	struct cap_chunk c;
	uint32_t zlen;

	if (!w->chunk_len)
		return;
	zlen = deflate_chunk(w);
	data = zlen ? w->zbuf : w->chunk;
	c.size = zlen ? zlen : w->chunk_len;
	c.records = w->chunk_records;
	c.raw_size = w->chunk_len;
	c.encoding = zlen ? CAP_CHUNK_DEFLATE : CAP_CHUNK_STORED;
	c.crc = crc(data, c.size);
	c.hdr_crc = crc(&c, offsetof(struct cap_chunk, hdr_crc));
	ob_write(w->ob, &c, sizeof(c));
	ob_write(w->ob, data, c.size);
	w->chunk_len = 0;
	w->chunk_records = 0;
}

static void put(struct capture_writer *w, const void *rec, size_t size)
{
	if (w->chunk_len + size > CAPTURE_CHUNK_BYTES)
		seal(w);
	memcpy(w->chunk + w->chunk_len, rec, size);
	w->chunk_len += (uint32_t)size;
	w->chunk_records++;
	w->records++;
}

/* pid: the process the record is about; 0 for the session's own (tick, end) */
static void hdr(struct at_hdr *h, uint16_t kind, size_t size, uint32_t pid, uint32_t tid,
		uint64_t ts)
{
	h->kind = kind;
	h->size = (uint16_t)size;
	h->tid = tid;
	h->ts = ts;
	h->pid = pid;
	h->pad = 0;
}

int capture_writer__open(struct capture_writer **wp, const char *path)
{
	struct capture_writer *w = calloc(1, sizeof(*w));
	int err;

	if (!w)
		return -ENOMEM;
	w->chunk = malloc(CAPTURE_CHUNK_BYTES);
	if (!w->chunk) {
		free(w);
		return -ENOMEM;
	}
	err = outbuf__open(&w->ob, path);
	if (err) {
		free(w->chunk);
		free(w);
		return err;
	}
	u64map__init(&w->names);
	u64map__init(&w->threads);
	*wp = w;
	return 0;
}

void capture_writer__store(struct capture_writer *w)
{
	w->store = true;
}

void cap_process__set_config(struct cap_process *p, const struct detect_config *c)
{
#define X(field, ...) p->field = c->field;
	DETECT_THRESHOLDS(X)
#undef X
}

void cap_process__config(const struct cap_process *p, struct detect_config *c)
{
	*c = (struct detect_config){ 0 };
#define X(field, ...) c->field = p->field;
	DETECT_THRESHOLDS(X)
#undef X
}

void capture__begin(struct capture_writer *w, const struct cap_process *proc)
{
	struct capture_file_header fh = { .version = CAPTURE_VERSION,
					  .header_size = sizeof(fh) };
	struct cap_process p = *proc;

	if (!w->begun) {
		memcpy(fh.magic, CAPTURE_MAGIC, sizeof(fh.magic));
		ob_write(w->ob, &fh, sizeof(fh));
		w->begun = true;
	}
	hdr(&p.hdr, AT_CAP_PROCESS, sizeof(p), proc->pid, 0, proc->hdr.ts);
	put(w, &p, sizeof(p));
}

void capture__event(struct capture_writer *w, const void *rec, size_t size)
{
	put(w, rec, size);
}

bool capture__has_name(const struct capture_writer *w, uint32_t pid, uint64_t addr)
{
	return !addr || w->names.len >= CAPTURE_MAX_NAMES ||
	       u64map__get(&w->names, name_key(pid, addr));
}

bool capture__has_thread(const struct capture_writer *w, uint32_t tid)
{
	return !tid || w->threads.len >= CAPTURE_MAX_THREADS || u64map__get(&w->threads, tid);
}

void capture__no_name(struct capture_writer *w, uint32_t pid, uint64_t addr)
{
	if (!capture__has_name(w, pid, addr))
		u64map__set(&w->names, name_key(pid, addr), (void *)1);
}

void capture__name(struct capture_writer *w, uint32_t pid, uint64_t addr, const char *name)
{
	uint64_t buf[(sizeof(struct cap_name) + AT_TASK_NAME_LEN + 8) / 8];
	struct cap_name *rec = (struct cap_name *)buf;
	size_t len = strnlen(name, AT_TASK_NAME_LEN - 1);
	size_t size = (sizeof(*rec) + len + 1 + 7) & ~(size_t)7;

	if (capture__has_name(w, pid, addr) || u64map__set(&w->names, name_key(pid, addr), (void *)1))
		return;
	memset(buf, 0, sizeof(buf));
	hdr(&rec->hdr, AT_CAP_NAME, size, pid, 0, 0);
	rec->addr = addr;
	memcpy(rec->name, name, len);
	put(w, rec, size);
}

void capture__thread(struct capture_writer *w, uint32_t pid, uint32_t tid, const char *comm)
{
	struct cap_thread rec;

	if (capture__has_thread(w, tid) || u64map__set(&w->threads, tid, (void *)1))
		return;
	memset(&rec, 0, sizeof(rec));
	hdr(&rec.hdr, AT_CAP_THREAD, sizeof(rec), pid, tid, 0);
	strncpy(rec.comm, comm, sizeof(rec.comm) - 1);
	put(w, &rec, sizeof(rec));
}

void capture__tick(struct capture_writer *w, uint64_t ts)
{
	struct at_hdr rec;

	hdr(&rec, AT_CAP_TICK, sizeof(rec), 0, 0, ts);
	put(w, &rec, sizeof(rec));
}

void capture__snapshot(struct capture_writer *w, const struct stats *st,
		       const uint64_t *counters, uint32_t nr_counters)
{
	uint64_t buf[(sizeof(struct cap_runtime_stats) + AT_STAT_NR * sizeof(uint64_t)) / 8];
	struct cap_runtime_stats *rt = (struct cap_runtime_stats *)buf;
	struct cap_worker_stats ws;
	struct cap_task_stats ts;
	struct cap_idle_task it;
	struct cap_steal_stats ss;
	struct task_entry *top;
	size_t size;

	if (nr_counters > AT_STAT_NR)
		nr_counters = AT_STAT_NR;
	size = sizeof(*rt) + nr_counters * sizeof(uint64_t);
	memset(buf, 0, sizeof(buf));
	hdr(&rt->hdr, AT_CAP_RUNTIME_STATS, size, st->pid, 0, st->ts);
	runtime_to_cap(rt, &st->rt);
	rt->dropped = st->dropped;
	rt->nr_counters = nr_counters;
	memcpy(rt->counters, counters, nr_counters * sizeof(uint64_t));
	put(w, rt, size);
	for (uint32_t i = 0; i < st->nr_workers; i++) {
		memset(&ws, 0, sizeof(ws));
		hdr(&ws.hdr, AT_CAP_WORKER_STATS, sizeof(ws), st->pid, 0, st->ts);
		worker_to_cap(&ws, i, &st->workers[i]);
		put(w, &ws, sizeof(ws));
	}
	top = malloc(st->nr_tasks * sizeof(*top) + 1);
	if (top && st->nr_tasks) {
		memcpy(top, st->tasks, st->nr_tasks * sizeof(*top));
		qsort(top, st->nr_tasks, sizeof(*top), task_entry__by_poll_ns);
	}
	for (size_t i = 0; top && i < st->nr_tasks && i < CAPTURE_TOP_TASKS; i++) {
		memset(&ts, 0, sizeof(ts));
		hdr(&ts.hdr, AT_CAP_TASK_STATS, sizeof(ts), st->pid, 0, st->ts);
		task_to_cap(&ts, &top[i]);
		put(w, &ts, sizeof(ts));
	}
	free(top);
	for (size_t i = 0; i < st->nr_idle; i++) {
		memset(&it, 0, sizeof(it));
		hdr(&it.hdr, AT_CAP_IDLE_TASK, sizeof(it), st->pid, 0, st->ts);
		it.task = st->idle[i].id;
		it.idle_since = st->idle[i].idle_since;
		it.name_addr = st->idle[i].name_addr;
		put(w, &it, sizeof(it));
	}
	for (size_t i = 0; i < st->nr_steals; i++) {
		memset(&ss, 0, sizeof(ss));
		hdr(&ss.hdr, AT_CAP_STEAL_STATS, sizeof(ss), st->pid, 0, st->ts);
		ss.thief = st->steals[i].key.thief;
		ss.victim = st->steals[i].key.victim;
		ss.ops = st->steals[i].s.ops;
		ss.tasks = st->steals[i].s.tasks;
		put(w, &ss, sizeof(ss));
	}
}

static void end_record(struct capture_writer *w, uint32_t kind, uint32_t pid, uint64_t ts,
		       const char *reason)
{
	struct cap_end end;

	memset(&end, 0, sizeof(end));
	hdr(&end.hdr, kind, sizeof(end), pid, 0, ts);
	strncpy(end.reason, reason ? reason : "", sizeof(end.reason) - 1);
	put(w, &end, sizeof(end));
}

void capture__process_end(struct capture_writer *w, uint32_t pid, uint64_t ts, const char *reason)
{
	end_record(w, AT_CAP_PROCESS_END, pid, ts, reason);
}

void capture__end(struct capture_writer *w, uint64_t ts, const char *reason)
{
	end_record(w, AT_CAP_END, 0, ts, reason);
}

void capture__finish(struct capture_writer *w, const struct stats *st,
		     const uint64_t *counters, uint32_t nr_counters, uint64_t stop,
		     const char *reason)
{
	capture__snapshot(w, st, counters, nr_counters);
	capture__process_end(w, st->pid, stop, reason);
	capture__end(w, stop, reason);
}

int capture_writer__flush(struct capture_writer *w)
{
	seal(w);
	return outbuf__flush(w->ob);
}

uint64_t capture_writer__bytes(const struct capture_writer *w)
{
	return outbuf__bytes(w->ob) + (w->chunk_len ? sizeof(struct cap_chunk) + w->chunk_len : 0);
}

uint64_t capture_writer__records(const struct capture_writer *w)
{
	return w->records;
}

void capture_writer__free(struct capture_writer *w)
{
	if (!w)
		return;
	outbuf__free(w->ob);
	u64map__clear(&w->names);
	u64map__clear(&w->threads);
	if (w->z)
		libdeflate_free_compressor(w->z);
	free(w->zbuf);
	free(w->chunk);
	free(w);
}

/* --- reading -------------------------------------------------------------- */

struct capture_reader {
	const uint8_t *data;
	size_t size;
	size_t off;		/* in data: the next chunk's header */
	size_t chunk_off;	/* the current chunk's header */
	/* the current chunk's records: in data, or inflated into zbuf */
	const uint8_t *recs;
	size_t pos;		/* the next record in recs */
	size_t end;		/* where the chunk's records end in recs */
	uint32_t chunk_left;	/* records it still holds */
	uint32_t version;
	void *map;		/* the mmap'd file, if any */
	size_t map_len;
	size_t released;	/* bytes of the map given back: memory stays flat */
	bool started;		/* past the process record */
	bool ended;
	struct cap_process proc;
	struct u64map pids;	/* version 4: the processes begun, each once */
	struct libdeflate_decompressor *z; /* inflates deflated chunks (version 5) */
	uint8_t *zbuf;		/* CAPTURE_CHUNK_MAX bytes, once a chunk is deflated */
	char error[224];
	/* records at an odd offset are copied here, aligned; older versions' widened */
	uint64_t aligned[(65536 + CAPTURE_V2_GROWTH) / sizeof(uint64_t)];
	/* an old version's record, as this version's */
	uint64_t translated[CAPTURE_V1_MAX_TRANSLATED / sizeof(uint64_t)];
};

static int fail(char *buf, size_t len, int err, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static int fail(char *buf, size_t len, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, len, fmt, ap);
	va_end(ap);
	return err;
}

/*
 * Damage in a record: where it starts in the file, or, in a deflated chunk,
 * where the chunk does and how far into its records the record is.
 */
static int reader_error(struct capture_reader *r, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static int reader_error(struct capture_reader *r, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (r->recs == r->data)
		n = snprintf(r->error, sizeof(r->error), "at byte %zu: ", r->pos);
	else
		n = snprintf(r->error, sizeof(r->error), "at byte %zu (%zu bytes into the "
			     "chunk's inflated records): ", r->chunk_off, r->pos);
	va_start(ap, fmt);
	vsnprintf(r->error + n, sizeof(r->error) - (size_t)n, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

/* Is a record of a capture kind whole and consistent? NULL, or what is wrong. */
static const char *check_record(const struct at_hdr *h)
{
	if (h->kind < AT_CAP_KIND_MAX && h->size < min_size[h->kind - AT_CAP_BASE])
		return "a record shorter than its kind";
	switch (h->kind) {
	case AT_CAP_NAME:
		if (!memchr((const char *)h + sizeof(struct cap_name), '\0',
			    h->size - sizeof(struct cap_name)))
			return "a name without its terminating NUL";
		break;
	case AT_CAP_RUNTIME_STATS: {
		const struct cap_runtime_stats *rs = (const void *)h;

		if (rs->nr_counters > (h->size - sizeof(*rs)) / sizeof(uint64_t))
			return "more counters than the record holds";
		break;
	}
	}
	return NULL;
}

/* From version 4 a capture holds several processes, each begun once. */
static const char *check_process(struct capture_reader *r, const struct at_hdr *h)
{
	uint64_t key = (uint64_t)h->pid + 1;

	if (r->started && (r->version < 4 || u64map__get(&r->pids, key)))
		return "a second process record";
	if (r->pids.len >= CAPTURE_MAX_PROCESSES)
		return "more process records than a capture holds";
	if (u64map__set(&r->pids, key, (void *)1))
		return "out of memory";
	return NULL;
}

/*
 * Gives back the pages of the map before the current chunk: a long capture
 * converts in the memory of a short one.
 */
static void release(struct capture_reader *r)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	size_t upto = r->chunk_off & ~(page - 1);

	if (upto <= r->released)
		return;
	madvise((char *)r->map + r->released, upto - r->released, MADV_DONTNEED);
	r->released = upto;
}

/* A chunk's header, as this version writes it, from any version's. */
static size_t chunk_header(const struct capture_reader *r, const uint8_t *p, struct cap_chunk *c,
			   uint32_t *hdr_sum)
{
	struct cap_chunk_v2 old;

	if (r->version >= 5) {
		memcpy(c, p, sizeof(*c));
		*hdr_sum = crc(c, offsetof(struct cap_chunk, hdr_crc));
		return sizeof(*c);
	}
	memcpy(&old, p, sizeof(old));
	*hdr_sum = crc(&old, offsetof(struct cap_chunk_v2, hdr_crc));
	c->size = c->raw_size = old.size;
	c->records = old.records;
	c->encoding = CAP_CHUNK_STORED;
	c->crc = old.crc;
	c->hdr_crc = old.hdr_crc;
	return sizeof(old);
}

/* A deflated chunk's records into r->zbuf: NULL, or what is wrong. */
static const char *inflate_chunk(struct capture_reader *r, const uint8_t *in,
				 const struct cap_chunk *c)
{
	size_t in_len, out_len;

	if (!r->z) {
		r->zbuf = malloc(CAPTURE_CHUNK_MAX);
		r->z = r->zbuf ? libdeflate_alloc_decompressor() : NULL;
		if (!r->z)
			return "out of memory";
	}
	if (libdeflate_deflate_decompress_ex(r->z, in, c->size, r->zbuf, c->raw_size, &in_len,
					     &out_len) != LIBDEFLATE_SUCCESS ||
	    in_len != c->size || out_len != c->raw_size)
		return "a deflated chunk that does not inflate to its records";
	return NULL;
}

/*
 * Opens the chunk at r->off: its header must be whole and check, its
 * records all there and pass their checksum (and inflate, when deflated),
 * before any of them is read.
 */
static int next_chunk(struct capture_reader *r)
{
	size_t left = r->size - r->off, head = r->version >= 5 ? sizeof(struct cap_chunk)
								: sizeof(struct cap_chunk_v2);
	size_t hdr_size = r->version < 3 ? CAPTURE_V2_HDR_SIZE : sizeof(struct at_hdr);
	const uint8_t *stored;
	struct cap_chunk c;
	uint32_t sum;
	const char *why;

	r->chunk_off = r->pos = r->off;
	r->recs = r->data;
	if (left < head)
		return reader_error(r, "cut in the middle of a chunk header");
	chunk_header(r, r->data + r->off, &c, &sum);
	if (sum != c.hdr_crc)
		return reader_error(r, "a damaged chunk header (it fails its checksum)");
	if (!c.raw_size || c.raw_size > CAPTURE_CHUNK_MAX || !c.records ||
	    c.records > c.raw_size / hdr_size || !c.size ||
	    (c.encoding == CAP_CHUNK_STORED && c.size != c.raw_size) ||
	    (c.encoding == CAP_CHUNK_DEFLATE && c.size > CAPTURE_CHUNK_MAX))
		return reader_error(r, "a chunk header that cannot be right (%u bytes, %u records)",
				    c.size, c.records);
	if (c.encoding > CAP_CHUNK_DEFLATE)
		return reader_error(r, "a chunk in an encoding this asynctraced does not know "
				    "(%u): convert it with a newer asynctraced", c.encoding);
	if (c.size > left - head)
		return reader_error(r, "cut in the middle of a %u-byte chunk (%zu bytes of it "
				       "written): its records are lost",
				    c.size, left - head);
	stored = r->data + r->off + head;
	sum = crc(stored, c.size);
	if (sum != c.crc)
		return reader_error(r, "a chunk of %u records in %u bytes fails its checksum "
				       "(CRC-32 %08x, written %08x): none of them is converted",
				    c.records, c.size, sum, c.crc);
	if (c.encoding == CAP_CHUNK_DEFLATE) {
		why = inflate_chunk(r, stored, &c);
		if (why)
			return reader_error(r, "%s (%u records in %u bytes, %u deflated): none of "
					    "them is converted", why, c.records, c.raw_size, c.size);
		r->recs = r->zbuf;
		r->pos = 0;
		r->end = c.raw_size;
	} else {
		r->pos = r->off + head;
		r->end = r->pos + c.size;
	}
	r->off += head + c.size;
	r->chunk_left = c.records;
	return 0;
}

int capture_reader__next(struct capture_reader *r, const struct at_hdr **rec, size_t *size)
{
	const uint8_t *p;
	size_t left, hdr_size = r->version < 3 ? CAPTURE_V2_HDR_SIZE : sizeof(struct at_hdr);
	struct {
		uint16_t kind, size; /* where every version's header starts */
	} h;
	const char *why;
	int err;

	if (r->ended) {
		left = r->end - r->pos + r->size - r->off;
		if (left)
			return reader_error(r, "%zu bytes after the end record", left);
		return 0;
	}
	if (r->pos == r->end) {
		if (r->chunk_left) {
			r->recs = r->data;
			r->pos = r->chunk_off;
			return reader_error(r, "a chunk that holds fewer records than its header "
					    "says (%u missing)", r->chunk_left);
		}
		if (r->off == r->size) {
			r->recs = r->data;
			r->pos = r->off;
			return reader_error(r, "the capture stops without its end record: the "
					       "recording was cut short");
		}
		err = next_chunk(r);
		if (err)
			return err;
	}
	p = r->recs + r->pos;
	left = r->end - r->pos;
	if (left < hdr_size)
		return reader_error(r, r->version == 1 ? "cut in the middle of a record header"
						       : "a record header runs past the end of its "
							 "chunk");
	memcpy(&h, p, sizeof(h));
	if (h.kind == 0 || h.size < hdr_size)
		return reader_error(r, "not a record (kind %u, size %u): the capture is damaged",
				    h.kind, h.size);
	if (h.size > left)
		return reader_error(r, r->version == 1 ? "cut in the middle of a %u-byte record"
						       : "a %u-byte record runs past the end of "
							 "its chunk",
				    h.size);
	if (r->version > 1 && !r->chunk_left) {
		r->recs = r->data;
		r->pos = r->chunk_off;
		return reader_error(r, "a chunk that holds more records than its header says");
	}
	*size = h.size;
	if (r->version < 3) {
		*size = capture_v2__widen(p, h.size, r->proc.pid, r->aligned);
		if (!*size)
			return reader_error(r, "a %u-byte record, too long to be read as version "
					    "%u's", h.size, CAPTURE_VERSION);
		p = (const uint8_t *)r->aligned;
	} else if (((uintptr_t)p & 7) != 0) {
		memcpy(r->aligned, p, h.size);
		p = (const uint8_t *)r->aligned;
	}
	if (h.kind >= AT_CAP_BASE) {
		why = check_record((const struct at_hdr *)p);
		if (why)
			return reader_error(r, "%s (kind 0x%x, size %u)", why, h.kind, h.size);
		why = h.kind == AT_CAP_PROCESS ? check_process(r, (const struct at_hdr *)p) : NULL;
		if (why)
			return reader_error(r, "%s", why);
	}
	if (r->version == 1)
		p = capture_v1__translate(p, size, r->translated);
	r->pos += h.size;
	if (r->version > 1)
		r->chunk_left--;
	r->ended = h.kind == AT_CAP_END;
	if (r->map && r->chunk_off - r->released >= RELEASE_BYTES)
		release(r);
	*rec = (const struct at_hdr *)p;
	return 1;
}

static int check_version(uint32_t version, char *err, size_t err_len)
{
	if (version > CAPTURE_VERSION)
		return fail(err, err_len, -EPROTO, "capture version %u is newer than this "
			    "asynctraced, which reads versions %u to %u: convert it with a newer "
			    "asynctraced", version, CAPTURE_VERSION_OLDEST, CAPTURE_VERSION);
	if (version < CAPTURE_VERSION_OLDEST)
		return fail(err, err_len, -EPROTO, "capture version %u is not supported by this "
			    "asynctraced (reads versions %u to %u); re-record it", version,
			    CAPTURE_VERSION_OLDEST, CAPTURE_VERSION);
	return 0;
}

static int reader_start(struct capture_reader *r, char *err, size_t err_len)
{
	struct capture_file_header fh;
	const struct at_hdr *rec;
	size_t size;
	int ret;

	if (r->size < sizeof(fh))
		return fail(err, err_len, -EINVAL, "not a capture: %zu bytes, too short for the "
			    "header", r->size);
	memcpy(&fh, r->data, sizeof(fh));
	if (memcmp(fh.magic, CAPTURE_MAGIC, sizeof(fh.magic)))
		return fail(err, err_len, -EINVAL, "not an asynctraced capture (bad magic): "
			    "write one with `asynctraced record`");
	ret = check_version(fh.version, err, err_len);
	if (ret)
		return ret;
	if (fh.header_size < sizeof(fh) || fh.header_size > r->size)
		return fail(err, err_len, -EINVAL, "damaged header (header size %u)",
			    fh.header_size);
	r->version = fh.version;
	r->off = r->pos = r->end = fh.header_size;
	r->recs = r->data;
	if (r->version == 1) {
		/* no chunks: the records run to the end of the file, unchecked */
		r->end = r->off = r->size;
	}
	ret = capture_reader__next(r, &rec, &size);
	if (ret < 0)
		return fail(err, err_len, -EINVAL, "damaged capture: no process record after "
			    "the header: %s", r->error);
	if (ret == 0 || rec->kind != AT_CAP_PROCESS)
		return fail(err, err_len, -EINVAL, "damaged capture: no process record after "
			    "the header");
	r->started = true;
	memcpy(&r->proc, rec, sizeof(r->proc));
	r->proc.comm[sizeof(r->proc.comm) - 1] = '\0';
	return 0;
}

int capture_reader__open_mem(struct capture_reader **rp, const void *data, size_t size,
			     char *err, size_t err_len)
{
	struct capture_reader *r = calloc(1, sizeof(*r));
	int ret;

	if (!r)
		return fail(err, err_len, -ENOMEM, "out of memory");
	r->data = data;
	r->size = size;
	ret = reader_start(r, err, err_len);
	if (ret) {
		capture_reader__free(r);
		return ret;
	}
	*rp = r;
	return 0;
}

int capture_reader__open(struct capture_reader **rp, const char *path, char *err,
			 size_t err_len)
{
	struct stat st;
	void *map = NULL;
	int fd, ret;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return fail(err, err_len, -errno, "cannot open: %s", strerror(errno));
	if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		close(fd);
		return fail(err, err_len, -EINVAL, "not a regular file");
	}
	if (st.st_size > 0) {
		map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
		if (map == MAP_FAILED) {
			ret = -errno;
			close(fd);
			return fail(err, err_len, ret, "cannot map: %s", strerror(-ret));
		}
		madvise(map, (size_t)st.st_size, MADV_SEQUENTIAL);
	}
	close(fd);
	ret = capture_reader__open_mem(rp, map, (size_t)st.st_size, err, err_len);
	if (ret) {
		if (map)
			munmap(map, (size_t)st.st_size);
		return ret;
	}
	(*rp)->map = map;
	(*rp)->map_len = (size_t)st.st_size;
	return 0;
}

const struct cap_process *capture_reader__process(const struct capture_reader *r)
{
	return &r->proc;
}

uint32_t capture_reader__version(const struct capture_reader *r)
{
	return r->version;
}

const char *capture_reader__error(const struct capture_reader *r)
{
	return r->error;
}

void capture_reader__free(struct capture_reader *r)
{
	if (!r)
		return;
	if (r->map)
		munmap(r->map, r->map_len);
	u64map__clear(&r->pids);
	if (r->z)
		libdeflate_free_decompressor(r->z);
	free(r->zbuf);
	free(r);
}
