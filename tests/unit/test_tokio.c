// SPDX-License-Identifier: MIT
/* Recognising tokio's functions and naming futures, from demangled symbols. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <setjmp.h>
#include <cmocka.h>

#include "targets/tokio/tokio.h"

static void strip(const char *in, const char *want)
{
	char out[512];

	tokio__strip_generics(in, out, sizeof(out));
	assert_string_equal(out, want);
}

static void paths_without_generics(void **state)
{
	/* legacy mangling keeps the impl's parameter names */
	strip("tokio::runtime::task::raw::poll", "tokio::runtime::task::raw::poll");
	strip("tokio::runtime::task::list::OwnedTasks<S>::bind",
	      "tokio::runtime::task::list::OwnedTasks::bind");
	strip("tokio::runtime::scheduler::multi_thread::queue::Steal<T>::steal_into",
	      "tokio::runtime::scheduler::multi_thread::queue::Steal::steal_into");
	/* v0 spells the types out, and wraps a type's methods in <...> */
	strip("tokio::runtime::task::raw::poll::<tk::handle::{closure#0}, alloc::sync::Arc<"
	      "tokio::runtime::scheduler::multi_thread::handle::Handle>>",
	      "tokio::runtime::task::raw::poll");
	strip("<tokio::runtime::task::list::OwnedTasks<alloc::sync::Arc<tokio::runtime::"
	      "scheduler::current_thread::Handle>>>::bind::<tk::handle::{closure#0}>",
	      "tokio::runtime::task::list::OwnedTasks::bind");
	strip("<tokio::runtime::task::list::OwnedTasks<alloc::sync::Arc<h::Handle>>>::remove",
	      "tokio::runtime::task::list::OwnedTasks::remove");
	strip("<T as core::future::Future>::poll", "T::poll");
	/* "->" in a fn type is no bracket */
	strip("a::b<fn() -> u8>::c", "a::b::c");
}

static void future(const char *in, const char *want)
{
	char *got = tokio__future_of(in);

	if (!want) {
		assert_null(got);
		return;
	}
	assert_non_null(got);
	assert_string_equal(got, want);
	free(got);
}

static void futures_from_symbols(void **state)
{
	/* v0: raw::poll::<T, S> */
	future("tokio::runtime::task::raw::poll::<tk::handle::{closure#0}, alloc::sync::Arc<"
	       "tokio::runtime::scheduler::multi_thread::handle::Handle>>",
	       "tk::handle::{closure#0}");
	future("tokio::runtime::task::raw::poll::<tokio::runtime::blocking::task::BlockingTask<"
	       "<a::Launch>::launch::{closure#0}>, tokio::runtime::blocking::schedule::"
	       "BlockingSchedule>",
	       "tokio::runtime::blocking::task::BlockingTask<<a::Launch>::launch::{closure#0}>");
	/* legacy: the drop glue of what the task holds */
	future("core::ptr::drop_in_place<alloc::boxed::Box<tokio::runtime::task::core::Cell<"
	       "tk::handle::{{closure}},alloc::sync::Arc<tokio::runtime::scheduler::multi_thread::"
	       "handle::Handle>>>>",
	       "tk::handle::{{closure}}");
	future("core::ptr::drop_in_place<tokio::runtime::task::core::Stage<core::future::"
	       "from_generator::GenFuture<srv::conn::{{closure}}>>>",
	       "core::future::from_generator::GenFuture<srv::conn::{{closure}}>");
	/* not a name */
	future("tokio::runtime::task::raw::poll", NULL);
	future("tokio::runtime::task::core::Cell<T,S>::new", NULL);
	future("core::ptr::drop_in_place<alloc::vec::Vec<u8>>", NULL);
}

static void not_an_elf(void **state)
{
	struct tokio_runtime rt;

	assert_int_equal(tokio__detect("/nonexistent", NULL, &rt), -2 /* ENOENT */);
	/* an ELF file without tokio */
	assert_int_equal(tokio__detect("/proc/self/exe", NULL, &rt), -2);
	assert_true(rt.has_symtab);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(paths_without_generics),
		cmocka_unit_test(futures_from_symbols),
		cmocka_unit_test(not_an_elf),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
