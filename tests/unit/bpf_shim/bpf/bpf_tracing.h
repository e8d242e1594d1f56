/* SPDX-License-Identifier: MIT */
/*
 * libbpf's program wrappers for the shim: BPF_KPROBE(name, a, b) defines
 * int name(struct pt_regs *ctx) that calls the body with the first
 * arguments' registers, BPF_PROG(name, ...) one that takes the raw
 * tracepoint's array of arguments. Up to three arguments; the return type
 * comes before the macro, as with libbpf's.
 */
#ifndef SHIM_BPF_TRACING_H
#define SHIM_BPF_TRACING_H

#define PT_REGS_PARM1(x) ((x)->di)
#define PT_REGS_PARM2(x) ((x)->si)
#define PT_REGS_PARM3(x) ((x)->dx)
#define PT_REGS_RC(x) ((x)->ax)
#define PT_REGS_SP(x) ((x)->sp)

#define ___shim_nth(_, _1, _2, _3, N, ...) N
#define ___shim_cnt(...) ___shim_nth(_, ##__VA_ARGS__, 3, 2, 1, 0)
#define ___shim_cat(a, b) a##b
#define ___shim_apply(fn, n) ___shim_cat(fn, n)

#define ___shim_kp0() ctx
#define ___shim_kp1(a) ctx, (void *)PT_REGS_PARM1(ctx)
#define ___shim_kp2(a, b) ___shim_kp1(a), (void *)PT_REGS_PARM2(ctx)
#define ___shim_kp3(a, b, c) ___shim_kp2(a, b), (void *)PT_REGS_PARM3(ctx)

#define BPF_KPROBE(name, args...)                                                                  \
	name(struct pt_regs *ctx);                                                                 \
	static inline typeof(name(0)) ____##name(struct pt_regs *ctx, ##args);                     \
	typeof(name(0)) name(struct pt_regs *ctx)                                                  \
	{                                                                                          \
		_Pragma("GCC diagnostic push")                                                     \
		_Pragma("GCC diagnostic ignored \"-Wint-conversion\"")                             \
		return ____##name(___shim_apply(___shim_kp, ___shim_cnt(args))(args));             \
		_Pragma("GCC diagnostic pop")                                                      \
	}                                                                                          \
	static inline typeof(name(0)) ____##name(struct pt_regs *ctx, ##args)

#define BPF_KRETPROBE(name, args...) BPF_KPROBE(name, ##args)

#define ___shim_tp0() ctx
#define ___shim_tp1(a) ctx, (void *)ctx[0]
#define ___shim_tp2(a, b) ___shim_tp1(a), (void *)ctx[1]
#define ___shim_tp3(a, b, c) ___shim_tp2(a, b), (void *)ctx[2]

#define BPF_PROG(name, args...)                                                                    \
	name(unsigned long long *ctx);                                                             \
	static inline typeof(name(0)) ____##name(unsigned long long *ctx, ##args);                 \
	typeof(name(0)) name(unsigned long long *ctx)                                              \
	{                                                                                          \
		_Pragma("GCC diagnostic push")                                                     \
		_Pragma("GCC diagnostic ignored \"-Wint-conversion\"")                             \
		return ____##name(___shim_apply(___shim_tp, ___shim_cnt(args))(args));             \
		_Pragma("GCC diagnostic pop")                                                      \
	}                                                                                          \
	static inline typeof(name(0)) ____##name(unsigned long long *ctx, ##args)

#endif
