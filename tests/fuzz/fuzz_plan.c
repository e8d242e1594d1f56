// SPDX-License-Identifier: MIT
/*
 * libFuzzer target: any bytes as a probe plan the analyser sent
 * (src/analyser/plan.c), decoded as the privileged side does, against
 * three files of known sizes. The analyser reads what targets control; a
 * bug there may make it send anything, and the decoder is what stands
 * between it and where root puts breakpoints.
 *
 * Whatever the bytes: no crash, hang, leak or UB; a plan taken has every
 * probe, semaphore and return site inside its file, every name terminated,
 * and encoded again and decoded, it gives the very same bytes.
 *
 *   build/fuzz/fuzz_plan -runs=0 tests/fuzz/plan   replay the corpus
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyser/plan.h"
#include "check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FILES 3

/* the first as large as a real executable: the seeds' plans are of real programs */
static const uint64_t sizes[FILES] = { 64 << 20, 4096, 1 << 20 };

static void with_files(struct discovery *d, struct target_file *f)
{
	memset(d, 0, sizeof(*d));
	for (int i = 0; i < FILES; i++) {
		f[i] = (struct target_file){ .fd = -1, .target_path = (char *)"/usr/bin/x" };
		snprintf(f[i].path, sizeof(f[i].path), "/proc/self/fd/%d", 100 + i);
	}
	d->files = (struct target_files){ .f = f, .nr = FILES, .exe = 0 };
}

static void forget(struct discovery *d)
{
	d->files = (struct target_files){ .exe = -1 };
	discovery__free(d);
}

static size_t file_of(const struct discovery *d, const char *path)
{
	for (size_t i = 0; i < FILES; i++)
		if (!strcmp(d->files.f[i].path, path))
			return i;
	CHECK(!"a path that is none of the files");
	return 0;
}

static void check(const struct discovery *d)
{
	for (size_t i = 0; i < d->nr; i++) {
		size_t f = file_of(d, d->sites[i].path);

		CHECK(strnlen(d->sites[i].name, sizeof(d->sites[i].name)) < sizeof(d->sites[i].name));
		for (size_t j = 0; j < d->sites[i].nr_at; j++)
			CHECK(d->sites[i].at[j].offset < sizes[f] && d->sites[i].at[j].ref_ctr < sizes[f]);
	}
	for (size_t i = 0; i < d->tokio.rt.nr; i++) {
		const struct tokio_site *s = &d->tokio.rt.sites[i];
		size_t f = file_of(d, d->tokio.path);

		CHECK(s->offset + s->place.skip < sizes[f]);
		CHECK(strlen(s->place.why) < sizeof(s->place.why));
	}
	for (size_t i = 0; i < d->go.nr_all; i++)
		CHECK(golang__goroutine_name(&d->go, d->go.all[i].addr));
	for (int i = 0; i < d->nr_go_rets; i++)
		CHECK(d->go_rets[i].at < sizes[file_of(d, d->go_path)]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct target_file f[FILES];
	struct discovery d, again;
	struct plan_buf once = { 0 }, twice = { 0 };
	const char *why = NULL;

	with_files(&d, f);
	if (plan__decode(data, size, sizes, &d, &why)) {
		CHECK(why);
		CHECK(!d.nr && !d.tokio.rt.nr && !d.go.nr_all);
		return 0;
	}
	check(&d);
	CHECK(plan__encode(&d, &once) == 0);
	with_files(&again, f);
	CHECK(plan__decode(once.data, once.len, sizes, &again, &why) == 0);
	CHECK(plan__encode(&again, &twice) == 0);
	CHECK(once.len == twice.len && !memcmp(once.data, twice.data, once.len));
	plan_buf__free(&once);
	plan_buf__free(&twice);
	forget(&again);
	forget(&d);
	return 0;
}
