// SPDX-License-Identifier: MIT
/*
 * Probe placement on hand-assembled function starts: past endbr64 and other
 * harmless instructions to the first one the kernel emulates, following the
 * argument the probe reads into the register it was copied to, and never
 * past anything a probe could see (control flow, memory writes outside the
 * frame the function made, the argument overwritten, the stack pointer when
 * a return probe shares the place), nor past a branch target.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <setjmp.h>
#include <cmocka.h>

#include "placement.h"

#define ENDBR64 0xf3, 0x0f, 0x1e, 0xfa
#define PUSH_RBX 0x53
#define PUSH_R14 0x41, 0x56
#define RET 0xc3
#define NOP5 0x0f, 0x1f, 0x44, 0x00, 0x00

/* What raw::poll's probes need: the first argument, and a return probe. */
static const struct placement_need poll_need = { .arg = 0, .ret = true };

static struct placement place(const uint8_t *code, size_t len, const struct placement_need *need)
{
	struct placement p;

	assert_int_equal(placement__entry(code, len, 0x1000, need, &p), 0);
	/* a reason exactly when the probe stays on a single-stepped entry */
	assert_int_equal(!p.cheap, p.why[0] != '\0');
	return p;
}

#define PLACE_FOR(need, ...)                                                                       \
	({                                                                                         \
		static const uint8_t code_[] = { __VA_ARGS__ };                                    \
		place(code_, sizeof(code_), need);                                                 \
	})
#define PLACE(...) PLACE_FOR(&poll_need, __VA_ARGS__)

static void cheap_entries_stay(void **state)
{
	struct placement p = PLACE(PUSH_RBX, RET);

	assert_int_equal(p.skip, 0);
	assert_true(p.cheap);
	assert_string_equal(p.at, "push");
	p = PLACE(0xe9, 0x10, 0x00, 0x00, 0x00); /* jmp rel32 */
	assert_int_equal(p.skip, 0);
	assert_true(p.cheap);
	p = PLACE(NOP5, RET);
	assert_int_equal(p.skip, 0);
	assert_true(p.cheap);
}

static void past_endbr64(void **state)
{
	struct placement p = PLACE(ENDBR64, PUSH_RBX, RET);

	assert_int_equal(p.skip, 4);
	assert_true(p.cheap);
	assert_string_equal(p.entry, "endbr64");
	assert_string_equal(p.at, "push");
	/* endbr64; jmp (a raw::poll instance under CET) */
	p = PLACE(ENDBR64, 0xe9, 0x10, 0x00, 0x00, 0x00);
	assert_int_equal(p.skip, 4);
	/* endbr64; call: the probe goes before the call, which is the side effect */
	p = PLACE(ENDBR64, 0xe8, 0x10, 0x00, 0x00, 0x00, RET);
	assert_int_equal(p.skip, 4);
}

static void past_harmless_moves(void **state)
{
	/* mov (%rdi),%rax reads an argument, writes a scratch register: harmless */
	struct placement p = PLACE(0x48, 0x8b, 0x07, PUSH_R14, RET);

	assert_int_equal(p.skip, 3);
	assert_string_equal(p.entry, "mov");
	/* endbr64; xor %eax,%eax; test %rdi,%rdi; jne: flags and scratch only */
	p = PLACE(ENDBR64, 0x31, 0xc0, 0x48, 0x85, 0xff, 0x75, 0x02, RET, RET, RET);
	assert_int_equal(p.skip, 9);
	assert_string_equal(p.at, "jne");
}

static void never_past_what_a_probe_sees(void **state)
{
	/* mov %rsi,%rdi: overwrites the first argument */
	struct placement p = PLACE(ENDBR64, 0x48, 0x89, 0xf7, PUSH_RBX, RET);

	assert_int_equal(p.skip, 0);
	assert_false(p.cheap);
	/* sub $8,%rsp: moves the stack a return probe reads its address from */
	p = PLACE(0x48, 0x83, 0xec, 0x08, PUSH_RBX, RET);
	assert_int_equal(p.skip, 0);
	assert_non_null(strstr(p.why, "stack pointer"));
	/* mov %rax,(%rsp): writes memory */
	p = PLACE(ENDBR64, 0x48, 0x89, 0x04, 0x24, PUSH_RBX, RET);
	assert_int_equal(p.skip, 0);
	/* lock incl (%rax) */
	p = PLACE(0xf0, 0xff, 0x00, PUSH_RBX, RET);
	assert_int_equal(p.skip, 0);
	/* mov $1,%ecx: the fourth argument, 32-bit, when the probe reads it */
	p = PLACE_FOR((&(struct placement_need){ .arg = 3 }), ENDBR64, 0xb9, 0x01, 0x00, 0x00, 0x00,
		      PUSH_RBX, RET);
	assert_int_equal(p.skip, 0);
	assert_non_null(strstr(p.why, "overwrites the argument"));
	/* stores capstone 4 calls reads: movups %xmm0,(%rdi); fstpl (%rax) */
	p = PLACE(ENDBR64, 0x0f, 0x11, 0x07, 0xeb, 0x00, RET);
	assert_int_equal(p.skip, 0);
	p = PLACE(ENDBR64, 0xdd, 0x18, PUSH_RBX, RET);
	assert_int_equal(p.skip, 0);
	/* enter $16,$0: moves the stack (capstone 4 sees no operands) */
	p = PLACE(ENDBR64, 0xc8, 0x10, 0x00, 0x00, PUSH_RBX, RET);
	assert_int_equal(p.skip, 0);
	/* xchg %rax,(%rdx): a store with no lock prefix */
	p = PLACE(0x48, 0x87, 0x02, PUSH_RBX, RET);
	assert_int_equal(p.skip, 0);
	/* ret first: nothing to move past */
	p = PLACE(RET);
	assert_int_equal(p.skip, 0);
	assert_false(p.cheap);
}

/* Registers written are followed: the argument read where it was copied to. */
static void arguments_followed(void **state)
{
	static const struct placement_need wake = { .arg = 0 }, remove = { .arg = 1 };
	/*
	 * tokio's raw::schedule thunk under fat LTO: mov %rdi,%rsi;
	 * mov 0x10(%rdi),%rax; mov 0x40(%rax),%rax; mov (%rdi,%rax,1),%rdi;
	 * add $0x10,%rdi; xor %edx,%edx; jmp schedule_task: the task is in rsi
	 */
	struct placement p = PLACE_FOR(&wake, 0x48, 0x89, 0xfe, 0x48, 0x8b, 0x47, 0x10, 0x48, 0x8b,
				       0x40, 0x40, 0x48, 0x8b, 0x3c, 0x07, 0x48, 0x83, 0xc7, 0x10,
				       0x31, 0xd2, 0xe9, 0x10, 0x00, 0x00, 0x00);

	assert_true(p.cheap);
	assert_int_equal(p.skip, 21);
	assert_string_equal(p.at, "jmp");
	assert_int_equal(p.arg_reg, 104); /* pt_regs.si */
	/* the same with a return probe: rsp is not touched, so it moves too */
	p = PLACE(0x48, 0x89, 0xfe, 0x48, 0x8b, 0x3c, 0x07, 0xe9, 0x10, 0x00, 0x00, 0x00);
	assert_int_equal(p.skip, 7);
	assert_int_equal(p.arg_reg, 104);
	/* an argument copied, then the copy overwritten too: the entry */
	p = PLACE_FOR(&wake, 0x48, 0x89, 0xfe, 0x48, 0x8b, 0x3f, 0x31, 0xf6, PUSH_RBX, RET);
	assert_false(p.cheap);
	assert_non_null(strstr(p.why, "xor esi, esi"));
	/* copied as 32 bits (mov %edi,%eax), then overwritten: not the same value */
	p = PLACE_FOR(&wake, 0x89, 0xf8, 0x48, 0x8b, 0x3f, PUSH_RBX, RET);
	assert_false(p.cheap);
	/* the second argument untouched while the first is overwritten: stays where the ABI put it */
	p = PLACE_FOR(&remove, 0x48, 0x8b, 0x3f, PUSH_RBX, RET);
	assert_int_equal(p.skip, 3);
	assert_int_equal(p.arg_reg, -1);
	/* a return-only probe reads no argument: any register may change */
	p = PLACE_FOR((&(struct placement_need){ .arg = -1, .ret = true }), 0x31, 0xff, PUSH_RBX,
		      RET);
	assert_int_equal(p.skip, 2);
}

/* An entry-only probe may follow the function into the frame it makes. */
static void past_a_new_frame(void **state)
{
	static const struct placement_need wake = { .arg = 0 };
	/* sub $0x18,%rsp; mov %rdi,0x8(%rsp); call: stores into the frame */
	struct placement p = PLACE_FOR(&wake, 0x48, 0x83, 0xec, 0x18, 0x48, 0x89, 0x7c, 0x24, 0x08,
				       0xe8, 0x10, 0x00, 0x00, 0x00, RET);

	assert_true(p.cheap);
	assert_int_equal(p.skip, 9);
	assert_int_equal(p.arg_reg, -1);
	assert_int_equal(p.frame, 0x18); /* the return address, for the wake probe */
	/* a store at 0x18(%rsp) after sub $0x18: the return address, not the frame */
	p = PLACE_FOR(&wake, 0x48, 0x83, 0xec, 0x18, 0x48, 0x89, 0x7c, 0x24, 0x18, 0xe8, 0x10, 0x00,
		      0x00, 0x00, RET);
	assert_int_equal(p.skip, 0);
	/* the red zone below the stack pointer: a leaf's scratch */
	p = PLACE_FOR(&wake, 0x48, 0x89, 0x7c, 0x24, 0xf8, PUSH_RBX, RET);
	assert_int_equal(p.skip, 5);
	/* stores through another register: anywhere */
	p = PLACE_FOR(&wake, 0x48, 0x83, 0xec, 0x18, 0x48, 0x89, 0x38, PUSH_RBX, RET);
	assert_int_equal(p.skip, 0);
	assert_non_null(strstr(p.why, "may change what the probe reads"));
}

static void never_past_a_branch_target(void **state)
{
	/*
	 * 0x1000 endbr64; 0x1004 mov (%rdi),%rax; 0x1007 push %rbx;
	 * 0x1008 jmp 0x1004 (back into the prefix): moving to 0x1007 would let the
	 * loop hit the probe again without entering the function.
	 */
	struct placement p = PLACE(ENDBR64, 0x48, 0x8b, 0x07, PUSH_RBX, 0xeb, 0xfa, RET);

	assert_int_equal(p.skip, 0);
	/* a branch to the entry itself is fine: the probe stays on the path */
	p = PLACE(ENDBR64, PUSH_RBX, 0xeb, 0xf9, RET);
	assert_int_equal(p.skip, 4);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(cheap_entries_stay),
		cmocka_unit_test(past_endbr64),
		cmocka_unit_test(past_harmless_moves),
		cmocka_unit_test(never_past_what_a_probe_sees),
		cmocka_unit_test(arguments_followed),
		cmocka_unit_test(past_a_new_frame),
		cmocka_unit_test(never_past_a_branch_target),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
