// SPDX-License-Identifier: MIT
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "lib/util.h"

static void durations(void **state)
{
	uint64_t ns;

	assert_int_equal(parse_duration("10ms", 1, &ns), 0);
	assert_int_equal(ns, 10000000);
	assert_int_equal(parse_duration("500us", 1, &ns), 0);
	assert_int_equal(ns, 500000);
	assert_int_equal(parse_duration("1.5s", 1, &ns), 0);
	assert_int_equal(ns, 1500000000);
	assert_int_equal(parse_duration("250ns", 1, &ns), 0);
	assert_int_equal(ns, 250);
	/* a bare number takes the caller's unit */
	assert_int_equal(parse_duration("7", 1000000, &ns), 0);
	assert_int_equal(ns, 7000000);
	assert_int_equal(parse_duration("2.5", 1000000000, &ns), 0);
	assert_int_equal(ns, 2500000000);
	assert_int_equal(parse_duration("0", 1000000, &ns), 0);
	assert_int_equal(ns, 0);
}

static void bad_durations(void **state)
{
	uint64_t ns = 42;

	assert_int_not_equal(parse_duration("", 1, &ns), 0);
	assert_int_not_equal(parse_duration("ms", 1, &ns), 0);
	assert_int_not_equal(parse_duration("-1ms", 1, &ns), 0);
	assert_int_not_equal(parse_duration("10 ms", 1, &ns), 0);
	assert_int_not_equal(parse_duration("10xs", 1, &ns), 0);
	assert_int_not_equal(parse_duration("nan", 1, &ns), 0);
	assert_int_not_equal(parse_duration("1e30s", 1, &ns), 0);
	assert_int_equal(ns, 42);
}

static void sizes(void **state)
{
	uint64_t b;

	assert_int_equal(parse_size("16M", &b), 0);
	assert_int_equal(b, 16u << 20);
	assert_int_equal(parse_size("4K", &b), 0);
	assert_int_equal(b, 4096);
	assert_int_equal(parse_size("1G", &b), 0);
	assert_int_equal(b, 1u << 30);
	assert_int_equal(parse_size("8MiB", &b), 0);
	assert_int_equal(b, 8u << 20);
	assert_int_equal(parse_size("4096", &b), 0);
	assert_int_equal(b, 4096);
	assert_int_not_equal(parse_size("M", &b), 0);
	assert_int_not_equal(parse_size("-4K", &b), 0);
	assert_int_not_equal(parse_size("4X", &b), 0);
	assert_int_not_equal(parse_size("99999999999999999999G", &b), 0);
}

static void ints(void **state)
{
	int v;

	assert_int_equal(parse_int("123", 1, 1000, &v), 0);
	assert_int_equal(v, 123);
	assert_int_not_equal(parse_int("0", 1, 1000, &v), 0);
	assert_int_not_equal(parse_int("1001", 1, 1000, &v), 0);
	assert_int_not_equal(parse_int("12a", 1, 1000, &v), 0);
	assert_int_not_equal(parse_int("", 1, 1000, &v), 0);
	assert_int_not_equal(parse_int("99999999999", 1, 2147483647, &v), 0);
}

/* Entries sorted by an address at their start, whatever follows it. */
static void upper_bounds(void **state)
{
	struct entry {
		uint64_t addr;
		char rest[12];
	} e[] = { { 10, "a" }, { 20, "b" }, { 20, "c" }, { 30, "d" } };

	(void)state;
	assert_int_equal(upper_bound_u64(e, 4, sizeof(e[0]), 5), 0);
	assert_int_equal(upper_bound_u64(e, 4, sizeof(e[0]), 10), 1);
	assert_int_equal(upper_bound_u64(e, 4, sizeof(e[0]), 19), 1);
	assert_int_equal(upper_bound_u64(e, 4, sizeof(e[0]), 20), 3);
	assert_int_equal(upper_bound_u64(e, 4, sizeof(e[0]), 1000), 4);
	assert_int_equal(upper_bound_u64(e, 0, sizeof(e[0]), 1000), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(durations),
		cmocka_unit_test(bad_durations),
		cmocka_unit_test(sizes),
		cmocka_unit_test(ints),
		cmocka_unit_test(upper_bounds),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
