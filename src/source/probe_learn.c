// SPDX-License-Identifier: MIT
/*
 * How each form is learnt. The forms are laid out on a memfd, one slot
 * each, and one uprobe_multi link puts a probe on every form at once,
 * before any process maps the file: the kernel then judges each probe when
 * a process maps it, and one it refuses is simply not placed (the same
 * silent refusal a process that maps a probed file later meets). Then, per
 * form, a child process maps the file and tells: whether the breakpoint is
 * there (a refused probe leaves the form's own first byte), whether running
 * the form three times left an [uprobes] page (single-stepped out of line)
 * or an [uprobes-trampoline] (optimized) in its address space, and what a
 * hit wrote into the red zone below the stack pointer. A child each,
 * because those pages, once made, stay for the life of the process. One
 * link, because removing a uprobe waits for an RCU grace period (about
 * 80 ms here), once per link.
 */
#include "source/probe_learn.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <linux/perf_event.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <bpf/bpf.h>

#include "lib/util.h"
#include "source/uprobe_multi.h"

#define SLOT 128		/* bytes of code a form has: prologue, form, epilogue */
#define RED_ZONE 128		/* below the stack pointer, the bytes a function may use */
#define RUNS 3			/* the first hit is the one that may optimize the probe */
#define CANARY 0x5a5a5a5a5a5a5a5aull
#define CHILD_SECONDS 5		/* a form that hangs its child is unknown */

/*
 * Around a form that leaves the stack pointer alone: fill the red zone with
 * the canary, run the form, copy the red zone out to the buffer the slot is
 * called with, return.
 *   mov %rdi,%rdx; lea -0x80(%rsp),%rdi; mov $16,%ecx; movabs $CANARY,%rax; rep stosq
 */
static const uint8_t prologue[] = {
	0x48, 0x89, 0xfa, 0x48, 0x8d, 0x7c, 0x24, 0x80, 0xb9, 0x10, 0x00, 0x00, 0x00,
	0x48, 0xb8, 0x5a, 0x5a, 0x5a, 0x5a, 0x5a, 0x5a, 0x5a, 0x5a, 0xf3, 0x48, 0xab,
};
/*   lea -0x80(%rsp),%rsi; mov %rdx,%rdi; mov $16,%ecx; rep movsq; ret */
static const uint8_t epilogue[] = {
	0x48, 0x8d, 0x74, 0x24, 0x80, 0x48, 0x89, 0xd7, 0xb9, 0x10,
	0x00, 0x00, 0x00, 0xf3, 0x48, 0xa5, 0xc3,
};
_Static_assert(sizeof(prologue) + PROBE_FORM_MAX_LEN + sizeof(epilogue) <= SLOT, "a slot holds a form");

/* What a child saw of its form's probe. */
struct outcome {
	uint8_t placed;		/* the probed byte once mapped: 0xcc if the breakpoint is there */
	bool xol, trampoline;	/* the pages a single step and an optimized probe leave */
	uint8_t clobbers;	/* the deepest red-zone byte a hit overwrote, from the stack pointer */
};

/* Lays out every form's slot; where each form's probe goes in offsets. */
static void lay_out(uint8_t *code, uint64_t *offsets)
{
	memset(code, 0xcc, nr_probe_forms * SLOT);
	for (size_t i = 0; i < nr_probe_forms; i++) {
		const struct probe_form *f = &probe_forms[i];
		uint8_t *p = code + i * SLOT;

		if (!f->stack) {
			memcpy(p, prologue, sizeof(prologue));
			p += sizeof(prologue);
		}
		offsets[i] = (uint64_t)(p - code);
		memcpy(p, f->bytes, f->len);
		p += f->len;
		if (f->ret)
			continue;
		memcpy(p, f->undo, f->undo_len);
		p += f->undo_len;
		if (f->stack)
			*p = 0xc3;
		else
			memcpy(p, epilogue, sizeof(epilogue));
	}
}

/* Whether /proc/self/maps names a special mapping (tag: "[uprobes]"). */
static void scan_maps(struct outcome *o)
{
	static char buf[1 << 18];
	size_t len = 0;
	ssize_t n;
	int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return;
	while (len < sizeof(buf) - 1 && (n = read(fd, buf + len, sizeof(buf) - 1 - len)) > 0)
		len += (size_t)n;
	close(fd);
	buf[len] = '\0';
	o->xol = strstr(buf, "[uprobes]") != NULL;
	o->trampoline = strstr(buf, "[uprobes-trampoline]") != NULL;
}

/* In a fresh child: map the forms, run form i, say what happened on out. Never returns. */
static void __attribute__((noreturn)) run_form(int memfd, size_t i, uint64_t at, int out)
{
	const struct probe_form *f = &probe_forms[i];
	uint64_t zone[RED_ZONE / 8];
	struct outcome o = { 0 };
	uint8_t *code;
	void (*slot)(uint64_t *);

	alarm(CHILD_SECONDS);
	code = mmap(NULL, nr_probe_forms * SLOT, PROT_READ | PROT_EXEC, MAP_PRIVATE, memfd, 0);
	if (code == MAP_FAILED)
		_exit(1);
	o.placed = code[at];
	memcpy(&slot, &(void *){ code + i * SLOT }, sizeof(slot));
	for (int run = 0; run < RUNS; run++) {
		memset(zone, 0, sizeof(zone));
		slot(zone);
		for (int q = 0; !f->stack && q < RED_ZONE / 8; q++)
			if (zone[q] != CANARY) {
				if (RED_ZONE - 8 * q > o.clobbers)
					o.clobbers = (uint8_t)(RED_ZONE - 8 * q);
				break;
			}
	}
	scan_maps(&o);
	_exit(write(out, &o, sizeof(o)) == sizeof(o) ? 0 : 1);
}

/* Form i's verdict, from a child of its own; UNKNOWN (and why) if the child failed. */
static enum probe_verdict judge(int memfd, size_t i, uint64_t at, uint8_t *clobbers, char *why,
				size_t why_len)
{
	struct outcome o;
	int pipefd[2], status = 0;
	ssize_t n;
	pid_t pid;

	if (pipe2(pipefd, O_CLOEXEC))
		return PROBE_UNKNOWN;
	pid = fork();
	if (pid == 0) {
		close(pipefd[0]);
		run_form(memfd, i, at, pipefd[1]);
	}
	close(pipefd[1]);
	n = pid > 0 ? read(pipefd[0], &o, sizeof(o)) : -1;
	close(pipefd[0]);
	if (pid > 0)
		waitpid(pid, &status, 0);
	if (n != sizeof(o)) {
		snprintf(why, why_len, "the process that ran `%s` %s %d", probe_forms[i].name,
			 WIFSIGNALED(status) ? "died of signal" : "exited with status",
			 WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
		return PROBE_UNKNOWN;
	}
	*clobbers = o.clobbers;
	if (o.placed != 0xcc)
		return PROBE_REFUSED;
	if (o.trampoline)
		return PROBE_OPTIMIZED;
	return o.xol ? PROBE_STEPPED : PROBE_EMULATED;
}

/* An empty program for a uprobe_multi link: the probes are the point, not what they run. */
static int empty_prog(void)
{
	const struct bpf_insn insns[] = {
		{ .code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 0 },
		{ .code = BPF_JMP | BPF_EXIT },
	};
	LIBBPF_OPTS(bpf_prog_load_opts, opts,
		    .expected_attach_type = (enum bpf_attach_type)AT_BPF_TRACE_UPROBE_MULTI);
	int fd = bpf_prog_load(BPF_PROG_TYPE_KPROBE, "at_probe_rules", "GPL", insns, 2, &opts);

	return fd < 0 ? -errno : fd;
}

/* Kernels before uprobe_multi: a perf event per probe, for every process (on CPU 0). */
static int perf_probes(const char *path, const uint64_t *offsets, int *fds)
{
	struct perf_event_attr a = { .size = sizeof(a) };
	FILE *f = fopen("/sys/bus/event_source/devices/uprobe/type", "re");
	int type = -1;

	if (f) {
		if (fscanf(f, "%d", &type) != 1)
			type = -1;
		fclose(f);
	}
	if (type < 0)
		return -ENOTSUP;
	a.type = (uint32_t)type;
	a.config1 = (uint64_t)(uintptr_t)path;
	for (size_t i = 0; i < nr_probe_forms; i++) {
		a.config2 = offsets[i];
		fds[i] = (int)syscall(SYS_perf_event_open, &a, -1, 0, -1, PERF_FLAG_FD_CLOEXEC);
		if (fds[i] < 0)
			return -errno;
	}
	return 0;
}

int probe_learn(struct probe_rules *r, char *why, size_t why_len)
{
	static uint8_t code[PROBE_FORMS_MAX * SLOT];
	uint64_t offsets[PROBE_FORMS_MAX];
	int fds[PROBE_FORMS_MAX], prog, link = -1, memfd, err = 0;
	char path[64];

	memset(r, 0, sizeof(*r));
	for (size_t i = 0; i < nr_probe_forms; i++)
		fds[i] = -1;
	lay_out(code, offsets);
	memfd = memfd_create("asynctraced-probe-rules", MFD_CLOEXEC);
	if (memfd < 0 || write(memfd, code, nr_probe_forms * SLOT) != (ssize_t)(nr_probe_forms * SLOT)) {
		err = -errno;
		snprintf(why, why_len, "cannot write a code page: %s", strerror(errno));
		goto out;
	}
	snprintf(path, sizeof(path), "/proc/self/fd/%d", memfd);
	prog = empty_prog();
	if (prog >= 0)
		link = uprobe_multi__link(prog, path, offsets, NULL, NULL, (__u32)nr_probe_forms, false,
					  0);
	if (link < 0)
		err = perf_probes(path, offsets, fds);
	if (err) {
		snprintf(why, why_len, "cannot place uprobes: %s", strerror(-err));
		goto close_prog;
	}
	why[0] = '\0';
	for (size_t i = 0; i < nr_probe_forms; i++)
		r->verdict[i] = (uint8_t)judge(memfd, i, offsets[i], &r->clobbers[i], why, why_len);
	r->learnt = true;
close_prog:
	for (size_t i = 0; i < nr_probe_forms; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	if (link >= 0)
		close(link);
	if (prog >= 0)
		close(prog);
out:
	if (memfd >= 0)
		close(memfd);
	return err;
}

int probe_learn__kernel(char *buf, size_t size)
{
	char boot[64] = "";
	struct utsname u;
	int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, boot, sizeof(boot) - 1) : -1;

	if (fd >= 0)
		close(fd);
	if (n < 0 || uname(&u))
		return -errno;
	boot[strcspn(boot, "\n")] = '\0';
	snprintf(buf, size, "%s %s boot %s", u.release, u.version, boot);
	return 0;
}

/*
 * The cache's directory: root's alone (it says where probes go into other
 * processes' code), made if missing. An fd, or -errno.
 */
static int cache_dir(const char *dir)
{
	struct stat st;
	int fd;

	if (mkdir(dir, 0700) && errno != EEXIST)
		return -errno;
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) || st.st_uid != 0 || (st.st_mode & 022)) {
		close(fd);
		return -EPERM;
	}
	return fd;
}

static int read_cache(int dfd, const char *kernel, struct probe_rules *r)
{
	char text[16384];
	struct stat st;
	ssize_t n;
	int fd = openat(dfd, PROBE_RULES_FILE, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	int err;

	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_uid != 0 || (st.st_mode & 022) ||
	    st.st_size >= (off_t)sizeof(text)) {
		close(fd);
		return -EPERM;
	}
	n = read(fd, text, sizeof(text) - 1);
	err = n < 0 ? -errno : 0;
	close(fd);
	if (err)
		return err;
	text[n] = '\0';
	return probe_rules__parse(r, kernel, text);
}

/* Written whole under another name, then renamed: a reader never sees half. */
static void write_cache(int dfd, const char *kernel, const struct probe_rules *r)
{
	static const char tmp[] = PROBE_RULES_FILE ".tmp";
	char text[16384];
	size_t len;
	bool ok;
	int fd;

	if (probe_rules__format(r, kernel, text, sizeof(text)))
		return;
	len = strlen(text);
	unlinkat(dfd, tmp, 0);
	fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return;
	ok = write(fd, text, len) == (ssize_t)len;
	if (close(fd) || !ok || renameat(dfd, tmp, dfd, PROBE_RULES_FILE))
		unlinkat(dfd, tmp, 0);
}

int probe_learn__get(struct probe_rules *r, const char *dir, bool fresh, char *why,
		     size_t why_len)
{
	char kernel[512];
	int dfd = -1, err;

	why[0] = '\0';
	err = probe_learn__kernel(kernel, sizeof(kernel));
	if (err) {
		snprintf(why, why_len, "cannot tell which kernel runs: %s", strerror(-err));
		return err;
	}
	if (dir)
		dfd = cache_dir(dir);
	if (dfd >= 0 && !fresh && !read_cache(dfd, kernel, r)) {
		close(dfd);
		return 0;
	}
	err = probe_learn(r, why, why_len);
	if (!err && dfd >= 0)
		write_cache(dfd, kernel, r);
	if (dfd >= 0)
		close(dfd);
	return err;
}

int probe_learn__print(FILE *out)
{
	char kernel[512], text[16384], why[256];
	struct probe_rules r;
	int err;

	if (geteuid() != 0) {
		err_msg("probe-rules needs root: it places uprobes (run it with sudo)\n");
		return -EPERM;
	}
	err = probe_learn__get(&r, PROBE_RULES_DIR, true, why, sizeof(why));
	if (!err)
		err = probe_learn__kernel(kernel, sizeof(kernel));
	if (!err)
		err = probe_rules__format(&r, kernel, text, sizeof(text));
	if (err) {
		err_msg("cannot learn the kernel's uprobe rules: %s\n", why[0] ? why : strerror(-err));
		return err;
	}
	if (why[0])
		warn_msg("%s: that form is unknown\n", why);
	fputs(text, out);
	return 0;
}
