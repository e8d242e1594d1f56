/* SPDX-License-Identifier: MIT */
/*
 * uprobe_multi links (Linux 6.6): many uprobes in one link, removed with one
 * RCU grace period instead of one each. libbpf 1.1 predates them, so the
 * link is made with the bpf syscall; the constants are the kernel's ABI.
 */
#ifndef UPROBE_MULTI_H
#define UPROBE_MULTI_H

#include <stdbool.h>
#include <stdint.h>

#include <linux/types.h>

#define AT_BPF_TRACE_UPROBE_MULTI 48
#define AT_BPF_F_UPROBE_MULTI_RETURN 1u

struct link_create_uprobe_multi {
	__u32 prog_fd;
	__u32 target_fd;
	__u32 attach_type;
	__u32 flags;
	__u64 path;
	__u64 offsets;
	__u64 ref_ctr_offsets;
	__u64 cookies;
	__u32 cnt;
	__u32 multi_flags;
	__u32 pid;
};

/*
 * One link of prog at offsets (with cookies, or none; with the file offsets
 * of USDT semaphores the kernel raises while attached, or none) in the file
 * at path, for process pid (0: every process that maps it); its fd, or
 * -errno.
 */
int uprobe_multi__link(int prog_fd, const char *path, const uint64_t *offsets,
		       const uint64_t *ref_ctrs, const uint64_t *cookies, __u32 cnt, bool ret,
		       __u32 pid);

#endif
