// SPDX-License-Identifier: MIT
/*
 * Go's runtime found in the Go test program (tests/go, built by `make go`
 * with Debian's golang-go): its version, the scheduler's functions from
 * .symtab and, stripped, from .gopclntab (at the same addresses), the
 * structures' offsets from DWARF and, without it, from the version table
 * (which must agree with the DWARF); a C program is not Go. The file is
 * read into memory of our own: the bytes in memory give what the path does,
 * and what is not a regular file is refused without waiting on it.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "asynctraced.h"
#include "rules_fixture.h"
#include "targets/elf_image.h"
#include "targets/go/golang.h"
#include "targets/placement.h"

static char path[4096];

static const char *build_file(const char *name)
{
	const char *build = getenv("BUILD");

	snprintf(path, sizeof(path), "%s/%s", build ? build : "build", name);
	return path;
}

/*
 * What `asynctraced tasks` reads: the table's layout of a g's stack and
 * saved registers is what DWARF says; the goroutines' list and the
 * funcdata's base are found in either (their addresses differ: stripping
 * moves the data), and so are the wait reasons' names.
 */
static void check_walk(const struct go_binary *full, const struct go_binary *bare)
{
	const struct go_task_offsets *o = &full->walk.off;

	print_message("  %s: sched.sp %d pc %d bp %d syscallsp %d waitsince %d gopc %d "
		      "m.procid %d\n", full->version, o->g_sched_sp, o->g_sched_pc, o->g_sched_bp,
		      o->g_syscallsp, o->g_waitsince, o->g_gopc, o->m_procid);
	for (size_t i = 0; i < sizeof(*o) / sizeof(int32_t); i++)
		assert_true(((const int32_t *)o)[i] >= 0);
	assert_memory_equal(&bare->walk.off, o, sizeof(*o));
	for (int k = 0; k < 2; k++) {
		const struct go_walk *w = k ? &bare->walk : &full->walk;

		assert_int_not_equal(w->allglen, 0);
		assert_int_not_equal(w->allgptr, 0);
		assert_int_not_equal(w->gofunc, 0);
		assert_int_not_equal(w->pclntab_size, 0);
	}
	assert_int_equal(bare->walk.text, full->walk.text);
	assert_memory_equal(bare->walk.wait_names, full->walk.wait_names,
			    sizeof(full->walk.wait_names));
	assert_string_equal(full->walk.wait_names[full->minor >= 26 ? 19 : 14], "chan receive");
}

static void the_version_and_functions(void **state)
{
	struct go_binary gb;

	(void)state;
	assert_int_equal(golang__detect(build_file("go-app"), &gb), 0);
	assert_true(!strncmp(gb.version, "go1.", 4));
	assert_int_equal(gb.major, 1);
	assert_true(gb.minor >= 18);
	assert_true(gb.has_symtab);
	assert_true(gb.has_dwarf);
	for (int i = 0; i < GO_FUNC_MAX; i++)
		assert_int_not_equal(gb.funcs[i], 0);
	golang__free(&gb);
}

/* Goroutines are named by their start function: any address in a function names it. */
static void functions_by_address(void **state)
{
	const char *files[] = { "go-app", "go-app-stripped" };

	(void)state;
	for (int f = 0; f < 2; f++) {
		struct go_binary gb;
		uint64_t exec;

		assert_int_equal(golang__detect(build_file(files[f]), &gb), 0);
		assert_true(gb.nr_all > 1000);
		exec = gb.funcs[GO_EXECUTE];
		assert_string_equal(golang__func_at(&gb, exec), "runtime.execute");
		assert_string_equal(golang__func_at(&gb, exec + 8), "runtime.execute");
		assert_string_equal(golang__func_at(&gb, gb.funcs[GO_CASGSTATUS]),
				    "runtime.casgstatus");
		assert_null(golang__func_at(&gb, 0x1000));
		/* the program's own goroutine functions are there by name */
		size_t i = 0;

		while (i < gb.nr_all && strcmp(gb.names + gb.all[i].name, "main.burnCPU"))
			i++;
		assert_true(i < gb.nr_all);
		assert_string_equal(golang__func_at(&gb, gb.all[i].addr + 1), "main.burnCPU");
		golang__free(&gb);
	}
}

static void stripped_keeps_what_is_needed(void **state)
{
	struct go_binary full, bare;

	(void)state;
	assert_int_equal(golang__detect(build_file("go-app"), &full), 0);
	assert_int_equal(golang__detect(build_file("go-app-stripped"), &bare), 0);
	assert_string_equal(bare.version, full.version);
	assert_false(bare.has_symtab);
	assert_false(bare.has_dwarf);
	/* the same program: .gopclntab gives the functions .symtab does */
	for (int i = 0; i < GO_FUNC_MAX; i++) {
		print_message("  %s: %#llx / %#llx\n", go_func_names[i],
			      (unsigned long long)full.funcs[i], (unsigned long long)bare.funcs[i]);
		assert_int_not_equal(bare.funcs[i], 0);
	}
	/* and the table's layout is what DWARF says */
	print_message("  g.goid %d g.m %d g.atomicstatus %d g.startpc %d m.p %d m.curg %d "
		      "p.id %d runqhead %d runqtail %d\n", full.off.g_goid, full.off.g_m,
		      full.off.g_atomicstatus, full.off.g_startpc, full.off.m_p, full.off.m_curg,
		      full.off.p_id, full.off.p_runqhead, full.off.p_runqtail);
	assert_memory_equal(&bare.off, &full.off, sizeof(full.off));
	/* g at -8 from the thread pointer, as Go's own linker places it, read from the code */
	assert_int_equal(full.tls_g, -8);
	assert_int_equal(bare.tls_g, -8);
	check_walk(&full, &bare);
	golang__free(&full);
	golang__free(&bare);
	/* a PIE: .gopclntab under another name, the moduledata's pointers left to the loader */
	assert_int_equal(golang__detect(build_file("go-app-pie"), &bare), 0);
	assert_true(bare.pie);
	assert_int_not_equal(bare.walk.pclntab_size, 0);
	assert_int_not_equal(bare.walk.gofunc, 0);
	golang__free(&bare);
}

/*
 * A go statement's wrapper (main.main.funcN) is named by the function it
 * calls; a closure of its own keeps its name.
 */
static void goroutines_named_by_their_function(void **state)
{
	const char *files[] = { "go-app", "go-app-stripped" };

	(void)state;
	for (int f = 0; f < 2; f++) {
		const char *started[] = { "main.burnCPU", "main.blockInSyscall", "main.pingPong",
					  "main.timers", "main.fanOut", "main.leaked", "main.child" };
		bool found[7] = { false };
		struct go_binary gb;
		struct elf_image im;

		assert_int_equal(golang__detect(build_file(files[f]), &gb), 0);
		assert_int_equal(elf_image__open(&im, path), 0);
		golang__name_goroutines(&gb, &im);
		elf_image__close(&im); /* names need no code once read */
		for (size_t i = 0; i < gb.nr_all; i++) {
			const char *name = gb.names + gb.all[i].name;
			const char *as = golang__goroutine_name(&gb, gb.all[i].addr);

			if (!strncmp(name, "main.", 5) && strcmp(name, as))
				print_message("  %s: %s\n", name, as);
			for (int j = 0; j < 7; j++)
				found[j] |= strcmp(name, as) && !strcmp(as, started[j]);
			/* closures with work of their own keep their names */
			if (!strcmp(name, "main.pingPong.func1") || !strcmp(name, "main.timers.func1"))
				assert_string_equal(as, name);
		}
		for (int j = 0; j < 7; j++)
			assert_true(found[j]);
		golang__free(&gb);
	}
}

/*
 * casgstatus (nosplit: no stack check) begins with its frame and the spills
 * of its register arguments; its probe moves past them to an instruction the
 * kernel emulates, the registers it reads untouched. Code that writes one
 * of them is refused.
 */
static void casgstatus_probed_past_its_prologue(void **state)
{
	static const uint8_t clobbers[] = { 0x48, 0x31, 0xc0, 0x90 };	/* xor %rax,%rax; nop */
	static const uint8_t partial[] = { 0x48, 0x83, 0xec };		/* half a sub */
	struct placement_need need = { .arg = -1, .spills = true };
	struct probe_rules rules;
	struct placement p;
	struct go_binary gb;
	struct elf_image im;
	const uint8_t *code;
	uint64_t addr, size;

	(void)state;
	assert_int_equal(rules_fixture(&rules), 0);
	assert_int_equal(golang__detect(build_file("go-app"), &gb), 0);
	assert_int_equal(elf_image__open(&im, path), 0);
	addr = gb.funcs[GO_CASGSTATUS];
	size = golang__func_size(&gb, addr);
	code = elf_image__bytes(&im, addr, size);
	assert_non_null(code);
	assert_int_equal(placement__entry(code, size, addr, &need, &rules, &p), 0);
	print_message("  casgstatus: +%llu past %s, at %s\n", (unsigned long long)p.skip, p.entry,
		      p.at);
	assert_true(p.cheap && p.skip > 0);
	assert_true(golang__keeps_args(code, p.skip, addr));
	/* without Go's spill slots, the first spill stops it */
	need.spills = false;
	assert_int_equal(placement__entry(code, size, addr, &need, &rules, &p), 0);
	assert_false(p.cheap && p.skip > 0);
	assert_false(golang__keeps_args(clobbers, 3, 0x1000));
	assert_true(golang__keeps_args(clobbers + 3, 1, 0x1003));
	assert_false(golang__keeps_args(partial, sizeof(partial), 0x1000));
	elf_image__close(&im);
	golang__free(&gb);
}

static bool has(const uint64_t *set, unsigned bit)
{
	return (set[bit / 64] >> (bit % 64)) & 1;
}

static bool empty(const uint64_t *set)
{
	return !(set[0] | set[1] | set[2] | set[3]);
}

/*
 * The wait reasons are read from the binary, stripped or not: the same
 * sets. Go 1.19's values (runtime2.go): 3 and 4 the nil channels', 9
 * select, 14 and 15 a channel's receive and send; 2 (I/O) and 19 (sleep)
 * are waits by design; 10 (select with no cases) is meant forever.
 */
static void wait_reasons_from_the_binary(void **state)
{
	struct go_binary full, bare;

	(void)state;
	assert_int_equal(golang__detect(build_file("go-app"), &full), 0);
	assert_int_equal(golang__detect(build_file("go-app-stripped"), &bare), 0);
	assert_memory_equal(full.may_lose, bare.may_lose, sizeof(full.may_lose));
	assert_memory_equal(full.never_woken, bare.never_woken, sizeof(full.never_woken));
	if (full.minor == 19) {
		for (unsigned r = 0; r < 256; r++)
			assert_int_equal(has(full.never_woken, r), r == 3 || r == 4);
		assert_true(has(full.may_lose, 9) && has(full.may_lose, 14) &&
			    has(full.may_lose, 15) && has(full.may_lose, 3));
		assert_false(has(full.may_lose, 2) || has(full.may_lose, 19) ||
			     has(full.may_lose, 10) || has(full.may_lose, 0));
	}
	golang__free(&full);
	golang__free(&bare);
}

/*
 * Each Go Debian ships (GO_VERSIONS, built by make go-versions): its
 * binary stripped of DWARF and .symtab gets from .gopclntab the functions
 * its twin's .symtab has, from the table the offsets its DWARF says, and
 * the same wait reasons.
 */
static void every_version_in_the_table(void **state)
{
	const char *versions = getenv("GO_VERSIONS");
	char list[256], *save = NULL;
	int checked = 0;

	(void)state;
	if (!versions)
		fail_msg("GO_VERSIONS is not set: run the unit tests through make");
	snprintf(list, sizeof(list), "%s", versions);
	for (char *v = strtok_r(list, " ", &save); v; v = strtok_r(NULL, " ", &save)) {
		struct go_binary full, bare;
		char name[64];
		int minor = atoi(strchr(v, '.') ? strchr(v, '.') + 1 : v);

		snprintf(name, sizeof(name), "go-versions/go-app-%s", v);
		assert_int_equal(golang__detect(build_file(name), &full), 0);
		snprintf(name, sizeof(name), "go-versions/go-app-%s-stripped", v);
		assert_int_equal(golang__detect(build_file(name), &bare), 0);
		print_message("  %s: goid %d m %d startpc %d waitreason %d m.p %d curg %d "
			      "runqhead %d\n", full.version, full.off.g_goid, full.off.g_m,
			      full.off.g_startpc, full.off.g_waitreason, full.off.m_p,
			      full.off.m_curg, full.off.p_runqhead);
		assert_int_equal(full.minor, minor);
		assert_true(full.has_dwarf);
		assert_false(bare.has_dwarf || bare.has_symtab);
		assert_memory_equal(&bare.off, &full.off, sizeof(full.off));
		assert_true(full.off.g_tracking_seq > 0 && full.off.p_schedtick > 0);
		assert_int_equal(full.tls_g, -8);
		assert_int_equal(bare.tls_g, -8);
		/* .gopclntab gives the functions .symtab does (1.26 left its textStart 0) */
		for (int f = 0; f < GO_FUNC_MAX; f++) {
			assert_int_not_equal(full.funcs[f], 0);
			assert_int_equal(bare.funcs[f], full.funcs[f]);
		}
		assert_false(empty(full.may_lose) || empty(full.never_woken));
		assert_memory_equal(full.may_lose, bare.may_lose, sizeof(full.may_lose));
		assert_memory_equal(full.never_woken, bare.never_woken, sizeof(full.never_woken));
		check_walk(&full, &bare);
		golang__free(&full);
		golang__free(&bare);
		checked++;
	}
	assert_true(checked >= 3);
}

/* Whether name is one of the NULL-ended list. */
static bool one_of(const char *name, const char *const *list)
{
	for (; *list; list++)
		if (!strcmp(name, *list))
			return true;
	return false;
}

/*
 * casgstatus's calls in one binary, read from its code. The ones let be are
 * changes the probes ignore, or a system call's (into it, out of it with
 * its P), made only in the runtime's functions for those; every call of
 * those functions is let be but the one that leaves without a P, and every
 * other change the probes act on is probed, in the functions Go makes them
 * in. A change into or out of a system call is made with constants (what
 * golang__status_site_needed() assumes), and few sides are unknown.
 */
static void status_sites_of(const char *file)
{
	static const char *const syscalls[] = { "runtime.reentersyscall",
						"runtime.entersyscallblock", "runtime.exitsyscall",
						NULL };
	static const char *const needed[] = { "runtime.execute", "runtime.park_m", "runtime.ready",
					      "runtime.goschedImpl", "runtime.injectglist", NULL };
	struct go_status_site sites[GO_STATUS_SITES];
	struct go_binary gb;
	struct elf_image im;
	int n, unknown = 0, kept = 0, skipped = 0;
	unsigned found_needed = 0;
	bool exit_kept = false;

	assert_int_equal(golang__detect(build_file(file), &gb), 0);
	assert_int_equal(elf_image__open(&im, path), 0);
	n = golang__status_sites(&gb, &im, sites, GO_STATUS_SITES);
	assert_true(n >= 30);
	for (int i = 0; i < n; i++) {
		const char *fn = golang__func_at(&gb, sites[i].addr);
		const struct go_status_site *st = &sites[i];
		enum at_go_change c = at_go_change((__u32)st->from, (__u32)st->to);

		assert_non_null(fn);
		if (st->from < 0 || st->to < 0) {
			unknown++;
			print_message("    %s: %d -> %d\n", fn, st->from, st->to);
			assert_int_not_equal(st->from, AT_GO_SYSCALL);
			assert_int_not_equal(st->to, AT_GO_SYSCALL);
			assert_false(one_of(fn, syscalls) || strstr(fn, "needm") ||
				     strstr(fn, "dropm") || strstr(fn, "exitsyscall"));
		}
		if (!golang__status_site_needed(st)) {
			skipped++;
			if ((c == AT_GO_SYSCALL_ENTERS || c == AT_GO_SYSCALL_RETURNS) &&
			    !one_of(fn, syscalls))
				fail_msg("%s: a system call's change in %s", file, fn);
			if (c != AT_GO_IGNORED && c != AT_GO_SYSCALL_ENTERS &&
			    c != AT_GO_SYSCALL_RETURNS)
				fail_msg("%s: a call in %s let be (%d -> %d)", file, fn, st->from,
					 st->to);
			continue;
		}
		kept++;
		if (one_of(fn, syscalls))
			fail_msg("%s: a call in %s probed (%d -> %d)", file, fn, st->from, st->to);
		for (int k = 0; needed[k]; k++)
			found_needed |= (unsigned)!strcmp(fn, needed[k]) << k;
		/* leaving a system call without a P ends the run: kept, whatever the version */
		exit_kept |= !strcmp(fn, "runtime.exitsyscall0") || !strcmp(fn, "runtime.exitsyscallNoP");
	}
	print_message("  %s %s: %d calls of casgstatus, %d probed, %d let be, %d unknown\n",
		      file, gb.version, n, kept, skipped, unknown);
	/* reentersyscall, entersyscallblock, exitsyscall, newproc1's, newstack's two */
	assert_true(skipped >= 6);
	assert_int_equal(found_needed, (1u << 5) - 1); /* each of them */
	assert_true(exit_kept);
	assert_true(unknown <= 3);
	/* and in runqsteal, where only a steal that took something goes */
	{
		uint64_t steal = gb.funcs[GO_RUNQSTEAL], size = golang__func_size(&gb, steal);
		const uint8_t *code = elf_image__bytes(&im, steal, size);
		uint64_t taken = code ? golang__steal_taken(code, size, steal) : 0;

		print_message("    runqsteal+%llu, p.runq at %d\n",
			      (unsigned long long)(taken - steal), gb.off.p_runq);
		assert_true(taken > steal && taken - steal < 128);
		assert_int_equal(gb.off.p_runq, gb.off.p_runqtail + 4);
	}
	elf_image__close(&im);
	golang__free(&gb);
}

static void casgstatus_calls_of_every_version(void **state)
{
	const char *versions = getenv("GO_VERSIONS");
	char list[256], *save = NULL, name[64];

	(void)state;
	if (!versions)
		fail_msg("GO_VERSIONS is not set: run the unit tests through make");
	status_sites_of("go-app");
	status_sites_of("go-app-stripped");
	status_sites_of("go-app-pie");
	snprintf(list, sizeof(list), "%s", versions);
	for (char *v = strtok_r(list, " ", &save); v; v = strtok_r(NULL, " ", &save)) {
		snprintf(name, sizeof(name), "go-versions/go-app-%s-stripped", v);
		status_sites_of(name);
	}
}

/* golang__detect_mem, given the file's bytes, finds what golang__detect finds from its path. */
static void the_same_from_memory(void **state)
{
	const char *files[] = { "go-app", "go-app-stripped", "go-app-pie" };

	(void)state;
	for (int f = 0; f < 3; f++) {
		struct go_binary a, b;
		size_t size;
		uint8_t *data;
		FILE *in;

		assert_int_equal(golang__detect(build_file(files[f]), &a), 0);
		in = fopen(path, "rb");
		assert_non_null(in);
		assert_int_equal(fseek(in, 0, SEEK_END), 0);
		size = (size_t)ftell(in);
		rewind(in);
		data = malloc(size);
		assert_non_null(data);
		assert_int_equal(fread(data, 1, size, in), size);
		fclose(in);
		assert_int_equal(golang__detect_mem(data, size, &b), 0);
		free(data);
		assert_string_equal(a.version, b.version);
		assert_memory_equal(a.funcs, b.funcs, sizeof(a.funcs));
		assert_memory_equal(&a.off, &b.off, sizeof(a.off));
		/* g's slot, however the code loads it (PIE: mov $-8, %r14; mov %fs:(%r14), %r14) */
		assert_int_equal(a.tls_g, -8);
		assert_int_equal(b.tls_g, -8);
		assert_memory_equal(a.may_lose, b.may_lose, sizeof(a.may_lose));
		assert_int_equal(a.nr_all, b.nr_all);
		for (size_t i = 0; i < a.nr_all; i++) {
			assert_int_equal(a.all[i].addr, b.all[i].addr);
			assert_int_equal(a.all[i].size, b.all[i].size);
			assert_string_equal(a.names + a.all[i].name, b.names + b.all[i].name);
		}
		assert_int_equal(a.pie, b.pie);
		golang__free(&a);
		golang__free(&b);
	}
}

/*
 * A FIFO where a binary was (its owner can put one there) is refused, not
 * waited on: an open that blocks would stop discovery; a directory too.
 */
static void only_regular_files(void **state)
{
	char dir[] = "/tmp/at-go-XXXXXX", fifo[64];
	struct go_binary gb;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(fifo, sizeof(fifo), "%s/fifo", dir);
	assert_int_equal(mkfifo(fifo, 0600), 0);
	assert_int_equal(golang__detect(fifo, &gb), -ENOEXEC);
	assert_int_equal(golang__detect(dir, &gb), -ENOEXEC);
	assert_int_equal(gb.nr_all, 0);
	unlink(fifo);
	rmdir(dir);
}

static void not_go(void **state)
{
	struct go_binary gb;

	(void)state;
	assert_int_equal(golang__detect(build_file("sample-executor"), &gb), -ENOENT);
	assert_int_equal(golang__detect("/etc/hostname", &gb), -ENOEXEC);
	assert_int_equal(golang__detect("/nonexistent", &gb), -ENOENT);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(the_version_and_functions),
		cmocka_unit_test(stripped_keeps_what_is_needed),
		cmocka_unit_test(functions_by_address),
		cmocka_unit_test(goroutines_named_by_their_function),
		cmocka_unit_test(casgstatus_probed_past_its_prologue),
		cmocka_unit_test(wait_reasons_from_the_binary),
		cmocka_unit_test(every_version_in_the_table),
		cmocka_unit_test(casgstatus_calls_of_every_version),
		cmocka_unit_test(the_same_from_memory),
		cmocka_unit_test(only_regular_files),
		cmocka_unit_test(not_go),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
