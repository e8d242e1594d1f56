/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * USDT arguments, fetched cheaply. Each site of a probe is attached with its
 * argument spec's id as the attach cookie (src/source/tracer.c), the spec
 * parsed by asynctraced from the ELF note (src/targets/usdt/usdt_notes.c)
 * and kept in usdt_specs: one lookup a probe hit, registers read straight
 * from the context, an argument fetched only when a program needs it.
 * (libbpf's BPF_USDT() finds the spec again for every argument, 60 ns each
 * here, and would have libbpf parse the target's notes itself.) Where the
 * loader could fix a probe's arguments before loading (usdt_fixed), even
 * that one lookup goes.
 */
#ifndef USDT_ARGS_BPF_H
#define USDT_ARGS_BPF_H

typedef const struct at_usdt_spec *usdt_spec_t;

/*
 * Each probe's arguments, when every site of it says the same (set by the
 * loader from the ELF notes, include/asynctraced.h). Read-only data the
 * verifier knows: a known probe's reads become constants, its register
 * switch a single load, and the spec lookup below drops out of the program.
 */
const volatile struct at_usdt_spec usdt_fixed[AT_USDT_NR_PROBES];

/* Every distinct spec of the sites attached, by id (the attach cookie). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, AT_USDT_MAX_SPECS);
	__type(key, __u32);
	__type(value, struct at_usdt_spec);
} usdt_specs SEC(".maps");

/* The spec of the probe being hit; NULL if fixed, or unknown (then every argument reads 0). */
static __always_inline usdt_spec_t usdt_spec(struct pt_regs *ctx, const int probe)
{
	__u32 id;

	if (usdt_fixed[probe].known)
		return NULL;
	id = (__u32)bpf_get_attach_cookie(ctx);
	return bpf_map_lookup_elem(&usdt_specs, &id);
}

/*
 * A register by its offset in struct pt_regs (what libbpf records): read
 * from the context directly on x86-64, where the offsets are fixed; through
 * a probe read anywhere else.
 */
static __always_inline unsigned long usdt_reg(struct pt_regs *ctx, short off)
{
	unsigned long v = 0;

#if defined(__TARGET_ARCH_x86)
#define USDT_REG(o)                                                                                \
	case o:                                                                                    \
		return *(volatile const unsigned long *)((const char *)ctx + o)
	switch (off) {
		USDT_REG(0);   /* r15 */
		USDT_REG(8);   /* r14 */
		USDT_REG(16);  /* r13 */
		USDT_REG(24);  /* r12 */
		USDT_REG(32);  /* bp */
		USDT_REG(40);  /* bx */
		USDT_REG(48);  /* r11 */
		USDT_REG(56);  /* r10 */
		USDT_REG(64);  /* r9 */
		USDT_REG(72);  /* r8 */
		USDT_REG(80);  /* ax */
		USDT_REG(88);  /* cx */
		USDT_REG(96);  /* dx */
		USDT_REG(104); /* si */
		USDT_REG(112); /* di */
		USDT_REG(152); /* sp */
	}
#undef USDT_REG
#endif
	bpf_probe_read_kernel(&v, sizeof(v), (const char *)ctx + off);
	return v;
}

/* An argument of kind (enum at_usdt_arg_kind), found as a spec says. */
static __always_inline long usdt_value(struct pt_regs *ctx, int kind, short reg_off, long val_off,
				       int shift, bool is_signed)
{
	unsigned long val;

	switch (kind) {
	case AT_USDT_ARG_CONST:
		val = val_off;
		break;
	case AT_USDT_ARG_REG:
		val = usdt_reg(ctx, reg_off);
		break;
	case AT_USDT_ARG_DEREF:
		val = usdt_reg(ctx, reg_off);
		if (bpf_probe_read_user(&val, sizeof(val), (const void *)(val + val_off)))
			return 0;
		break;
	default:
		return 0;
	}
	/* Arguments of 1, 2 or 4 bytes: clear (or sign-extend) the upper bits. */
	val <<= shift;
	if (is_signed)
		return ((long)val) >> shift;
	return (long)(val >> shift);
}

/* Argument n (a constant) of probe (a constant), as the note's operand says. */
static __always_inline long usdt_arg(struct pt_regs *ctx, usdt_spec_t spec, const int probe,
				     const int n)
{
	const volatile struct at_usdt_spec *f = &usdt_fixed[probe];

	if (f->known) {
		if (n >= f->nr_args)
			return 0;
		return usdt_value(ctx, f->args[n].kind, f->args[n].reg_off, f->args[n].val,
				  f->args[n].shift, f->args[n].is_signed);
	}
	if (!spec || !spec->known || n >= spec->nr_args || n >= AT_USDT_MAX_ARGS)
		return 0;
	return usdt_value(ctx, spec->args[n].kind, spec->args[n].reg_off, spec->args[n].val,
			  spec->args[n].shift, spec->args[n].is_signed);
}

#endif
