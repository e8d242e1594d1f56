/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * USDT arguments, fetched cheaply. libbpf's BPF_USDT() calls bpf_usdt_arg()
 * once per argument, and each call finds the probe's argument spec again
 * (cookie, map lookup) before reading its argument: about 60 ns an argument
 * here, 300 ns for five, more than all our own work in a probe. This reads
 * the spec (which libbpf still fills in when attaching) once per probe hit,
 * reads registers straight from the context, and lets a program fetch an
 * argument only when it needs it.
 */
#ifndef USDT_ARGS_BPF_H
#define USDT_ARGS_BPF_H

#include <bpf/usdt.bpf.h>

typedef const struct __bpf_usdt_spec *usdt_spec_t;

/* The spec of the probe being hit; NULL if unknown (then every argument reads 0). */
static __always_inline usdt_spec_t usdt_spec(struct pt_regs *ctx)
{
	int id = __bpf_usdt_spec_id(ctx);

	return id < 0 ? NULL : bpf_map_lookup_elem(&__bpf_usdt_specs, &id);
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

/* Argument n (a constant) of the probe, as libbpf's bpf_usdt_arg() would give it. */
static __always_inline long usdt_arg(struct pt_regs *ctx, usdt_spec_t spec, const int n)
{
	const struct __bpf_usdt_arg_spec *a;
	unsigned long val = 0;

	if (!spec || n >= spec->arg_cnt)
		return 0;
	a = &spec->args[n];
	switch (a->arg_type) {
	case BPF_USDT_ARG_CONST:
		val = a->val_off;
		break;
	case BPF_USDT_ARG_REG:
		val = usdt_reg(ctx, a->reg_off);
		break;
	case BPF_USDT_ARG_REG_DEREF:
		val = usdt_reg(ctx, a->reg_off);
		if (bpf_probe_read_user(&val, sizeof(val), (const void *)(val + a->val_off)))
			return 0;
		break;
	default:
		return 0;
	}
	/* Arguments of 1, 2 or 4 bytes: clear (or sign-extend) the upper bits. */
	val <<= a->arg_bitshift;
	if (a->arg_signed)
		return ((long)val) >> a->arg_bitshift;
	return (long)(val >> a->arg_bitshift);
}

#endif
