// SPDX-License-Identifier: MIT
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <setjmp.h>
#include <cmocka.h>

#include "lib/u64map.h"

#define N 20000

static void sequential(void **state)
{
	struct u64map m;

	u64map__init(&m);
	for (uintptr_t k = 1; k <= N; k++)
		assert_int_equal(u64map__set(&m, k, (void *)(k * 3)), 0);
	assert_int_equal(m.len, N);
	for (uintptr_t k = 1; k <= N; k++)
		assert_ptr_equal(u64map__get(&m, k), (void *)(k * 3));
	/* delete every odd key: the evens must all stay reachable */
	for (uintptr_t k = 1; k <= N; k += 2)
		assert_ptr_equal(u64map__del(&m, k), (void *)(k * 3));
	assert_int_equal(m.len, N / 2);
	for (uintptr_t k = 1; k <= N; k++)
		assert_ptr_equal(u64map__get(&m, k), k % 2 ? NULL : (void *)(k * 3));
	assert_null(u64map__del(&m, 1));
	assert_null(u64map__get(&m, 0));
	assert_int_not_equal(u64map__set(&m, 0, NULL), 0);
	u64map__clear(&m);
}

/* Values and table freed: an empty map after, as good as new; an empty one too. */
static void clear_free(void **state)
{
	struct u64map m;

	u64map__init(&m);
	u64map__clear_free(&m);
	for (uint64_t k = 1; k <= 100; k++)
		assert_int_equal(u64map__set(&m, k, malloc(16)), 0);
	for (uint64_t k = 1; k <= 100; k += 3)
		free(u64map__del(&m, k));
	u64map__clear_free(&m);
	assert_int_equal(m.len, 0);
	assert_null(m.slots);
	assert_null(u64map__get(&m, 2));
	assert_int_equal(u64map__set(&m, 2, malloc(16)), 0);
	u64map__clear_free(&m);
}

/* Random operations against a plain array as the reference. */
static void random_ops(void **state)
{
	static void *ref[4096];
	struct u64map m;
	uint64_t key;
	void *val;
	size_t live = 0, seen = 0;

	u64map__init(&m);
	srandom(7);
	for (int i = 0; i < 200000; i++) {
		uint64_t k = 1 + (uint64_t)random() % 4095;

		if (random() % 3 == 0) {
			assert_ptr_equal(u64map__del(&m, k), ref[k]);
			ref[k] = NULL;
		} else {
			void *v = (void *)(uintptr_t)(i + 1);

			assert_int_equal(u64map__set(&m, k, v), 0);
			ref[k] = v;
		}
		if (i % 997 == 0)
			for (uint64_t j = 1; j < 4096; j++)
				assert_ptr_equal(u64map__get(&m, j), ref[j]);
	}
	for (uint64_t j = 1; j < 4096; j++)
		live += ref[j] != NULL;
	assert_int_equal(m.len, live);
	for (size_t it = 0; u64map__next(&m, &it, &key, &val);) {
		assert_ptr_equal(ref[key], val);
		seen++;
	}
	assert_int_equal(seen, live);
	u64map__clear(&m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(sequential),
		cmocka_unit_test(random_ops),
		cmocka_unit_test(clear_free),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
