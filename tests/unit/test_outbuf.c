// SPDX-License-Identifier: MIT
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <setjmp.h>
#include <cmocka.h>

#include "lib/outbuf.h"

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	static char buf[1 << 16];
	size_t n;

	assert_non_null(f);
	n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

static void formats(void **state)
{
	char path[] = "/tmp/asynctraced-outbuf-XXXXXX";
	struct outbuf *ob;
	int fd = mkstemp(path);

	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(outbuf__open(&ob, path), 0);
	ob_us(ob, 1234567);
	ob_putc(ob, ' ');
	ob_us(ob, 5);
	ob_putc(ob, ' ');
	ob_u64(ob, 0);
	ob_putc(ob, ' ');
	ob_u64(ob, UINT64_MAX);
	ob_putc(ob, ' ');
	ob_i64(ob, -42);
	ob_putc(ob, ' ');
	ob_hex(ob, 0xbeef);
	ob_putc(ob, ' ');
	ob_json_str(ob, "a\"b\\c\n\x01");
	ob_putc(ob, ' ');
	/* valid UTF-8 passes, a stray byte does not break the JSON */
	ob_json_str(ob, "caf\xc3\xa9 \xff!");
	assert_int_equal(outbuf__flush(ob), 0);
	assert_string_equal(slurp(path), "1234.567 0.005 0 18446744073709551615 -42 0xbeef "
					 "\"a\\\"b\\\\c\\u000a\\u0001\" \"caf\xc3\xa9 ?!\"");
	assert_int_equal(outbuf__bytes(ob), strlen(slurp(path)));
	outbuf__free(ob);
	unlink(path);
}

/* More than the buffer holds, in pieces and in one large write. */
static void large(void **state)
{
	char path[] = "/tmp/asynctraced-outbuf-XXXXXX";
	struct outbuf *ob;
	size_t big = 3u << 20;
	char *blob = malloc(big);
	int fd = mkstemp(path);

	assert_true(fd >= 0);
	close(fd);
	memset(blob, 'x', big);
	assert_int_equal(outbuf__open(&ob, path), 0);
	for (int i = 0; i < 300000; i++)
		ob_puts(ob, "0123456789");
	ob_write(ob, blob, big);
	assert_int_equal(outbuf__flush(ob), 0);
	assert_int_equal(outbuf__bytes(ob), 3000000 + big);
	outbuf__free(ob);
	free(blob);
	unlink(path);
}

static void unwritable(void **state)
{
	struct outbuf *ob;

	assert_int_not_equal(outbuf__open(&ob, "/nonexistent-dir/trace.json"), 0);
}

/* A scratch directory, as /tmp is where a planted file would wait. */
static char *scratch(void)
{
	static char dir[64];

	snprintf(dir, sizeof(dir), "/tmp/asynctraced-outbuf-XXXXXX");
	assert_non_null(mkdtemp(dir));
	return dir;
}

static char *in(const char *dir, const char *name)
{
	static char paths[4][128];
	static int next;
	char *p = paths[next++ % 4];

	snprintf(p, sizeof(paths[0]), "%s/%s", dir, name);
	return p;
}

static void put_file(const char *path, const char *text, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	assert_int_equal(chmod(path, mode), 0);
}

/* A symlink planted where root writes must not lead to the file it names. */
static void refuses_symlink(void **state)
{
	char *dir = scratch(), *victim = in(dir, "victim"), *link = in(dir, "t.json");
	struct outbuf *ob;
	struct stat st;

	put_file(victim, "secret", 0600);
	assert_int_equal(symlink(victim, link), 0);
	assert_int_equal(outbuf__open(&ob, link), -ELOOP);
	assert_string_equal(slurp(victim), "secret");
	assert_int_equal(stat(victim, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0600);
	/* a dangling one is refused too: it would create the file it names */
	assert_int_equal(unlink(victim), 0);
	assert_int_equal(outbuf__open(&ob, link), -ELOOP);
	assert_int_equal(access(victim, F_OK), -1);
	unlink(link);
	rmdir(dir);
}

static void on_alarm(int sig)
{
	fail_msg("outbuf__open blocked on a FIFO");
}

/* Writing a FIFO would block (no reader) or feed whoever reads it. */
static void refuses_fifo(void **state)
{
	char *dir = scratch(), *fifo = in(dir, "t.json");
	struct outbuf *ob;
	int rd;

	assert_int_equal(mkfifo(fifo, 0666), 0);
	signal(SIGALRM, on_alarm);
	alarm(5);
	assert_int_equal(outbuf__open(&ob, fifo), -ENXIO);
	rd = open(fifo, O_RDONLY | O_NONBLOCK);
	assert_true(rd >= 0);
	assert_int_equal(outbuf__open(&ob, fifo), -ENXIO);
	alarm(0);
	close(rd);
	unlink(fifo);
	rmdir(dir);
}

/* Devices and directories are not truncated or written either. */
static void refuses_other_files(void **state)
{
	struct outbuf *ob;

	assert_int_equal(outbuf__open(&ob, "/dev/null"), -ENXIO);
	assert_int_equal(outbuf__open(&ob, "/tmp"), -EISDIR);
}

/* An existing regular file is written from its start and keeps its mode. */
static void rewrites_regular_file(void **state)
{
	char *dir = scratch(), *path = in(dir, "t.json");
	struct outbuf *ob;
	struct stat st;

	put_file(path, "an older and longer trace", 0600);
	assert_int_equal(outbuf__open(&ob, path), 0);
	ob_puts(ob, "new");
	assert_int_equal(outbuf__flush(ob), 0);
	outbuf__free(ob);
	assert_string_equal(slurp(path), "new");
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0600);
	unlink(path);
	rmdir(dir);
}

/* New files: 0666 less the umask (asynctraced's: 077 unless --umask). */
static void creates_with_umask(void **state)
{
	static const mode_t masks[][2] = { { 022, 0644 }, { 077, 0600 }, { 0, 0666 } };
	char *dir = scratch(), *path = in(dir, "t.json");
	mode_t old = umask(0);

	for (size_t i = 0; i < sizeof(masks) / sizeof(masks[0]); i++) {
		struct outbuf *ob;
		struct stat st;

		umask(masks[i][0]);
		assert_int_equal(outbuf__open(&ob, path), 0);
		outbuf__free(ob);
		assert_int_equal(stat(path, &st), 0);
		assert_int_equal(st.st_mode & 07777, masks[i][1]);
		unlink(path);
	}
	umask(old);
	rmdir(dir);
}

/*
 * SIGHUP's reopen of the alert log (logrotate moved it): what is at the path
 * then is as untrusted as at the start. A FIFO, with a reader or without,
 * neither blocks the loop nor gets the log; a symlink is not followed; a
 * regular file is appended to.
 */
static void reopen_takes_only_a_regular_file(void **state)
{
	char *dir = scratch(), *path = in(dir, "alerts"), *victim = in(dir, "victim");
	struct outbuf *ob;
	int rd;

	assert_int_equal(outbuf__open(&ob, path), 0);
	ob_puts(ob, "one\n");
	assert_int_equal(unlink(path), 0);
	assert_int_equal(mkfifo(path, 0666), 0);
	signal(SIGALRM, on_alarm);
	alarm(5);
	assert_int_equal(outbuf__reopen(ob, path), -ENXIO);
	rd = open(path, O_RDONLY | O_NONBLOCK);
	assert_true(rd >= 0);
	assert_int_equal(outbuf__reopen(ob, path), -ENXIO);
	alarm(0);
	assert_int_equal(read(rd, (char[8]){ 0 }, 8), 0);
	close(rd);
	unlink(path);
	put_file(victim, "secret", 0600);
	assert_int_equal(symlink(victim, path), 0);
	assert_int_equal(outbuf__reopen(ob, path), -ELOOP);
	assert_string_equal(slurp(victim), "secret");
	unlink(path);
	assert_int_equal(outbuf__reopen(ob, "/dev/null"), -ENXIO);
	put_file(path, "zero\n", 0600);
	assert_int_equal(outbuf__reopen(ob, path), 0);
	ob_puts(ob, "two\n");
	assert_int_equal(outbuf__flush(ob), 0);
	outbuf__free(ob);
	assert_string_equal(slurp(path), "zero\ntwo\n");
	unlink(path);
	unlink(victim);
	rmdir(dir);
}

/* "-" is standard output, whatever kind of file that is. */
static void dash_is_stdout(void **state)
{
	struct outbuf *ob;

	assert_int_equal(outbuf__open(&ob, "-"), 0);
	outbuf__free(ob);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(formats),
		cmocka_unit_test(large),
		cmocka_unit_test(unwritable),
		cmocka_unit_test(refuses_symlink),
		cmocka_unit_test(refuses_fifo),
		cmocka_unit_test(refuses_other_files),
		cmocka_unit_test(rewrites_regular_file),
		cmocka_unit_test(creates_with_umask),
		cmocka_unit_test(reopen_takes_only_a_regular_file),
		cmocka_unit_test(dash_is_stdout),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
