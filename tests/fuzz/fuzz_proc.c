// SPDX-License-Identifier: MIT
/*
 * libFuzzer target: any bytes as the /proc files the tracer reads of a
 * process it does not own (src/targets/target.c, src/targets/scan.c): as
 * /proc/PID/maps, line by line as target__open_files takes them
 * (target__next_exec_mapping); as /proc/PID/stat, its first 511 bytes as
 * --follow-children reads them for the parent (scan__stat_ppid: the name
 * in it is the process's own, parentheses and all); as /proc/PID/cgroup,
 * against the subtrees --cgroup may ask for (scan__cgroup_in).
 *
 * Whatever the bytes: no crash, hang, leak or UB; every mapping given is of
 * a file (a path from '/') ending inside its buffer; a process is in the
 * subtree "/" whenever its file has a cgroup v2 line.
 *
 *   build/fuzz/fuzz_proc -runs=0 tests/fuzz/proc   replay the corpus
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "targets/scan.h"
#include "targets/target.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The input as a file (fmemopen refuses an empty buffer on older glibc). */
static FILE *as_file(char *copy, size_t size)
{
	return size ? fmemopen(copy, size, "r") : NULL;
}

static void maps(char *copy, size_t size)
{
	struct target_exec_mapping m;
	FILE *f = as_file(copy, size);

	while (f && target__next_exec_mapping(f, &m)) {
		CHECK(m.file[0] == '/');
		CHECK(strnlen(m.file, sizeof(m.file)) < sizeof(m.file));
	}
	if (f)
		fclose(f);
}

static void stat_file(const uint8_t *data, size_t size)
{
	char buf[512];
	pid_t ppid;

	/* what descends_from() reads: at most 511 bytes, NUL-terminated */
	size = size < sizeof(buf) - 1 ? size : sizeof(buf) - 1;
	memcpy(buf, data, size);
	buf[size] = '\0';
	scan__stat_ppid(buf, &ppid);
}

static void cgroups(char *copy, size_t size)
{
	static const char *const wants[] = { "/", "/system.slice", "/system.slice/a.service",
					     "/a/b" };
	bool in_root = false, in;

	for (size_t i = 0; i < sizeof(wants) / sizeof(wants[0]); i++) {
		FILE *f = as_file(copy, size);

		if (!f)
			return;
		in = scan__cgroup_in(f, wants[i]);
		fclose(f);
		if (i == 0)
			in_root = in;
		else
			CHECK(!in || in_root); /* in a subtree: in the whole tree */
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *copy = malloc(size ? size : 1);

	if (!copy)
		return 0;
	memcpy(copy, data, size);
	maps(copy, size);
	stat_file(data, size);
	cgroups(copy, size);
	free(copy);
	return 0;
}
