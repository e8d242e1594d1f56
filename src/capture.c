// SPDX-License-Identifier: MIT
#include "capture.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "outbuf.h"
#include "u64map.h"

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
};

/* --- writing -------------------------------------------------------------- */

struct capture_writer {
	struct outbuf *ob;
	uint64_t records;
	struct u64map names;	/* addresses already named */
	struct u64map threads;	/* tids already named */
};

static void put(struct capture_writer *w, const void *rec, size_t size)
{
	ob_write(w->ob, rec, size);
	w->records++;
}

static void hdr(struct at_hdr *h, uint16_t kind, size_t size, uint32_t tid, uint64_t ts)
{
	h->kind = kind;
	h->size = (uint16_t)size;
	h->tid = tid;
	h->ts = ts;
}

int capture_writer__open(struct capture_writer **wp, const char *path)
{
	struct capture_writer *w = calloc(1, sizeof(*w));
	int err;

	if (!w)
		return -ENOMEM;
	err = outbuf__open(&w->ob, path);
	if (err) {
		free(w);
		return err;
	}
	u64map__init(&w->names);
	u64map__init(&w->threads);
	*wp = w;
	return 0;
}

void capture__begin(struct capture_writer *w, const struct cap_process *proc)
{
	struct capture_file_header fh = { .version = CAPTURE_VERSION,
					  .header_size = sizeof(fh) };
	struct cap_process p = *proc;

	memcpy(fh.magic, CAPTURE_MAGIC, sizeof(fh.magic));
	ob_write(w->ob, &fh, sizeof(fh));
	hdr(&p.hdr, AT_CAP_PROCESS, sizeof(p), 0, proc->hdr.ts);
	put(w, &p, sizeof(p));
}

void capture__event(struct capture_writer *w, const void *rec, size_t size)
{
	put(w, rec, size);
}

bool capture__has_name(const struct capture_writer *w, uint64_t addr)
{
	return !addr || w->names.len >= CAPTURE_MAX_NAMES || u64map__get(&w->names, addr);
}

bool capture__has_thread(const struct capture_writer *w, uint32_t tid)
{
	return !tid || w->threads.len >= CAPTURE_MAX_THREADS || u64map__get(&w->threads, tid);
}

void capture__no_name(struct capture_writer *w, uint64_t addr)
{
	if (!capture__has_name(w, addr))
		u64map__set(&w->names, addr, (void *)1);
}

void capture__name(struct capture_writer *w, uint64_t addr, const char *name)
{
	uint64_t buf[(sizeof(struct cap_name) + AT_TASK_NAME_LEN + 8) / 8];
	struct cap_name *rec = (struct cap_name *)buf;
	size_t len = strnlen(name, AT_TASK_NAME_LEN - 1);
	size_t size = (sizeof(*rec) + len + 1 + 7) & ~(size_t)7;

	if (capture__has_name(w, addr) || u64map__set(&w->names, addr, (void *)1))
		return;
	memset(buf, 0, sizeof(buf));
	hdr(&rec->hdr, AT_CAP_NAME, size, 0, 0);
	rec->addr = addr;
	memcpy(rec->name, name, len);
	put(w, rec, size);
}

void capture__thread(struct capture_writer *w, uint32_t tid, const char *comm)
{
	struct cap_thread rec;

	if (capture__has_thread(w, tid) || u64map__set(&w->threads, tid, (void *)1))
		return;
	memset(&rec, 0, sizeof(rec));
	hdr(&rec.hdr, AT_CAP_THREAD, sizeof(rec), tid, 0);
	strncpy(rec.comm, comm, sizeof(rec.comm) - 1);
	put(w, &rec, sizeof(rec));
}

void capture__tick(struct capture_writer *w, uint64_t ts)
{
	struct at_hdr rec;

	hdr(&rec, AT_CAP_TICK, sizeof(rec), 0, ts);
	put(w, &rec, sizeof(rec));
}

void capture__finish(struct capture_writer *w, const struct stats *st,
		     const uint64_t *counters, uint32_t nr_counters, uint64_t stop,
		     const char *reason)
{
	uint64_t buf[(sizeof(struct cap_runtime_stats) + AT_STAT_NR * sizeof(uint64_t)) / 8];
	struct cap_runtime_stats *rt = (struct cap_runtime_stats *)buf;
	struct cap_worker_stats ws;
	struct cap_task_stats ts;
	struct cap_idle_task it;
	struct cap_steal_stats ss;
	struct cap_end end;
	struct task_entry *top;
	size_t size;

	if (nr_counters > AT_STAT_NR)
		nr_counters = AT_STAT_NR;
	size = sizeof(*rt) + nr_counters * sizeof(uint64_t);
	memset(buf, 0, sizeof(buf));
	hdr(&rt->hdr, AT_CAP_RUNTIME_STATS, size, 0, st->ts);
	rt->rt = st->rt;
	rt->dropped = st->dropped;
	rt->nr_counters = nr_counters;
	memcpy(rt->counters, counters, nr_counters * sizeof(uint64_t));
	put(w, rt, size);
	for (uint32_t i = 0; i < st->nr_workers; i++) {
		memset(&ws, 0, sizeof(ws));
		hdr(&ws.hdr, AT_CAP_WORKER_STATS, sizeof(ws), 0, st->ts);
		ws.worker = i;
		ws.s = st->workers[i];
		put(w, &ws, sizeof(ws));
	}
	top = malloc(st->nr_tasks * sizeof(*top) + 1);
	if (top && st->nr_tasks) {
		memcpy(top, st->tasks, st->nr_tasks * sizeof(*top));
		qsort(top, st->nr_tasks, sizeof(*top), task_entry__by_poll_ns);
	}
	for (size_t i = 0; top && i < st->nr_tasks && i < CAPTURE_TOP_TASKS; i++) {
		hdr(&ts.hdr, AT_CAP_TASK_STATS, sizeof(ts), 0, st->ts);
		ts.e = top[i];
		put(w, &ts, sizeof(ts));
	}
	free(top);
	for (size_t i = 0; i < st->nr_idle; i++) {
		hdr(&it.hdr, AT_CAP_IDLE_TASK, sizeof(it), 0, st->ts);
		it.e = st->idle[i];
		put(w, &it, sizeof(it));
	}
	for (size_t i = 0; i < st->nr_steals; i++) {
		hdr(&ss.hdr, AT_CAP_STEAL_STATS, sizeof(ss), 0, st->ts);
		ss.e = st->steals[i];
		put(w, &ss, sizeof(ss));
	}
	memset(&end, 0, sizeof(end));
	hdr(&end.hdr, AT_CAP_END, sizeof(end), 0, stop);
	strncpy(end.reason, reason ? reason : "", sizeof(end.reason) - 1);
	put(w, &end, sizeof(end));
}

int capture_writer__flush(struct capture_writer *w)
{
	return outbuf__flush(w->ob);
}

uint64_t capture_writer__bytes(const struct capture_writer *w)
{
	return outbuf__bytes(w->ob);
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
	free(w);
}

/* --- reading -------------------------------------------------------------- */

struct capture_reader {
	const uint8_t *data;
	size_t size;
	size_t off;
	void *map;		/* the mmap'd file, if any */
	size_t map_len;
	size_t released;	/* bytes of the map given back: memory stays flat */
	bool started;		/* past the process record */
	bool ended;
	struct cap_process proc;
	char error[160];
	/* records at an odd offset are copied here, aligned */
	uint64_t aligned[65536 / sizeof(uint64_t)];
};

static int fail(char *buf, size_t len, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, len, fmt, ap);
	va_end(ap);
	return err;
}

static int reader_error(struct capture_reader *r, const char *fmt, ...)
{
	va_list ap;
	int n;

	n = snprintf(r->error, sizeof(r->error), "at byte %zu: ", r->off);
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

/*
 * Gives back the pages of the map already read (all but the one the current
 * record starts in): a long capture converts in the memory of a short one.
 */
static void release(struct capture_reader *r)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	size_t upto = (r->off - 65536) & ~(page - 1);

	if (upto <= r->released)
		return;
	madvise((char *)r->map + r->released, upto - r->released, MADV_DONTNEED);
	r->released = upto;
}

int capture_reader__next(struct capture_reader *r, const struct at_hdr **rec, size_t *size)
{
	const uint8_t *p = r->data + r->off;
	size_t left = r->size - r->off;
	struct at_hdr h;
	const char *why;

	if (r->ended) {
		if (left)
			return reader_error(r, "%zu bytes after the end record", left);
		return 0;
	}
	if (!left)
		return reader_error(r, "the capture stops without its end record: the recording "
				       "was cut short");
	if (left < sizeof(h))
		return reader_error(r, "cut in the middle of a record header");
	memcpy(&h, p, sizeof(h));
	if (h.kind == 0 || h.size < sizeof(h))
		return reader_error(r, "not a record (kind %u, size %u): the capture is damaged",
				    h.kind, h.size);
	if (h.size > left)
		return reader_error(r, "cut in the middle of a %u-byte record", h.size);
	if (((uintptr_t)p & 7) != 0) {
		memcpy(r->aligned, p, h.size);
		p = (const uint8_t *)r->aligned;
	}
	if (h.kind >= AT_CAP_BASE) {
		why = check_record((const struct at_hdr *)p);
		if (why)
			return reader_error(r, "%s (kind 0x%x, size %u)", why, h.kind, h.size);
		if (h.kind == AT_CAP_PROCESS && r->started)
			return reader_error(r, "a second process record");
	}
	r->off += h.size;
	r->ended = h.kind == AT_CAP_END;
	if (r->map && r->off - r->released >= RELEASE_BYTES)
		release(r);
	*rec = (const struct at_hdr *)p;
	*size = h.size;
	return 1;
}

static int reader_start(struct capture_reader *r, char *err, size_t err_len)
{
	struct capture_file_header fh;
	const struct at_hdr *rec;
	size_t size;

	if (r->size < sizeof(fh))
		return fail(err, err_len, -EINVAL, "not a capture: %zu bytes, too short for the "
			    "header", r->size);
	memcpy(&fh, r->data, sizeof(fh));
	if (memcmp(fh.magic, CAPTURE_MAGIC, sizeof(fh.magic)))
		return fail(err, err_len, -EINVAL, "not an asynctraced capture (bad magic): "
			    "write one with `asynctraced record`");
	if (fh.version != CAPTURE_VERSION)
		return fail(err, err_len, -EPROTO, "capture format version %u: this asynctraced "
			    "reads version %u", fh.version, CAPTURE_VERSION);
	if (fh.header_size < sizeof(fh) || fh.header_size > r->size)
		return fail(err, err_len, -EINVAL, "damaged header (header size %u)",
			    fh.header_size);
	r->off = fh.header_size;
	if (capture_reader__next(r, &rec, &size) != 1 || rec->kind != AT_CAP_PROCESS)
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
	free(r);
}
