// SPDX-License-Identifier: MIT
/*
 * libFuzzer target: any bytes as a tokio process's memory, read the way
 * `asynctraced tasks` reads one (src/tasks/tokio_tasks.c): the task list
 * walked from its head (or from threads' CONTEXT, to the scheduler's list),
 * each task's cell found by its vtable, its future's state machines decoded
 * down their awaitees, select!'s branches included. The types are a real
 * program's DWARF: build/tokio-parked's (FUZZ_TOKIO_EXE names another),
 * indexed once. The input:
 *
 *   struct tokio_image_hdr, its nr_context CONTEXT addresses (u64), then
 *   regions of memory, each a struct tokio_region and its bytes.
 *
 * A read not wholly inside one region fails, as an unmapped page does.
 * Whatever the bytes: no crash, hang, leak or UB; every task's frames and
 * strings inside the list, at most TOKIO_FRAMES_MAX frames a task; the
 * list decodes to what was encoded.
 *
 * Seeds are a live tokio-parked's memory as the reader read it:
 *   FUZZ_TOKIO_RECORD=PID FUZZ_TOKIO_SEED=FILE build/fuzz/fuzz_tokio_tasks -runs=0 /dev/null
 * (root: its threads' pointers come from the BPF task iterator).
 *
 *   build/fuzz/fuzz_tokio_tasks -runs=0 tests/fuzz/tokio_tasks   replay the corpus
 */
#include <elfutils/libdw.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "task_list_checks.h"
#include "source/thread_ptrs.h"
#include "targets/elf_image.h"
#include "tasks/tasks.h"
#include "tasks/tokio_tasks.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct tokio_image_hdr {
	uint64_t head_at;	/* where the list's head is (when no CONTEXT finds one) */
	uint64_t only;		/* a task's id, or 0 */
	uint64_t bias;		/* where the executable is loaded */
	uint32_t nr_context;	/* CONTEXT addresses that follow (at most 8) */
	uint32_t pad;
};

struct tokio_region {
	uint64_t addr;
	uint32_t len;
	uint32_t pad;
};

static struct tokio_dwarf *td;

/* ---- the memory: the input's regions ---- */

struct image {
	const uint8_t *data;
	size_t size;
};

static int image_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
	const struct image *im = ctx;
	size_t at = 0;

	while (im->size - at >= sizeof(struct tokio_region)) {
		struct tokio_region r;

		memcpy(&r, im->data + at, sizeof(r));
		at += sizeof(r);
		if (r.len > im->size - at)
			break;
		if (addr >= r.addr && len <= r.len && addr - r.addr <= r.len - len) {
			memcpy(buf, im->data + at + (addr - r.addr), len);
			return 0;
		}
		at += r.len;
	}
	return -EIO;
}

/* ---- the seed recorder: a live process, each read kept as a region ---- */

struct recorder {
	int mem;
	FILE *out;
};

static int record_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
	struct recorder *rec = ctx;
	struct tokio_region r = { .addr = addr, .len = (uint32_t)len };

	if (len > UINT32_MAX || pread(rec->mem, buf, len, (off_t)addr) != (ssize_t)len)
		return -EIO;
	fwrite(&r, sizeof(r), 1, rec->out);
	fwrite(buf, len, 1, rec->out);
	return 0;
}

/* The lowest address the executable is mapped at: a PIE's load bias. */
static uint64_t exe_base(int pid, const char *exe)
{
	char path[64], line[4096], real[4096];
	uint64_t lo = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/maps", pid);
	if (!realpath(exe, real) || !(f = fopen(path, "r")))
		return 0;
	while (fgets(line, sizeof(line), f)) {
		unsigned long long start;
		char *name = strchr(line, '/');

		if (!name)
			continue;
		name[strcspn(name, "\n")] = 0;
		if (sscanf(line, "%llx-", &start) == 1 && !strcmp(name, real) && (!lo || start < lo))
			lo = start;
	}
	fclose(f);
	return lo;
}

static int read_image(const uint8_t *data, size_t size, struct u64map *found, uint64_t resume,
		      uint64_t *only, struct task_list *l);

static void record(int pid, const char *exe, const char *seed)
{
	struct tokio_image_hdr h = { .bias = exe_base(pid, exe) };
	struct elf_image im;
	struct recorder rec;
	struct task_mem m = { record_read, &rec };
	struct task_list l;
	uint64_t *fsbase = NULL, tls, ctx[8], head = 0;
	int64_t tpoff;
	size_t n = 0;
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d/mem", pid);
	rec.mem = open(path, O_RDONLY);
	rec.out = fopen(seed, "w");
	CHECK(rec.mem >= 0 && rec.out);
	CHECK(!thread_ptrs__read(pid, &fsbase, &n) && n);
	CHECK(tokio_dwarf__context(td, &tls) && !elf_image__open(&im, exe) &&
	      !elf_image__tpoff(&im, tls, &tpoff));
	elf_image__close(&im);
	for (size_t i = 0; i < n && h.nr_context < 8; i++)
		if (fsbase[i])
			ctx[h.nr_context++] = fsbase[i] + (uint64_t)tpoff;
	free(fsbase);
	fwrite(&h, sizeof(h), 1, rec.out);
	fwrite(ctx, sizeof(ctx[0]), h.nr_context, rec.out);
	task_list__init(&l);
	CHECK(!tokio_tasks__head_at(td, ctx, h.nr_context, &m, &head));
	CHECK(!tokio_tasks__read(td, h.bias, head, &(struct tokio_read_opts){ 0 }, &m, &l) &&
	      l.nr_tasks);
	CHECK(!fclose(rec.out));
	close(rec.mem);
	/* read again from the seed: the same tasks, frame for frame */
	{
		struct task_list again;
		uint8_t *b = malloc(1 << 20);
		FILE *f = fopen(seed, "r");
		size_t len = f && b ? fread(b, 1, 1 << 20, f) : 0;

		uint64_t only;

		CHECK(len && read_image(b, len, NULL, 0, &only, &again) == 0);
		CHECK(again.nr_tasks == l.nr_tasks && again.nr_frames == l.nr_frames);
		fprintf(stderr, "recorded %zu tasks (%zu frames) of pid %d into %s, %zu bytes\n",
			(size_t)l.nr_tasks, (size_t)l.nr_frames, pid, seed, len);
		task_list__free(&again);
		free(b);
		fclose(f);
	}
	task_list__free(&l);
	exit(0);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *exe = getenv("FUZZ_TOKIO_EXE") ? getenv("FUZZ_TOKIO_EXE")
						    : "build/tokio-parked";
	const char *why = NULL;
	Dwarf *dw;
	int fd = open(exe, O_RDONLY | O_CLOEXEC);

	(void)argc, (void)argv;
	/* no types, no target: said, and failed (never a pass that read nothing) */
	if (fd < 0 || !(dw = dwarf_begin(fd, DWARF_C_READ)) || tokio_dwarf__index(dw, &td, &why)) {
		fprintf(stderr, "fuzz_tokio_tasks: %s: no tokio DWARF to read with (%s)\n", exe,
			why ? why : "cannot open it");
		exit(1);
	}
	if (getenv("FUZZ_TOKIO_RECORD") && getenv("FUZZ_TOKIO_SEED"))
		record(atoi(getenv("FUZZ_TOKIO_RECORD")), exe, getenv("FUZZ_TOKIO_SEED"));
	return 0;
}

/*
 * The input's tasks into l (its own, freed by the caller); -EINVAL: no
 * image. found: where the tasks met were (tokio_tasks__read); resume: the
 * Header a walk for one begins at (0: the head); *only: the task asked for,
 * 0 every one.
 */
static int read_image(const uint8_t *data, size_t size, struct u64map *found, uint64_t resume,
		      uint64_t *only, struct task_list *l)
{
	struct tokio_image_hdr h;
	uint64_t ctx[8], head;
	struct image im;
	struct task_mem m = { image_read, &im };
	size_t at;

	task_list__init(l);
	if (size < sizeof(h))
		return -EINVAL;
	memcpy(&h, data, sizeof(h));
	if (h.nr_context > 8 || size - sizeof(h) < h.nr_context * sizeof(ctx[0]))
		return -EINVAL;
	memcpy(ctx, data + sizeof(h), h.nr_context * sizeof(ctx[0]));
	at = sizeof(h) + h.nr_context * sizeof(ctx[0]);
	im = (struct image){ data + at, size - at };
	head = h.head_at;
	if (h.nr_context)
		tokio_tasks__head_at(td, ctx, h.nr_context, &m, &head);
	struct tokio_read_opts o = { .only = h.only, .found = found, .resume = &resume };

	*only = h.only;
	return tokio_tasks__read(td, h.bias, head, &o, &m, l);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct task_list l, again;
	struct u64map found;
	uint64_t only = 0;

	/* each input finds the types' layouts again: none rides on an earlier one's */
	tokio_dwarf__forget_layouts(td);
	u64map__init(&found);
	read_image(data, size, &found, 0, &only, &l);
	check_list(&l, TOKIO_FRAMES_MAX);
	round_trip(&l);
	if (only && l.nr_tasks == 1 && !(l.tasks[0].flags & TASK_TORN)) {
		uint64_t key, first = 0;
		void *at;

		/* read again where it was met: the same task, as read along the list */
		read_image(data, size, &found, 0, &only, &again);
		CHECK(again.nr_tasks == 1 && again.tasks[0].id == l.tasks[0].id &&
		      again.tasks[0].state == l.tasks[0].state &&
		      again.tasks[0].nr_frames == l.tasks[0].nr_frames);
		task_list__free(&again);
		/* looked for from the first task met on (round the list): the same task */
		for (size_t i = 0; !first && u64map__next(&found, &i, &key, &at);)
			first = (uint64_t)(uintptr_t)at;
		read_image(data, size, NULL, first, &only, &again);
		CHECK(again.nr_tasks == 1 && again.tasks[0].id == l.tasks[0].id &&
		      again.tasks[0].nr_frames == l.tasks[0].nr_frames);
		task_list__free(&again);
	}
	u64map__clear(&found);
	task_list__free(&l);
	return 0;
}
