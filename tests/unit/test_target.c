// SPDX-License-Identifier: MIT
/* The /proc and ELF side of finding a target, tried on ourselves (no root). */
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

#include "target.h"
#include "usdt_notes.h"

static const char *build(void)
{
	return getenv("BUILD") ? getenv("BUILD") : "build";
}

static void probes_of_the_sample_executor(void **state)
{
	static const char *const want[] = { "task_spawn", "poll_begin",  "poll_end",
					    "wake",	  "steal",	 "worker_park",
					    "worker_unpark" };
	struct usdt_probe *probes;
	char path[512];
	size_t nr;

	snprintf(path, sizeof(path), "%s/sample-executor", build());
	assert_int_equal(usdt__list(path, "asynctrace", &probes, &nr), 0);
	assert_int_equal(nr, 7);
	for (size_t i = 0; i < 7; i++) {
		size_t j;

		for (j = 0; j < nr; j++)
			if (!strcmp(probes[j].name, want[i]))
				break;
		assert_true(j < nr);
		assert_string_equal(probes[j].provider, "asynctrace");
		assert_int_not_equal(probes[j].pc, 0);
		assert_int_not_equal(probes[j].semaphore, 0); /* every probe has one */
		assert_true(probes[j].args_known);
		assert_true(probes[j].args[0]); /* every probe has arguments... */
	}
	/* ...which the loader can fix before loading (one site a probe) */
	for (size_t j = 0; j < nr; j++) {
		struct at_usdt_spec spec;

		assert_int_equal(usdt__parse_args(probes[j].args, &spec), 0);
		assert_true(spec.known);
		assert_true(spec.nr_args >= 1);
	}
	free(probes);
	/* another provider's name filters everything out */
	assert_int_equal(usdt__list(path, "nosuchprovider", &probes, &nr), 0);
	assert_int_equal(nr, 0);
	free(probes);
}

static void assert_arg(const struct at_usdt_arg *a, int kind, int reg_off, long long val,
		       int bits, int is_signed)
{
	assert_int_equal(a->kind, kind);
	assert_int_equal(a->reg_off, reg_off);
	assert_int_equal(a->val, val);
	assert_int_equal(a->shift, 64 - bits);
	assert_int_equal(a->is_signed, is_signed);
}

static void usdt_argument_specs(void **state)
{
	static const char *const rejected[] = {
		"8@foo(%rip)",	    /* a symbol */
		"8@8(%rax,%rbx,4)", /* an index register */
		"3@%rax",	    /* no such size */
		"8@%ah",	    /* a high byte register */
		"8@%rax,",	    /* junk after an operand */
		"8%rax",	    /* no @ */
		"8@$",		    /* no value */
		"8@16",		    /* an address without a register */
	};
	struct at_usdt_spec spec;

	assert_int_equal(usdt__parse_args("8@%rax -4@%ecx 2@%r9w 1@%sil -8@%r15", &spec), 0);
	assert_true(spec.known);
	assert_int_equal(spec.nr_args, 5);
	assert_arg(&spec.args[0], AT_USDT_ARG_REG, 80, 0, 64, 0);
	assert_arg(&spec.args[1], AT_USDT_ARG_REG, 88, 0, 32, 1);
	assert_arg(&spec.args[2], AT_USDT_ARG_REG, 64, 0, 16, 0);
	assert_arg(&spec.args[3], AT_USDT_ARG_REG, 104, 0, 8, 0);
	assert_arg(&spec.args[4], AT_USDT_ARG_REG, 0, 0, 64, 1);

	assert_int_equal(usdt__parse_args("  8@$-1 4@$0x10\t-4@-8(%rbp) 8@(%rsp) 2@0x18(%r12d)",
					  &spec), 0);
	assert_int_equal(spec.nr_args, 5);
	assert_arg(&spec.args[0], AT_USDT_ARG_CONST, 0, -1, 64, 0);
	assert_arg(&spec.args[1], AT_USDT_ARG_CONST, 0, 16, 32, 0);
	assert_arg(&spec.args[2], AT_USDT_ARG_DEREF, 32, -8, 32, 1);
	assert_arg(&spec.args[3], AT_USDT_ARG_DEREF, 152, 0, 64, 0);
	assert_arg(&spec.args[4], AT_USDT_ARG_DEREF, 24, 0x18, 16, 0);

	/* no arguments is a spec too; more than we describe keeps the first ones */
	assert_int_equal(usdt__parse_args("", &spec), 0);
	assert_true(spec.known);
	assert_int_equal(spec.nr_args, 0);
	assert_int_equal(usdt__parse_args("8@%rdi 8@%rsi 8@%rdx 8@%rcx 8@%r8 8@%r9 8@%rax", &spec),
			 0);
	assert_int_equal(spec.nr_args, AT_USDT_MAX_ARGS);
	assert_arg(&spec.args[5], AT_USDT_ARG_REG, 64, 0, 64, 0);

	for (size_t i = 0; i < sizeof(rejected) / sizeof(rejected[0]); i++) {
		assert_int_equal(usdt__parse_args(rejected[i], &spec), -EINVAL);
		assert_false(spec.known);
	}
}

static void files_without_probes(void **state)
{
	struct usdt_probe *probes;
	size_t nr;
	char path[] = "/tmp/asynctraced-notelf-XXXXXX";
	int fd = mkstemp(path);

	assert_int_equal(usdt__list("/proc/self/exe", "asynctrace", &probes, &nr), 0);
	assert_int_equal(nr, 0);
	free(probes);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "not an ELF file\n", 16), 16);
	close(fd);
	assert_int_equal(usdt__list(path, NULL, &probes, &nr), -ENOEXEC);
	unlink(path);
	assert_int_equal(usdt__list("/nonexistent", NULL, &probes, &nr), -ENOENT);
}

struct found {
	int self;
	int libc;
};

static int note_binary(void *ctx, const char *path, const char *target_path,
		       const struct target_mapping *map)
{
	struct found *f = ctx;
	char self[4096];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);

	assert_true(n > 0);
	self[n] = '\0';
	if (!strcmp(target_path, self)) {
		/* the main executable is reached through /proc/PID/exe */
		assert_non_null(strstr(path, "/exe"));
		/* this very function is inside the executable mapping */
		assert_true((uintptr_t)note_binary >= map->start &&
			    (uintptr_t)note_binary < map->end);
		f->self++;
	}
	if (strstr(target_path, "libc.so"))
		f->libc++;
	return 0;
}

static void ourselves_as_a_target(void **state)
{
	static const char greeting[] = "hello from the target";
	struct target t;
	struct found f = { 0 };
	char buf[64], comm[16];

	assert_int_equal(target__open(&t, getpid()), 0);
	assert_string_equal(t.comm, "test_target");
	assert_int_equal(target__alive(&t), 1);
	assert_int_equal(target__read_str(&t, (uintptr_t)greeting, buf, sizeof(buf)), 0);
	assert_string_equal(buf, greeting);
	/* a short buffer truncates, still terminated */
	assert_int_equal(target__read_str(&t, (uintptr_t)greeting, buf, 6), 0);
	assert_string_equal(buf, "hello");
	assert_int_not_equal(target__read_str(&t, 8, buf, sizeof(buf)), 0);
	assert_int_equal(target__thread_comm(&t, (uint32_t)getpid(), comm, sizeof(comm)), 0);
	assert_string_equal(comm, "test_target");
	assert_int_equal(target__for_each_binary(&t, note_binary, &f), 0);
	assert_int_equal(f.self, 1); /* once, however many mappings */
	assert_int_equal(f.libc, 1);
	target__close(&t);
	assert_int_equal(target__open(&t, 0), -ESRCH);
	assert_int_equal(target__open(&t, 0x7ffffff0), -ESRCH);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(probes_of_the_sample_executor),
		cmocka_unit_test(usdt_argument_specs),
		cmocka_unit_test(files_without_probes),
		cmocka_unit_test(ourselves_as_a_target),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
