// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * The floor: empty programs at the same attach points, nothing recorded
 * (--empty-programs; what the benchmarks measure against).
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "maps.bpf.h"

/*
 * --empty-programs (benchmarks): these replace every program above at the
 * same attach points, and do nothing. What tracing costs beyond them is our
 * BPF code; what they cost is the probe traps and the hooks themselves.
 */
SEC("?usdt")
int floor_usdt(struct pt_regs *ctx)
{
	return 0;
}

SEC("?uprobe")
int floor_uprobe(struct pt_regs *ctx)
{
	return 0;
}

SEC("?uretprobe")
int floor_uretprobe(struct pt_regs *ctx)
{
	return 0;
}

SEC("?tp_btf/sched_switch")
int BPF_PROG(floor_sched_switch)
{
	return 0;
}

SEC("?raw_tp/sched_switch")
int BPF_PROG(floor_sched_switch_raw)
{
	return 0;
}
