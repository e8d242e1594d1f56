/* SPDX-License-Identifier: MIT */
/*
 * The traced process, seen through /proc: does it exist, what is it called,
 * which ELF files does it run (reached through /proc/PID/exe and
 * /proc/PID/root, so a target in another mount namespace works too), what
 * are its threads called, and a pidfd that tells when it exits.
 */
#ifndef TARGET_H
#define TARGET_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#define TARGET_COMM_LEN 16

struct target {
	pid_t pid;
	int pidfd;		/* readable once the process has exited */
	/*
	 * /proc/PID/mem, opened while privileged: reads need no capability.
	 * -1 when it could not be opened (it is mode 0600: a process of another
	 * user, read without CAP_DAC_OVERRIDE); then strings are read with
	 * process_vm_readv, which needs CAP_SYS_PTRACE at every call.
	 */
	int memfd;
	char comm[TARGET_COMM_LEN];
	char exe[64];		/* "/proc/PID/exe" */
};

/* -ESRCH: no such process; -EPERM: not ours to look at. */
int target__open(struct target *t, pid_t pid);
/* Process pid's name (/proc/PID/comm) into comm: 0, or -errno (-ENOENT: gone). */
int target__comm(pid_t pid, char *comm, size_t len);
void target__close(struct target *t);
int target__alive(const struct target *t);

/* Matches model_thread_comm_fn and model_read_str_fn. */
int target__thread_comm(void *target, uint32_t tid, char *comm, size_t len);
int target__read_str(void *target, uint64_t addr, char *buf, size_t len);

/* An executable mapping of a file: file offset `offset` lives at address `start`. */
struct target_mapping {
	uint64_t start, end, offset;
};

/*
 * Calls fn for every distinct ELF file mapped executable in the target, with
 * a path that opens it from our namespace, the path the target knows it by,
 * and its (first) executable mapping. Stops early, returning fn's value, when
 * fn returns nonzero.
 */
typedef int (*target_binary_fn)(void *ctx, const char *path, const char *target_path,
				const struct target_mapping *map);
int target__for_each_binary(const struct target *t, target_binary_fn fn, void *ctx);

/* An executable mapping of a file, as /proc/PID/maps lists it. */
struct target_exec_mapping {
	struct target_mapping map;
	char file[4096];	/* as the kernel shows it: " (deleted)" after a file gone */
};
/*
 * The next line of a maps file (/proc/PID/maps: "start-end perms offset dev
 * inode path") that maps a file executable: 1 with *m, 0 at the end. What
 * target__for_each_binary reads, apart for the fuzzer (tests/fuzz/fuzz_proc.c).
 */
int target__next_exec_mapping(FILE *maps, struct target_exec_mapping *m);

#endif
