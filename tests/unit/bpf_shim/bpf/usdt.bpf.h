/* SPDX-License-Identifier: MIT */
/*
 * libbpf's USDT argument specs for the shim: the same layout, one spec the
 * test fills in (shim_usdt_spec_id picks it) instead of a lookup by cookie.
 */
#ifndef SHIM_USDT_BPF_H
#define SHIM_USDT_BPF_H

enum __bpf_usdt_arg_type {
	BPF_USDT_ARG_CONST,
	BPF_USDT_ARG_REG,
	BPF_USDT_ARG_REG_DEREF,
};

struct __bpf_usdt_arg_spec {
	__u64 val_off;
	enum __bpf_usdt_arg_type arg_type;
	short reg_off;
	bool arg_signed;
	char arg_bitshift;
};

#define BPF_USDT_MAX_ARG_CNT 12
struct __bpf_usdt_spec {
	struct __bpf_usdt_arg_spec args[BPF_USDT_MAX_ARG_CNT];
	__u64 usdt_cookie;
	short arg_cnt;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, int);
	__type(value, struct __bpf_usdt_spec);
} __bpf_usdt_specs SEC(".maps");

static inline int __bpf_usdt_spec_id(struct pt_regs *ctx)
{
	(void)ctx;
	return 0;
}

#endif
