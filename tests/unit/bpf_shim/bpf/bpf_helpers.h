/* SPDX-License-Identifier: MIT */
/*
 * libbpf's bpf_helpers.h for BPF code compiled as userspace C: map
 * definitions become plain structs whose members carry the map's shape
 * (shim_map() reads it back), and the helpers are functions of the test's
 * simulated kernel (test_bpf_logic.c): maps, clock, current CPU and thread,
 * ring buffers, target memory (the test's own).
 */
#ifndef SHIM_BPF_HELPERS_H
#define SHIM_BPF_HELPERS_H

#define SEC(name)
#define __weak __attribute__((weak))
#define __uint(name, val) int (*name)[val]
#define __type(name, val) typeof(val) *name
#define __array(name, val) typeof(val) *name[]
#ifndef __always_inline
#define __always_inline inline __attribute__((always_inline))
#endif
#define barrier() __asm__ __volatile__("" ::: "memory")
#define __noinline __attribute__((noinline))
#define __weak __attribute__((weak))
#define __kconfig
#define barrier_var(var) __asm__ __volatile__("" : "+r"(var))

void *bpf_map_lookup_elem(void *map, const void *key);
long bpf_map_update_elem(void *map, const void *key, const void *value, __u64 flags);
long bpf_map_delete_elem(void *map, const void *key);
__u64 bpf_ktime_get_ns(void);
__u32 bpf_get_smp_processor_id(void);
__u64 bpf_get_current_pid_tgid(void);
__u64 bpf_get_attach_cookie(void *ctx);
void *bpf_ringbuf_reserve(void *ringbuf, __u64 size, __u64 flags);
void bpf_ringbuf_submit(void *data, __u64 flags);
long bpf_ringbuf_output(void *ringbuf, void *data, __u64 size, __u64 flags);
long bpf_probe_read_user(void *dst, __u32 size, const void *src);
long bpf_probe_read_user_str(void *dst, __u32 size, const void *src);
long bpf_probe_read_kernel(void *dst, __u32 size, const void *src);
struct task_struct *bpf_get_current_task_btf(void);
long bpf_task_pt_regs(struct task_struct *task);
long bpf_get_stack(void *ctx, void *buf, __u32 size, __u64 flags);
/* callback_fn: long (*)(__u32 index, void *ctx), as the programs pass it */
long bpf_loop(__u32 nr_loops, void *callback_fn, void *callback_ctx, __u64 flags);

/*
 * A place inside a program where the test may run other programs, as if
 * this one had been preempted there (AT_RACE_POINT in bpf/core.bpf.h).
 */
void shim_race_point(const char *where);
#define AT_RACE_POINT(where) shim_race_point(where)

#endif
