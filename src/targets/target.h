/* SPDX-License-Identifier: MIT */
/*
 * The traced process, seen through /proc: does it exist, what is it called,
 * which ELF files does it run (reached through /proc/PID/exe and
 * /proc/PID/root, so a target in another mount namespace works too), what
 * are its threads called, and a pidfd that tells when it exits.
 */
#ifndef TARGET_H
#define TARGET_H

#include <stdbool.h>
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
	dev_t exe_dev;		/* what it named when opened (0, 0: unknown) */
	ino_t exe_ino;
};

/* -ESRCH: no such process; -EPERM: not ours to look at. */
int target__open(struct target *t, pid_t pid);
/* Process pid's name (/proc/PID/comm) into comm: 0, or -errno (-ENOENT: gone). */
int target__comm(pid_t pid, char *comm, size_t len);
void target__close(struct target *t);
int target__alive(const struct target *t);
/*
 * Whether the process still runs the program it ran when opened: alive, and
 * no exec since (its executable the same file). Checked just before its
 * probes go in: what was read of it then is of another program.
 */
bool target__same_program(const struct target *t);

/* Matches model_thread_comm_fn and model_read_str_fn. */
int target__thread_comm(void *target, uint32_t tid, char *comm, size_t len);
int target__read_str(void *target, uint64_t addr, char *buf, size_t len);

/* An executable mapping of a file: file offset `offset` lives at address `start`. */
struct target_mapping {
	uint64_t start, end, offset;
};

/*
 * An ELF file the target maps executable, opened by us: what is read of it
 * and where its probes go is this very file, whatever its name names later
 * (a process that execs, a path swapped in the target's mount namespace).
 */
struct target_file {
	int fd;			/* O_RDONLY | O_NONBLOCK, a regular file */
	char path[32];		/* "/proc/self/fd/N": reads it, and attaches to it */
	char *target_path;	/* what the target calls it */
	struct target_mapping map;	/* its first executable mapping */
	dev_t dev;
	ino_t ino;
};

struct target_files {
	struct target_file *f;
	size_t nr;
	int exe;		/* the executable's index; -1: not among them */
};

/*
 * Opens every distinct file the target maps executable: through
 * /proc/PID/map_files (the mapped file itself, which needs CAP_SYS_ADMIN),
 * else by its name under /proc/PID/root (its mount namespace), when that
 * names a file of the inode the mapping shows. 0; -ESRCH: gone; -EACCES:
 * not one reachable, for want of the right to (another user's process,
 * without CAP_SYS_PTRACE); -errno.
 */
int target__open_files(const struct target *t, struct target_files *fs);
void target_files__close(struct target_files *fs);

/* An executable mapping of a file, as /proc/PID/maps lists it. */
struct target_exec_mapping {
	struct target_mapping map;
	unsigned long inode;	/* as the mapping shows it */
	char file[4096];	/* as the kernel shows it: " (deleted)" after a file gone */
};
/*
 * The next line of a maps file (/proc/PID/maps: "start-end perms offset dev
 * inode path") that maps a file executable: 1 with *m, 0 at the end. What
 * target__open_files reads, apart for the fuzzer (tests/fuzz/fuzz_proc.c).
 */
int target__next_exec_mapping(FILE *maps, struct target_exec_mapping *m);

#endif
