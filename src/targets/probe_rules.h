/* SPDX-License-Identifier: MIT */
/*
 * What the running kernel does with a uprobe on each instruction a probe may
 * be placed on. Linux emulates a few instructions in the trap, single-steps
 * most others out of line (several times dearer), refuses some outright
 * (x86: any ES, CS, SS, DS or LOCK prefix, which LLVM's loop padding
 * carries), and since 6.18 rewrites a probed 5-byte nop into a call to a
 * trampoline, which writes below the stack pointer. Which is which changed
 * between kernels (nops other than 0x90 were single-stepped before 2025),
 * so no table copied from one kernel's source is right on another: the
 * answers are learnt from the kernel itself (src/source/probe_learn.c) by
 * probing each form below on a private code page, and placement
 * (placement.c) looks instructions up here.
 *
 * A form is an encoding: an instruction matches it when its bytes are the
 * form's, the displacement of a direct branch aside (its last `rel` bytes).
 * An instruction that matches no form is unknown, and never chosen.
 */
#ifndef PROBE_RULES_H
#define PROBE_RULES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum probe_verdict {
	PROBE_UNKNOWN = 0,	/* not learnt: no form matches, or its probe failed */
	PROBE_REFUSED,		/* the kernel will not place a breakpoint there */
	PROBE_STEPPED,		/* single-stepped out of line (an [uprobes] page) */
	PROBE_EMULATED,		/* emulated in the trap */
	PROBE_OPTIMIZED,	/* after its first hit, a call into [uprobes-trampoline] */
};

#define PROBE_FORM_MAX_LEN 15

struct probe_form {
	const char *name;	/* as objdump prints it */
	uint8_t len;
	uint8_t rel;		/* its last rel bytes are a branch displacement */
	uint8_t bytes[PROBE_FORM_MAX_LEN];
	/*
	 * It moves the stack pointer: these bytes undo it before the test
	 * page's `ret` (a push's pop, a call's pop); a form that returns itself
	 * has undo_len 0 and ret set. No red-zone check for such forms.
	 */
	uint8_t undo_len;
	uint8_t undo[4];
	bool stack, ret;
};

extern const struct probe_form probe_forms[];
extern const size_t nr_probe_forms;

#define PROBE_FORMS_MAX 96

struct probe_rules {
	bool learnt;		/* from this kernel (else every lookup is unknown) */
	uint8_t verdict[PROBE_FORMS_MAX];	/* enum probe_verdict, by form */
	/*
	 * Bytes below the stack pointer a hit overwrote (0..128, the red zone
	 * the ABI lets a function use without moving the stack pointer).
	 */
	uint8_t clobbers[PROBE_FORMS_MAX];
};

const char *probe_verdict_str(enum probe_verdict v);

/* The form insn (len bytes) matches, or -1. */
int probe_forms__match(const uint8_t *insn, size_t len);

/* What the kernel does with a probe on insn; *clobbers (if not NULL): bytes below %rsp it writes. */
enum probe_verdict probe_rules__lookup(const struct probe_rules *r, const uint8_t *insn, size_t len,
				       unsigned int *clobbers);

/* The forms table's identity: a rule set learnt against another table is not this one's. */
uint64_t probe_forms__hash(void);

/*
 * The rules as text, one form a line ("bytes verdict clobbers # name"),
 * after a header naming the kernel (its release, version and boot) they
 * were learnt on: the cache (probe_learn.c). parse fills r from such text
 * when its header says kernel; -EINVAL (malformed), -ESTALE (another
 * kernel or table) otherwise.
 */
int probe_rules__format(const struct probe_rules *r, const char *kernel, char *buf, size_t size);
int probe_rules__parse(struct probe_rules *r, const char *kernel, const char *text);

#endif
