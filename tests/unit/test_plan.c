// SPDX-License-Identifier: MIT
/*
 * The analyser's plans (src/analyser/plan.c): what real processes' files
 * hold (the sample executor's USDT probes, tokio's sites, a Go program's
 * runtime) comes
 * through encode and decode whole, and a plan cut short, with any one byte
 * changed, or with an offset past its file's end, is refused or decodes to
 * one whose every offset is inside its file.
 */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <setjmp.h>
#include <cmocka.h>

#include "analyser/plan.h"
#include "targets/discover.h"
#include "targets/target.h"

static const char *build(void)
{
	return getenv("BUILD") ? getenv("BUILD") : "build";
}

struct examined {
	pid_t pid;
	struct target t;
	struct discovery d;
	struct plan_buf plan;
	uint64_t sizes[256];
};

/* Program argv started, examined in this process, and its plan written. */
static void examine(struct examined *e, char *const argv[], const char *comm)
{
	char path[64], got[32] = "";

	memset(e, 0, sizeof(*e));
	e->pid = fork();
	assert_true(e->pid >= 0);
	if (e->pid == 0) {
		execv(argv[0], argv);
		_exit(127);
	}
	snprintf(path, sizeof(path), "/proc/%d/comm", e->pid);
	for (int i = 0; i < 500 && strcmp(got, comm); i++) {
		FILE *f = fopen(path, "r");

		if (f) {
			if (!fgets(got, sizeof(got), f))
				got[0] = '\0';
			got[strcspn(got, "\n")] = '\0';
			fclose(f);
		}
		usleep(10000);
	}
	assert_string_equal(got, comm);
	assert_int_equal(target__open(&e->t, e->pid), 0);
	assert_int_equal(discover(&e->d, &e->t), 0);
	assert_true(e->d.files.nr <= 256);
	for (size_t i = 0; i < e->d.files.nr; i++) {
		struct stat st;

		assert_int_equal(fstat(e->d.files.f[i].fd, &st), 0);
		e->sizes[i] = (uint64_t)st.st_size;
	}
	assert_int_equal(plan__encode(&e->d, &e->plan), 0);
	/* PLAN_SEEDS=DIR: the plan kept there, a seed of tests/fuzz/plan */
	if (getenv("PLAN_SEEDS")) {
		FILE *f;

		snprintf(path, sizeof(path), "%s/%s", getenv("PLAN_SEEDS"), comm);
		f = fopen(path, "w");
		assert_non_null(f);
		assert_int_equal(fwrite(e->plan.data, 1, e->plan.len, f), e->plan.len);
		fclose(f);
	}
}

/* The sample executor, examined. */
static void examine_executor(struct examined *e)
{
	char exe[PATH_MAX];
	char *argv[] = { exe, "--scenario", "healthy", "--rate", "10", "--duration", "20",
			 "--workers", "2", NULL };

	snprintf(exe, sizeof(exe), "%s/sample-executor", build());
	examine(e, argv, "sample-executor");
}

static void done(struct examined *e)
{
	plan_buf__free(&e->plan);
	discovery__free(&e->d);
	target__close(&e->t);
	kill(e->pid, SIGKILL);
	waitpid(e->pid, NULL, 0);
}

/* plan decoded against e's files: 0 or -EBADMSG; out is freed but for those files. */
static int decode(const struct examined *e, const uint8_t *plan, size_t len, struct discovery *out)
{
	const char *why = NULL;
	int err;

	memset(out, 0, sizeof(*out));
	out->files = e->d.files;
	err = plan__decode(plan, len, e->sizes, out, &why);
	assert_true(err == 0 || (err == -EBADMSG && why));
	return err;
}

static void forget(struct discovery *d)
{
	d->files = (struct target_files){ .exe = -1 };
	discovery__free(d);
}

/* Every offset a decoded plan holds is inside the file it names. */
static void check_bounds(const struct examined *e, const struct discovery *d)
{
	for (size_t i = 0; i < d->nr; i++) {
		size_t f;

		for (f = 0; strcmp(d->sites[i].path, e->d.files.f[f].path); f++)
			assert_true(f + 1 < e->d.files.nr);
		for (size_t j = 0; j < d->sites[i].nr_at; j++) {
			assert_true(d->sites[i].at[j].offset < e->sizes[f]);
			assert_true(d->sites[i].at[j].ref_ctr < e->sizes[f]);
		}
	}
}

static void usdt_probes_whole(void **state)
{
	struct examined e;
	struct discovery d;

	(void)state;
	examine_executor(&e);
	assert_int_equal(e.d.kind, RUNTIME_USDT);
	assert_int_equal(decode(&e, e.plan.data, e.plan.len, &d), 0);
	assert_int_equal(d.kind, RUNTIME_USDT);
	assert_int_equal(d.nr, e.d.nr);
	assert_int_equal(d.scanned, e.d.scanned);
	assert_memory_equal(d.specs, e.d.specs, sizeof(d.specs));
	for (size_t i = 0; i < d.nr; i++) {
		assert_string_equal(d.sites[i].name, e.d.sites[i].name);
		assert_string_equal(d.sites[i].path, e.d.sites[i].path);
		assert_string_equal(d.sites[i].target_path, e.d.sites[i].target_path);
		assert_int_equal(d.sites[i].probe, e.d.sites[i].probe);
		assert_int_equal(d.sites[i].nr_at, e.d.sites[i].nr_at);
		assert_memory_equal(d.sites[i].at, e.d.sites[i].at,
				    d.sites[i].nr_at * sizeof(*d.sites[i].at));
	}
	forget(&d);

	/* cut anywhere: refused */
	for (size_t len = 0; len < e.plan.len; len++)
		assert_int_equal(decode(&e, e.plan.data, len, &d), -EBADMSG);
	/* any one byte changed: refused, or every offset still inside its file */
	for (size_t i = 0; i < e.plan.len; i++) {
		uint8_t *copy = malloc(e.plan.len);

		assert_non_null(copy);
		memcpy(copy, e.plan.data, e.plan.len);
		copy[i] ^= 0xff;
		if (decode(&e, copy, e.plan.len, &d) == 0) {
			check_bounds(&e, &d);
			forget(&d);
		}
		free(copy);
	}
	done(&e);
}

/* The first USDT site's offset moved to its file's end: refused, and why. */
static void offset_past_the_end(void **state)
{
	struct examined e;
	struct discovery d;
	const char *why = NULL;
	uint64_t offset;
	uint8_t *at;

	(void)state;
	examine_executor(&e);
	offset = e.d.sites[0].at[0].offset;
	at = memmem(e.plan.data, e.plan.len, &offset, sizeof(offset));
	assert_non_null(at);
	for (size_t f = 0; f < e.d.files.nr; f++)
		if (!strcmp(e.d.files.f[f].path, e.d.sites[0].path))
			offset = e.sizes[f];
	memcpy(at, &offset, sizeof(offset));
	memset(&d, 0, sizeof(d));
	d.files = e.d.files;
	assert_int_equal(plan__decode(e.plan.data, e.plan.len, e.sizes, &d, &why), -EBADMSG);
	assert_string_equal(why, "an offset past its file's end");
	assert_int_equal(d.nr, 0);
	done(&e);
}

static void go_runtime_whole(void **state)
{
	char exe[PATH_MAX];
	char *argv[] = { exe, "-duration", "20s", "-scenario", "pingpong", NULL };
	struct examined e;
	struct discovery d;

	(void)state;
	snprintf(exe, sizeof(exe), "%s/go-app", build());
	examine(&e, argv, "go-app");
	assert_int_equal(e.d.kind, RUNTIME_GO);
	assert_int_equal(decode(&e, e.plan.data, e.plan.len, &d), 0);
	assert_int_equal(d.kind, RUNTIME_GO);
	assert_true(d.is_go);
	assert_string_equal(d.go.version, e.d.go.version);
	assert_string_equal(d.go_path, e.d.go_path);
	assert_memory_equal(&d.go_map, &e.d.go_map, sizeof(d.go_map));
	assert_memory_equal(&d.go.off, &e.d.go.off, sizeof(d.go.off));
	assert_int_equal(d.go_bias, e.d.go_bias);
	assert_int_equal(d.nr_go_rets, e.d.nr_go_rets);
	assert_true(d.nr_go_rets > 0);
	assert_memory_equal(d.go_rets, e.d.go_rets, sizeof(d.go_rets));
	assert_memory_equal(d.go_entries, e.d.go_entries, sizeof(d.go_entries));
	assert_int_equal(d.go.nr_all, e.d.go.nr_all);
	/* goroutines are named by the table alone */
	for (size_t i = 0; i < d.go.nr_all; i += 97)
		assert_string_equal(golang__goroutine_name(&d.go, d.go.all[i].addr),
				    golang__goroutine_name(&e.d.go, e.d.go.all[i].addr));
	forget(&d);
	for (size_t len = 0; len < e.plan.len; len += 1 + len / 64)
		assert_int_equal(decode(&e, e.plan.data, len, &d), -EBADMSG);
	done(&e);
}

static void tokio_sites_whole(void **state)
{
	char exe[PATH_MAX];
	char *argv[] = { exe, "--duration", "20", NULL };
	struct examined e;
	struct discovery d;

	(void)state;
	snprintf(exe, sizeof(exe), "%s/tokio-app", build());
	examine(&e, argv, "tokio-app");
	assert_int_equal(e.d.kind, RUNTIME_TOKIO);
	assert_int_equal(decode(&e, e.plan.data, e.plan.len, &d), 0);
	assert_int_equal(d.kind, RUNTIME_TOKIO);
	assert_string_equal(d.tokio.path, e.d.tokio.path);
	assert_memory_equal(&d.tokio.map, &e.d.tokio.map, sizeof(d.tokio.map));
	assert_int_equal(d.tokio.rt.nr, e.d.tokio.rt.nr);
	assert_memory_equal(d.tokio.rt.count, e.d.tokio.rt.count, sizeof(d.tokio.rt.count));
	assert_int_equal(d.tokio.rt.nr_defer, e.d.tokio.rt.nr_defer);
	assert_memory_equal(d.tokio.rt.defer_ret, e.d.tokio.rt.defer_ret,
			    sizeof(d.tokio.rt.defer_ret));
	for (size_t i = 0; i < d.tokio.rt.nr; i++) {
		const struct tokio_site *a = &d.tokio.rt.sites[i], *b = &e.d.tokio.rt.sites[i];

		assert_int_equal(a->kind, b->kind);
		assert_int_equal(a->offset, b->offset);
		assert_memory_equal(&a->place, &b->place, sizeof(a->place));
		assert_int_equal(a->internal, b->internal);
		assert_true(a->future ? b->future && !strcmp(a->future, b->future) : !b->future);
		assert_memory_equal(a->code_off, b->code_off, sizeof(a->code_off));
		assert_memory_equal(a->code_len, b->code_len, sizeof(a->code_len));
		/* a probed instance's polls run in it (sample mode names tasks by it) */
		if (b->kind == TOKIO_POLL && !b->internal)
			assert_int_equal(b->code_off[0], b->offset);
	}
	/* sample mode's thread-local: found in the executable, and carried whole */
	assert_string_equal(e.d.tokio.rt.current.why, "");
	assert_true(e.d.tokio.rt.current.tpoff < 0);
	assert_int_equal(d.tokio.rt.current.tpoff, e.d.tokio.rt.current.tpoff);
	assert_int_equal(d.tokio.rt.current.size, e.d.tokio.rt.current.size);
	assert_int_equal(d.tokio.rt.current.task_id, e.d.tokio.rt.current.task_id);
	assert_int_equal(d.tokio.rt.current.budget, e.d.tokio.rt.current.budget);
	assert_string_equal(d.tokio.rt.current.why, "");
	forget(&d);
	plan_buf__free(&e.plan);
	/* a field past the thread-local's end is refused */
	e.d.tokio.rt.current.task_id = (int32_t)e.d.tokio.rt.current.size - 8;
	assert_int_equal(plan__encode(&e.d, &e.plan), 0);
	assert_int_equal(decode(&e, e.plan.data, e.plan.len, &d), -EBADMSG);
	forget(&d);
	done(&e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(usdt_probes_whole),
		cmocka_unit_test(offset_past_the_end),
		cmocka_unit_test(go_runtime_whole),
		cmocka_unit_test(tokio_sites_whole),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
