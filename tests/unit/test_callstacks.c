// SPDX-License-Identifier: MIT
/*
 * The session's stacks: a stack is kept once however often it is sampled
 * (frames are functions, not addresses), what an alert says of a stack
 * (the program's own innermost frames; asleep, the call it slept in), the
 * table's bound; and the kernel's symbols read from a kallsyms file.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "stacks/callstacks.h"
#include "stacks/ksyms.h"
#include "stacks/unwind.h"

#define F(fn, mod, addr) { .pc = (addr), .rel_pc = (addr), .function = (fn), .module = (mod) }
#define K(fn) { .pc = 1, .function = (fn), .module = "[kernel]", .kernel = true }

static void test_same_functions_one_stack(void **state)
{
	struct callstacks c;
	struct stack_frame a[] = { F("burn", "app", 0x100), F("handle", "app", 0x200),
				   F("main", "app", 0x300) };
	struct stack_frame b[] = { F("burn", "app", 0x104), F("handle", "app", 0x200),
				   F("main", "app", 0x300) };
	struct stack_frame other[] = { F("handle", "app", 0x200), F("main", "app", 0x300) };
	uint32_t id;

	(void)state;
	callstacks__init(&c);
	id = callstacks__intern(&c, a, 3);
	assert_int_equal(id, 1);
	/* a few instructions further in the same function: the same stack */
	assert_int_equal(callstacks__intern(&c, b, 3), id);
	assert_int_equal(callstacks__intern(&c, other, 2), 2);
	assert_int_equal(c.nr_frames, 3);
	assert_int_equal(callstacks__get(&c, id)->nr, 3);
	assert_string_equal(callstacks__frame(&c, callstacks__get(&c, id)->frames[0])->function,
			    "burn");
	/* the first sample's address stays */
	assert_int_equal(callstacks__frame(&c, callstacks__get(&c, id)->frames[0])->rel_pc, 0x100);
	assert_null(callstacks__get(&c, 3));
	assert_null(callstacks__get(&c, 0));
	assert_int_equal(callstacks__intern(&c, a, 0), 0);
	callstacks__free(&c);
}

static void test_unnamed_frames_keep_their_address(void **state)
{
	struct callstacks c;
	struct stack_frame a[] = { F(NULL, "app", 0x100), F("main", "app", 0x300) };
	struct stack_frame b[] = { F(NULL, "app", 0x180), F("main", "app", 0x300) };
	struct stack_frame inl[] = { { .rel_pc = 0x300, .function = "main", .module = "app",
				       .inlined = true } };
	struct stack_frame outer[] = { F("main", "app", 0x300) };

	(void)state;
	callstacks__init(&c);
	assert_int_not_equal(callstacks__intern(&c, a, 2), callstacks__intern(&c, b, 2));
	/* inlined or not are two frames */
	assert_int_not_equal(callstacks__intern(&c, inl, 1), callstacks__intern(&c, outer, 1));
	assert_string_equal(callstacks__frame(&c, 1)->function, "");
	callstacks__free(&c);
}

static void test_deep_stacks_are_cut(void **state)
{
	struct stack_frame deep[CALLSTACK_FRAMES + 10];
	char names[CALLSTACK_FRAMES + 10][8];
	struct callstacks c;

	(void)state;
	for (int i = 0; i < CALLSTACK_FRAMES + 10; i++) {
		snprintf(names[i], sizeof(names[i]), "f%d", i);
		deep[i] = (struct stack_frame){ .function = names[i], .module = "app" };
	}
	callstacks__init(&c);
	assert_int_equal(callstacks__get(&c, callstacks__intern(&c, deep, CALLSTACK_FRAMES + 10))->nr,
			 CALLSTACK_FRAMES);
	callstacks__free(&c);
}

static void test_the_table_is_bounded(void **state)
{
	struct callstacks c;
	char name[32];
	struct stack_frame f = { .function = name, .module = "app" };

	(void)state;
	callstacks__init(&c);
	for (uint32_t i = 0; i < CALLSTACKS_MAX; i++) {
		snprintf(name, sizeof(name), "f%u", i);
		assert_int_equal(callstacks__intern(&c, &f, 1), i + 1);
	}
	snprintf(name, sizeof(name), "one more");
	assert_int_equal(callstacks__intern(&c, &f, 1), 0);
	assert_int_equal(c.dropped, 1);
	/* one already kept still is */
	snprintf(name, sizeof(name), "f7");
	assert_int_equal(callstacks__intern(&c, &f, 1), 8);
	callstacks__free(&c);
}

static void test_where_on_the_cpu(void **state)
{
	struct callstacks c;
	char where[256];
	struct stack_frame s[] = { F("__vdso_clock_gettime", "[vdso]", 1),
				   F("clock_gettime", "libc.so.6", 2),
				   F("burn_cpu_ns", "app", 3),
				   F("burn_cpu_ns", "app", 4),
				   F("core::ops::function::FnOnce::call_once", "app", 5),
				   F("handle_request", "app", 6),
				   F("start_thread", "libc.so.6", 7) };

	(void)state;
	callstacks__init(&c);
	callstacks__where(&c, callstacks__intern(&c, s, 7), false, where, sizeof(where));
	/* libc and the vDSO skipped, a recursion named once, std's frames skipped */
	assert_string_equal(where, " in burn_cpu_ns <- handle_request");
	callstacks__where(&c, 99, false, where, sizeof(where));
	assert_string_equal(where, "");
	callstacks__free(&c);
}

static void test_where_asleep(void **state)
{
	struct callstacks c;
	char where[256], text[4096];
	struct stack_frame s[] = { K("__schedule"), K("do_nanosleep"),
				   F("clock_nanosleep", "libc.so.6", 1),
				   F("std::thread::sleep", "app", 2),
				   F("tokio_app::blocking", "app", 3) };
	struct stack_frame std_only[] = { K("schedule"), F("read", "libc.so.6", 1),
					  F("std::io::Read::read", "app", 2),
					  F("tokio::runtime::task::raw::poll", "app", 3) };
	struct stack_frame rust_std[] = {
		K("schedule"), F("clock_nanosleep", "libc.so.6", 1), F("__nanosleep", "libc.so.6", 2),
		F("std::sys::unix::thread::Thread::sleep", "app", 3),
		F("std::thread::sleep", "app", 4),
		F("<core::future::from_generator::GenFuture<T> as core::future::future::Future>::poll",
		  "app", 5)
	};

	(void)state;
	callstacks__init(&c);
	/* the call it slept in (the first frame out of the kernel), then who made it */
	callstacks__where(&c, callstacks__intern(&c, s, 5), true, where, sizeof(where));
	assert_string_equal(where, " in clock_nanosleep <- tokio_app::blocking");
	/* all std's and tokio's: the first caller outside libc */
	callstacks__where(&c, callstacks__intern(&c, std_only, 4), true, where, sizeof(where));
	assert_string_equal(where, " in read <- std::io::Read::read");
	/* the library call the program made: the outermost of std's frames */
	callstacks__where(&c, callstacks__intern(&c, rust_std, 6), true, where, sizeof(where));
	assert_string_equal(where, " in clock_nanosleep <- std::thread::sleep");
	callstacks__text(&c, 1, text, sizeof(text));
	assert_non_null(strstr(text, "__schedule ([kernel])\ndo_nanosleep ([kernel])\n"
				     "clock_nanosleep (libc.so.6)\n"));
	callstacks__free(&c);
}

static void test_text_has_files_and_inlining(void **state)
{
	struct callstacks c;
	char text[256], small[24];
	struct stack_frame s[] = { { .function = "leaf", .module = "app", .file = "a.c",
				     .line = 12, .inlined = true },
				   { .function = "outer", .module = "app", .file = "a.c",
				     .line = 40 } };

	(void)state;
	callstacks__init(&c);
	callstacks__text(&c, callstacks__intern(&c, s, 2), text, sizeof(text));
	assert_string_equal(text, "[inlined] leaf (app a.c:12)\nouter (app a.c:40)");
	/* cut, never overrun */
	callstacks__text(&c, 1, small, sizeof(small));
	assert_int_equal(strlen(small), sizeof(small) - 1);
	callstacks__free(&c);
}

/* A task's place has no module; a leaf future's type, no file: nothing empty is written. */
static void test_text_leaves_out_what_is_not_known(void **state)
{
	struct callstacks c;
	char text[256];
	struct stack_frame s[] = { { .function = "tokio::sync::notify::Notified", .module = "" },
				   { .function = "app::park", .module = "", .file = "src/main.rs",
				     .line = 23 } };

	(void)state;
	callstacks__init(&c);
	c.by_line = true;
	callstacks__text(&c, callstacks__intern(&c, s, 2), text, sizeof(text));
	assert_string_equal(text, "tokio::sync::notify::Notified\napp::park (src/main.rs:23)");
	callstacks__waiting(&c, 1, "waiting at", text, sizeof(text));
	assert_string_equal(text, "waiting at app::park (src/main.rs:23)");
	callstacks__free(&c);
}

static char *write_file(const char *text)
{
	static char path[] = "/tmp/at-kallsyms-XXXXXX";
	int fd;

	strcpy(path, "/tmp/at-kallsyms-XXXXXX");
	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	return path;
}

/* A table of places: the same function at two lines is two frames, and the parked line is exact. */
static void test_places_by_line(void **state)
{
	struct callstacks c;
	struct stack_frame a[] = { { .function = "runtime.gopark", .module = "", .file = "proc.go",
				     .line = 363 },
				   { .function = "main.leaked", .module = "", .file = "main.go",
				     .line = 283 } };
	struct stack_frame b[] = { { .function = "runtime.gopark", .module = "", .file = "proc.go",
				     .line = 363 },
				   { .function = "main.leaked", .module = "", .file = "main.go",
				     .line = 290 } };
	char buf[256];
	uint32_t ia, ib;

	(void)state;
	callstacks__init(&c);
	c.by_line = true;
	ia = callstacks__intern(&c, a, 2);
	ib = callstacks__intern(&c, b, 2);
	assert_int_not_equal(ia, ib);
	assert_int_equal(c.nr_frames, 3);
	callstacks__parked(&c, ib, buf, sizeof(buf));
	assert_string_equal(buf, "; parked at main.leaked (main.go:290)");
	callstacks__parked(&c, 0, buf, sizeof(buf));
	assert_string_equal(buf, "");
	callstacks__free(&c);
}

/* The program's own code: not Rust's std or tokio, not Go's standard library; C clones are. */
static void test_own_functions(void **state)
{
	(void)state;
	assert_true(callstacks__own_function("main.leaked"));
	assert_true(callstacks__own_function("main.(*server).handle"));
	assert_true(callstacks__own_function("github.com/acme/app/queue.(*Q).Pop"));
	assert_true(callstacks__own_function("noisy_poll"));
	assert_true(callstacks__own_function("burn_cpu_ns.constprop.0"));
	assert_true(callstacks__own_function("handle_request.cold"));
	assert_true(callstacks__own_function("app::worker::run"));
	/* a module path without a dot is the program's, not the standard library's */
	assert_true(callstacks__own_function("myapp/internal/db.(*Pool).Get"));
	assert_true(callstacks__own_function("example/hello.wait"));
	assert_true(callstacks__own_function("server.handle"));
	assert_false(callstacks__own_function("vendor/golang.org/x/net/http2.(*Framer).ReadFrame"));
	assert_false(callstacks__own_function("type:.eq.main.T"));
	assert_false(callstacks__own_function("type..hash.main.key"));
	/* a wait all in libraries is placed outside the scheduler's own machinery */
	assert_true(callstacks__runtime_function("runtime.gopark"));
	assert_true(callstacks__runtime_function("internal/poll.(*FD).Read"));
	assert_true(callstacks__runtime_function("tokio::runtime::park::Inner::park"));
	assert_false(callstacks__runtime_function("net.(*conn).Read"));
	assert_false(callstacks__runtime_function("net/http.(*connReader).Read"));
	assert_false(callstacks__runtime_function("tokio::sync::mpsc::bounded::Receiver<T>::recv"));
	assert_false(callstacks__own_function("context.(*cancelCtx).Done"));
	assert_false(callstacks__own_function("time.Sleep"));
	assert_false(callstacks__own_function("runtime.gopark"));
	assert_false(callstacks__own_function("sync.(*Mutex).Lock"));
	assert_false(callstacks__own_function("net/http.(*conn).serve"));
	assert_false(callstacks__own_function("internal/poll.(*FD).Read"));
	assert_false(callstacks__own_function("tokio::runtime::task::raw::poll"));
	assert_false(callstacks__own_function("std::thread::sleep"));
	assert_false(callstacks__own_function(""));
	assert_false(callstacks__own_function(NULL));
}

static void test_ksyms(void **state)
{
	struct ksyms *k;
	const char *module = NULL;
	char *path = write_file("ffffffff81000000 T _stext\n"
				"ffffffff81001000 t do_nanosleep\n"
				"ffffffff81002000 D some_data\n"
				"ffffffff81003000 T schedule\n"
				"ffffffffc0001000 t ext4_read\t[ext4]\n"
				"ffffffffc0002000 t ext4_write\t[ext4]\n");

	(void)state;
	assert_int_equal(ksyms__load(&k, path), 0);
	assert_string_equal(ksyms__find(k, 0xffffffff81001234, &module), "do_nanosleep");
	assert_string_equal(module, "[kernel]");
	/* data is no function: the code before it covers the address */
	assert_string_equal(ksyms__find(k, 0xffffffff81002010, NULL), "do_nanosleep");
	assert_string_equal(ksyms__find(k, 0xffffffffc0002008, &module), "ext4_write");
	assert_string_equal(module, "[ext4]");
	assert_null(ksyms__find(k, 0x1000, &module));
	ksyms__free(k);
	unlink(path);

	/*
	 * A line that ends after its address (at a tab, cut there) is no symbol:
	 * it read on past the end, and took " x" for type and name
	 */
	path = write_file("ffffffff81000000 T _stext\nffffffff81000200 \t x\n");
	assert_int_equal(ksyms__load(&k, path), 0);
	assert_string_equal(ksyms__find(k, 0xffffffff81000300, &module), "_stext");
	ksyms__free(k);
	unlink(path);

	/* kptr_restrict: every address 0 */
	path = write_file("0000000000000000 T _stext\n0000000000000000 t schedule\n");
	assert_int_equal(ksyms__load(&k, path), -EPERM);
	unlink(path);
	assert_int_equal(ksyms__load(&k, "/nonexistent/kallsyms"), -ENOENT);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_same_functions_one_stack),
		cmocka_unit_test(test_unnamed_frames_keep_their_address),
		cmocka_unit_test(test_deep_stacks_are_cut),
		cmocka_unit_test(test_the_table_is_bounded),
		cmocka_unit_test(test_where_on_the_cpu),
		cmocka_unit_test(test_where_asleep),
		cmocka_unit_test(test_text_has_files_and_inlining),
		cmocka_unit_test(test_text_leaves_out_what_is_not_known),
		cmocka_unit_test(test_places_by_line),
		cmocka_unit_test(test_own_functions),
		cmocka_unit_test(test_ksyms),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
