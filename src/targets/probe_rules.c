// SPDX-License-Identifier: MIT
#include "targets/probe_rules.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Every direct branch of x86-64 with a 1-byte (rel8) or 4-byte (rel32) displacement. */
/* A form that leaves the stack alone; a branch (rel: its displacement's bytes); one that moves it */
#define FORM(nm, n, ...) { .name = nm, .len = n, .bytes = { __VA_ARGS__ } }
#define BRANCH(nm, n, r, ...) { .name = nm, .len = n, .rel = r, .bytes = { __VA_ARGS__ } }
#define STACK(nm, n, u, ...) { .name = nm, .len = n, .bytes = { __VA_ARGS__ }, .stack = true, \
			       .undo_len = sizeof((uint8_t[])u), .undo = u }
#define UNDO(...) { __VA_ARGS__ }
#define JCC8(op, nm) BRANCH(nm " rel8", 2, 1, op, 0)
#define JCC32(op, nm) BRANCH(nm " rel32", 6, 4, 0x0f, op, 0, 0, 0, 0)
#define PUSH(op, nm) STACK("push " nm, 1, UNDO((op) + 8), op)
#define PUSHX(op, nm) STACK("push " nm, 2, UNDO(0x41, (op) + 8), 0x41, op)
/* LLVM's and GNU as's padding of 10 to 15 bytes: operand-size prefixes, then cs nopw */
#define CS_NOPW(n, ...) FORM("cs nopw (" #n " bytes)", n, __VA_ARGS__, 0x66, 0x2e, 0x0f, 0x1f, 0x84, \
			     0, 0, 0, 0, 0)

/*
 * What placement may choose (nops of every length compilers pad with, push
 * of each register, relative jumps, calls and conditional jumps, with and
 * without the bnd prefix), and, for the record, what it moves past.
 */
const struct probe_form probe_forms[] = {
	FORM("nop", 1, 0x90),
	FORM("xchg %ax,%ax", 2, 0x66, 0x90),
	FORM("nopl (%rax)", 3, 0x0f, 0x1f, 0x00),
	FORM("nopl 0x0(%rax)", 4, 0x0f, 0x1f, 0x40, 0x00),
	FORM("nopl 0x0(%rax,%rax,1)", 5, 0x0f, 0x1f, 0x44, 0x00, 0x00),
	FORM("nopw 0x0(%rax,%rax,1)", 6, 0x66, 0x0f, 0x1f, 0x44, 0x00, 0x00),
	FORM("nopl 0x0(%rax) (7 bytes)", 7, 0x0f, 0x1f, 0x80, 0, 0, 0, 0),
	FORM("nopl 0x0(%rax,%rax,1) (8 bytes)", 8, 0x0f, 0x1f, 0x84, 0, 0, 0, 0, 0),
	FORM("nopw 0x0(%rax,%rax,1) (9 bytes)", 9, 0x66, 0x0f, 0x1f, 0x84, 0, 0, 0, 0, 0),
	FORM("cs nopl 0x0(%rax,%rax,1)", 9, 0x2e, 0x0f, 0x1f, 0x84, 0, 0, 0, 0, 0),
	FORM("cs nopw (10 bytes)", 10, 0x66, 0x2e, 0x0f, 0x1f, 0x84, 0, 0, 0, 0, 0),
	CS_NOPW(11, 0x66),
	CS_NOPW(12, 0x66, 0x66),
	CS_NOPW(13, 0x66, 0x66, 0x66),
	CS_NOPW(14, 0x66, 0x66, 0x66, 0x66),
	CS_NOPW(15, 0x66, 0x66, 0x66, 0x66, 0x66),
	PUSH(0x50, "%rax"), PUSH(0x51, "%rcx"), PUSH(0x52, "%rdx"), PUSH(0x53, "%rbx"),
	PUSH(0x54, "%rsp"), PUSH(0x55, "%rbp"), PUSH(0x56, "%rsi"), PUSH(0x57, "%rdi"),
	PUSHX(0x50, "%r8"), PUSHX(0x51, "%r9"), PUSHX(0x52, "%r10"), PUSHX(0x53, "%r11"),
	PUSHX(0x54, "%r12"), PUSHX(0x55, "%r13"), PUSHX(0x56, "%r14"), PUSHX(0x57, "%r15"),
	BRANCH("jmp rel8", 2, 1, 0xeb, 0),
	BRANCH("jmp rel32", 5, 4, 0xe9, 0, 0, 0, 0),
	BRANCH("bnd jmp rel32", 6, 4, 0xf2, 0xe9, 0, 0, 0, 0),
	/* a call to the next instruction, whose return address is popped */
	{ .name = "call rel32", .len = 5, .rel = 4, .bytes = { 0xe8 }, .stack = true,
	  .undo_len = 1, .undo = { 0x58 } },
	{ .name = "bnd call rel32", .len = 6, .rel = 4, .bytes = { 0xf2, 0xe8 }, .stack = true,
	  .undo_len = 1, .undo = { 0x58 } },
	JCC8(0x70, "jo"), JCC8(0x71, "jno"), JCC8(0x72, "jb"), JCC8(0x73, "jae"),
	JCC8(0x74, "je"), JCC8(0x75, "jne"), JCC8(0x76, "jbe"), JCC8(0x77, "ja"),
	JCC8(0x78, "js"), JCC8(0x79, "jns"), JCC8(0x7a, "jp"), JCC8(0x7b, "jnp"),
	JCC8(0x7c, "jl"), JCC8(0x7d, "jge"), JCC8(0x7e, "jle"), JCC8(0x7f, "jg"),
	JCC32(0x80, "jo"), JCC32(0x81, "jno"), JCC32(0x82, "jb"), JCC32(0x83, "jae"),
	JCC32(0x84, "je"), JCC32(0x85, "jne"), JCC32(0x86, "jbe"), JCC32(0x87, "ja"),
	JCC32(0x88, "js"), JCC32(0x89, "jns"), JCC32(0x8a, "jp"), JCC32(0x8b, "jnp"),
	JCC32(0x8c, "jl"), JCC32(0x8d, "jge"), JCC32(0x8e, "jle"), JCC32(0x8f, "jg"),
	/* what functions begin with, which placement moves past */
	FORM("endbr64", 4, 0xf3, 0x0f, 0x1e, 0xfa),
	STACK("sub $0x18,%rsp", 4, UNDO(0x48, 0x83, 0xc4, 0x18), 0x48, 0x83, 0xec, 0x18),
	FORM("mov %rdi,%rax", 3, 0x48, 0x89, 0xf8),
	FORM("lea 0x8(%rdi),%rax", 4, 0x48, 0x8d, 0x47, 0x08),
	FORM("cmp 0x10(%rsp),%rsp", 5, 0x48, 0x3b, 0x64, 0x24, 0x10),
	FORM("test %rdi,%rdi", 3, 0x48, 0x85, 0xff),
	{ .name = "ret", .len = 1, .bytes = { 0xc3 }, .stack = true, .ret = true },
	{ .name = "bnd ret", .len = 2, .bytes = { 0xf2, 0xc3 }, .stack = true, .ret = true },
};
const size_t nr_probe_forms = sizeof(probe_forms) / sizeof(probe_forms[0]);
_Static_assert(sizeof(probe_forms) / sizeof(probe_forms[0]) <= PROBE_FORMS_MAX,
	       "struct probe_rules holds a verdict per form");

static const char *const verdicts[] = {
	[PROBE_UNKNOWN] = "unknown",	 [PROBE_REFUSED] = "refused",
	[PROBE_STEPPED] = "single-stepped", [PROBE_EMULATED] = "emulated",
	[PROBE_OPTIMIZED] = "optimized",
};

const char *probe_verdict_str(enum probe_verdict v)
{
	return (unsigned int)v < sizeof(verdicts) / sizeof(verdicts[0]) ? verdicts[v] : "?";
}

int probe_forms__match(const uint8_t *insn, size_t len)
{
	for (size_t i = 0; i < nr_probe_forms; i++) {
		const struct probe_form *f = &probe_forms[i];

		if (len == f->len && !memcmp(insn, f->bytes, (size_t)(f->len - f->rel)))
			return (int)i;
	}
	return -1;
}

enum probe_verdict probe_rules__lookup(const struct probe_rules *r, const uint8_t *insn, size_t len,
				       unsigned int *clobbers)
{
	int i = r && r->learnt ? probe_forms__match(insn, len) : -1;

	if (clobbers)
		*clobbers = i < 0 ? 0 : r->clobbers[i];
	return i < 0 ? PROBE_UNKNOWN : (enum probe_verdict)r->verdict[i];
}

uint64_t probe_forms__hash(void)
{
	uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */

	for (size_t i = 0; i < nr_probe_forms; i++) {
		const struct probe_form *f = &probe_forms[i];
		uint8_t head[4] = { f->len, f->rel, f->undo_len, (uint8_t)(f->stack | f->ret << 1) };

		for (size_t b = 0; b < sizeof(head) + f->len; b++) {
			h ^= b < sizeof(head) ? head[b] : f->bytes[b - sizeof(head)];
			h *= 0x100000001b3ull;
		}
	}
	return h;
}

#define HEADER "# asynctraced: what this kernel does with a uprobe on each instruction form\n"

int probe_rules__format(const struct probe_rules *r, const char *kernel, char *buf, size_t size)
{
	size_t at = 0;
	int n;

	n = snprintf(buf, size, HEADER "kernel %s\nforms %016llx\n", kernel,
		     (unsigned long long)probe_forms__hash());
	for (size_t i = 0; n >= 0 && i < nr_probe_forms; i++) {
		const struct probe_form *f = &probe_forms[i];

		at += (size_t)n;
		if (at >= size)
			return -ENOSPC;
		for (unsigned int b = 0; b < f->len && at + 3 < size; b++, at += 2)
			snprintf(buf + at, size - at, "%02x", f->bytes[b]);
		n = snprintf(buf + at, size - at, " %s %u # %s\n",
			     probe_verdict_str((enum probe_verdict)r->verdict[i]), r->clobbers[i],
			     f->name);
	}
	return n < 0 || at + (size_t)n >= size ? -ENOSPC : 0;
}

static int verdict_of(const char *word)
{
	for (size_t v = 0; v < sizeof(verdicts) / sizeof(verdicts[0]); v++)
		if (!strcmp(word, verdicts[v]))
			return (int)v;
	return -1;
}

/* One "bytes verdict clobbers" line into r; -EINVAL if it is not one, or repeats one. */
static int parse_rule(struct probe_rules *r, const char *line, bool *seen)
{
	char hex[2 * PROBE_FORM_MAX_LEN + 1], word[16];
	uint8_t bytes[PROBE_FORM_MAX_LEN];
	unsigned int clobbers;
	size_t len;
	int v, form;

	if (sscanf(line, "%30[0-9a-f] %15s %u", hex, word, &clobbers) != 3 || strlen(hex) % 2 ||
	    clobbers > 128 || (v = verdict_of(word)) < 0)
		return -EINVAL;
	len = strlen(hex) / 2;
	for (size_t b = 0; b < len; b++) {
		unsigned int byte;

		sscanf(hex + 2 * b, "%2x", &byte);
		bytes[b] = (uint8_t)byte;
	}
	form = probe_forms__match(bytes, len);
	if (form < 0 || memcmp(bytes, probe_forms[form].bytes, len) || seen[form])
		return -EINVAL;
	seen[form] = true;
	r->verdict[form] = (uint8_t)v;
	r->clobbers[form] = (uint8_t)clobbers;
	return 0;
}

int probe_rules__parse(struct probe_rules *r, const char *kernel, const char *text)
{
	unsigned long long hash;
	bool kernel_seen = false, forms_seen = false;
	size_t klen = strlen(kernel), rules = 0;
	bool seen[PROBE_FORMS_MAX] = { false };

	memset(r, 0, sizeof(*r));
	for (const char *line = text; *line;) {
		const char *end = strchr(line, '\n');
		size_t len = end ? (size_t)(end - line) : strlen(line);

		if (!strncmp(line, "kernel ", 7)) {
			if (len != 7 + klen || memcmp(line + 7, kernel, klen))
				return -ESTALE;
			kernel_seen = true;
		} else if (!strncmp(line, "forms ", 6)) {
			if (sscanf(line + 6, "%16llx", &hash) != 1 || hash != probe_forms__hash())
				return -ESTALE;
			forms_seen = true;
		} else if (len && line[0] != '#') {
			if (parse_rule(r, line, seen))
				return -EINVAL;
			rules++;
		}
		line += len + (end != NULL);
	}
	/* every form once: a file cut short is not a rule set */
	if (!kernel_seen || !forms_seen || rules != nr_probe_forms)
		return -EINVAL;
	r->learnt = true;
	return 0;
}
