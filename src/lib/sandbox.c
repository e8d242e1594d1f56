// SPDX-License-Identifier: MIT
#include "lib/sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include <netinet/in.h>

#include <linux/bpf.h>
#include <linux/landlock.h>
#include <linux/perf_event.h>
#include <seccomp.h>
#include <sys/capability.h>

#include "lib/util.h"

bool sandbox__has_cap(int cap)
{
	cap_flag_value_t v = CAP_CLEAR;
	cap_t c = cap_get_proc();

	if (!c)
		return geteuid() == 0;
	if (cap_get_flag(c, (cap_value_t)cap, CAP_EFFECTIVE, &v))
		v = CAP_CLEAR;
	cap_free(c);
	return v == CAP_SET;
}

bool sandbox__privileged(void)
{
	return sandbox__has_cap(CAP_SYS_ADMIN) ||
	       (sandbox__has_cap(CAP_BPF) && sandbox__has_cap(CAP_PERFMON));
}

/*
 * Every capability goes but those in keep (bits by number) that we hold:
 * each one the tracer needs is spent on loading and attaching, but for
 * CAP_SYS_PTRACE when the target's strings can only be read with
 * process_vm_readv (see target.h). The bounding set goes too when we hold
 * CAP_SETPCAP (root), so that not even a program it could exec would get a
 * capability back; no_new_privs already stops setuid and file capabilities
 * on exec.
 */
int sandbox__drop_privileges(uint64_t keep)
{
	cap_flag_value_t setpcap = CAP_CLEAR, have;
	cap_t caps = cap_get_proc(), now = cap_init();
	int err = 0;

	if (!caps || !now) {
		err = -errno;
		goto out;
	}
	for (cap_value_t c = 0; c < 64 && c < (cap_value_t)cap_max_bits(); c++) {
		if (!(keep & (1ull << c)) || cap_get_flag(caps, c, CAP_PERMITTED, &have) ||
		    have != CAP_SET)
			continue;
		if (cap_set_flag(now, CAP_PERMITTED, 1, &c, CAP_SET) ||
		    cap_set_flag(now, CAP_EFFECTIVE, 1, &c, CAP_SET)) {
			err = -errno;
			goto out;
		}
	}
	cap_get_flag(caps, CAP_SETPCAP, CAP_EFFECTIVE, &setpcap);
	for (cap_value_t c = 0; setpcap == CAP_SET && c < (cap_value_t)cap_max_bits(); c++)
		if ((c >= 64 || !(keep & (1ull << c))) && cap_drop_bound(c) && errno != EINVAL) {
			err = -errno;
			goto out;
		}
	if (CAP_AMBIENT_SUPPORTED() && cap_reset_ambient()) {
		err = -errno;
		goto out;
	}
	if (cap_set_proc(now)) {
		err = -errno;
		goto out;
	}
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
		err = -errno;
out:
	cap_free(caps);
	cap_free(now);
	return err;
}

/*
 * A refused call fails with EPERM, as SCMP_ACT_ERRNO would make it, but
 * through SIGSYS so that it is also said and counted: a tracer quietly
 * failing a call in its loop would lose the trace without a word, and one
 * killed for it (SCMP_ACT_KILL_PROCESS) would lose it for sure.
 */
#define MAX_REFUSED 16

static struct {
	int nr;
	unsigned long count;
} refused[MAX_REFUSED];
static unsigned long refused_total;

#if defined(__x86_64__)
#define SET_RETURN(uc, v) ((uc)->uc_mcontext.gregs[REG_RAX] = (v))
#elif defined(__aarch64__)
#define SET_RETURN(uc, v) ((uc)->uc_mcontext.regs[0] = (v))
#endif

#ifdef SET_RETURN
/* Async-signal-safe: a message built by hand, write(2), counters. */
static void on_sigsys(int sig, siginfo_t *si, void *ctx)
{
	static const char head[] = "asynctraced: the sandbox refused system call ";
	static const char tail[] = " (a bug: please report it; --no-sandbox turns the sandbox off)\n";
	char msg[sizeof(head) + 12 + sizeof(tail)], num[12];
	int nr = si->si_syscall, n = 0, len = 0, saved = errno;
	size_t i;

	SET_RETURN((ucontext_t *)ctx, -EPERM);
	__atomic_fetch_add(&refused_total, 1, __ATOMIC_RELAXED);
	/* its slot: the one holding it, else the first free (numbers kept + 1) */
	for (i = 0; i < MAX_REFUSED; i++) {
		int seen = 0;

		if (__atomic_compare_exchange_n(&refused[i].nr, &seen, nr + 1, false,
						__ATOMIC_RELAXED, __ATOMIC_RELAXED) ||
		    seen == nr + 1)
			break;
	}
	if (i < MAX_REFUSED && __atomic_fetch_add(&refused[i].count, 1, __ATOMIC_RELAXED))
		return; /* said once per call already */
	do
		num[n++] = (char)('0' + nr % 10);
	while ((nr /= 10) && n < (int)sizeof(num));
	memcpy(msg, head, sizeof(head) - 1);
	len = sizeof(head) - 1;
	while (n)
		msg[len++] = num[--n];
	memcpy(msg + len, tail, sizeof(tail) - 1);
	len += sizeof(tail) - 1;
	/* nothing to do if stderr is gone; the count still tells at the end */
	if (write(STDERR_FILENO, msg, (size_t)len) < 0)
		n = 0;
	errno = saved;
}
#endif

unsigned long sandbox__refused(char *buf, size_t len)
{
	size_t used = 0;

	if (len)
		buf[0] = '\0';
	for (int i = 0; i < MAX_REFUSED && refused[i].nr && used < len; i++) {
		char *name = seccomp_syscall_resolve_num_arch(SCMP_ARCH_NATIVE, refused[i].nr - 1);
		int n = snprintf(buf + used, len - used, "%s%s x%lu", used ? ", " : "",
				 name ? name : "?", refused[i].count);

		free(name);
		if (n < 0)
			break;
		used += (size_t)n;
	}
	return refused_total;
}

bool sandbox__say_refused(void)
{
	char calls[512];
	unsigned long n = sandbox__refused(calls, sizeof(calls));

	if (n)
		warn_msg("the sandbox refused %lu system calls (%s): some of the output may be "
			"missing; --no-sandbox turns the sandbox off\n",
			n, calls);
	return n != 0;
}

/*
 * What the loop and the shutdown call, measured with strace -f after the
 * drop in every mode (trace to JSON, protobuf and standard output, maps
 * only, record, the live view, SIGUSR1, tokio and USDT targets), plus the
 * few a rarer path takes (marked). docs/security.md says why each is here.
 */
static const int allowed[] = {
	/* rings and outputs; thread names; the target's strings (mem file) */
	SCMP_SYS(read), SCMP_SYS(write), SCMP_SYS(pread64), SCMP_SYS(process_vm_readv),
	SCMP_SYS(close),
	SCMP_SYS(newfstatat), SCMP_SYS(fstat), SCMP_SYS(lseek), SCMP_SYS(dup),
	/* the event loop: rings, signalfd, the target's pidfd, standard output */
	SCMP_SYS(epoll_create1), SCMP_SYS(epoll_ctl), SCMP_SYS(epoll_wait),
	SCMP_SYS(epoll_pwait),
	/* malloc; realloc of large blocks (rarer); thread stacks */
	SCMP_SYS(brk), SCMP_SYS(munmap), SCMP_SYS(mremap), SCMP_SYS(madvise),
	/* the clock (vDSO, rarely a call); the wait for a record still being written */
	SCMP_SYS(clock_gettime), SCMP_SYS(clock_nanosleep),
	/* signals: the mask around shutdown, glibc's handler at the first thread,
	 * the return from SIGSYS; abort() on a failed assertion (rarer) */
	SCMP_SYS(rt_sigprocmask), SCMP_SYS(rt_sigaction), SCMP_SYS(rt_sigreturn),
	SCMP_SYS(getpid), SCMP_SYS(gettid), SCMP_SYS(tgkill),
	/* glibc's qsort asks how much memory there is before it sorts a large array */
	SCMP_SYS(sysinfo),
	/* the threads that detach uprobes in parallel (tracer.c) */
	SCMP_SYS(futex), SCMP_SYS(set_robust_list), SCMP_SYS(rseq), SCMP_SYS(exit),
	SCMP_SYS(exit_group),
};

/*
 * --metrics: libmicrohttpd's thread accepts scrapes on the socket bound
 * before the filter (TCP, or a unix socket), and answers them; it creates
 * no socket and connects nowhere (socket, connect and bind stay refused).
 * It waits on epoll, as the loop does (epoll_wait, epoll_ctl). Measured
 * with strace -f over scrapes in both formats on TCP and a unix socket,
 * connections over the limits, a client gone mid-request, and the stop.
 */
static const int serving[] = {
	/*
	 * accept (the socket non-blocking and close-on-exec at once: no
	 * fcntl), read the request, answer (sendmsg: headers and body at
	 * once; sendto: headers alone), end it; shutdown of the listening
	 * socket also wakes the thread to stop
	 */
	SCMP_SYS(accept4), SCMP_SYS(recvfrom), SCMP_SYS(sendmsg), SCMP_SYS(sendto),
	SCMP_SYS(shutdown),
	/* the tracer's own CPU time (process_cpu_seconds_total) */
	SCMP_SYS(getrusage),
};

/* bpf(2) commands on maps we hold; nothing that loads, creates or attaches. */
/*
 * reading the maps; freeing the state of a process gone (tracer__forget);
 * running an iterator attached before (a tokio program's threads read
 * again until its runtime runs: thread_ptrs.h)
 */
static const int bpf_cmds[] = { BPF_MAP_LOOKUP_ELEM, BPF_MAP_LOOKUP_BATCH, BPF_MAP_GET_NEXT_KEY,
				BPF_MAP_UPDATE_ELEM, BPF_MAP_DELETE_ELEM, BPF_ITER_CREATE };

int sandbox__allow_memory(scmp_filter_ctx ctx)
{
	int err = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(mmap), 1,
				   SCMP_A2(SCMP_CMP_MASKED_EQ, PROT_EXEC, 0));

	return err ? err
		   : seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(mprotect), 1,
				      SCMP_A2(SCMP_CMP_MASKED_EQ, PROT_EXEC, 0));
}

/* Calls allowed only with some arguments: each rule's comment says which. */
static int build_filter(scmp_filter_ctx ctx, unsigned flags, int dirfd, pid_t child,
			pid_t analyser)
{
	const uint64_t writing = O_WRONLY | O_RDWR | O_CREAT | O_TRUNC | O_APPEND | O_PATH;
	int err = 0;

	for (size_t i = 0; !err && i < sizeof(allowed) / sizeof(allowed[0]); i++)
		err = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, allowed[i], 0);
	for (size_t i = 0; !err && (flags & SANDBOX_SERVE) && i < sizeof(serving) / sizeof(serving[0]);
	     i++)
		err = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, serving[i], 0);
	/* --metrics on TCP: TCP_NODELAY and TCP_CORK around an answer; no other level */
	if (!err && (flags & SANDBOX_SERVE))
		err = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(setsockopt), 1,
				       SCMP_A1(SCMP_CMP_EQ, (uint64_t)IPPROTO_TCP));
	for (size_t i = 0; !err && i < sizeof(bpf_cmds) / sizeof(bpf_cmds[0]); i++)
		err = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(bpf), 1,
				       SCMP_A0(SCMP_CMP_EQ, (uint64_t)bpf_cmds[i]));
	/*
	 * --escalate: the probes of a traced process attached, through the
	 * descriptors of its files held since they were read (a path to
	 * /proc/self/fd, which the kernel resolves); nothing loaded
	 */
	if (!err && (flags & SANDBOX_ATTACH))
		err = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(bpf), 1,
				       SCMP_A0(SCMP_CMP_EQ, (uint64_t)BPF_LINK_CREATE));
	/*
	 * --flight-recorder: its dumps, made, renamed and removed relative to
	 * the --dump-dir descriptor opened before the filter, and only there;
	 * reading the directory to keep it under its size
	 */
	if (!err && (flags & SANDBOX_DUMPS) && dirfd >= 0) {
		err = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(openat), 1,
				       SCMP_A0(SCMP_CMP_EQ, (uint64_t)dirfd));
		if (!err)
			err = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(renameat), 2,
					       SCMP_A0(SCMP_CMP_EQ, (uint64_t)dirfd),
					       SCMP_A2(SCMP_CMP_EQ, (uint64_t)dirfd));
		if (!err)
			err = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(renameat2), 2,
					       SCMP_A0(SCMP_CMP_EQ, (uint64_t)dirfd),
					       SCMP_A2(SCMP_CMP_EQ, (uint64_t)dirfd));
		if (!err)
			err = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(unlinkat), 1,
					       SCMP_A0(SCMP_CMP_EQ, (uint64_t)dirfd));
		if (!err)
			err = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(getdents64), 0);
		/* fdopendir asks the descriptor's flags */
		if (!err)
			err = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(fcntl), 0);
	}
	/*
	 * --stacks: samples sent to the analyser that unwinds them and its
	 * frames read back, within a deadline (poll); an image mapped since
	 * (dlopen) handed over with its files (sendmsg); an analyser that
	 * failed killed and waited for: that process and no other
	 */
	if (!err && (flags & SANDBOX_STACKS) && analyser > 0) {
		static const int talking[] = { SCMP_SYS(sendto), SCMP_SYS(sendmsg),
					       SCMP_SYS(recvfrom), SCMP_SYS(recvmsg),
					       SCMP_SYS(poll) };

		for (size_t i = 0; !err && i < sizeof(talking) / sizeof(talking[0]); i++)
			err = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, talking[i], 0);
		if (!err)
			err = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(kill), 1,
					       SCMP_A0(SCMP_CMP_EQ, (uint64_t)analyser));
		if (!err)
			err = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(wait4), 1,
					       SCMP_A0(SCMP_CMP_EQ, (uint64_t)analyser));
	}
	/*
	 * run: its command, held at its entry point under ptrace, let go once
	 * attached (PTRACE_DETACH), signalled when tracing is stopped by one,
	 * and waited for; that process and no other. Each summary is rendered
	 * into a memfd for the gates to judge (anonymous memory, never
	 * executable: mmap's rule holds), whose JSON parser (json-c) seeds its
	 * hash tables from getrandom
	 */
	if (!err && (flags & SANDBOX_CHILD) && child > 0) {
		err = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(ptrace), 2,
				       SCMP_A0(SCMP_CMP_EQ, (uint64_t)PTRACE_DETACH),
				       SCMP_A1(SCMP_CMP_EQ, (uint64_t)child));
		if (!err)
			err = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(kill), 1,
					       SCMP_A0(SCMP_CMP_EQ, (uint64_t)child));
		if (!err)
			err = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(wait4), 1,
					       SCMP_A0(SCMP_CMP_EQ, (uint64_t)child));
		if (!err)
			err = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(memfd_create), 0);
		if (!err)
			err = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(getrandom), 0);
	}
	/* read-only opens: /proc/PID/task/TID/comm, a thread's name */
	if (!err)
		err = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(openat), 1,
				       SCMP_A2(SCMP_CMP_MASKED_EQ, writing, 0));
	if (!err)
		err = sandbox__allow_memory(ctx);
	/*
	 * Threads, not processes: clone only with CLONE_THREAD. clone3 passes
	 * its flags in memory a filter cannot read, so it answers ENOSYS, and
	 * glibc falls back to clone.
	 */
	if (!err)
		err = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(clone), 1,
				       SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_THREAD, CLONE_THREAD));
	if (!err)
		err = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
	/*
	 * detaching a uprobe's perf event (libbpf), and whether an output is a
	 * terminal (isatty: TCGETS) and its size (the live view and the report
	 * fit it: src/sinks/layout.c); nothing else
	 */
	if (!err)
		err = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(ioctl), 1,
				       SCMP_A1(SCMP_CMP_EQ, (uint64_t)PERF_EVENT_IOC_DISABLE));
	if (!err)
		err = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(ioctl), 1,
				       SCMP_A1(SCMP_CMP_EQ, (uint64_t)TCGETS));
	if (!err)
		err = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(ioctl), 1,
				       SCMP_A1(SCMP_CMP_EQ, (uint64_t)TIOCGWINSZ));
	return err;
}

/*
 * Landlock: the files the sandboxed side may still open. The seccomp
 * filter sees an openat's directory descriptor and flags, not its path, and
 * an absolute path ignores the descriptor: without this, --dump-dir's rule
 * would let it create a file anywhere, and the read-only rule read any.
 * Writing is confined to the dump directory; reading to /proc (thread
 * names) and the time zone (libmicrohttpd's Date header), or anything with
 * --stacks (libdwfl may open an image's debug file). Rights a kernel's
 * Landlock does not know are left out; a kernel without Landlock leaves
 * the seccomp filter alone (0). It binds this thread and those it starts
 * (the detach threads), not one started before (libmicrohttpd's).
 */
#ifndef LANDLOCK_ACCESS_FS_REFER
#define LANDLOCK_ACCESS_FS_REFER (1ULL << 13)
#endif
#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14)
#endif

static int allow_beneath(int ruleset, int fd, const char *path, uint64_t access)
{
	struct landlock_path_beneath_attr rule = { .allowed_access = access };
	int err = 0;

	rule.parent_fd = fd >= 0 ? fd : open(path, O_PATH | O_CLOEXEC);
	if (rule.parent_fd < 0)
		return errno == ENOENT ? 0 : -errno; /* no time zone file: nothing to allow */
	if (syscall(__NR_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &rule, 0))
		err = -errno;
	if (fd < 0)
		close(rule.parent_fd);
	return err;
}

static int confine_files(unsigned flags, int dirfd)
{
	const uint64_t reading = LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR;
	uint64_t handled = LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE | reading |
			   LANDLOCK_ACCESS_FS_REMOVE_DIR | LANDLOCK_ACCESS_FS_REMOVE_FILE |
			   LANDLOCK_ACCESS_FS_MAKE_CHAR | LANDLOCK_ACCESS_FS_MAKE_DIR |
			   LANDLOCK_ACCESS_FS_MAKE_REG | LANDLOCK_ACCESS_FS_MAKE_SOCK |
			   LANDLOCK_ACCESS_FS_MAKE_FIFO | LANDLOCK_ACCESS_FS_MAKE_BLOCK |
			   LANDLOCK_ACCESS_FS_MAKE_SYM;
	uint64_t dumps = LANDLOCK_ACCESS_FS_WRITE_FILE | reading | LANDLOCK_ACCESS_FS_REMOVE_FILE |
			 LANDLOCK_ACCESS_FS_MAKE_REG;
	struct landlock_ruleset_attr attr = { 0 };
	long abi = syscall(__NR_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
	int ruleset, err = 0;

	if (abi < 1)
		return 0; /* no Landlock here (or it is off): seccomp alone */
	if (abi >= 2) { /* renaming a dump into place */
		handled |= LANDLOCK_ACCESS_FS_REFER;
		dumps |= LANDLOCK_ACCESS_FS_REFER;
	}
	if (abi >= 3) {
		handled |= LANDLOCK_ACCESS_FS_TRUNCATE;
		dumps |= LANDLOCK_ACCESS_FS_TRUNCATE;
	}
	attr.handled_access_fs = handled;
	ruleset = (int)syscall(__NR_landlock_create_ruleset, &attr, sizeof(attr), 0);
	if (ruleset < 0)
		return -errno;
	err = allow_beneath(ruleset, -1, "/proc", reading);
	if (!err)
		err = allow_beneath(ruleset, -1, "/etc/localtime", LANDLOCK_ACCESS_FS_READ_FILE);
	if (!err)
		err = allow_beneath(ruleset, -1, "/usr/share/zoneinfo", reading);
	if (!err && (flags & SANDBOX_DUMPS) && dirfd >= 0)
		err = allow_beneath(ruleset, dirfd, NULL, dumps);
	if (!err && syscall(__NR_landlock_restrict_self, ruleset, 0))
		err = -errno;
	close(ruleset);
	return err;
}

int sandbox__filter(unsigned flags, int dirfd, pid_t child, pid_t analyser)
{
#ifdef SET_RETURN
	const uint32_t deny = SCMP_ACT_TRAP;
	struct sigaction sa = { .sa_sigaction = on_sigsys, .sa_flags = SA_SIGINFO };
#else
	const uint32_t deny = SCMP_ACT_ERRNO(EPERM);
#endif
	scmp_filter_ctx ctx = seccomp_init(deny);
	int err;

	if (!ctx)
		return -ENOMEM;
#ifdef SET_RETURN
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGSYS, &sa, NULL)) {
		err = -errno;
		goto out;
	}
#endif
	err = confine_files(flags, dirfd);
	/* the detach threads start after the filter; any other thread gets it too */
	if (!err)
		err = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_TSYNC, 1);
	if (!err)
		err = build_filter(ctx, flags, dirfd, child, analyser);
	if (!err)
		err = seccomp_load(ctx);
#ifdef SET_RETURN
out:
#endif
	seccomp_release(ctx);
	return err;
}
