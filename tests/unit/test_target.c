// SPDX-License-Identifier: MIT
/* The /proc and ELF side of finding a target, tried on ourselves (no root). */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <elf.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <setjmp.h>
#include <cmocka.h>

#include "lib/file_copy.h"
#include "targets/discover.h"
#include "targets/elf_image.h"
#include "targets/scan.h"
#include "targets/target.h"
#include "targets/usdt/usdt_notes.h"

static const char *build(void)
{
	return getenv("BUILD") ? getenv("BUILD") : "build";
}

static int file_byte(const char *path, uint64_t off)
{
	unsigned char c;
	int fd = open(path, O_RDONLY);

	assert_true(fd >= 0);
	assert_int_equal(pread(fd, &c, 1, (off_t)off), 1);
	close(fd);
	return c;
}

static void probes_of_the_sample_executor(void **state)
{
	static const char *const want[] = { "task_spawn", "poll_begin",  "poll_end",
					    "wake",	  "steal",	 "worker_park",
					    "worker_unpark" };
	struct usdt_probe *probes;
	char path[512];
	size_t nr;

	snprintf(path, sizeof(path), "%s/sample-executor", build());
	assert_int_equal(usdt__list(path, "asynctrace", &probes, &nr), 0);
	assert_int_equal(nr, 7);
	for (size_t i = 0; i < 7; i++) {
		size_t j;

		for (j = 0; j < nr; j++)
			if (!strcmp(probes[j].name, want[i]))
				break;
		assert_true(j < nr);
		assert_string_equal(probes[j].provider, "asynctrace");
		assert_int_not_equal(probes[j].pc, 0);
		assert_int_not_equal(probes[j].semaphore, 0); /* every probe has one */
		assert_true(probes[j].args_known);
		assert_true(probes[j].args[0]); /* every probe has arguments... */
		/*
		 * where its uprobe goes: the nop at the probe (sdt.h's nop, or
		 * the 5-byte one the executor's probe functions start with), at
		 * that file offset; its semaphore: 2 bytes, 0 in the file
		 */
		assert_true(file_byte(path, probes[j].offset) == 0x90 ||
			    (file_byte(path, probes[j].offset) == 0x0f &&
			     file_byte(path, probes[j].offset + 1) == 0x1f));
		assert_int_not_equal(probes[j].sema_offset, 0);
		assert_int_equal(file_byte(path, probes[j].sema_offset), 0);
		assert_int_equal(file_byte(path, probes[j].sema_offset + 1), 0);
	}
	/* ...which the loader can fix before loading (one site a probe) */
	for (size_t j = 0; j < nr; j++) {
		struct at_usdt_spec spec;

		assert_int_equal(usdt__parse_args(probes[j].args, &spec), 0);
		assert_true(spec.known);
		assert_true(spec.nr_args >= 1);
	}
	free(probes);
	/* another provider's name filters everything out */
	assert_int_equal(usdt__list(path, "nosuchprovider", &probes, &nr), 0);
	assert_int_equal(nr, 0);
	free(probes);
	/*
	 * sample mode's thread-local: asynctrace_current_tpoff, 8 bytes of the
	 * data segment, placed as the code is (PIE: the code's first segment at
	 * file offset and address 0, so its address less the base is its own)
	 */
	uint64_t current = 0;

	assert_int_equal(usdt__read(path, "asynctrace", &probes, &nr, &current), 0);
	free(probes);
	assert_int_not_equal(current, 0);
	assert_int_equal(usdt__read("/proc/self/exe", "asynctrace", &probes, &nr, &current), 0);
	free(probes);
	assert_int_equal(current, 0);
}

static void assert_arg(const struct at_usdt_arg *a, int kind, int reg_off, long long val,
		       int bits, int is_signed)
{
	assert_int_equal(a->kind, kind);
	assert_int_equal(a->reg_off, reg_off);
	assert_int_equal(a->val, val);
	assert_int_equal(a->shift, 64 - bits);
	assert_int_equal(a->is_signed, is_signed);
}

static void usdt_argument_specs(void **state)
{
	static const char *const rejected[] = {
		"8@foo(%rip)",	    /* a symbol */
		"8@8(%rax,%rbx,4)", /* an index register */
		"3@%rax",	    /* no such size */
		"8@%ah",	    /* a high byte register */
		"8@%rax,",	    /* junk after an operand */
		"8%rax",	    /* no @ */
		"8@$",		    /* no value */
		"8@16",		    /* an address without a register */
	};
	struct at_usdt_spec spec;

	assert_int_equal(usdt__parse_args("8@%rax -4@%ecx 2@%r9w 1@%sil -8@%r15", &spec), 0);
	assert_true(spec.known);
	assert_int_equal(spec.nr_args, 5);
	assert_arg(&spec.args[0], AT_USDT_ARG_REG, 80, 0, 64, 0);
	assert_arg(&spec.args[1], AT_USDT_ARG_REG, 88, 0, 32, 1);
	assert_arg(&spec.args[2], AT_USDT_ARG_REG, 64, 0, 16, 0);
	assert_arg(&spec.args[3], AT_USDT_ARG_REG, 104, 0, 8, 0);
	assert_arg(&spec.args[4], AT_USDT_ARG_REG, 0, 0, 64, 1);

	assert_int_equal(usdt__parse_args("  8@$-1 4@$0x10\t-4@-8(%rbp) 8@(%rsp) 2@0x18(%r12d)",
					  &spec), 0);
	assert_int_equal(spec.nr_args, 5);
	assert_arg(&spec.args[0], AT_USDT_ARG_CONST, 0, -1, 64, 0);
	assert_arg(&spec.args[1], AT_USDT_ARG_CONST, 0, 16, 32, 0);
	assert_arg(&spec.args[2], AT_USDT_ARG_DEREF, 32, -8, 32, 1);
	assert_arg(&spec.args[3], AT_USDT_ARG_DEREF, 152, 0, 64, 0);
	assert_arg(&spec.args[4], AT_USDT_ARG_DEREF, 24, 0x18, 16, 0);

	/* no arguments is a spec too; more than we describe keeps the first ones */
	assert_int_equal(usdt__parse_args("", &spec), 0);
	assert_true(spec.known);
	assert_int_equal(spec.nr_args, 0);
	assert_int_equal(usdt__parse_args("8@%rdi 8@%rsi 8@%rdx 8@%rcx 8@%r8 8@%r9 8@%rax", &spec),
			 0);
	assert_int_equal(spec.nr_args, AT_USDT_MAX_ARGS);
	assert_arg(&spec.args[5], AT_USDT_ARG_REG, 64, 0, 64, 0);

	for (size_t i = 0; i < sizeof(rejected) / sizeof(rejected[0]); i++) {
		assert_int_equal(usdt__parse_args(rejected[i], &spec), -EINVAL);
		assert_false(spec.known);
	}
}

static void files_without_probes(void **state)
{
	struct usdt_probe *probes;
	size_t nr;
	char path[] = "/tmp/asynctraced-notelf-XXXXXX";
	int fd = mkstemp(path);

	assert_int_equal(usdt__list("/proc/self/exe", "asynctrace", &probes, &nr), 0);
	assert_int_equal(nr, 0);
	free(probes);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "not an ELF file\n", 16), 16);
	close(fd);
	assert_int_equal(usdt__list(path, NULL, &probes, &nr), -ENOEXEC);
	unlink(path);
	assert_int_equal(usdt__list("/nonexistent", NULL, &probes, &nr), -ENOENT);
}

/*
 * A target's file is its owner's to change while we read it: only a regular
 * file is read (a FIFO does not block, a device is not read), and what was
 * read is a copy, which the file truncated to nothing afterwards leaves
 * whole (a mapping would SIGBUS at its first page past the new end).
 */
static void hostile_files(void **state)
{
	char dir[] = "/tmp/asynctraced-hostile-XXXXXX", fifo[64], copy[64], cmd[256];
	struct usdt_probe *probes;
	struct elf_image im;
	struct file_copy fc;
	uint64_t sum = 0;
	size_t nr;

	assert_non_null(mkdtemp(dir));
	snprintf(fifo, sizeof(fifo), "%s/fifo", dir);
	assert_int_equal(mkfifo(fifo, 0600), 0);
	alarm(10); /* a blocked open or read fails the test by SIGALRM */
	assert_int_equal(elf_image__open(&im, fifo), -ENOEXEC);
	assert_int_equal(usdt__list(fifo, NULL, &probes, &nr), -ENOEXEC);
	assert_int_equal(elf_image__open(&im, "/dev/zero"), -ENOEXEC);
	assert_int_equal(elf_image__open(&im, "/tmp"), -ENOEXEC);
	alarm(0);
	/* too large for the budget: not read at all */
	assert_int_equal(file_copy__read(&fc, "/proc/self/exe", 1024), -EFBIG);
	assert_null(fc.data);

	snprintf(copy, sizeof(copy), "%s/exe", dir);
	snprintf(cmd, sizeof(cmd), "cp %s/sample-executor %s", build(), copy);
	assert_int_equal(system(cmd), 0);
	assert_int_equal(elf_image__open(&im, copy), 0);
	assert_true(im.nr_funcs > 10);
	assert_int_equal(truncate(copy, 0), 0);
	for (size_t i = 0; i < im.nr_funcs; i++) {
		const struct elf_func *f = &im.funcs[i];
		const uint8_t *code = elf_image__bytes(&im, f->addr, f->size);

		sum += strlen(elf_image__name(&im, f));
		for (size_t j = 0; code && j < f->size; j++)
			sum += code[j];
	}
	assert_true(sum > 0);
	elf_image__close(&im);
	unlink(copy);
	unlink(fifo);
	rmdir(dir);
}

/*
 * Every file we map executable, opened once: ourselves (this very function
 * inside its mapping, and known as the executable) and libc; each read
 * through the descriptor its path names.
 */
static void check_files(const struct target_files *fs)
{
	char self[4096], fdpath[32];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	int seen_self = 0, seen_libc = 0;

	assert_true(n > 0);
	self[n] = '\0';
	for (size_t i = 0; i < fs->nr; i++) {
		const struct target_file *f = &fs->f[i];
		struct stat st;

		snprintf(fdpath, sizeof(fdpath), "/proc/self/fd/%d", f->fd);
		assert_string_equal(f->path, fdpath);
		assert_int_equal(fstat(f->fd, &st), 0);
		assert_true(S_ISREG(st.st_mode) && st.st_ino == f->ino && st.st_dev == f->dev);
		assert_true(fcntl(f->fd, F_GETFL) & O_NONBLOCK);
		if (!strcmp(f->target_path, self)) {
			assert_int_equal(fs->exe, (int)i);
			assert_true((uintptr_t)check_files >= f->map.start &&
				    (uintptr_t)check_files < f->map.end);
			seen_self++;
		}
		seen_libc += strstr(f->target_path, "libc.so") != NULL;
	}
	assert_int_equal(seen_self, 1); /* once, however many mappings */
	assert_int_equal(seen_libc, 1);
}

static void ourselves_as_a_target(void **state)
{
	static const char greeting[] = "hello from the target";
	struct target t;
	struct target_files fs;
	char buf[64], comm[16];

	assert_int_equal(target__open(&t, getpid()), 0);
	assert_string_equal(t.comm, "test_target");
	assert_int_equal(target__alive(&t), 1);
	assert_int_equal(target__read_str(&t, (uintptr_t)greeting, buf, sizeof(buf)), 0);
	assert_string_equal(buf, greeting);
	/* a short buffer truncates, still terminated */
	assert_int_equal(target__read_str(&t, (uintptr_t)greeting, buf, 6), 0);
	assert_string_equal(buf, "hello");
	assert_int_not_equal(target__read_str(&t, 8, buf, sizeof(buf)), 0);
	assert_int_equal(target__thread_comm(&t, (uint32_t)getpid(), comm, sizeof(comm)), 0);
	assert_string_equal(comm, "test_target");
	assert_int_equal(target__open_files(&t, &fs), 0);
	check_files(&fs);
	target_files__close(&fs);
	assert_int_equal(fs.nr, 0);
	target__close(&t);
	assert_int_equal(target__open(&t, 0), -ESRCH);
	assert_int_equal(target__open(&t, 0x7ffffff0), -ESRCH);
}

/*
 * /proc/PID/maps read line by line: executable mappings of files only (not
 * anonymous, not [vdso], not read-only), a deleted file as the kernel says
 * it, and lines cut short or garbled skipped.
 */
static void maps_lines(void **state)
{
	static char maps[] =
		"55d0c0a00000-55d0c0a02000 r--p 00000000 fd:01 1234 /usr/bin/prog\n"
		"55d0c0a02000-55d0c0a09000 r-xp 00002000 fd:01 1234 /usr/bin/prog\n"
		"7f0000000000-7f0000021000 rw-p 00000000 00:00 0 \n"
		"7f1000000000-7f1000001000 r-xp 00001000 fd:01 99 "
		"/tmp/lib with spaces.so (deleted)\n"
		"7ffd00000000-7ffd00002000 r-xp 00000000 00:00 0 [vdso]\n"
		"7f2000000000-7f2000001000 r 0 fd:01 7 /x\n"
		"garbage\n"
		"ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0 /ends-without-newline";
	struct target_exec_mapping m;
	FILE *f = fmemopen(maps, strlen(maps), "r");

	(void)state;
	assert_non_null(f);
	assert_int_equal(target__next_exec_mapping(f, &m), 1);
	assert_string_equal(m.file, "/usr/bin/prog");
	assert_int_equal(m.inode, 1234);
	assert_int_equal(m.map.start, 0x55d0c0a02000);
	assert_int_equal(m.map.end, 0x55d0c0a09000);
	assert_int_equal(m.map.offset, 0x2000);
	assert_int_equal(target__next_exec_mapping(f, &m), 1);
	assert_string_equal(m.file, "/tmp/lib with spaces.so (deleted)");
	assert_int_equal(target__next_exec_mapping(f, &m), 1);
	assert_string_equal(m.file, "/ends-without-newline");
	assert_int_equal(m.map.start, 0xffffffffff600000);
	assert_int_equal(target__next_exec_mapping(f, &m), 0);
	fclose(f);
}

/* What the filter reads of /proc: a parent past a name full of ')', cgroup subtrees. */
static void stat_and_cgroup_lines(void **state)
{
	static char cgroups[] = "12:cpu:/elsewhere\n0::/system.slice/app.service/sub\n";
	const char *want[] = { "/", "/system.slice", "/system.slice/app.service",
			       "/system.slice/app", "/other" };
	const bool in[] = { true, true, true, false, false };
	pid_t ppid = 0;

	(void)state;
	assert_int_equal(scan__stat_ppid("42 (a) b) c) S 17 42 42 0", &ppid), 0);
	assert_int_equal(ppid, 17);
	assert_int_equal(scan__stat_ppid("42 (no close S 17", &ppid), -EINVAL);
	assert_int_equal(scan__stat_ppid("42 (cut)", &ppid), -EINVAL);
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		FILE *f = fmemopen(cgroups, strlen(cgroups), "r");

		assert_non_null(f);
		assert_int_equal(scan__cgroup_in(f, want[i]), in[i]);
		fclose(f);
	}
}

struct fake_section {
	const char *name;
	uint32_t type;
	uint64_t flags;
	const char *data;
};

/*
 * A minimal ELF file with these sections (and .shstrtab): just what a
 * stripped binary shows of itself, without a toolchain to make one.
 */
static void write_elf(const char *path, const struct fake_section *secs, int nr)
{
	Elf64_Shdr sh[8] = { 0 };
	Elf64_Ehdr eh = { 0 };
	char names[256] = "", data[4096];
	size_t names_len = 1, off = sizeof(eh);
	FILE *f = fopen(path, "wb");

	assert_non_null(f);
	assert_true(nr + 2 <= 8);
	memcpy(eh.e_ident, ELFMAG, SELFMAG);
	eh.e_ident[EI_CLASS] = ELFCLASS64;
	eh.e_ident[EI_DATA] = ELFDATA2LSB;
	eh.e_ident[EI_VERSION] = EV_CURRENT;
	eh.e_type = ET_EXEC;
	eh.e_machine = EM_X86_64;
	eh.e_version = EV_CURRENT;
	eh.e_ehsize = sizeof(eh);
	eh.e_shentsize = sizeof(Elf64_Shdr);
	eh.e_shnum = (uint16_t)(nr + 2);
	eh.e_shstrndx = (uint16_t)(nr + 1);
	/* contents right after the header, then the names, then the headers */
	for (int i = 0; i <= nr; i++) {
		const char *name = i < nr ? secs[i].name : ".shstrtab";

		sh[i + 1].sh_name = (uint32_t)names_len;
		memcpy(names + names_len, name, strlen(name) + 1);
		names_len += strlen(name) + 1;
	}
	for (int i = 0; i < nr; i++) {
		size_t len = strlen(secs[i].data) + 1;

		sh[i + 1].sh_type = secs[i].type;
		sh[i + 1].sh_flags = secs[i].flags;
		sh[i + 1].sh_offset = off;
		sh[i + 1].sh_size = len;
		sh[i + 1].sh_addralign = 1;
		memcpy(data + off - sizeof(eh), secs[i].data, len);
		off += len;
	}
	sh[nr + 1].sh_type = SHT_STRTAB;
	sh[nr + 1].sh_offset = off;
	sh[nr + 1].sh_size = names_len;
	memcpy(data + off - sizeof(eh), names, names_len);
	off += names_len;
	eh.e_shoff = off;
	assert_int_equal(fwrite(&eh, sizeof(eh), 1, f), 1);
	assert_int_equal(fwrite(data, off - sizeof(eh), 1, f), 1);
	assert_int_equal(fwrite(sh, sizeof(sh[0]), (size_t)nr + 2, f), (size_t)nr + 2);
	assert_int_equal(fclose(f), 0);
}

static const char *marker_of(const struct fake_section *secs, int nr)
{
	static char path[] = "/tmp/asynctraced-elf-XXXXXX";
	static char copy[64];
	struct elf_image im;
	const char *marker;
	int fd;

	strcpy(path, "/tmp/asynctraced-elf-XXXXXX");
	fd = mkstemp(path);
	assert_true(fd >= 0);
	close(fd);
	write_elf(path, secs, nr);
	assert_int_equal(elf_image__open(&im, path), 0);
	assert_false(im.has_symtab);
	marker = elf_image__rust_marker(&im);
	snprintf(copy, sizeof(copy), "%s", marker ? marker : "");
	elf_image__close(&im);
	unlink(path);
	return copy;
}

#define RO (SHF_ALLOC)
#define RW (SHF_ALLOC | SHF_WRITE)

/* Stripped or not, a file gives away that it holds Rust; a C program does not. */
static void rust_without_symbols(void **state)
{
	const struct fake_section c[] = {
		{ ".rodata", SHT_PROGBITS, RO, "usage: sleep NUMBER[SUFFIX]...\n" },
		{ ".comment", SHT_PROGBITS, 0, "GCC: (Debian 12.2.0-14) 12.2.0" },
	};
	const struct fake_section rustc_comment[] = {
		{ ".rodata", SHT_PROGBITS, RO, "hi\n" },
		{ ".comment", SHT_PROGBITS, 0, "rustc version 1.95.0 (59807616e 2026-04-14)" },
	};
	const struct fake_section old_std[] = { /* a rustc that signs nothing (1.63) */
		{ ".comment", SHT_PROGBITS, 0, "GCC: (Debian 12.2.0-14) 12.2.0" },
		{ ".rodata", SHT_PROGBITS, RO, "overflowlibrary/std/src/rt.rscalled `unwrap()`" },
	};
	const struct fake_section core_paths[] = {
		{ ".rodata", SHT_PROGBITS, RO, "/rustc/59807616e/library/core/src/fmt/mod.rs" },
	};
	const struct fake_section prefixes_only[] = {
		/* what a program that looks for the paths holds (this one) */
		{ ".rodata", SHT_PROGBITS, RO, "library/core/src/" },
	};
	const struct fake_section dylib[] = {
		{ ".rustc", SHT_PROGBITS, RO, "rust" },
	};
	const struct fake_section elsewhere[] = {
		/* the same paths where no Rust program keeps them: writable data */
		{ ".data", SHT_PROGBITS, RW, "library/core/src/fmt/mod.rs" },
		{ ".rodata", SHT_PROGBITS, RO, "rust_begin_unwind library/core/src/.rs" },
	};
	char path[512];
	struct elf_image im;

	assert_string_equal(marker_of(c, 2), "");
	assert_string_equal(marker_of(rustc_comment, 2), "rustc in .comment");
	assert_string_equal(marker_of(old_std, 2), "Rust's standard library in read-only data");
	assert_string_equal(marker_of(core_paths, 1), "Rust's standard library in read-only data");
	assert_string_equal(marker_of(dylib, 1), "a .rustc section");
	assert_string_equal(marker_of(prefixes_only, 1), "");
	assert_string_equal(marker_of(elsewhere, 2), "");

	/* a real C program, which holds the prefixes it looks for */
	snprintf(path, sizeof(path), "%s/asynctraced", build());
	assert_int_equal(elf_image__open(&im, path), 0);
	assert_null(elf_image__rust_marker(&im));
	elf_image__close(&im);
	/* the stripped tokio program, when `make tokio` built it */
	snprintf(path, sizeof(path), "%s/tokio-app-stripped", build());
	if (access(path, R_OK) == 0) {
		assert_int_equal(elf_image__open(&im, path), 0);
		assert_false(im.has_symtab);
		assert_non_null(elf_image__rust_marker(&im));
		elf_image__close(&im);
	}
}

/* A C program with neither probes nor tokio: no runtime, and no word of stripping. */
static void no_runtime_in_a_c_program(void **state)
{
	struct discovery d = { 0 };
	struct target t;

	assert_int_equal(target__open(&t, getpid()), 0);
	assert_int_equal(discover(&d, &t), 0);
	assert_int_equal(d.kind, RUNTIME_NONE);
	assert_false(d.stripped);
	assert_true(d.scanned >= 2); /* this test and libc, at least */
	discovery__free(&d);
	target__close(&t);
}

/*
 * Files found to hold no runtime are remembered by what they are: a second
 * look at the same process reads none of them (system-wide, every process
 * maps libc), and a file changed since is read again.
 */
static void images_without_a_runtime_are_remembered(void **state)
{
	struct image_cache images;
	struct discovery d = { 0 };
	char path[] = "/tmp/at-image-XXXXXX";
	struct timespec later[2] = { { 0, UTIME_OMIT }, { 12345, 0 } };
	struct target t;
	size_t first;
	int fd;

	image_cache__init(&images);
	assert_int_equal(target__open(&t, getpid()), 0);
	d.images = &images;
	assert_int_equal(discover(&d, &t), 0);
	assert_int_equal(d.kind, RUNTIME_NONE);
	first = d.scanned;
	assert_true(first >= 2);
	discovery__free(&d);
	d.images = &images;
	assert_int_equal(discover(&d, &t), 0);
	assert_int_equal(d.kind, RUNTIME_NONE);
	assert_int_equal(d.scanned, 0);
	/* each file skipped three times: no probes, no tokio, no Go */
	assert_int_equal(images.hits, 3 * first);
	discovery__free(&d);
	target__close(&t);

	/* a file rebuilt in place (another mtime, size) is looked at again */
	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "x", 1), 1);
	image_cache__note(&images, path, IMAGE_NO_USDT);
	assert_true(image_cache__lacks(&images, path, IMAGE_NO_USDT));
	assert_false(image_cache__lacks(&images, path, IMAGE_NO_TOKIO));
	assert_int_equal(futimens(fd, later), 0);
	assert_false(image_cache__lacks(&images, path, IMAGE_NO_USDT));
	image_cache__note(&images, path, IMAGE_NO_TOKIO);
	assert_int_equal(write(fd, "y", 1), 1);
	assert_false(image_cache__lacks(&images, path, IMAGE_NO_TOKIO));
	close(fd);
	unlink(path);
	assert_false(image_cache__lacks(&images, path, IMAGE_NO_TOKIO));
	image_cache__free(&images);
}

/* A child running argv, once its exec is done (its comm is then want). */
static pid_t run_child(char *const argv[], const char *want)
{
	char path[64], comm[32] = "";
	pid_t pid = fork();

	assert_true(pid >= 0);
	if (pid == 0) {
		execv(argv[0], argv);
		_exit(127);
	}
	snprintf(path, sizeof(path), "/proc/%d/comm", pid);
	for (int i = 0; i < 200 && strcmp(comm, want); i++) {
		FILE *f = fopen(path, "r");

		if (f) {
			if (!fgets(comm, sizeof(comm), f))
				comm[0] = '\0';
			comm[strcspn(comm, "\n")] = '\0';
			fclose(f);
		}
		usleep(10000);
	}
	assert_string_equal(comm, want);
	return pid;
}

static void stop_child(pid_t pid)
{
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

/* The processes a scan told of. */
struct told {
	pid_t pids[8192];
	size_t nr;
};

static int tell(void *ctx, pid_t pid, const char *comm)
{
	struct told *t = ctx;

	if (t->nr < sizeof(t->pids) / sizeof(t->pids[0]))
		t->pids[t->nr++] = pid;
	return 0;
}

static bool told_of(const struct told *t, pid_t pid)
{
	for (size_t i = 0; i < t->nr; i++)
		if (t->pids[i] == pid)
			return true;
	return false;
}

/* One scan of the host with a fresh memory of what it saw: who passes f. */
static void scan_once(const struct scan_filter *f, struct told *t)
{
	struct u64map seen;

	u64map__init(&seen);
	t->nr = 0;
	assert_int_equal(scan__new_processes(f, &seen, tell, t), 0);
	u64map__clear(&seen);
}

/* What process pid runs, looked for with the image cache. */
static enum runtime_kind runtime_of(pid_t pid, struct image_cache *images)
{
	struct discovery d = { .images = images };
	struct target t;
	enum runtime_kind kind;

	assert_int_equal(target__open(&t, pid), 0);
	assert_int_equal(discover(&d, &t), 0);
	kind = d.kind;
	discovery__free(&d);
	target__close(&t);
	return kind;
}

/*
 * The host's processes, narrowed by name and cgroup, each told once until
 * it runs another executable; what the executor and a sleep run, the
 * second look at the sleep's files saved by the image cache.
 */
static void scan_finds_executors(void **state)
{
	char exe[PATH_MAX], cgroup[4096] = "", err[256];
	char *executor[] = { exe, "--scenario", "healthy", "--rate", "10", "--duration", "20",
			     "--workers", "2", NULL };
	char *sleeper[] = { "/bin/sleep", "20", NULL };
	static struct told t;
	struct scan_filter f;
	struct image_cache images;
	struct u64map seen;
	uint64_t hits;
	pid_t ex, sl;
	FILE *cg;

	snprintf(exe, sizeof(exe), "%s/sample-executor", build());
	ex = run_child(executor, "sample-executor");
	sl = run_child(sleeper, "sleep");
	image_cache__init(&images);

	/* by name, each once: a second scan with the same memory tells neither again */
	assert_int_equal(scan_filter__init(&f, "^(sample-exec|sleep)", NULL, NULL, err, sizeof(err)), 0);
	u64map__init(&seen);
	assert_int_equal(scan__new_processes(&f, &seen, tell, &t), 0);
	assert_true(told_of(&t, ex));
	assert_true(told_of(&t, sl));
	t.nr = 0;
	assert_int_equal(scan__new_processes(&f, &seen, tell, &t), 0);
	assert_false(told_of(&t, ex));
	assert_int_equal(scan__process(&f, &seen, ex, tell, &t), 0);
	assert_false(told_of(&t, ex));
	u64map__clear(&seen);
	u64map__init(&seen);
	assert_int_equal(scan__process(&f, &seen, ex, tell, &t), 0);
	assert_true(told_of(&t, ex));
	u64map__clear(&seen);
	scan_filter__free(&f);
	/* what they run; the second look skips the files the first found empty */
	assert_int_equal(runtime_of(ex, &images), RUNTIME_USDT);
	assert_int_equal(runtime_of(sl, &images), RUNTIME_NONE);
	hits = images.hits;
	assert_int_equal(runtime_of(sl, &images), RUNTIME_NONE);
	assert_true(images.hits > hits);

	/* excluded by name */
	assert_int_equal(scan_filter__init(&f, NULL, "^sample", NULL, err, sizeof(err)), 0);
	scan_once(&f, &t);
	assert_false(told_of(&t, ex));
	assert_true(told_of(&t, sl));
	scan_filter__free(&f);

	/* by cgroup: ours (the child's too), given either way; or one that holds nothing */
	cg = fopen("/proc/self/cgroup", "r");
	assert_non_null(cg);
	while (fgets(cgroup, sizeof(cgroup), cg) && strncmp(cgroup, "0::", 3))
		;
	fclose(cg);
	cgroup[strcspn(cgroup, "\n")] = '\0';
	if (!strncmp(cgroup, "0::", 3)) {
		char mounted[4200];

		snprintf(mounted, sizeof(mounted), "/sys/fs/cgroup%s", cgroup + 3);
		for (int i = 0; i < 2; i++) {
			assert_int_equal(scan_filter__init(&f, "^sample", NULL, i ? mounted : cgroup + 3,
							   err, sizeof(err)), 0);
			scan_once(&f, &t);
			assert_true(told_of(&t, ex));
			scan_filter__free(&f);
		}
	}
	assert_int_equal(scan_filter__init(&f, NULL, NULL, "/no/such.slice", err, sizeof(err)), 0);
	scan_once(&f, &t);
	assert_int_equal(t.nr, 0);
	scan_filter__free(&f);

	/* a pattern that is none */
	assert_int_equal(scan_filter__init(&f, "(", NULL, NULL, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "--comm '(' is not a regular expression"));
	assert_int_equal(scan_filter__init(&f, NULL, "[", NULL, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "--exclude-comm '[' is not a regular expression"));

	image_cache__free(&images);
	stop_child(ex);
	stop_child(sl);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(probes_of_the_sample_executor),
		cmocka_unit_test(usdt_argument_specs),
		cmocka_unit_test(files_without_probes),
		cmocka_unit_test(hostile_files),
		cmocka_unit_test(ourselves_as_a_target),
		cmocka_unit_test(maps_lines),
		cmocka_unit_test(stat_and_cgroup_lines),
		cmocka_unit_test(rust_without_symbols),
		cmocka_unit_test(no_runtime_in_a_c_program),
		cmocka_unit_test(images_without_a_runtime_are_remembered),
		cmocka_unit_test(scan_finds_executors),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
