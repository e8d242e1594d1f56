// SPDX-License-Identifier: MIT
/*
 * Probe placement on hand-assembled function starts: past endbr64 and other
 * harmless instructions to the first one the kernel emulates, following the
 * argument the probe reads into the register it was copied to, and never
 * past anything a probe could see (control flow, memory writes outside the
 * frame the function made, the argument overwritten, the stack pointer when
 * a return probe shares the place), nor past a branch target. What the
 * kernel emulates, single-steps and refuses is the rule set learnt on 6.18
 * (rules_fixture.h), and variations of it.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <setjmp.h>
#include <cmocka.h>

#include "rules_fixture.h"
#include "targets/placement.h"

#define ENDBR64 0xf3, 0x0f, 0x1e, 0xfa
#define PUSH_RBX 0x53
#define PUSH_R14 0x41, 0x56
#define RET 0xc3
#define NOP5 0x0f, 0x1f, 0x44, 0x00, 0x00

/* What raw::poll's probes need: the first argument, and a return probe. */
static const struct placement_need poll_need = { .arg = 0, .ret = true };

/* The rules placement follows: the kernel's (rules_fixture.h), or a test's variation. */
static struct probe_rules rules;

static struct placement place(const uint8_t *code, size_t len, const struct placement_need *need)
{
	struct placement p;

	assert_int_equal(placement__entry(code, len, 0x1000, need, &rules, &p), 0);
	/* only where the kernel was seen to emulate (or optimize) a probe */
	if (p.cheap)
		assert_true(p.verdict == PROBE_EMULATED || p.verdict == PROBE_OPTIMIZED);
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
	/* a loop back onto the new place itself would hit the probe at every turn */
	p = PLACE(ENDBR64, PUSH_RBX, 0xeb, 0xfd, RET);
	assert_int_equal(p.skip, 0);
}

/* A form's verdict changed in the rules, for one test (restored by the setup). */
static void set_verdict(const uint8_t *insn, size_t len, enum probe_verdict v)
{
	int form = probe_forms__match(insn, len);

	assert_true(form >= 0);
	rules.verdict[form] = (uint8_t)v;
}

static int load_rules(void **state)
{
	(void)state;
	return rules_fixture(&rules);
}

/* The kernel's refusals: LLVM's loop padding, and what is learnt single-stepped. */
static void kernel_refusals(void **state)
{
	/*
	 * tokio 1.24's waker::wake_by_ref built by rustc 1.95: sub $0x18,%rsp;
	 * mov (%rdi),%rax; lea 0x8(%rsp),%rcx; lea 0x10(%rsp),%rdx; data16 x5
	 * cs nopw (which the kernel refuses: CS prefix); loop: test $0x6,%al;
	 * je; ... jne loop. The je is emulated, but the loop comes back above
	 * it: the entry.
	 */
	static const uint8_t wake_by_ref[] = {
		0x48, 0x83, 0xec, 0x18, 0x48, 0x8b, 0x07, 0x48, 0x8d, 0x4c, 0x24, 0x08, 0x48, 0x8d,
		0x54, 0x24, 0x10, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x2e, 0x0f, 0x1f, 0x84, 0x00,
		0x00, 0x00, 0x00, 0x00, 0xa8, 0x06, 0x74, 0x08, 0x31, 0xf6, 0x90, 0x90, 0x90, 0x90,
		0x75, 0xf4, 0xc3,
	};
	static const struct placement_need wake = { .arg = 0 };
	struct placement p = place(wake_by_ref, sizeof(wake_by_ref), &wake);

	assert_int_equal(p.skip, 0);
	assert_false(p.cheap);
	assert_int_equal(p.verdict, PROBE_STEPPED); /* sub: learnt single-stepped */
	assert_non_null(strstr(p.why, "branch lands"));
	/* the same padding with no loop after it: past it, to the je */
	p = PLACE_FOR(&wake, 0x48, 0x8b, 0x07, 0x66, 0x66, 0x2e, 0x0f, 0x1f, 0x84, 0x00, 0x00, 0x00,
		      0x00, 0x00, 0xa8, 0x06, 0x74, 0x01, RET, RET);
	assert_int_equal(p.skip, 16);
	assert_string_equal(p.at, "je");
	/* a refused padding nop at the entry is never the place */
	p = PLACE_FOR(&wake, 0x66, 0x2e, 0x0f, 0x1f, 0x84, 0x00, 0x00, 0x00, 0x00, 0x00, PUSH_RBX,
		      RET);
	assert_int_equal(p.skip, 10);
	assert_string_equal(p.at, "push");
	/* a 9-byte nop is single-stepped here: passed over for the push */
	p = PLACE_FOR(&wake, 0x66, 0x0f, 0x1f, 0x84, 0x00, 0x00, 0x00, 0x00, 0x00, PUSH_RBX, RET);
	assert_int_equal(p.skip, 9);
	/* on a kernel that single-steps push (none known): the entry, nothing cheaper */
	set_verdict((const uint8_t[]){ PUSH_RBX }, 1, PROBE_STEPPED);
	p = PLACE(ENDBR64, PUSH_RBX, RET);
	assert_int_equal(p.skip, 0);
	assert_false(p.cheap);
	assert_int_equal(load_rules(NULL), 0);
}

/*
 * A probe on a 5-byte nop becomes a call into the kernel's trampoline after
 * its first hit, which writes below the stack pointer: never where the
 * function keeps something there.
 */
static void optimized_nop5(void **state)
{
	static const struct placement_need wake = { .arg = 0 };
	struct placement p = PLACE(NOP5, RET);

	assert_true(p.cheap);
	assert_int_equal(p.verdict, PROBE_OPTIMIZED);
	/* mov %rdi,-0x8(%rsp) (the red zone); nop5; push %rbx: the push, not the nop */
	p = PLACE_FOR(&wake, 0x48, 0x89, 0x7c, 0x24, 0xf8, NOP5, PUSH_RBX, RET);
	assert_int_equal(p.skip, 10);
	assert_string_equal(p.at, "push");
	/* sub $0x18,%rsp; mov %rdi,0x8(%rsp): into the frame, above the stack pointer */
	p = PLACE_FOR(&wake, 0x48, 0x83, 0xec, 0x18, 0x48, 0x89, 0x7c, 0x24, 0x08, NOP5, RET);
	assert_int_equal(p.skip, 9);
	assert_int_equal(p.verdict, PROBE_OPTIMIZED);
	/* a store into the red zone, then a frame made over it: above the stack pointer at the nop */
	p = PLACE_FOR(&wake, 0x48, 0x89, 0x7c, 0x24, 0xf8, 0x48, 0x83, 0xec, 0x18, NOP5, RET);
	assert_int_equal(p.skip, 9);
	/* on a kernel that does not optimize nop5 and emulates it: any place */
	set_verdict((const uint8_t[]){ NOP5 }, 5, PROBE_EMULATED);
	p = PLACE_FOR(&wake, 0x48, 0x89, 0x7c, 0x24, 0xf8, NOP5, PUSH_RBX, RET);
	assert_int_equal(p.skip, 5);
	assert_int_equal(load_rules(NULL), 0);
}

/* Rules not learnt (not root, no uprobes): every probe at its entry, and why. */
static void no_rules(void **state)
{
	static const uint8_t code[] = { ENDBR64, PUSH_RBX, RET };
	struct probe_rules none = { .learnt = false };
	struct placement p;

	assert_int_equal(placement__entry(code, sizeof(code), 0x1000, &poll_need, &none, &p), 0);
	assert_int_equal(p.skip, 0);
	assert_false(p.cheap);
	assert_non_null(strstr(p.why, "not known"));
	assert_int_equal(placement__entry(code, sizeof(code), 0x1000, &poll_need, NULL, &p), 0);
	assert_int_equal(p.skip, 0);
}

/* The rules as the cache keeps them: read back as written; another kernel's or a cut file refused. */
static void rules_text(void **state)
{
	static char text[16384], cut[16384];
	struct probe_rules back;

	assert_int_equal(probe_rules__format(&rules, "k1", text, sizeof(text)), 0);
	assert_int_equal(probe_rules__parse(&back, "k1", text), 0);
	assert_memory_equal(&back, &rules, sizeof(rules));
	assert_int_equal(probe_rules__parse(&back, "k2", text), -116 /* ESTALE */);
	memcpy(cut, text, strlen(text) / 2);
	cut[strlen(text) / 2] = '\0';
	assert_true(probe_rules__parse(&back, "k1", cut) < 0);
	assert_int_equal(probe_rules__format(&rules, "k1", text, 64), -28 /* ENOSPC */);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(kernel_refusals),
		cmocka_unit_test(optimized_nop5),
		cmocka_unit_test(no_rules),
		cmocka_unit_test(rules_text),
		cmocka_unit_test(cheap_entries_stay),
		cmocka_unit_test(past_endbr64),
		cmocka_unit_test(past_harmless_moves),
		cmocka_unit_test(never_past_what_a_probe_sees),
		cmocka_unit_test(arguments_followed),
		cmocka_unit_test(past_a_new_frame),
		cmocka_unit_test(never_past_a_branch_target),
	};

	return cmocka_run_group_tests(tests, load_rules, NULL);
}
