// SPDX-License-Identifier: MIT
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <setjmp.h>
#include <cmocka.h>

#include "outbuf.h"

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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(formats),
		cmocka_unit_test(large),
		cmocka_unit_test(unwritable),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
