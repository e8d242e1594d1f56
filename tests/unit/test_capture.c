// SPDX-License-Identifier: MIT
/*
 * Captures: what the writer writes the reader gives back, record for record;
 * every kind of damage is refused with its own message and offset (a flipped
 * bit included: chunks carry a CRC-32); version 1 and 2 captures are still
 * read, their records widened by the pid and version 1's counters
 * renumbered; other versions are refused, naming theirs.
 */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <setjmp.h>
#include <cmocka.h>

#include "../capture_seal.h"
#include "capture/capture.h"
#include "capture/replay.h"
#include "pipeline/pipeline.h"

struct file {
	uint8_t *data;
	size_t size;
};

static struct file slurp(const char *path)
{
	FILE *f = fopen(path, "rb");
	struct file out = { 0 };

	assert_non_null(f);
	fseek(f, 0, SEEK_END);
	out.size = (size_t)ftell(f);
	rewind(f);
	out.data = malloc(out.size + 16);
	assert_int_equal(fread(out.data, 1, out.size, f), out.size);
	fclose(f);
	return out;
}

static struct stats one_of_each(void)
{
	static struct at_worker_stats workers[2];
	static struct task_entry tasks[300];
	static struct idle_entry idle[1] = { { .id = 7, .idle_since = 5, .name_addr = 0x40 } };
	static struct steal_entry steals[1] = { { .key = { 1, 0 }, .s = { 3, 4 } } };
	struct stats st = { .ts = 1000, .workers = workers, .nr_workers = 2, .tasks = tasks,
			    .nr_tasks = 300, .idle = idle, .nr_idle = 1, .steals = steals,
			    .nr_steals = 1, .dropped = 9 };

	workers[1].polls = 42;
	workers[1].tid = 77;
	workers[1].poll.slot[39] = 5;
	workers[1].queue.peak = 6;
	for (int i = 0; i < 300; i++) {
		tasks[i].id = (uint64_t)i + 1;
		tasks[i].s.poll_ns = (uint64_t)i * 10;
	}
	st.rt.spawns = 11;
	return st;
}

/*
 * Writes a small capture of every record kind to path: its chunks deflated,
 * or stored as they are (store), for tests that damage records in place.
 */
static void write_capture(const char *path, bool store)
{
	struct cap_process proc = { .hdr.ts = 100, .pid = 4242, .runtime = CAPTURE_RUNTIME_USDT,
				    .long_poll_ns = 15000000, .lost_waker_ns = 1000000000 };
	struct at_poll poll = { .hdr = { .kind = AT_EV_POLL, .size = sizeof(poll), .tid = 17, .ts = 200 }, .task = 5,
				.duration_ns = 30, .name_addr = 0x40 };
	struct stats st = one_of_each();
	uint64_t counters[AT_STAT_NR] = { [AT_STAT_ORPHAN_POLL_END] = 3 };
	struct capture_writer *w;

	strcpy(proc.comm, "server");
	assert_int_equal(capture_writer__open(&w, path), 0);
	if (store)
		capture_writer__store(w);
	capture__begin(w, &proc);
	assert_false(capture__has_name(w, 4242, 0x40));
	capture__name(w, 4242, 0x40, "conn");
	capture__name(w, 4242, 0x40, "written once only");
	assert_true(capture__has_name(w, 4242, 0x40));
	capture__no_name(w, 4242, 0x80);
	assert_true(capture__has_name(w, 4242, 0x80));
	assert_true(capture__has_name(w, 4242, 0)); /* no address, nothing to name */
	capture__thread(w, 4242, 17, "worker-0");
	capture__thread(w, 4242, 17, "again");
	capture__event(w, &poll, sizeof(poll));
	capture__tick(w, 300);
	capture__finish(w, &st, counters, AT_STAT_NR, 400, "target exited");
	assert_int_equal(capture_writer__flush(w), 0);
	/* process, name, thread, poll, tick, runtime, 2 workers, 256 tasks, idle, steal, its
	 * end, the end */
	assert_int_equal(capture_writer__records(w), 1 + 1 + 1 + 1 + 1 + 1 + 2 + 256 + 1 + 1 + 1 + 1);
	capture_writer__free(w);
}

static void round_trip_one(bool store)
{
	char path[] = "/tmp/asynctraced-capture-XXXXXX";
	int fd = mkstemp(path);
	struct capture_reader *r;
	const struct at_hdr *h;
	size_t size;
	char err[256];
	uint64_t last_poll_ns = UINT64_MAX;
	int kinds[AT_CAP_KIND_MAX - AT_CAP_BASE] = { 0 }, polls = 0;

	assert_true(fd >= 0);
	close(fd);
	write_capture(path, store);
	assert_int_equal(capture_reader__open(&r, path, err, sizeof(err)), 0);
	assert_int_equal(capture_reader__process(r)->pid, 4242);
	assert_string_equal(capture_reader__process(r)->comm, "server");
	assert_int_equal(capture_reader__process(r)->long_poll_ns, 15000000);
	while (capture_reader__next(r, &h, &size) == 1) {
		assert_int_equal(h->size, size);
		if (h->kind < AT_CAP_BASE) {
			assert_int_equal(h->kind, AT_EV_POLL);
			assert_int_equal(((const struct at_poll *)h)->task, 5);
			polls++;
			continue;
		}
		kinds[h->kind - AT_CAP_BASE]++;
		if (h->kind == AT_CAP_NAME)
			assert_string_equal(((const struct cap_name *)h)->name, "conn");
		if (h->kind == AT_CAP_THREAD)
			assert_string_equal(((const struct cap_thread *)h)->comm, "worker-0");
		if (h->kind == AT_CAP_TASK_STATS) {
			/* the most poll time first */
			uint64_t ns = ((const struct cap_task_stats *)h)->poll_ns;

			assert_true(ns <= last_poll_ns);
			last_poll_ns = ns;
		}
		if (h->kind == AT_CAP_RUNTIME_STATS) {
			const struct cap_runtime_stats *rs = (const void *)h;

			assert_int_equal(rs->spawns, 11);
			assert_int_equal(rs->dropped, 9);
			assert_int_equal(rs->nr_counters, AT_STAT_NR);
			assert_int_equal(rs->counters[AT_STAT_ORPHAN_POLL_END], 3);
		}
		if (h->kind == AT_CAP_WORKER_STATS && ((const struct cap_worker_stats *)h)->worker) {
			struct at_worker_stats ws;

			cap_worker_stats__get((const struct cap_worker_stats *)h, &ws);
			assert_int_equal(ws.polls, 42);
			assert_int_equal(ws.tid, 77);
			assert_int_equal(ws.poll.slot[39], 5);
			assert_int_equal(ws.queue.peak, 6);
		}
		if (h->kind == AT_CAP_STEAL_STATS) {
			struct steal_entry e;

			cap_steal_stats__get((const struct cap_steal_stats *)h, &e);
			assert_int_equal(e.key.thief, 1);
			assert_int_equal(e.s.tasks, 4);
		}
		if (h->kind == AT_CAP_END)
			assert_string_equal(((const struct cap_end *)h)->reason, "target exited");
	}
	assert_int_equal(capture_reader__next(r, &h, &size), 0); /* clean end, again */
	assert_int_equal(polls, 1);
	assert_int_equal(kinds[AT_CAP_NAME - AT_CAP_BASE], 1);
	assert_int_equal(kinds[AT_CAP_THREAD - AT_CAP_BASE], 1);
	assert_int_equal(kinds[AT_CAP_TICK - AT_CAP_BASE], 1);
	assert_int_equal(kinds[AT_CAP_WORKER_STATS - AT_CAP_BASE], 2);
	assert_int_equal(kinds[AT_CAP_TASK_STATS - AT_CAP_BASE], 256);
	assert_int_equal(last_poll_ns, 440); /* the 256th of 300, from the top */
	assert_int_equal(kinds[AT_CAP_END - AT_CAP_BASE], 1);
	capture_reader__free(r);
	unlink(path);
}

static void round_trip(void **state)
{
	round_trip_one(false);
	round_trip_one(true);
}

/* Reads data (at an odd address) to its end; returns the error, or "" if clean. */
static const char *read_all(const uint8_t *data, size_t size, char *open_err, size_t len)
{
	static char msg[256];
	uint8_t *odd = malloc(size + 1);
	struct capture_reader *r;
	const struct at_hdr *h;
	size_t n;
	int ret;

	memcpy(odd + 1, data, size);
	open_err[0] = '\0';
	if (capture_reader__open_mem(&r, odd + 1, size, open_err, len)) {
		free(odd);
		return open_err;
	}
	while ((ret = capture_reader__next(r, &h, &n)) == 1)
		assert_int_equal((uintptr_t)h & 7, 0); /* records come aligned */
	snprintf(msg, sizeof(msg), "%s", ret ? capture_reader__error(r) : "");
	capture_reader__free(r);
	free(odd);
	return msg;
}

/* The offset of the n-th chunk (0: the first) of a chunked capture; 0 if none. */
static size_t chunk_at(const uint8_t *data, size_t size, int n)
{
	size_t off = sizeof(struct capture_file_header);
	struct cap_chunk c;

	for (;; n--) {
		if (off + sizeof(c) > size)
			return 0;
		if (!n)
			return off;
		memcpy(&c, data + off, sizeof(c));
		off += sizeof(c) + c.size;
	}
}

static struct file written_as(bool store)
{
	char path[] = "/tmp/asynctraced-capture-XXXXXX";
	int fd = mkstemp(path);
	struct file f;

	assert_true(fd >= 0);
	close(fd);
	write_capture(path, store);
	f = slurp(path);
	unlink(path);
	return f;
}

/* A capture whose chunks are stored as they are: its records damaged in place. */
static struct file written(void)
{
	return written_as(true);
}

#define assert_damage(data, size, msg)                                                             \
	do {                                                                                       \
		char e_[256];                                                                      \
		const char *got_ = read_all(data, size, e_, sizeof(e_));                           \
		if (!strstr(got_, msg))                                                            \
			fail_msg("wanted \"%s\", got \"%s\"", msg, got_);                          \
	} while (0)

static void damage(void **state)
{
	struct file f = written();
	uint8_t *bad = malloc(f.size + 4096);
	size_t c0 = chunk_at(f.data, f.size, 0), c1 = chunk_at(f.data, f.size, 1);
	size_t first = c0 + sizeof(struct cap_chunk) + sizeof(struct cap_process);
	size_t last = c0, n;
	char msg[160];
	struct cap_chunk c;

	/* more than one chunk: 256 task records do not fit in one */
	assert_int_equal(c0, sizeof(struct capture_file_header));
	assert_true(c1 > c0);
	for (int i = 1; chunk_at(f.data, f.size, i); i++)
		last = chunk_at(f.data, f.size, i);

	assert_damage(f.data, f.size, "");
	assert_string_equal(read_all(f.data, f.size, msg, sizeof(msg)), "");
	assert_damage(f.data, 3, "too short for the header");

	memcpy(bad, f.data, f.size);
	bad[1] = 'X';
	assert_damage(bad, f.size, "bad magic");

	/* no process record first */
	assert_damage(f.data, c0 + 20, "no process record");

	/* cut: at a chunk boundary, inside a chunk header, inside a chunk */
	snprintf(msg, sizeof(msg), "at byte %zu: the capture stops without its end record", c1);
	assert_damage(f.data, c1, msg);
	snprintf(msg, sizeof(msg), "at byte %zu: cut in the middle of a chunk header", c1);
	assert_damage(f.data, c1 + 5, msg);
	snprintf(msg, sizeof(msg), "at byte %zu: cut in the middle of a", last);
	assert_damage(f.data, f.size - 1, msg);

	/* one flipped bit: in a record (any record), in a chunk header */
	for (size_t at = c1 + sizeof(c); at < f.size; at += 997) {
		size_t chunk = c1;

		for (int i = 1; chunk_at(f.data, f.size, i) && chunk_at(f.data, f.size, i) <= at; i++)
			chunk = chunk_at(f.data, f.size, i);
		memcpy(bad, f.data, f.size);
		bad[at] ^= 0x08;
		if (at < chunk + sizeof(c)) {
			snprintf(msg, sizeof(msg), "at byte %zu: a damaged chunk header", chunk);
		} else {
			memcpy(&c, f.data + chunk, sizeof(c));
			snprintf(msg, sizeof(msg), "at byte %zu: a chunk of %u records in %u bytes fails "
				 "its checksum", chunk, c.records, c.size);
		}
		assert_damage(bad, f.size, msg);
	}
	memcpy(bad, f.data, f.size);
	bad[c1 + 2] ^= 0x01; /* the size of the second chunk */
	snprintf(msg, sizeof(msg), "at byte %zu: a damaged chunk header", c1);
	assert_damage(bad, f.size, msg);

	/* damage behind a good checksum: a writer's mistake, or a forged capture */
	memcpy(bad, f.data, f.size);
	bad[first + 2] = 0;
	bad[first + 3] = 0;
	capture_seal(bad, f.size);
	assert_damage(bad, f.size, "not a record");
	memcpy(bad, f.data, f.size);
	bad[first + 2] = 25; /* the name record, cut to 25 bytes: a header and one byte */
	capture_seal(bad, f.size);
	assert_damage(bad, f.size, "a record shorter than its kind");
	memcpy(bad, f.data, f.size);
	memset(bad + first + sizeof(struct cap_name), 'x', 8);
	capture_seal(bad, f.size);
	assert_damage(bad, f.size, "a name without its terminating NUL");
	memcpy(bad, f.data, f.size);
	memset(bad + last + sizeof(c) + 2, 0xff, 2); /* the last chunk's first record: 64 KiB */
	capture_seal(bad, f.size);
	assert_damage(bad, f.size, "record runs past the end of its chunk");
	memcpy(bad, f.data, f.size);
	memcpy(&c, bad + c0, sizeof(c));
	c.records++;
	memcpy(bad + c0, &c, sizeof(c));
	capture_seal(bad, f.size);
	snprintf(msg, sizeof(msg), "at byte %zu: a chunk that holds fewer records than its "
		 "header says (1 missing)", c0);
	assert_damage(bad, f.size, msg);
	c.records -= 2;
	memcpy(bad + c0, &c, sizeof(c));
	capture_seal(bad, f.size);
	assert_damage(bad, f.size, "a chunk that holds more records than its header says");
	memcpy(bad, f.data, f.size);
	memcpy(&c, bad + c0, sizeof(c));
	c.size = CAPTURE_CHUNK_MAX + 8;
	memcpy(bad + c0, &c, sizeof(c));
	n = capture_seal(bad, f.size);
	assert_int_equal(n, 0); /* runs past the end: not sealed, so seal its header alone */
	c.hdr_crc = (uint32_t)crc32(crc32(0, Z_NULL, 0), (const uint8_t *)&c,
				    offsetof(struct cap_chunk, hdr_crc));
	memcpy(bad + c0, &c, sizeof(c));
	assert_damage(bad, f.size, "a chunk header that cannot be right");

	/* a second process record, in a chunk of its own */
	n = c0 + sizeof(c) + sizeof(struct cap_process);
	memcpy(bad, f.data, c1);
	memcpy(bad + c1, f.data + c0, n - c0);
	memcpy(&c, bad + c1, sizeof(c));
	c.size = c.raw_size = sizeof(struct cap_process);
	c.records = 1;
	memcpy(bad + c1, &c, sizeof(c));
	memcpy(bad + c1 + (n - c0), f.data + c1, f.size - c1);
	capture_seal(bad, f.size + (n - c0));
	snprintf(msg, sizeof(msg), "at byte %zu: a second process record", c1 + sizeof(c));
	assert_damage(bad, f.size + (n - c0), msg);

	/* bytes after the end */
	memcpy(bad, f.data, f.size);
	memset(bad + f.size, 0, 16);
	assert_damage(bad, f.size + 16, "16 bytes after the end record");
	free(bad);
	free(f.data);
}

/* Raw deflate (as the writer's) or inflate of in into out: the bytes out. */
static size_t zraw(bool deflating, const uint8_t *in, size_t len, uint8_t *out, size_t room)
{
	z_stream z = { 0 };
	size_t n;

	if (deflating)
		assert_int_equal(deflateInit2(&z, Z_BEST_SPEED, Z_DEFLATED, -MAX_WBITS, 8,
					      Z_DEFAULT_STRATEGY), Z_OK);
	else
		assert_int_equal(inflateInit2(&z, -MAX_WBITS), Z_OK);
	z.next_in = (uint8_t *)in;
	z.avail_in = (uInt)len;
	z.next_out = out;
	z.avail_out = (uInt)room;
	assert_int_equal(deflating ? deflate(&z, Z_FINISH) : inflate(&z, Z_FINISH), Z_STREAM_END);
	n = z.total_out;
	if (deflating)
		deflateEnd(&z);
	else
		inflateEnd(&z);
	return n;
}

/*
 * Deflated chunks: damage is found before any of a chunk's records is read,
 * and named; a record damaged before deflating is named by its chunk and
 * its place among the chunk's records.
 */
static void damage_deflated(void **state)
{
	struct file f = written_as(false);
	uint8_t *bad = malloc(f.size + CAPTURE_CHUNK_MAX), *raw = malloc(CAPTURE_CHUNK_MAX);
	size_t c0 = chunk_at(f.data, f.size, 0), c1 = chunk_at(f.data, f.size, 1);
	size_t last = c1, n;
	struct cap_chunk c;
	char msg[224];

	for (int i = 2; chunk_at(f.data, f.size, i); i++)
		last = chunk_at(f.data, f.size, i);
	assert_damage(f.data, f.size, "");
	memcpy(&c, f.data + c1, sizeof(c));
	assert_int_equal(c.encoding, CAP_CHUNK_DEFLATE); /* 160-odd task records */
	assert_true(c.size < c.raw_size / 4);

	/* a flipped bit in the deflated bytes: its checksum */
	memcpy(bad, f.data, f.size);
	bad[c1 + sizeof(c) + c.size / 2] ^= 0x10;
	snprintf(msg, sizeof(msg), "at byte %zu: a chunk of %u records in %u bytes fails its "
		 "checksum", c1, c.records, c.size);
	assert_damage(bad, f.size, msg);

	/* behind a good checksum: a stream cut short, a size it does not inflate to */
	memcpy(bad, f.data, f.size);
	memcpy(&c, bad + last, sizeof(c));
	assert_int_equal(c.encoding, CAP_CHUNK_DEFLATE);
	c.size--;
	memcpy(bad + last, &c, sizeof(c));
	capture_seal(bad, f.size);
	snprintf(msg, sizeof(msg), "at byte %zu: a deflated chunk that does not inflate to its "
		 "records (%u records in %u bytes, %u deflated)", last, c.records, c.raw_size,
		 c.size);
	assert_damage(bad, f.size, msg);
	memcpy(bad, f.data, f.size);
	memcpy(&c, bad + c1, sizeof(c));
	c.raw_size -= 8;
	memcpy(bad + c1, &c, sizeof(c));
	capture_seal(bad, f.size);
	snprintf(msg, sizeof(msg), "at byte %zu: a deflated chunk that does not inflate", c1);
	assert_damage(bad, f.size, msg);

	/* an encoding of a newer version */
	c.raw_size += 8;
	c.encoding = 7;
	memcpy(bad + c1, &c, sizeof(c));
	capture_seal(bad, f.size);
	assert_damage(bad, f.size, "a chunk in an encoding this asynctraced does not know (7)");

	/* a record's size zeroed before deflating: the second record of the first chunk */
	memcpy(&c, f.data + c0, sizeof(c));
	n = zraw(false, f.data + c0 + sizeof(c), c.size, raw, CAPTURE_CHUNK_MAX);
	assert_int_equal(n, c.raw_size);
	memset(raw + sizeof(struct cap_process) + 2, 0, 2);
	memcpy(bad, f.data, c0);
	c.size = (uint32_t)zraw(true, raw, n, bad + c0 + sizeof(c), CAPTURE_CHUNK_MAX);
	memcpy(bad + c0, &c, sizeof(c));
	n = c0 + sizeof(c) + c.size;
	memcpy(bad + n, f.data + c1, f.size - c1);
	n += f.size - c1;
	capture_seal(bad, n);
	snprintf(msg, sizeof(msg), "at byte %zu (%zu bytes into the chunk's inflated records): "
		 "not a record (kind %u, size 0)", c0, sizeof(struct cap_process), AT_CAP_NAME);
	assert_damage(bad, n, msg);
	free(raw);
	free(bad);
	free(f.data);
}

static void other_versions(void **state)
{
	struct file f = written();
	char msg[160];

	for (uint32_t v = 0; v < 5; v++) {
		memcpy(f.data + 8, &v, sizeof(v));
		if (v == CAPTURE_VERSION)
			assert_damage(f.data, f.size, "");
		else if (v > CAPTURE_VERSION)
			snprintf(msg, sizeof(msg), "capture version %u is newer than this asynctraced, "
				 "which reads versions 1 to %u: convert it with a newer asynctraced",
				 v, CAPTURE_VERSION);
		else if (v < CAPTURE_VERSION_OLDEST)
			snprintf(msg, sizeof(msg), "capture version %u is not supported by this "
				 "asynctraced (reads versions 1 to %u); re-record it", v,
				 CAPTURE_VERSION);
		else
			continue; /* versions 1 and 2: read_v1, read_v2 */
		if (v != CAPTURE_VERSION)
			assert_damage(f.data, f.size, msg);
	}
	free(f.data);
}

/*
 * A record as versions 1 and 2 wrote it, at buf + off: a 16-byte header (no
 * pid), then the body. Returns the offset after it.
 */
static size_t put_old(uint8_t *buf, size_t off, const void *rec, size_t size)
{
	uint16_t old = (uint16_t)(size - 8);

	memcpy(buf + off, rec, 16);
	memcpy(buf + off + 2, &old, sizeof(old));
	memcpy(buf + off + 16, (const uint8_t *)rec + sizeof(struct at_hdr),
	       size - sizeof(struct at_hdr));
	return off + size - 8;
}

/* A version 1 capture, as version 1 wrote them: records back to back, no chunks. */
static size_t write_v1(uint8_t *buf)
{
	struct capture_file_header fh = { .version = 1, .header_size = sizeof(fh) };
	struct cap_process proc = { .hdr = { .kind = AT_CAP_PROCESS, .size = sizeof(proc), .tid = 0, .ts = 100 }, .pid = 7 };
	struct at_poll poll = { .hdr = { .kind = AT_EV_POLL, .size = sizeof(poll), .tid = 17, .ts = 200 }, .task = 5,
				.duration_ns = 30 };
	uint64_t rt[(sizeof(struct cap_runtime_stats) + 12 * 8) / 8] = { 0 };
	struct cap_runtime_stats *rs = (struct cap_runtime_stats *)rt;
	struct cap_worker_stats ws = { .hdr = { .kind = AT_CAP_WORKER_STATS, .size = sizeof(ws), .tid = 0, .ts = 300 },
				       .worker = 0, .polls = 1, .tid = 17 };
	struct cap_end end = { .hdr = { .kind = AT_CAP_END, .size = sizeof(end), .tid = 0, .ts = 400 } };
	size_t off = 0;

	memcpy(fh.magic, CAPTURE_MAGIC, sizeof(fh.magic));
	rs->hdr = (struct at_hdr){ .kind = AT_CAP_RUNTIME_STATS, .size = sizeof(rt), .tid = 0, .ts = 300 };
	rs->spawns = 1;
	rs->nr_counters = 12;	/* version 1's AT_STAT_NR */
	rs->counters[3] = 5;	/* drops of wakes (kind 3) */
	rs->counters[8] = 3;	/* polls that began before attach */
	rs->counters[11] = 7;	/* missed switches in */
	strcpy(end.reason, "target exited");
#define PUT(x) (off = put_old(buf, off, &(x), sizeof(x)))
	memcpy(buf, &fh, sizeof(fh));
	off = sizeof(fh);
	PUT(proc);
	off = put_old(buf, off, &poll, AT_POLL_MIN_SIZE); /* before cpu_ns was appended */
	PUT(rt);
	PUT(ws);
	PUT(end);
#undef PUT
	return off;
}

static void read_v1(void **state)
{
	static uint8_t buf[4096];
	size_t size = write_v1(buf), n;
	struct capture_reader *r;
	const struct at_hdr *h;
	char err[256];
	int kinds = 0;

	assert_int_equal(capture_reader__open_mem(&r, buf, size, err, sizeof(err)), 0);
	assert_int_equal(capture_reader__version(r), 1);
	assert_int_equal(capture_reader__process(r)->pid, 7);
	while (capture_reader__next(r, &h, &n) == 1) {
		assert_int_equal(h->size, n);
		kinds++;
		if (h->kind == AT_CAP_RUNTIME_STATS) {
			const struct cap_runtime_stats *rs = (const void *)h;

			/* counters by this version's numbers */
			assert_int_equal(rs->spawns, 1);
			assert_int_equal(rs->nr_counters, AT_STAT_NR);
			assert_int_equal(n, sizeof(*rs) + AT_STAT_NR * 8);
			assert_int_equal(rs->counters[AT_STAT_DROP_BASE + AT_EV_WAKE], 5);
			assert_int_equal(rs->counters[AT_STAT_ORPHAN_POLL_END], 3);
			assert_int_equal(rs->counters[AT_STAT_MISSED_SWITCH_IN], 7);
			assert_int_equal(rs->counters[8], 0);
			assert_int_equal(rs->counters[11], 0);
		}
		if (h->kind == AT_CAP_WORKER_STATS)
			assert_int_equal(((const struct cap_worker_stats *)h)->tid, 17);
	}
	assert_string_equal(capture_reader__error(r), "");
	assert_int_equal(kinds, 4);
	capture_reader__free(r);

	/* damage is told as version 1 told it: no chunks, no checksums */
	assert_damage(buf, size - 1, "cut in the middle of a 48-byte record");
	assert_damage(buf, size - 48, "the capture stops without its end record");
}

/*
 * A version 2 capture: chunks, and records with 16-byte headers, a poll with
 * its self-wake appended among them. Every record comes back in this
 * version's layout, every field where it belongs, with the process's pid.
 */
static void read_v2(void **state)
{
	static uint8_t buf[4096];
	struct capture_file_header fh = { .version = 2, .header_size = sizeof(fh) };
	struct cap_process proc = { .hdr = { .kind = AT_CAP_PROCESS, .size = sizeof(proc), .tid = 0, .ts = 100 }, .pid = 7,
				    .comm = "old" };
	struct at_poll_self_wake pw = {
		.poll = { .hdr = { .kind = AT_EV_POLL, .size = sizeof(pw), .tid = 17, .ts = 200 }, .task = 5,
			  .duration_ns = 30, .holder_begin = 99 },
		.wake = { .hdr = { .kind = AT_EV_WAKE, .size = sizeof(pw.wake), .tid = 17, .ts = 210 }, .task = 5,
			  .waker_task = 5, .depth = 3 },
	};
	struct at_hdr tick = { .kind = AT_CAP_TICK, .size = sizeof(tick), .tid = 0, .ts = 300 };
	struct cap_end end = { .hdr = { .kind = AT_CAP_END, .size = sizeof(end), .tid = 0, .ts = 400 } };
	struct cap_chunk_v2 c = { .records = 4 };
	uint16_t old_size = sizeof(pw) - 24;	/* two headers 8 bytes shorter, no cpu_ns */
	size_t off = sizeof(fh) + sizeof(c), poll_at, n;
	struct capture_reader *r;
	const struct at_hdr *h;
	const struct at_poll_self_wake *got;
	char err[256];

	memcpy(fh.magic, CAPTURE_MAGIC, sizeof(fh.magic));
	off = put_old(buf, off, &proc, sizeof(proc));
	poll_at = off;
	off = put_old(buf, off, &pw.poll, AT_POLL_MIN_SIZE);
	off = put_old(buf, off, &pw.wake, sizeof(pw.wake));
	memcpy(buf + poll_at + 2, &old_size, sizeof(old_size));
	off = put_old(buf, off, &tick, sizeof(tick));
	off = put_old(buf, off, &end, sizeof(end));
	c.size = (uint32_t)(off - sizeof(fh) - sizeof(c));
	memcpy(buf, &fh, sizeof(fh));
	memcpy(buf + sizeof(fh), &c, sizeof(c));
	assert_int_equal(capture_seal(buf, off), 1);

	assert_int_equal(capture_reader__open_mem(&r, buf, off, err, sizeof(err)), 0);
	assert_int_equal(capture_reader__version(r), 2);
	assert_int_equal(capture_reader__process(r)->pid, 7);
	assert_string_equal(capture_reader__process(r)->comm, "old");
	assert_int_equal(capture_reader__next(r, &h, &n), 1);
	assert_int_equal(n, sizeof(pw));
	got = (const void *)h;
	assert_int_equal(got->poll.hdr.size, sizeof(pw));
	assert_int_equal(got->poll.hdr.tid, 17);
	assert_int_equal(got->poll.hdr.pid, 7);
	assert_int_equal(got->poll.hdr.ts, 200);
	assert_int_equal(got->poll.task, 5);
	assert_int_equal(got->poll.duration_ns, 30);
	assert_int_equal(got->poll.holder_begin, 99);
	assert_int_equal(got->poll.flags, 0);	/* cpu_ns: not known */
	assert_int_equal(got->poll.cpu_ns, 0);
	assert_int_equal(got->wake.hdr.kind, AT_EV_WAKE);
	assert_int_equal(got->wake.hdr.size, sizeof(pw.wake));
	assert_int_equal(got->wake.hdr.pid, 7);
	assert_int_equal(got->wake.hdr.ts, 210);
	assert_int_equal(got->wake.waker_task, 5);
	assert_int_equal(got->wake.depth, 3);
	/* the tick and the end are the session's */
	assert_int_equal(capture_reader__next(r, &h, &n), 1);
	assert_int_equal(h->kind, AT_CAP_TICK);
	assert_int_equal(h->pid, 0);
	assert_int_equal(h->ts, 300);
	assert_int_equal(capture_reader__next(r, &h, &n), 1);
	assert_int_equal(h->kind, AT_CAP_END);
	assert_int_equal(n, sizeof(end));
	assert_int_equal(capture_reader__next(r, &h, &n), 0);
	assert_string_equal(capture_reader__error(r), "");
	capture_reader__free(r);
}

/* Unknown kinds from a newer version: skipped by the replay, but counted and named. */
static void unknown_kinds(void **state)
{
	char path[] = "/tmp/asynctraced-capture-XXXXXX";
	int fd = mkstemp(path);
	struct cap_process proc = { .hdr.ts = 100, .pid = 1 };
	struct at_hdr newer_event = { .kind = 29, .size = sizeof(newer_event), .tid = 0, .ts = 150 };
	struct at_hdr newer_capture = { .kind = 0x80ff, .size = sizeof(newer_capture), .tid = 0, .ts = 150 };
	struct stats st = { .ts = 200 };
	uint64_t counters[AT_STAT_NR] = { 0 };
	struct detect_config opts = { .given = ~0u }; /* as it is: none taken from the capture */
	struct capture_writer *w;
	struct capture_reader *r;
	struct pipeline *p;
	struct replay rp;
	char err[256];

	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(capture_writer__open(&w, path), 0);
	capture__begin(w, &proc);
	capture__event(w, &newer_event, sizeof(newer_event));
	capture__event(w, &newer_capture, sizeof(newer_capture));
	capture__event(w, &newer_event, sizeof(newer_event));
	capture__finish(w, &st, counters, AT_STAT_NR, 300, "target exited");
	assert_int_equal(capture_writer__flush(w), 0);
	capture_writer__free(w);

	assert_int_equal(capture_reader__open(&r, path, err, sizeof(err)), 0);
	assert_int_equal(replay__init(&rp, r, &opts, NULL), 0);
	assert_int_equal(replay__run(&rp, r), 0);
	p = &rp.procs[0]->pipe;
	assert_int_equal(p->model.n.unknown, 3);
	assert_int_equal(p->model.n.unknown_kinds[0], 29);
	assert_int_equal(p->model.n.unknown_kinds[1], 0x80ff);
	assert_int_equal(p->model.n.unknown_kinds[2], 0);
	assert_int_equal(p->model.n.malformed, 0);
	replay__free(&rp);
	capture_reader__free(r);
	unlink(path);
}

/* A capture cut before its snapshot: the counts come from the records read. */
static void counts_without_snapshot(void **state)
{
	char path[] = "/tmp/asynctraced-capture-XXXXXX";
	int fd = mkstemp(path);
	struct cap_process proc = { .hdr.ts = 100, .pid = 1 };
	struct at_spawn spawn = { .hdr = { .kind = AT_EV_SPAWN, .size = sizeof(spawn), .tid = 11, .ts = 110 }, .task = 5 };
	struct at_poll_self_wake pw = {
		.poll = { .hdr = { .kind = AT_EV_POLL, .size = sizeof(pw), .tid = 11, .ts = 200 }, .task = 5, .worker = 1,
			  .duration_ns = 3000, .oncpu_ns = 1000, .wake_ts = 150, .depth = 4 },
		.wake = { .hdr = { .kind = AT_EV_WAKE, .size = sizeof(pw.wake), .tid = 11, .ts = 210 }, .task = 5,
			  .waker_task = 5, .waker_worker = 1, .wake_id = 9 },
	};
	struct at_poll poll = { .hdr = { .kind = AT_EV_POLL, .size = sizeof(poll), .tid = 11, .ts = 300 }, .task = 5,
				.worker = 1, .duration_ns = 70, .ready = 1 };
	struct at_wake outside = { .hdr = { .kind = AT_EV_WAKE, .size = sizeof(outside), .tid = 99, .ts = 250 }, .task = 5,
				   .waker_worker = -1 };
	struct at_steal steal = { .hdr = { .kind = AT_EV_STEAL, .size = sizeof(steal), .tid = 10, .ts = 260 }, .thief = 0,
				  .victim = 1, .count = 2 };
	struct at_park park = { .hdr = { .kind = AT_EV_PARK, .size = sizeof(park), .tid = 10, .ts = 270 }, .worker = 0,
				.duration_ns = 40 };
	struct detect_config opts = { .given = ~0u }; /* as it is: none taken from the capture */
	struct capture_writer *w;
	struct capture_reader *r;
	const struct stats *st;
	struct replay rp;
	char err[256];

	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(capture_writer__open(&w, path), 0);
	capture__begin(w, &proc);
	capture__event(w, &spawn, sizeof(spawn));
	capture__event(w, &pw, sizeof(pw));
	capture__event(w, &outside, sizeof(outside));
	capture__event(w, &steal, sizeof(steal));
	capture__event(w, &park, sizeof(park));
	capture__event(w, &poll, sizeof(poll));
	assert_int_equal(capture_writer__flush(w), 0); /* and no finish: the recorder died */
	capture_writer__free(w);

	assert_int_equal(capture_reader__open(&r, path, err, sizeof(err)), 0);
	assert_int_equal(replay__init(&rp, r, &opts, NULL), 0);
	assert_int_equal(replay__run(&rp, r), -EINVAL);
	assert_false(replay__has_snapshot(rp.procs[0]));
	st = replay__stats(rp.procs[0]);
	assert_int_equal(st->rt.spawns, 1);
	assert_int_equal(st->rt.completed, 1);
	assert_int_equal(st->rt.wakes, 2);
	assert_int_equal(st->rt.self_wakes, 1);
	assert_int_equal(st->rt.outside_wakes, 1);
	assert_int_equal(st->nr_workers, 2);
	assert_int_equal(st->workers[1].polls, 2);
	assert_int_equal(st->workers[1].busy_ns, 3070);
	assert_int_equal(st->workers[1].max_poll_ns, 3000);
	assert_int_equal(st->workers[1].wakes, 1);
	assert_int_equal(st->workers[1].queue.peak, 4);
	assert_int_equal(hist_count(&st->workers[1].poll), 2);
	assert_int_equal(st->workers[1].poll.slot[11], 1); /* 3000 ns: [2048, 4096) */
	assert_int_equal(st->workers[1].delay.slot[5], 1);  /* 50 ns: [32, 64) */
	assert_int_equal(st->workers[0].steals, 1);
	assert_int_equal(st->workers[0].stolen, 2);
	assert_int_equal(st->workers[0].parks, 1);
	assert_int_equal(st->workers[0].park_ns, 40);
	assert_int_equal(st->nr_steals, 1);
	assert_int_equal(st->steals[0].key.victim, 1);
	assert_int_equal(st->steals[0].s.tasks, 2);
	assert_int_equal(st->nr_tasks, 0);
	replay__free(&rp);
	capture_reader__free(r);
	unlink(path);
}

/* what a replay told: each process's begin and end, in order */
struct told {
	char log[256];
};

static int told_begin(void *ctx, struct replay_proc *p)
{
	struct told *t = ctx;

	snprintf(t->log + strlen(t->log), sizeof(t->log) - strlen(t->log), "begin %u; ",
		 p->pid);
	return 0;
}

static void told_end(void *ctx, struct replay_proc *p)
{
	struct told *t = ctx;

	snprintf(t->log + strlen(t->log), sizeof(t->log) - strlen(t->log), "end %u at %llu %s; ",
		 p->pid, (unsigned long long)p->stop, p->reason);
}

/*
 * Version 4: two processes in one capture, the second begun later; each
 * record goes to its own (names at one address, each its own), the first
 * ends at its own end record with its snapshot, the second at the capture's.
 */
static void two_processes(void **state)
{
	char path[] = "/tmp/asynctraced-capture-XXXXXX";
	int fd = mkstemp(path);
	struct cap_process a = { .hdr.ts = 100, .pid = 10 }, b = { .hdr.ts = 150, .pid = 20 };
	struct at_poll pa = { .hdr = { .kind = AT_EV_POLL, .size = sizeof(pa), .tid = 11, .pid = 10,
				       .ts = 160 }, .task = 1, .duration_ns = 5, .name_addr = 0x40 };
	struct at_poll pb = { .hdr = { .kind = AT_EV_POLL, .size = sizeof(pb), .tid = 21, .pid = 20,
				       .ts = 170 }, .task = 1, .duration_ns = 7, .name_addr = 0x40 };
	struct at_poll stray = { .hdr = { .kind = AT_EV_POLL, .size = sizeof(pb), .tid = 31, .pid = 30,
					  .ts = 175 }, .task = 1 };
	struct stats st = { .ts = 180, .pid = 10 };
	uint64_t counters[AT_STAT_NR] = { 0 };
	struct told t = { "" };
	const struct replay_ops ops = { .begin = told_begin, .end = told_end, .ctx = &t };
	struct detect_config opts = { .given = ~0u }; /* as it is: none taken from the capture */
	struct capture_writer *w;
	struct capture_reader *r;
	struct replay rp;
	char err[256], name[64];

	assert_true(fd >= 0);
	close(fd);
	strcpy(a.comm, "first");
	strcpy(b.comm, "second");
	assert_int_equal(capture_writer__open(&w, path), 0);
	capture__begin(w, &a);
	capture__name(w, 10, 0x40, "ten's");
	capture__begin(w, &b);
	assert_false(capture__has_name(w, 20, 0x40)); /* the same address, another process */
	capture__name(w, 20, 0x40, "twenty's");
	capture__event(w, &pa, sizeof(pa));
	capture__event(w, &pb, sizeof(pb));
	capture__event(w, &stray, sizeof(stray));
	capture__snapshot(w, &st, counters, AT_STAT_NR);
	capture__process_end(w, 10, 190, "target exited");
	capture__tick(w, 200);
	capture__end(w, 300, "interrupted");
	assert_int_equal(capture_writer__flush(w), 0);
	capture_writer__free(w);

	assert_int_equal(capture_reader__open(&r, path, err, sizeof(err)), 0);
	assert_int_equal(capture_reader__version(r), CAPTURE_VERSION);
	assert_int_equal(replay__init(&rp, r, &opts, &ops), 0);
	assert_int_equal(replay__run(&rp, r), 0);
	assert_string_equal(t.log, "begin 10; begin 20; end 10 at 190 target exited; "
				   "end 20 at 300 interrupted; ");
	assert_int_equal(rp.nr, 2);
	assert_int_equal(rp.strays, 1);
	assert_int_equal(rp.procs[0]->pipe.model.n.polls, 1);
	assert_int_equal(rp.procs[1]->pipe.model.n.polls, 1);
	model__task_name(&rp.procs[0]->pipe.model, 1, 0x40, name, sizeof(name));
	assert_string_equal(name, "ten's");
	model__task_name(&rp.procs[1]->pipe.model, 1, 0x40, name, sizeof(name));
	assert_string_equal(name, "twenty's");
	assert_string_equal(rp.procs[1]->pipe.model.comm, "second");
	assert_true(replay__has_snapshot(rp.procs[0]));
	assert_false(replay__has_snapshot(rp.procs[1])); /* none was written: counted */
	replay__free(&rp);
	capture_reader__free(r);
	unlink(path);
}

/*
 * Every threshold travels into a process record and back, and replay's merge
 * takes the recorded ones but those given on the command line: each one
 * told apart by a value of its own, whatever thresholds the list holds.
 */
static void thresholds_recorded_and_merged(void **state)
{
	struct detect_config given = { 0 }, recorded = { 0 }, back;
	struct cap_process proc = { 0 };
	uint32_t v = 1;

	(void)state;
#define X(field, ...)                                                                              \
	recorded.field = v++;                                                                      \
	given.field = 1000 + v;
	DETECT_THRESHOLDS(X)
#undef X
	cap_process__set_config(&proc, &recorded);
	cap_process__config(&proc, &back);
	assert_memory_equal(&back, &recorded, sizeof(back));
	given.given = DETECT_GIVEN(sched_delay_ns) | DETECT_GIVEN(lost_waker_ns);
	detect_config__merge(&given, &back);
	assert_int_equal(given.long_poll_ns, recorded.long_poll_ns);
	assert_int_equal(given.sched_delay_ns, 1000 + 3);
	assert_int_equal(given.thrash_rate, recorded.thrash_rate);
	assert_int_equal(given.lost_waker_ns, 1000 + 7);
	assert_int_equal(given.episode_gap_ns, recorded.episode_gap_ns);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(round_trip),
		cmocka_unit_test(damage),
		cmocka_unit_test(damage_deflated),
		cmocka_unit_test(other_versions),
		cmocka_unit_test(read_v1),
		cmocka_unit_test(read_v2),
		cmocka_unit_test(unknown_kinds),
		cmocka_unit_test(counts_without_snapshot),
		cmocka_unit_test(two_processes),
		cmocka_unit_test(thresholds_recorded_and_merged),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
