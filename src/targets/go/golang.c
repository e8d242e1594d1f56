// SPDX-License-Identifier: MIT
#include "targets/go/golang.h"

#include <capstone/capstone.h>
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <errno.h>
#include <gelf.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "asynctraced.h"
#include "lib/file_copy.h"
#include "lib/util.h"
#include "targets/elf_image.h"
#include "targets/elf_strtab.h"

const char *const go_func_names[GO_FUNC_MAX] = {
	[GO_EXECUTE] = "runtime.execute",
	[GO_CASGSTATUS] = "runtime.casgstatus",
	[GO_READY] = "runtime.ready",
	[GO_RUNQSTEAL] = "runtime.runqsteal",
	[GO_NEWPROC1] = "runtime.newproc1",
	[GO_HANDOFFP] = "runtime.handoffp",
	[GO_STOP_THE_WORLD] = "runtime.stopTheWorldWithSema",
	[GO_PREEMPT_PARK] = "runtime.preemptPark",
};

/*
 * The layouts checked here, for binaries without DWARF: each one read from
 * the DWARF of a program built by that Go, x86-64 (Debian's golang-1.N-go:
 * bookworm's 1.19, its backports' 1.21-1.23, trixie's 1.24 and its
 * backports' 1.25-1.27; Debian never shipped 1.20). `make go-versions`
 * builds the test program with each, and tests/unit/test_golang.c checks
 * this table against their DWARF.
 */
#define GO_LAYOUT(minor_, goid, m, status, startpc, preempt, waitreason, mp, curg, head, seq) \
	{ 1, minor_, { .g_goid = goid, .g_m = m, .g_atomicstatus = status,                  \
		       .g_startpc = startpc, .g_preempt = preempt, .g_waitreason = waitreason, \
		       .m_p = mp, .m_curg = curg, .p_id = 0, .p_runqhead = head,          \
		       .p_runqtail = head + 4, .p_runq = head + 8, .g_tracking_seq = seq,  \
		       .p_schedtick = 16 } }

static const struct {
	int major, minor;
	struct go_offsets off;
} layouts[] = {
	/*         minor goid  m  status startpc preempt waitreason m.p curg runqhead seq */
	GO_LAYOUT(19, 152, 48, 144, 312, 177, 176, 208, 192, 400, 189),
	GO_LAYOUT(21, 152, 48, 144, 296, 177, 176, 208, 192, 400, 188),
	GO_LAYOUT(22, 152, 48, 144, 296, 177, 176, 208, 192, 400, 191),
	GO_LAYOUT(23, 160, 48, 152, 304, 185, 184, 208, 192, 392, 199),
	GO_LAYOUT(24, 160, 48, 152, 304, 185, 184, 208, 192, 392, 199),
	GO_LAYOUT(25, 152, 48, 144, 296, 177, 176, 200, 184, 392, 191),
	GO_LAYOUT(26, 152, 48, 144, 304, 177, 176, 208, 184, 400, 191),
	GO_LAYOUT(27, 152, 48, 144, 304, 177, 176, 208, 184, 400, 191),
};

/*
 * What tasks read besides, by version, for binaries without DWARF (the same
 * builds; tests/unit/test_golang.c checks it too): g.stack is at 0 in
 * every one, g.sched (a gobuf: sp, pc, ..., bp) at 56.
 */
#define GO_TASK_LAYOUT(minor_, bp, syscallsp, waitsince, gopc, procid)                      \
	{ 1, minor_, { .g_stack_lo = 0, .g_stack_hi = 8, .g_sched_sp = 56, .g_sched_pc = 64, \
		       .g_sched_bp = bp, .g_syscallsp = syscallsp, .g_syscallpc = syscallsp + 8, \
		       .g_waitsince = waitsince, .g_gopc = gopc, .m_procid = procid } }

static const struct {
	int major, minor;
	struct go_task_offsets off;
} task_layouts[] = {
	/*              minor sched.bp syscallsp waitsince gopc m.procid */
	GO_TASK_LAYOUT(19, 104, 112, 168, 296, 72),
	GO_TASK_LAYOUT(21, 104, 112, 168, 280, 72),
	GO_TASK_LAYOUT(22, 104, 112, 168, 280, 72),
	GO_TASK_LAYOUT(23, 104, 112, 176, 288, 72),
	GO_TASK_LAYOUT(24, 104, 112, 176, 288, 72),
	GO_TASK_LAYOUT(25, 96, 104, 168, 280, 64),
	GO_TASK_LAYOUT(26, 96, 104, 168, 288, 64),
	GO_TASK_LAYOUT(27, 96, 104, 168, 288, 64),
};

_Static_assert(sizeof(layouts) / sizeof(*layouts) == sizeof(task_layouts) / sizeof(*task_layouts),
	       "a layout of each version in each table");

int golang__layout(int major, int minor, struct go_offsets *off, struct go_task_offsets *toff)
{
	for (size_t i = 0; i < sizeof(layouts) / sizeof(*layouts); i++)
		if (layouts[i].major == major && layouts[i].minor == minor &&
		    task_layouts[i].minor == minor) {
			*off = layouts[i].off;
			*toff = task_layouts[i].off;
			return 0;
		}
	return -ENOENT;
}

/* A section's bytes, where it is loaded, and where it is in the file. */
struct section {
	const uint8_t *data;
	size_t size;
	uint64_t addr;
	uint64_t offset;
};

/* The sections read, by name: the first section of each name is the one. */
enum {
	SEC_BUILDINFO, SEC_DATA, SEC_RODATA, SEC_TEXT, SEC_PCLNTAB, SEC_NOPTRDATA, SEC_MODULE,
	SEC_RELA, NR_SECS
};

static const char *const sec_names[NR_SECS] = {
	[SEC_BUILDINFO] = ".go.buildinfo",
	[SEC_DATA] = ".data",
	[SEC_RODATA] = ".rodata",
	[SEC_TEXT] = ".text",
	[SEC_PCLNTAB] = ".gopclntab",
	[SEC_NOPTRDATA] = ".noptrdata",
	[SEC_MODULE] = ".go.module",	/* the moduledata, from Go 1.26 */
	[SEC_RELA] = ".rela",		/* a PIE's relocations (Go's own linker) */
};

/* What a section is called in a position-independent binary, where it has relocations. */
static const char *const pie_names[NR_SECS] = {
	[SEC_PCLNTAB] = ".data.rel.ro.gopclntab",
	[SEC_RELA] = ".rela.dyn",		/* an external linker's */
};

/* A Go binary as it is read: its sections, and what may still be read of names. */
struct image {
	Elf *elf;
	struct section sec[NR_SECS];	/* data NULL: none, or without contents */
	Elf_Scn *symtab;		/* the first SHT_SYMTAB (ELF allows one); NULL: stripped */
	/* the section names end in a NUL: libelf's and libdw's lookups stay cheap */
	bool shstrtab_sound;
	/*
	 * Bytes of function names still to be read: the file's size. A real
	 * table names each function once, in a string of its own; a hostile
	 * one can point a million entries at one long string, and each would
	 * be scanned and copied again.
	 */
	uint64_t names_budget;
};

/* Whether the name at off in tab is name: no more of it read than name's length. */
static bool named(const Elf_Data *tab, uint64_t off, const char *name)
{
	size_t n = strlen(name) + 1;

	return off < tab->d_size && tab->d_size - off >= n &&
	       !memcmp((const char *)tab->d_buf + off, name, n);
}

/* The sections golang.c reads, in one pass over the section headers. */
static void find_sections(struct image *im)
{
	const Elf_Data *names;
	bool seen[NR_SECS] = { false };
	Elf_Scn *scn = NULL;
	size_t shstrndx;

	if (elf_getshdrstrndx(im->elf, &shstrndx) || !(names = elf_strtab(im->elf, shstrndx)))
		return;
	im->shstrtab_sound = names->d_size && !((const char *)names->d_buf)[names->d_size - 1];
	while ((scn = elf_nextscn(im->elf, scn))) {
		GElf_Shdr sh;

		if (!gelf_getshdr(scn, &sh))
			continue;
		if (sh.sh_type == SHT_SYMTAB && !im->symtab)
			im->symtab = scn;
		for (int i = 0; i < NR_SECS; i++) {
			Elf_Data *d;

			if (seen[i] || (!named(names, sh.sh_name, sec_names[i]) &&
					(!pie_names[i] || !named(names, sh.sh_name, pie_names[i]))))
				continue;
			seen[i] = true;
			d = sh.sh_type == SHT_NOBITS ? NULL : elf_getdata(scn, NULL);
			if (d && d->d_buf)
				im->sec[i] = (struct section){ .data = d->d_buf, .size = d->d_size,
							       .addr = sh.sh_addr,
							       .offset = sh.sh_offset };
		}
	}
}

static uint64_t read_uint(const uint8_t *p, int size)
{
	uint64_t v = 0;

	memcpy(&v, p, size == 4 ? 4 : 8); /* little-endian: x86-64 only */
	return v;
}

/*
 * The bytes at link-time address addr, len of them, if s holds them all:
 * by differences, never sums, which a hostile address or length wraps.
 */
static const uint8_t *at(const struct section *s, uint64_t addr, uint64_t len)
{
	return s->data && addr >= s->addr && len <= s->size && addr - s->addr <= s->size - len
		       ? s->data + (addr - s->addr)
		       : NULL;
}

/*
 * The Go version in .go.buildinfo: a 16-byte header ("\xff Go buildinf:",
 * the pointer size, flags), then, since Go 1.18 (flag 2), the version as a
 * varint-prefixed string at 32; before, a pointer to a string header.
 */
static int build_version(const struct image *im, struct go_binary *gb)
{
	static const char magic[] = "\xff Go buildinf:";
	const struct section *bi = &im->sec[SEC_BUILDINFO];
	const uint8_t *p;
	uint64_t len = 0, addr;
	int shift = 0, ptr;
	size_t at_len = 32;

	if (!bi->data || bi->size < 32 || memcmp(bi->data, magic, sizeof(magic) - 1))
		return -ENOENT;
	ptr = bi->data[14];
	if (bi->data[15] & 2) {
		while (at_len < bi->size && shift < 64) {
			len |= (uint64_t)(bi->data[at_len] & 0x7f) << shift;
			shift += 7;
			if (!(bi->data[at_len++] & 0x80))
				break;
		}
		p = bi->data + at_len;
		if (len >= sizeof(gb->version) || len > bi->size - at_len)
			return -ENOTSUP;
	} else { /* Go 1.17 and older: the address of a string header in .data */
		if (ptr != 8 || !(p = at(&im->sec[SEC_DATA], read_uint(bi->data + 16, 8), 16)))
			return -ENOTSUP;
		addr = read_uint(p, 8);
		len = read_uint(p + 8, 8);
		if (len >= sizeof(gb->version) || !(p = at(&im->sec[SEC_RODATA], addr, len)))
			return -ENOTSUP;
	}
	memcpy(gb->version, p, len);
	gb->version[len] = '\0';
	if (sscanf(gb->version, "go%d.%d", &gb->major, &gb->minor) != 2)
		return -ENOTSUP;
	return 0;
}

/* Keeps a function (its name copied): 0, or -ENOMEM. */
static int func_found(struct go_binary *gb, const char *name, uint64_t addr, uint64_t size)
{
	size_t n = strlen(name) + 1;

	for (int i = 0; i < GO_FUNC_MAX; i++)
		if (!gb->funcs[i] && !strcmp(name, go_func_names[i]))
			gb->funcs[i] = addr;
	if (gb->nr_all == gb->cap_all) {
		size_t cap = gb->cap_all ? gb->cap_all * 2 : 4096;
		struct go_func_entry *all = realloc(gb->all, cap * sizeof(*all));

		if (!all)
			return -ENOMEM;
		gb->all = all;
		gb->cap_all = cap;
	}
	if (gb->names_len + n > gb->names_cap) {
		size_t cap = gb->names_cap ? gb->names_cap * 2 : (size_t)1 << 16;
		char *names;

		while (cap < gb->names_len + n)
			cap *= 2;
		if (!(names = realloc(gb->names, cap)))
			return -ENOMEM;
		gb->names = names;
		gb->names_cap = cap;
	}
	memcpy(gb->names + gb->names_len, name, n);
	gb->all[gb->nr_all++] = (struct go_func_entry){ .addr = addr, .size = size,
						       .name = (uint32_t)gb->names_len,
						       .goroutine = (uint32_t)gb->names_len };
	gb->names_len += n;
	return 0;
}

static int by_addr(const void *a, const void *b)
{
	const struct go_func_entry *x = a, *y = b;

	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

const char *golang__func_at(const struct go_binary *gb, uint64_t addr)
{
	/* one past the last function starting at or below addr */
	size_t lo = upper_bound_u64(gb->all, gb->nr_all, sizeof(*gb->all), addr);

	return lo ? gb->names + gb->all[lo - 1].name : NULL;
}

/* Whether name is of a closure or a go statement's wrapper: "...funcN", "...gowrapN". */
static bool wrapper_name(const char *name)
{
	const char *dot = strrchr(name, '.'), *d;

	if (!dot)
		return false;
	d = !strncmp(dot + 1, "func", 4) ? dot + 5 : !strncmp(dot + 1, "gowrap", 6) ? dot + 7 : NULL;
	if (!d || !*d)
		return false;
	while (*d >= '0' && *d <= '9')
		d++;
	return !*d;
}

/*
 * The one function wrapper f calls, besides the stack's growth (its entry in
 * gb->all), or NULL: none, several, or the runtime (a closure of its own).
 */
static const struct go_func_entry *wrapped(const struct go_binary *gb,
					   const struct go_func_entry *f, const struct elf_image *im,
					   csh cs, cs_insn *insn)
{
	const uint8_t *code = f->size < 4096 ? elf_image__bytes(im, f->addr, f->size) : NULL;
	const struct go_func_entry *callee = NULL;
	uint64_t addr = f->addr;
	size_t len = code ? f->size : 0;

	while (len && cs_disasm_iter(cs, &code, &len, &addr, insn)) {
		const cs_x86 *x = &insn->detail->x86;
		const struct go_func_entry *c = NULL;
		size_t at;

		if (insn->id != X86_INS_CALL)
			continue;
		if (x->op_count == 1 && x->operands[0].type == X86_OP_IMM &&
		    (at = upper_bound_u64(gb->all, gb->nr_all, sizeof(*gb->all),
					  (uint64_t)x->operands[0].imm)))
			c = &gb->all[at - 1];
		if (c && !strncmp(gb->names + c->name, "runtime.morestack", 17))
			continue;
		if (!c || callee || !strncmp(gb->names + c->name, "runtime.", 8))
			return NULL;
		callee = c;
	}
	return callee;
}

void golang__name_goroutines(struct go_binary *gb, const struct elf_image *im)
{
	cs_insn *insn;
	csh cs;

	if (cs_open(CS_ARCH_X86, CS_MODE_64, &cs) != CS_ERR_OK)
		return;
	cs_option(cs, CS_OPT_DETAIL, CS_OPT_ON);
	insn = cs_malloc(cs);
	for (size_t i = 0; insn && i < gb->nr_all; i++) {
		struct go_func_entry *f = &gb->all[i];
		const struct go_func_entry *callee =
			wrapper_name(gb->names + f->name) ? wrapped(gb, f, im, cs, insn) : NULL;

		if (callee)
			f->goroutine = callee->name;
	}
	if (insn)
		cs_free(insn, 1);
	cs_close(&cs);
}

const char *golang__goroutine_name(const struct go_binary *gb, uint64_t startpc)
{
	size_t lo = upper_bound_u64(gb->all, gb->nr_all, sizeof(*gb->all), startpc);

	if (!lo)
		return NULL;
	/* a goroutine starts at its function's entry; a pc inside one is named by it */
	return gb->names + (gb->all[lo - 1].addr == startpc ? gb->all[lo - 1].goroutine
							    : gb->all[lo - 1].name);
}

uint64_t golang__func_size(const struct go_binary *gb, uint64_t addr)
{
	size_t lo = upper_bound_u64(gb->all, gb->nr_all, sizeof(*gb->all), addr);

	return lo && gb->all[lo - 1].addr == addr ? gb->all[lo - 1].size : 0;
}

int golang__rets(const uint8_t *code, size_t len, uint64_t addr, uint64_t *out, size_t max)
{
	csh cs;
	cs_insn *insn;
	size_t n, found = 0;

	if (cs_open(CS_ARCH_X86, CS_MODE_64, &cs) != CS_ERR_OK)
		return -ENOTSUP;
	insn = cs_malloc(cs);
	if (!insn) {
		cs_close(&cs);
		return -ENOMEM;
	}
	/* the whole function in order; padding after its last instruction is int3 */
	while (len && cs_disasm_iter(cs, &code, &len, &addr, insn))
		if (insn->id == X86_INS_RET && found < max)
			out[found++] = insn->address;
	n = found;
	cs_free(insn, 1);
	cs_close(&cs);
	return (int)n;
}

bool golang__keeps_args(const uint8_t *code, size_t len, uint64_t addr)
{
	static const x86_reg args[] = { X86_REG_RAX, X86_REG_EAX, X86_REG_AX, X86_REG_AL,
					X86_REG_RBX, X86_REG_EBX, X86_REG_BX, X86_REG_BL,
					X86_REG_RCX, X86_REG_ECX, X86_REG_CX, X86_REG_CL,
					X86_REG_R14, X86_REG_R14D, X86_REG_R14W, X86_REG_R14B };
	bool keeps = true;
	cs_insn *insn;
	csh cs;

	if (cs_open(CS_ARCH_X86, CS_MODE_64, &cs) != CS_ERR_OK)
		return false;
	cs_option(cs, CS_OPT_DETAIL, CS_OPT_ON);
	insn = cs_malloc(cs);
	keeps = insn != NULL;
	while (keeps && len && cs_disasm_iter(cs, &code, &len, &addr, insn)) {
		cs_regs read, written;
		uint8_t nr_read, nr_written;

		if (cs_regs_access(cs, insn, read, &nr_read, written, &nr_written)) {
			keeps = false;
			break;
		}
		for (uint8_t i = 0; i < nr_written; i++)
			for (size_t j = 0; j < sizeof(args) / sizeof(args[0]); j++)
				keeps &= written[i] != args[j];
	}
	keeps &= !len; /* every byte read as whole instructions */
	cs_free(insn, 1);
	cs_close(&cs);
	return keeps;
}

uint64_t golang__steal_taken(const uint8_t *code, size_t len, uint64_t addr)
{
	enum { CALL, TEST, JE, AFTER } want = CALL;
	uint64_t end = addr + len, at = 0;
	cs_insn *insn;
	csh cs;

	if (cs_open(CS_ARCH_X86, CS_MODE_64, &cs) != CS_ERR_OK)
		return 0;
	cs_option(cs, CS_OPT_DETAIL, CS_OPT_ON);
	insn = cs_malloc(cs);
	while (insn && len && cs_disasm_iter(cs, &code, &len, &addr, insn)) {
		const cs_x86 *x = &insn->detail->x86;

		if (want == AFTER) {
			at = insn->address;
			break;
		}
		if (want == CALL) {
			/* its first call, past the stack check's morestack (at the end) */
			if (insn->id == X86_INS_CALL)
				want = TEST;
			continue;
		}
		if (insn->id == X86_INS_NOP) /* padding after the call (1.19) */
			continue;
		if (want == TEST && insn->id == X86_INS_TEST && x->op_count == 2 &&
		    x->operands[0].type == X86_OP_REG && x->operands[0].reg == X86_REG_EAX &&
		    x->operands[1].type == X86_OP_REG && x->operands[1].reg == X86_REG_EAX) {
			want = JE;
			continue;
		}
		/* the branch taken when it took nothing stays in the function */
		if (want == JE && insn->id == X86_INS_JE && x->op_count == 1 &&
		    x->operands[0].type == X86_OP_IMM && (uint64_t)x->operands[0].imm > insn->address &&
		    (uint64_t)x->operands[0].imm < end) {
			want = AFTER;
			continue;
		}
		break;
	}
	if (insn)
		cs_free(insn, 1);
	cs_close(&cs);
	return at;
}

/*
 * What an instruction does to EBX or ECX (casgstatus's old and new): leaves
 * it (REG_KEPT), sets a constant (>= 0), or anything else (REG_UNKNOWN).
 */
enum { REG_UNKNOWN = -1, REG_KEPT = -2 };

struct status_insn {
	uint64_t addr;
	int32_t bx, cx;
	bool stops;		/* a call, a jump or a return: what came before is another path */
	bool target;		/* a branch of this function lands here */
	bool calls;		/* a call of casgstatus */
};

static bool reg_in(x86_reg r, x86_reg r64, x86_reg r32, x86_reg r16, x86_reg r8)
{
	return r == r64 || r == r32 || r == r16 || r == r8;
}

/* What insn does to the register r64 (of family r32, r16, r8). */
static int32_t reg_effect(csh cs, const cs_insn *insn, x86_reg r64, x86_reg r32, x86_reg r16,
			  x86_reg r8)
{
	const cs_x86 *x = &insn->detail->x86;
	cs_regs read, written;
	uint8_t nr_read, nr_written;
	bool writes = false;

	if (cs_regs_access(cs, insn, read, &nr_read, written, &nr_written))
		return REG_UNKNOWN;
	for (uint8_t i = 0; i < nr_written; i++)
		writes |= reg_in((x86_reg)written[i], r64, r32, r16, r8);
	if (!writes)
		return REG_KEPT;
	if (x->op_count == 2 && x->operands[0].type == X86_OP_REG &&
	    (x->operands[0].reg == r32 || x->operands[0].reg == r64)) {
		if (insn->id == X86_INS_MOV && x->operands[1].type == X86_OP_IMM &&
		    x->operands[1].imm >= 0 && x->operands[1].imm < INT16_MAX)
			return (int32_t)x->operands[1].imm;
		if (insn->id == X86_INS_XOR && x->operands[1].type == X86_OP_REG &&
		    x->operands[1].reg == x->operands[0].reg)
			return 0;
	}
	return REG_UNKNOWN;
}

/* The branch's destination if insn is a direct call or jump (or 0). */
static uint64_t branch_to(const cs_insn *insn)
{
	const cs_x86 *x = &insn->detail->x86;

	for (uint8_t g = 0; g < insn->detail->groups_count; g++) {
		uint8_t grp = insn->detail->groups[g];

		if ((grp == CS_GRP_JUMP || grp == CS_GRP_CALL) && x->op_count == 1 &&
		    x->operands[0].type == X86_OP_IMM)
			return (uint64_t)x->operands[0].imm;
	}
	return 0;
}

static bool stops_path(const cs_insn *insn)
{
	return insn->id == X86_INS_CALL || insn->id == X86_INS_JMP || insn->id == X86_INS_RET ||
	       insn->id == X86_INS_UD2 || insn->id == X86_INS_INT3;
}

static int by_insn_addr(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = ((const struct status_insn *)b)->addr;

	return x < y ? -1 : x > y;
}

/*
 * The value casgstatus finds in a register at the call ins[k]: walked back
 * along the straight code that reaches it (no branch lands in between, no
 * call or jump before), as the last instruction there to write it set it.
 */
static int16_t reg_at_call(const struct status_insn *ins, size_t k, bool cx)
{
	for (size_t j = k; j > 0 && k - j < 16; j--) {
		const struct status_insn *i = &ins[j - 1];
		int32_t v = cx ? i->cx : i->bx;

		if (ins[j].target || i->stops)
			break;
		if (v != REG_KEPT)
			return (int16_t)v;
	}
	return -1;
}

/* The calls of target in one function's code, appended to out (*n of max so far). */
static int function_sites(csh cs, cs_insn *insn, const uint8_t *code, size_t len, uint64_t addr,
			  uint64_t target, struct go_status_site *out, size_t max, size_t *n)
{
	struct status_insn *ins = NULL;
	uint64_t *dest = NULL;
	size_t nr = 0, nr_dest = 0, cap = 0;
	uint64_t start = addr, end = addr + len;
	int err = 0;

	while (len && cs_disasm_iter(cs, &code, &len, &addr, insn)) {
		uint64_t to = branch_to(insn);

		if (nr == cap) {
			size_t c = cap ? cap * 2 : 256;
			struct status_insn *i = realloc(ins, c * sizeof(*i));
			uint64_t *d = realloc(dest, c * sizeof(*d));

			if (i)
				ins = i;
			if (d)
				dest = d;
			if (!i || !d) {
				err = -ENOMEM;
				goto out;
			}
			cap = c;
		}
		if (to >= start && to < end)
			dest[nr_dest++] = to;
		ins[nr++] = (struct status_insn){
			.addr = insn->address,
			.bx = reg_effect(cs, insn, X86_REG_RBX, X86_REG_EBX, X86_REG_BX, X86_REG_BL),
			.cx = reg_effect(cs, insn, X86_REG_RCX, X86_REG_ECX, X86_REG_CX, X86_REG_CL),
			.stops = stops_path(insn),
			.calls = insn->id == X86_INS_CALL && to == target,
		};
	}
	/* a branch into the middle of an instruction: code not as read, so none of it trusted */
	for (size_t d = 0; d < nr_dest; d++) {
		struct status_insn *i = bsearch(&dest[d], ins, nr, sizeof(*ins), by_insn_addr);

		if (!i) {
			err = -ENOEXEC;
			goto out;
		}
		i->target = true;
	}
	for (size_t k = 0; k < nr; k++) {
		if (!ins[k].calls)
			continue;
		if (*n == max) {
			err = -E2BIG;
			goto out;
		}
		out[(*n)++] = (struct go_status_site){ .addr = ins[k].addr,
						       .from = reg_at_call(ins, k, false),
						       .to = reg_at_call(ins, k, true) };
	}
out:
	free(ins);
	free(dest);
	return err;
}

/* Whether code (at link-time addr) holds a call rel32 to target anywhere: a quick first look. */
static bool may_call(const uint8_t *code, size_t len, uint64_t addr, uint64_t target)
{
	for (size_t i = 0; i + 5 <= len; i++) {
		int32_t rel;

		if (code[i] != 0xe8)
			continue;
		memcpy(&rel, code + i + 1, sizeof(rel));
		if (addr + i + 5 + (uint64_t)(int64_t)rel == target)
			return true;
	}
	return false;
}

int golang__status_sites(const struct go_binary *gb, const struct elf_image *im,
			 struct go_status_site *out, size_t max)
{
	uint64_t target = gb->funcs[GO_CASGSTATUS];
	size_t n = 0;
	cs_insn *insn;
	int err = 0;
	csh cs;

	if (!target)
		return -ENOENT;
	if (cs_open(CS_ARCH_X86, CS_MODE_64, &cs) != CS_ERR_OK)
		return -ENOTSUP;
	cs_option(cs, CS_OPT_DETAIL, CS_OPT_ON);
	insn = cs_malloc(cs);
	if (!insn)
		err = -ENOMEM;
	/*
	 * Functions in address order, each read only past the last one read: a
	 * table whose functions overlap (a hostile one can make every one the
	 * whole text) is read once, not once a function.
	 */
	for (size_t i = 0, read_to = 0; !err && i < gb->nr_all; i++) {
		const struct go_func_entry *f = &gb->all[i];
		const uint8_t *code = f->size && f->addr >= read_to
					      ? elf_image__bytes(im, f->addr, f->size) : NULL;

		if (!code)
			continue;
		read_to = f->addr + f->size;
		if (may_call(code, f->size, f->addr, target))
			err = function_sites(cs, insn, code, f->size, f->addr, target, out, max, &n);
	}
	if (insn)
		cs_free(insn, 1);
	cs_close(&cs);
	return err ? err : n ? (int)n : -ENOENT;
}

/*
 * An unknown side may hold any status but _Gsyscall: Go enters and leaves a
 * system call with constants, in every version read (tests/unit/test_golang.c
 * checks it). Else newproc1's (dead -> runnable or waiting: a computed
 * status, since 1.23) would look like needm's (dead -> syscall).
 */
static bool may_hold(int side, int status)
{
	return side < 0 ? status != AT_GO_SYSCALL : side == status;
}

bool golang__status_site_needed(const struct go_status_site *s)
{
	for (int from = 0; from < 16; from++)
		for (int to = 0; to < 16; to++)
			switch (may_hold(s->from, from) && may_hold(s->to, to)
					? at_go_change((__u32)from, (__u32)to) : AT_GO_IGNORED) {
			case AT_GO_IGNORED:
			case AT_GO_SYSCALL_ENTERS:
			case AT_GO_SYSCALL_RETURNS:
				break;
			default:
				return true;
			}
	return false;
}

void golang__free(struct go_binary *gb)
{
	free(gb->all);
	free(gb->names);
	gb->all = NULL;
	gb->names = NULL;
	gb->nr_all = gb->cap_all = gb->names_len = gb->names_cap = 0;
}

static int symtab_funcs(struct image *im, struct go_binary *gb)
{
	const Elf_Data *names;
	size_t nr;
	GElf_Shdr sh;
	Elf_Data *d;

	if (!im->symtab || !gelf_getshdr(im->symtab, &sh) || !(d = elf_getdata(im->symtab, NULL)))
		return 0;
	gb->has_symtab = true;
	names = elf_strtab(im->elf, sh.sh_link);
	/* as many as the header says, and the section holds (gelf_getsym reads no further) */
	nr = sh.sh_size / (sh.sh_entsize ? sh.sh_entsize : 1);
	if (nr > d->d_size / gelf_fsize(im->elf, ELF_T_SYM, 1, EV_CURRENT))
		nr = d->d_size / gelf_fsize(im->elf, ELF_T_SYM, 1, EV_CURRENT);
	for (size_t i = 0; names && i < nr; i++) {
		GElf_Sym sym;
		const char *name;

		if (!gelf_getsym(d, (int)i, &sym) || GELF_ST_TYPE(sym.st_info) != STT_FUNC ||
		    !sym.st_value ||
		    !(name = elf_strtab__name(names->d_buf, names->d_size, sym.st_name,
					       &im->names_budget)))
			continue;
		if (func_found(gb, name, sym.st_value, sym.st_size))
			return -ENOMEM;
	}
	return 0;
}

/*
 * The functions from .gopclntab, which the runtime needs (for tracebacks)
 * and so no strip removes. Go 1.18's layout (magic 0xfffffff0; 1.20 on,
 * 0xfffffff1, the same header, its textStart 0 from 1.26): then a table of (entry, _func offset)
 * pairs, each _func beginning with its entry's and its name's offsets.
 */
static int pclntab_funcs(struct image *im, struct go_binary *gb)
{
	const struct section *t = &im->sec[SEC_PCLNTAB];
	uint64_t nfunc, text, names, functab;
	uint32_t magic;
	int ptr;

	if (!t->data || t->size < 8)
		return -ENOTSUP;
	memcpy(&magic, t->data, 4);
	ptr = t->data[7];
	if ((magic != 0xfffffff0 && magic != 0xfffffff1) || ptr != 8 || t->size < 8 + 8 * 8)
		return -ENOTSUP;
	nfunc = read_uint(t->data + 8, 8);
	text = read_uint(t->data + 8 + 2 * 8, 8);
	names = read_uint(t->data + 8 + 3 * 8, 8);
	functab = read_uint(t->data + 8 + 7 * 8, 8);
	/* Go 1.26 leaves textStart 0: the entries count from .text, runtime.text */
	if (!text) {
		if (!im->sec[SEC_TEXT].data)
			return -ENOTSUP;
		text = im->sec[SEC_TEXT].addr;
	}
	if (functab > t->size || nfunc > (t->size - functab) / 8 || names > t->size)
		return -ENOTSUP;
	/* nfunc pairs, then the end of the text: the last function's end */
	if (nfunc + 1 > (t->size - functab) / 8)
		return -ENOTSUP;
	for (uint64_t i = 0; i < nfunc; i++) {
		const uint8_t *e = t->data + functab + i * 8;
		uint32_t entry, next, off, fentry;
		const char *name;
		int32_t name_off;

		memcpy(&entry, e, 4);
		memcpy(&off, e + 4, 4);
		memcpy(&next, e + 8, 4);
		/* the _func's first 8 bytes in the table: by differences, which cannot wrap */
		if (off > t->size - functab || t->size - functab - off < 8)
			continue;
		memcpy(&fentry, t->data + functab + off, 4);
		memcpy(&name_off, t->data + functab + off + 4, 4);
		if (name_off < 0)
			continue;
		name = elf_strtab__name(t->data + names, t->size - names, (uint64_t)name_off,
					&im->names_budget);
		if (!name)
			continue;
		if (func_found(gb, name, text + fentry, next > entry ? next - entry : 0))
			return -ENOMEM;
	}
	return 0;
}

/* A member's offset in a structure's DIE, -1 if it has none of that name. */
static int32_t member_offset(Dwarf_Die *type, const char *member)
{
	Dwarf_Attribute attr;
	Dwarf_Word off;
	Dwarf_Die c;

	if (dwarf_child(type, &c) != 0)
		return -1;
	do {
		const char *n = dwarf_diename(&c);

		/* no structure of the runtime's is a megabyte: a hostile offset is none */
		if (dwarf_tag(&c) == DW_TAG_member && n && !strcmp(n, member) &&
		    !dwarf_formudata(dwarf_attr(&c, DW_AT_data_member_location, &attr), &off))
			return off < (1u << 20) ? (int32_t)off : -1;
	} while (dwarf_siblingof(&c, &c) == 0);
	return -1;
}

/* A member of a member: -1 unless both are there. */
static int32_t plus(int32_t outer, int32_t inner)
{
	return outer >= 0 && inner >= 0 ? outer + inner : -1;
}

/*
 * The offsets from DWARF: runtime.g, runtime.m and runtime.p, wherever their
 * CU; those tasks read too (runtime.gobuf for g.sched's, runtime.moduledata
 * for where gofunc is: *gofunc_at).
 */
static bool dwarf_offsets(Elf *elf, struct go_offsets *o, struct go_task_offsets *t,
			  int32_t *gofunc_at)
{
	int32_t sched = -1, gobuf_sp = -1, gobuf_pc = -1, gobuf_bp = -1, stack = -1;
	Dwarf *dw = dwarf_begin_elf(elf, DWARF_C_READ, NULL);
	Dwarf_Off off = 0, next;
	size_t hsize;
	int found = 0;

	if (!dw)
		return false;
	while (found < 5 && dwarf_nextcu(dw, off, &next, &hsize, NULL, NULL, NULL) == 0) {
		Dwarf_Die cu, c;

		if (dwarf_offdie(dw, off + hsize, &cu) && dwarf_child(&cu, &c) == 0) {
			do {
				const char *n = dwarf_diename(&c);

				if (dwarf_tag(&c) != DW_TAG_structure_type || !n ||
				    dwarf_hasattr(&c, DW_AT_declaration))
					continue;
				if (!strcmp(n, "runtime.g")) {
					o->g_goid = member_offset(&c, "goid");
					o->g_m = member_offset(&c, "m");
					o->g_atomicstatus = member_offset(&c, "atomicstatus");
					o->g_startpc = member_offset(&c, "startpc");
					o->g_preempt = member_offset(&c, "preempt");
					o->g_waitreason = member_offset(&c, "waitreason");
					o->g_tracking_seq = member_offset(&c, "trackingSeq");
					stack = member_offset(&c, "stack");
					sched = member_offset(&c, "sched");
					t->g_syscallsp = member_offset(&c, "syscallsp");
					t->g_syscallpc = member_offset(&c, "syscallpc");
					t->g_waitsince = member_offset(&c, "waitsince");
					t->g_gopc = member_offset(&c, "gopc");
					found++;
				} else if (!strcmp(n, "runtime.m")) {
					o->m_p = member_offset(&c, "p");
					o->m_curg = member_offset(&c, "curg");
					t->m_procid = member_offset(&c, "procid");
					found++;
				} else if (!strcmp(n, "runtime.gobuf")) {
					gobuf_sp = member_offset(&c, "sp");
					gobuf_pc = member_offset(&c, "pc");
					gobuf_bp = member_offset(&c, "bp");
					found++;
				} else if (!strcmp(n, "runtime.moduledata")) {
					*gofunc_at = member_offset(&c, "gofunc");
					found++;
				} else if (!strcmp(n, "runtime.p")) {
					o->p_id = member_offset(&c, "id");
					o->p_runqhead = member_offset(&c, "runqhead");
					o->p_runqtail = member_offset(&c, "runqtail");
					o->p_runq = member_offset(&c, "runq");
					o->p_schedtick = member_offset(&c, "schedtick");
					found++;
				}
			} while (dwarf_siblingof(&c, &c) == 0);
		}
		off = next;
	}
	dwarf_end(dw);
	/* a stack is {lo, hi uintptr} */
	t->g_stack_lo = stack;
	t->g_stack_hi = plus(stack, 8);
	t->g_sched_sp = plus(sched, gobuf_sp);
	t->g_sched_pc = plus(sched, gobuf_pc);
	t->g_sched_bp = plus(sched, gobuf_bp);
	return found >= 3 && o->g_goid >= 0 && o->m_p >= 0 && o->p_id >= 0;
}

static void set_bit(uint64_t *set, unsigned bit)
{
	set[bit / 64] |= 1ull << (bit % 64);
}

static bool is(const char *name, size_t len, const char *s)
{
	return strlen(s) == len && !memcmp(s, name, len);
}

/* Whether a wait of this name is ended by another goroutine alone (docs/go.md). */
static bool may_lose(const char *name, size_t len)
{
	static const char *const waits[] = {
		"chan receive", "chan send", "select", "semacquire", "sync.Cond.Wait",
		"sync.Mutex.Lock", "sync.RWMutex.RLock", "sync.RWMutex.Lock",
		"sync.WaitGroup.Wait",
	};

	for (size_t i = 0; i < sizeof(waits) / sizeof(waits[0]); i++)
		if (is(name, len, waits[i]))
			return true;
	return false;
}

/*
 * The wait reasons: runtime.waitReasonStrings, an array of Go strings
 * (pointer, length) indexed by the reason, in .data. A stripped binary keeps
 * it, without its name: it is where the header of its entry 1 ("GC assist
 * marking", since Go 1.11) is, entry 0 the empty string. Read until an entry
 * is not a name (the array's end). Without it the sets stay empty: no
 * goroutine is ever called lost.
 */
static void wait_reasons(const struct image *im, struct go_binary *gb)
{
	static const char first[] = "GC assist marking";
	const size_t flen = sizeof(first) - 1;
	const struct section *ro = &im->sec[SEC_RODATA], *data = &im->sec[SEC_DATA];
	const uint8_t *array = NULL;
	uint64_t first_addr = 0;

	if (!ro->data || !data->data)
		return;
	/*
	 * Entry 1's header, after entry 0's zero length: of the lowest copy of
	 * the string that has one, then the lowest. One pass over .data, not
	 * one for each copy in .rodata, which a hostile file fills with them.
	 */
	for (uint64_t w = 16; w + 16 <= data->size; w += 8) {
		const uint8_t *e = data->data + w, *s;
		uint64_t addr = read_uint(e, 8);

		if (read_uint(e + 8, 8) != flen || read_uint(e - 8, 8) != 0 ||
		    (array && addr >= first_addr) || !(s = at(ro, addr, flen)) ||
		    memcmp(s, first, flen))
			continue;
		array = e - 16;
		first_addr = addr;
	}
	for (unsigned r = 1; array && r < 256; r++) {
		size_t e = (size_t)(array - data->data) + 16 * r; /* entry r's header */
		uint64_t len = e + 16 <= data->size ? read_uint(data->data + e + 8, 8) : 0;
		const uint8_t *name =
			len && len < 64 ? at(ro, read_uint(data->data + e, 8), len) : NULL;
		bool never;

		if (!name)
			break;
		if (r < GO_WAIT_MAX && len < GO_WAIT_NAME)
			memcpy(gb->walk.wait_names[r], name, len);
		never = is((const char *)name, len, "chan receive (nil chan)") ||
			is((const char *)name, len, "chan send (nil chan)");
		if (never)
			set_bit(gb->never_woken, r);
		if (never || may_lose((const char *)name, len))
			set_bit(gb->may_lose, r);
	}
}

static bool offsets_known(const struct go_offsets *o)
{
	return o->g_goid >= 0 && o->g_m >= 0 && o->g_atomicstatus >= 0 && o->g_startpc >= 0 &&
	       o->g_preempt >= 0 && o->g_waitreason >= 0 &&
	       o->m_p >= 0 && o->m_curg >= 0 && o->p_id >= 0 && o->p_runqhead >= 0 &&
	       o->p_runqtail >= 0;
}

/*
 * The offset of the running g from the thread pointer: Go code reloads g
 * from it after each call into the system (regabi keeps g in R14), as
 * `mov %fs:disp32, reg` (64, REX.W, 8b, a ModRM with no base, SIB 25,
 * disp32); position-independent, as `mov $imm32, reg; mov %fs:(reg), reg`
 * (REX.W c7 /0 imm32, then 64 REX.W 8b with that register as the base).
 * The most frequent offset of those in .text (a byte pattern may also
 * occur inside other instructions, never as often); 0 if there are fewer
 * than GO_TLS_MIN.
 */
static bool tls_load(const uint8_t *p, const uint8_t *start, int32_t *off)
{
	const uint8_t *m = p - 7; /* the mov $imm32 before, if any */
	unsigned reg;

	if ((p[1] & 0xf8) != 0x48 || p[2] != 0x8b)
		return false;
	if ((p[3] & 0xc7) == 0x04 && p[4] == 0x25) { /* mov %fs:disp32, reg */
		*off = (int32_t)read_uint(p + 5, 4);
		return true;
	}
	/* mov %fs:(reg), reg2: reg set just before by mov $imm32 (not rsp/rbp: SIB, disp) */
	reg = (p[3] & 7) | (p[1] & 1) << 3;
	if (m < start || (p[3] & 0xc0) != 0 || (p[3] & 7) == 4 || (p[3] & 7) == 5 ||
	    (m[0] & 0xfe) != 0x48 || m[1] != 0xc7 || (m[2] & 0xf8) != 0xc0 ||
	    ((m[2] & 7) | (m[0] & 1) << 3) != reg)
		return false;
	*off = (int32_t)read_uint(m + 3, 4);
	return true;
}

#define GO_TLS_MIN 8
#define GO_TLS_CANDIDATES 16

static int32_t tls_g_offset(const struct image *im)
{
	const struct section *text = &im->sec[SEC_TEXT];
	struct {
		int32_t disp;
		uint32_t n;
	} seen[GO_TLS_CANDIDATES] = { { 0, 0 } };
	uint32_t best = 0;
	int32_t disp = 0;

	if (!text->data || text->size < 9)
		return 0;
	for (const uint8_t *p = text->data, *end = text->data + text->size - 9;
	     (p = memchr(p, 0x64, (size_t)(end - p))); p++) {
		int32_t d;
		int i;

		if (!tls_load(p, text->data, &d))
			continue;
		if (d >= 0 || d < -(1 << 20)) /* below the thread pointer, in a TLS block */
			continue;
		for (i = 0; i < GO_TLS_CANDIDATES && seen[i].n && seen[i].disp != d; i++)
			;
		if (i < GO_TLS_CANDIDATES) {
			seen[i].disp = d;
			seen[i].n++;
		}
	}
	for (int i = 0; i < GO_TLS_CANDIDATES; i++)
		if (seen[i].n > best) {
			best = seen[i].n;
			disp = seen[i].disp;
		}
	return best >= GO_TLS_MIN ? disp : 0;
}

/* A function's address by its name; 0 if none. */
static uint64_t func_named(const struct go_binary *gb, const char *name)
{
	for (size_t i = 0; i < gb->nr_all; i++)
		if (!strcmp(gb->names + gb->all[i].name, name))
			return gb->all[i].addr;
	return 0;
}

/*
 * runtime.allglen and runtime.allgptr, which a stripped binary keeps
 * unnamed: the first loads of runtime.forEachGRace, the same in Go 1.19 to
 * 1.27 after its prologue: `mov allglen(%rip), %rcx` (48 8b 0d rel32), then
 * `mov allgptr(%rip), %rbx` (48 8b 1d rel32).
 */
static void find_allgs(const struct image *im, struct go_binary *gb)
{
	uint64_t fn = func_named(gb, "runtime.forEachGRace"), len = 0x80;
	const uint8_t *code;

	while (fn && len >= 16 && !(code = at(&im->sec[SEC_TEXT], fn, len)))
		len /= 2;
	if (!fn || len < 16)
		return;
	for (uint64_t i = 0; i + 7 <= len; i++) {
		uint64_t target = fn + i + 7 + (uint64_t)(int64_t)(int32_t)read_uint(code + i + 3, 4);

		if (code[i] != 0x48 || code[i + 1] != 0x8b)
			continue;
		if (code[i + 2] == 0x0d && !gb->walk.allglen) {
			gb->walk.allglen = target;
		} else if (code[i + 2] == 0x1d && gb->walk.allglen) {
			gb->walk.allgptr = target;
			return;
		}
	}
	gb->walk.allglen = 0; /* half of it is none of it */
}

/* The addend of the relative relocation of the word at addr in relocations r; 0 if none. */
static uint64_t relocated(const struct section *r, uint64_t addr)
{
	for (uint64_t e = 0; e + 24 <= r->size; e += 24)
		if (read_uint(r->data + e, 8) == addr && read_uint(r->data + e + 8, 8) == 8)
			return read_uint(r->data + e + 16, 8);
	return 0;
}

/*
 * A PIE's moduledata holds relocated pointers, which the file leaves for
 * the loader (its words 0): it is where a relative relocation (type 8,
 * R_X86_64_RELATIVE) puts .gopclntab's address, with the text's start put
 * 176 bytes on.
 */
static void find_gofunc_pie(const struct image *im, struct go_binary *gb, int32_t gofunc_at)
{
	const struct section *r = &im->sec[SEC_RELA];
	int tries = 0;

	/* a few words point at .gopclntab; a hostile file's thousands are not each searched for */
	for (uint64_t e = 0; r->data && e + 24 <= r->size && tries < 8; e += 24) {
		uint64_t where = read_uint(r->data + e, 8);

		if (read_uint(r->data + e + 8, 8) != 8 ||
		    read_uint(r->data + e + 16, 8) != im->sec[SEC_PCLNTAB].addr)
			continue;
		if (tries++, relocated(r, where + 176) != im->sec[SEC_TEXT].addr)
			continue;
		gb->walk.gofunc = relocated(r, where + (uint64_t)gofunc_at);
		return;
	}
}

/*
 * moduledata.gofunc, the base of a function's funcdata (its inline tree):
 * the moduledata is the word holding .gopclntab's address (its pcHeader)
 * with the text's start 176 bytes on, in .go.module (Go 1.26 on) or
 * .noptrdata; gofunc at gofunc_at, from DWARF, else where these versions
 * keep it.
 */
static void find_gofunc(const struct image *im, struct go_binary *gb, int32_t gofunc_at)
{
	const struct section *secs[] = { &im->sec[SEC_MODULE], &im->sec[SEC_NOPTRDATA] };
	uint64_t text = im->sec[SEC_TEXT].addr;

	if (gofunc_at < 0)
		gofunc_at = gb->minor <= 19 ? 304 : gb->minor <= 26 ? 320 : 344;
	for (size_t k = 0; k < 2; k++) {
		const struct section *sec = secs[k];

		for (uint64_t w = 0; sec->data && w + 8 <= sec->size; w += 8) {
			const uint8_t *md = sec->data + w;

			if (read_uint(md, 8) != im->sec[SEC_PCLNTAB].addr ||
			    (uint64_t)gofunc_at + 8 > sec->size - w || sec->size - w < 184 ||
			    read_uint(md + 176, 8) != text)
				continue;
			gb->walk.gofunc = read_uint(md + gofunc_at, 8);
			return;
		}
	}
	find_gofunc_pie(im, gb, gofunc_at);
}

/* What tasks read: where the goroutines are, the tables their stacks are read by. */
static void find_walk(const struct image *im, struct go_binary *gb, int32_t gofunc_at)
{
	const struct section *t = &im->sec[SEC_PCLNTAB];

	if (!t->data || t->size < 8 + 8 * 8)
		return;
	gb->walk.pclntab_addr = t->addr;
	gb->walk.pclntab_off = t->offset;
	gb->walk.pclntab_size = t->size;
	/* Go 1.26 leaves pcHeader.textStart 0: the entries count from .text, runtime.text */
	gb->walk.text = read_uint(t->data + 8 + 2 * 8, 8);
	if (!gb->walk.text)
		gb->walk.text = im->sec[SEC_TEXT].addr;
	find_allgs(im, gb);
	find_gofunc(im, gb, gofunc_at);
}

/* What detection reads of an ELF file, whichever way it came. */
static int detect(Elf *elf, size_t size, struct go_binary *gb)
{
	struct image im = { .elf = elf, .names_budget = size };
	struct go_offsets table;
	struct go_task_offsets task_table;
	int32_t gofunc_at = -1;
	bool in_table;
	GElf_Ehdr eh;
	int err;

	find_sections(&im);
	err = build_version(&im, gb);
	if (err)
		return err;
	gb->pie = gelf_getehdr(elf, &eh) && eh.e_type == ET_DYN;
	err = symtab_funcs(&im, gb);
	if (!err && !gb->has_symtab)
		err = pclntab_funcs(&im, gb);
	if (err)
		return err;
	/* no functions: all is NULL, which qsort() must not be given even for 0 */
	if (gb->nr_all)
		qsort(gb->all, gb->nr_all, sizeof(*gb->all), by_addr);
	/* libdw finds its sections by name through elf_strptr(): see elf_strtab.h */
	gb->has_dwarf = im.shstrtab_sound &&
			dwarf_offsets(elf, &gb->off, &gb->walk.off, &gofunc_at);
	/* without DWARF (or without what tasks read in it), the version's layouts */
	in_table = !golang__layout(gb->major, gb->minor, &table, &task_table);
	if (in_table && !gb->has_dwarf)
		gb->off = table;
	if (in_table && !(gb->has_dwarf && gb->walk.off.g_sched_sp >= 0 &&
			  gb->walk.off.g_sched_bp >= 0 && gb->walk.off.m_procid >= 0))
		gb->walk.off = task_table;
	err = offsets_known(&gb->off) ? 0 : -ENOTSUP;
	gb->tls_g = tls_g_offset(&im);
	wait_reasons(&im, gb);
	find_walk(&im, gb, gofunc_at);
	/* what golang__optional() names may be missing: said, and traced without */
	for (int i = 0; !err && i < GO_FUNC_MAX; i++)
		if (!gb->funcs[i] && !golang__optional(i))
			err = -ENOTSUP;
	return err;
}

static void go_binary_init(struct go_binary *gb)
{
	memset(gb, 0, sizeof(*gb));
	memset(&gb->off, 0xff, sizeof(gb->off)); /* every offset -1 */
	memset(&gb->walk.off, 0xff, sizeof(gb->walk.off));
}

int golang__detect_mem(const void *data, size_t size, struct go_binary *gb)
{
	Elf *elf;
	int err;

	go_binary_init(gb);
	if (elf_version(EV_CURRENT) == EV_NONE)
		return -EINVAL;
	/* libelf only reads an image it is given: const for us, not for its API */
	elf = elf_memory((char *)data, size);
	if (!elf || elf_kind(elf) != ELF_K_ELF) {
		elf_end(elf);
		return -ENOEXEC;
	}
	err = detect(elf, size, gb);
	elf_end(elf);
	return err;
}

int golang__detect(const char *path, struct go_binary *gb)
{
	struct file_copy fc;
	int err = file_copy__read(&fc, path, GO_FILE_MAX);

	if (err) {
		go_binary_init(gb);
		if (err == -EFBIG)
			warn_msg("%s: larger than the %zu MiB a Go binary is read up to: "
				 "not looked into\n", path, GO_FILE_MAX >> 20);
		return err;
	}
	err = golang__detect_mem(fc.data, fc.size, gb);
	file_copy__free(&fc);
	return err;
}
