// SPDX-License-Identifier: MIT
/*
 * Captures: what the writer writes the reader gives back, record for record;
 * and every kind of damage is refused with its own message and offset.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <setjmp.h>
#include <cmocka.h>

#include "capture.h"

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
	for (int i = 0; i < 300; i++) {
		tasks[i].id = (uint64_t)i + 1;
		tasks[i].s.poll_ns = (uint64_t)i * 10;
	}
	st.rt.spawns = 11;
	return st;
}

/* Writes a small capture of every record kind to path. */
static void write_capture(const char *path)
{
	struct cap_process proc = { .hdr.ts = 100, .pid = 4242, .runtime = CAPTURE_RUNTIME_USDT,
				    .long_poll_ns = 15000000, .lost_waker_ns = 1000000000 };
	struct at_poll poll = { .hdr = { AT_EV_POLL, sizeof(poll), 17, 200 }, .task = 5,
				.duration_ns = 30, .name_addr = 0x40 };
	struct stats st = one_of_each();
	uint64_t counters[AT_STAT_NR] = { [AT_STAT_ORPHAN_POLL_END] = 3 };
	struct capture_writer *w;

	strcpy(proc.comm, "server");
	assert_int_equal(capture_writer__open(&w, path), 0);
	capture__begin(w, &proc);
	assert_false(capture__has_name(w, 0x40));
	capture__name(w, 0x40, "conn");
	capture__name(w, 0x40, "written once only");
	assert_true(capture__has_name(w, 0x40));
	capture__no_name(w, 0x80);
	assert_true(capture__has_name(w, 0x80));
	assert_true(capture__has_name(w, 0)); /* no address, nothing to name */
	capture__thread(w, 17, "worker-0");
	capture__thread(w, 17, "again");
	capture__event(w, &poll, sizeof(poll));
	capture__tick(w, 300);
	capture__finish(w, &st, counters, AT_STAT_NR, 400, "target exited");
	assert_int_equal(capture_writer__flush(w), 0);
	/* process, name, thread, poll, tick, runtime, 2 workers, 256 tasks, idle, steal, end */
	assert_int_equal(capture_writer__records(w), 1 + 1 + 1 + 1 + 1 + 1 + 2 + 256 + 1 + 1 + 1);
	capture_writer__free(w);
}

static void round_trip(void **state)
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
	write_capture(path);
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
			uint64_t ns = ((const struct cap_task_stats *)h)->e.s.poll_ns;

			assert_true(ns <= last_poll_ns);
			last_poll_ns = ns;
		}
		if (h->kind == AT_CAP_RUNTIME_STATS) {
			const struct cap_runtime_stats *rs = (const void *)h;

			assert_int_equal(rs->rt.spawns, 11);
			assert_int_equal(rs->dropped, 9);
			assert_int_equal(rs->nr_counters, AT_STAT_NR);
			assert_int_equal(rs->counters[AT_STAT_ORPHAN_POLL_END], 3);
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

static void damage(void **state)
{
	char path[] = "/tmp/asynctraced-capture-XXXXXX";
	int fd = mkstemp(path);
	struct file f;
	char err[256];
	uint8_t *bad;
	size_t first = sizeof(struct capture_file_header) + sizeof(struct cap_process);

	assert_true(fd >= 0);
	close(fd);
	write_capture(path);
	f = slurp(path);
	unlink(path);
	bad = malloc(f.size + 64);

	assert_string_equal(read_all(f.data, f.size, err, sizeof(err)), "");
	assert_non_null(strstr(read_all(f.data, 3, err, sizeof(err)), "too short for the header"));

	memcpy(bad, f.data, f.size);
	bad[1] = 'X';
	assert_non_null(strstr(read_all(bad, f.size, err, sizeof(err)), "bad magic"));

	memcpy(bad, f.data, f.size);
	bad[8] = 9;
	assert_non_null(strstr(read_all(bad, f.size, err, sizeof(err)),
			       "capture format version 9: this asynctraced reads version 1"));

	/* no process record first */
	assert_non_null(strstr(read_all(f.data, sizeof(struct capture_file_header) + 20, err,
					sizeof(err)),
			       "no process record"));

	/* cut: at a record boundary, inside a header, inside a body */
	assert_non_null(strstr(read_all(f.data, first, err, sizeof(err)),
			       "at byte 120: the capture stops without its end record"));
	assert_non_null(strstr(read_all(f.data, first + 5, err, sizeof(err)),
			       "cut in the middle of a record header"));
	assert_non_null(strstr(read_all(f.data, f.size - 1, err, sizeof(err)),
			       "cut in the middle of a 48-byte record"));

	/* a record of size 0, and a capture record too short for its kind */
	memcpy(bad, f.data, f.size);
	bad[first + 2] = 0;
	bad[first + 3] = 0;
	assert_non_null(strstr(read_all(bad, f.size, err, sizeof(err)), "not a record"));
	memcpy(bad, f.data, f.size);
	bad[first + 2] = 17; /* the name record, cut to 17 bytes */
	assert_non_null(strstr(read_all(bad, f.size, err, sizeof(err)),
			       "a record shorter than its kind"));

	/* a name without its NUL */
	memcpy(bad, f.data, f.size);
	memset(bad + first + sizeof(struct cap_name), 'x', 8);
	assert_non_null(strstr(read_all(bad, f.size, err, sizeof(err)),
			       "a name without its terminating NUL"));

	/* a second process record */
	free(bad);
	bad = malloc(f.size + first);
	memcpy(bad, f.data, first);
	memcpy(bad + first, f.data + sizeof(struct capture_file_header), first - 16);
	memcpy(bad + 2 * first - 16, f.data + first, f.size - first);
	assert_non_null(strstr(read_all(bad, f.size + first - 16, err, sizeof(err)),
			       "a second process record"));

	/* bytes after the end */
	memcpy(bad, f.data, f.size);
	memset(bad + f.size, 0, 16);
	assert_non_null(strstr(read_all(bad, f.size + 16, err, sizeof(err)),
			       "16 bytes after the end record"));
	free(bad);
	free(f.data);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(round_trip),
		cmocka_unit_test(damage),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
