// SPDX-License-Identifier: MIT
/*
 * The analyser's side of `asynctraced tasks` and of an alert's place. It
 * is given two descriptors: the target's executable and its /proc/PID/mem,
 * opened by the privileged side (reads through it need no right of the
 * reader's: the kernel checked the opener's). The executable says which
 * runtime and where its lists are (a tokio program's DWARF may be in a
 * separate debug file: asked for, debug_files.c); the memory is read with
 * pread, which never stops the target. A process traced keeps both here, its executable
 * read once, until it is forgotten: an alert asks for one task's place.
 */
#include "analyser/task_reading.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <elfutils/libdw.h>
#include <gelf.h>

#include "analyser/analyser.h"
#include "analyser/debug_files.h"
#include "lib/file_copy.h"
#include "lib/u64map.h"
#include "lib/util.h"
#include "stacks/debug_file.h"
#include "targets/elf_image.h"
#include "targets/go/golang.h"
#include "targets/tokio/tokio.h"
#include "tasks/goroutines.h"
#include "tasks/tasks.h"
#include "tasks/tokio_tasks.h"

/* A process's executable as read, and its memory. */
struct held {
	int mem;
	struct file_copy fc;
	struct go_binary gb;
	bool go;		/* gb read: a Go runtime whose goroutines can be listed */
	/* tokio: the program's DWARF indexed, and CONTEXT's offset from a thread pointer */
	Elf *elf;
	Elf *debug_elf;		/* its separate debug file's, when the DWARF is there */
	int debug_fd;
	Dwarf *dw;
	struct tokio_dwarf *td;
	int64_t context_tpoff;
	bool have_context;
	uint64_t head_at;	/* where its task list begins, once found (0: not yet) */
	struct u64map found;	/* task id -> where it was met (an alert's, an idle span's) */
	uint64_t resume;	/* Go: where in allgs the next bounded look for one begins */
	uint64_t tokio_resume;	/* tokio: the Header it begins at */
	uint64_t bias;
	int err;		/* why not, when not */
	char note[256];
};

static struct u64map held;	/* pid -> struct held */

static int read_mem(void *ctx, uint64_t addr, void *buf, size_t len)
{
	int fd = *(const int *)ctx;
	size_t done = 0;

	/* /proc/PID/mem takes addresses as offsets: past 2^63 they are negative */
	if (addr > INT64_MAX || len > INT64_MAX - addr)
		return -EIO;
	while (done < len) {
		ssize_t n = pread(fd, (uint8_t *)buf + done, len - done, (off_t)(addr + done));

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -EIO;
		done += (size_t)n;
	}
	return 0;
}

/* Where a PIE was loaded: its mapping's start against a function's place in the file. */
static uint64_t load_bias(const struct go_binary *gb, const struct elf_image *im,
			  const struct wire_tasks_req *r)
{
	uint64_t vaddr = gb->funcs[GO_EXECUTE] ? gb->funcs[GO_EXECUTE] : gb->walk.text;
	int64_t off = vaddr ? elf_image__offset(im, vaddr) : -1;

	if (!gb->pie || off < 0)
		return 0;
	return r->start + ((uint64_t)off - r->offset) - vaddr;
}

static void held_free(struct held *h)
{
	if (!h)
		return;
	if (h->mem >= 0)
		close(h->mem);
	tokio_dwarf__free(h->td);
	if (h->dw)
		dwarf_end(h->dw);
	if (h->debug_elf)
		elf_end(h->debug_elf);
	if (h->debug_fd >= 0)
		close(h->debug_fd);
	if (h->elf)
		elf_end(h->elf);
	golang__free(&h->gb);
	u64map__clear(&h->found);
	file_copy__free(&h->fc);
	free(h);
}

/* The paths of the debug file an executable without DWARF names (w: none for one with). */
static void want_debug(struct held *h, const char *name, struct debug_wants *w)
{
	char paths[DEBUG_FILE_PATHS][PATH_MAX];
	int n;

	if (h->go || !h->elf || debug_file__has_dwarf(h->elf))
		return;
	n = debug_file__paths(h->elf, name, paths);
	for (int i = 0; i < n; i++)
		debug_wants__add(w, paths[i]);
}

/* The DWARF: the executable's own, else the first debug file given that is of its build. */
static Dwarf *tokio_dwarf(struct held *h, struct unwind_file *debug, uint32_t nr_debug)
{
	if (debug_file__has_dwarf(h->elf))
		return dwarf_begin_elf(h->elf, DWARF_C_READ, NULL);
	for (uint32_t i = 0; i < nr_debug; i++) {
		Dwarf *dw;

		if (!debug_file__same_build(h->elf, debug[i].fd) ||
		    !(h->debug_elf = elf_begin(debug[i].fd, ELF_C_READ_MMAP, NULL)))
			continue;
		if ((dw = dwarf_begin_elf(h->debug_elf, DWARF_C_READ, NULL))) {
			h->debug_fd = debug[i].fd;
			debug[i].fd = -1;
			return dw;
		}
		elf_end(h->debug_elf);
		h->debug_elf = NULL;
	}
	return NULL;
}

/*
 * A tokio program: its DWARF indexed (the executable's own, or its separate
 * debug file's: debug, those found of the paths wanted), CONTEXT's place.
 */
static void read_tokio(struct held *h, const struct wire_tasks_req *r, struct unwind_file *debug,
		       uint32_t nr_debug, const char *looked)
{
	struct elf_image im;
	const char *why = NULL;
	uint64_t tls;
	int err;

	h->err = -ENOENT;
	if (!h->elf || !(h->dw = tokio_dwarf(h, debug, nr_debug))) {
		snprintf(h->note, sizeof(h->note),
			 "no Go runtime, and no DWARF for tokio's tasks: a tokio program needs type "
			 "debug info (debug = 2), in the executable or in a separate debug file%s%s",
			 nr_debug ? ", and those found are not of its build (or hold none), first "
				    "looked for at "
			 : looked[0] ? ", none found at "
				     : " (it names none)",
			 looked);
		return;
	}
	err = tokio_dwarf__index(h->dw, &h->td, &why);
	if (err) {
		snprintf(h->note, sizeof(h->note), "%s", why ? why : strerror(-err));
		h->err = err;
		return;
	}
	/* kept for alerts, whose questions are bounded: what may be read lazily, read now */
	if (r->flags & WIRE_TASKS_KEEP)
		tokio_dwarf__prepare(h->td);
	if (!elf_image__open_mem(&im, h->fc.data, h->fc.size)) {
		h->have_context = tokio_dwarf__context(h->td, &tls)
					  ? !elf_image__tpoff(&im, tls, &h->context_tpoff)
					  : !tokio__context_tpoff(&im, &h->context_tpoff);
		elf_image__close(&im);
	}
	/* where a PIE is loaded: its mapping against the file's first executable segment */
	{
		GElf_Ehdr eh;
		size_t n = 0;

		if (gelf_getehdr(h->elf, &eh) && eh.e_type == ET_DYN && !elf_getphdrnum(h->elf, &n))
			for (size_t i = 0; i < n; i++) {
				GElf_Phdr ph;

				if (gelf_getphdr(h->elf, (int)i, &ph) && ph.p_type == PT_LOAD &&
				    (ph.p_flags & PF_X) && r->offset >= ph.p_offset &&
				    r->offset - ph.p_offset < ph.p_filesz) {
					h->bias = r->start - (ph.p_vaddr + (r->offset - ph.p_offset));
					break;
				}
			}
	}
	h->err = 0;
}

/*
 * Of a Go executable only .gopclntab is read again (the functions' names
 * are the go_binary's own): a traced process keeps that, not the whole
 * copy of tens of MB. Kept whole if the slice cannot be had.
 */
static void keep_pclntab(struct held *h)
{
	struct go_walk *w = &h->gb.walk;
	uint8_t *slice;

	if (w->pclntab_off > h->fc.size || w->pclntab_size > h->fc.size - w->pclntab_off ||
	    !(slice = malloc(w->pclntab_size ? w->pclntab_size : 1)))
		return;
	memcpy(slice, h->fc.data + w->pclntab_off, w->pclntab_size);
	free(h->fc.data);
	h->fc.data = slice;
	h->fc.size = w->pclntab_size;
	w->pclntab_off = 0;
}

/* The executable at exe read: which runtime, and where its tasks are. */
static void read_exe(struct held *h, const struct wire_tasks_req *r, int exe)
{
	struct elf_image im;
	char path[32];
	int err;

	snprintf(path, sizeof(path), "/proc/self/fd/%d", exe);
	err = file_copy__read(&h->fc, path, FILE_COPY_MAX);
	if (err) {
		snprintf(h->note, sizeof(h->note), "its executable could not be read: %s",
			 strerror(-err));
		h->err = err;
		return;
	}
	err = golang__detect_mem(h->fc.data, h->fc.size, &h->gb);
	if (err == -ENOENT || err == -ENOEXEC) {
		/* tokio's, perhaps: read once its debug file has been asked for */
		if (elf_version(EV_CURRENT) != EV_NONE)
			h->elf = elf_memory((char *)h->fc.data, h->fc.size);
	} else if (!h->gb.version[0]) {
		snprintf(h->note, sizeof(h->note), "its Go runtime could not be read: %s",
			 strerror(-err));
		h->err = err;
	} else if ((err = elf_image__open_mem(&im, h->fc.data, h->fc.size))) {
		h->err = err;
	} else {
		/* what the probes need may be missing (-ENOTSUP): the goroutines may still be read */
		golang__name_goroutines(&h->gb, &im);
		h->bias = load_bias(&h->gb, &im, r);
		h->go = true;
		elf_image__close(&im);
		keep_pclntab(h);
	}
}

/* The list asked for, of the process h holds (threads: their pointers). */
static int list(struct held *h, const struct wire_tasks_req *r, const uint64_t *threads,
		struct task_list *l)
{
	struct task_mem m = { read_mem, &h->mem };
	uint64_t deadline = r->only && r->bound_ms ? now_ns() + r->bound_ms * 1000000ull : 0;
	struct goroutines_opts o = { .system = r->flags & WIRE_TASKS_SYSTEM, .now_ns = now_ns(),
				     .only = r->only, .found = &h->found, .deadline_ns = deadline,
				     .resume = &h->resume };
	struct tokio_read_opts to = { .only = r->only, .found = &h->found, .deadline_ns = deadline,
				      .resume = &h->tokio_resume };

	if (h->td) {
		snprintf(l->runtime, sizeof(l->runtime), "tokio");
		/* the scheduler's list, found once from a thread's CONTEXT: it lives as long */
		if (!h->head_at && h->have_context && r->nr_threads) {
			uint64_t *at = calloc(r->nr_threads, sizeof(*at));

			if (!at)
				return -ENOMEM;
			for (uint32_t i = 0; i < r->nr_threads; i++)
				at[i] = threads[i] ? threads[i] + (uint64_t)h->context_tpoff : 0;
			tokio_tasks__head_at(h->td, at, r->nr_threads, &m, &h->head_at);
			free(at);
		}
		if (!h->have_context)
			snprintf(l->note, sizeof(l->note), "tokio's CONTEXT thread-local is neither in "
				 "its DWARF nor in its symbols: the tasks cannot be reached");
		else if (!h->head_at && !r->nr_threads)
			snprintf(l->note, sizeof(l->note), "%s", TASKS_NOTE_NO_THREADS);
		else if (!h->head_at)
			snprintf(l->note, sizeof(l->note), "%s", TASKS_NOTE_NO_RUNTIME_YET);
		if (!h->head_at || (r->flags & WIRE_TASKS_NONE))
			return 0;
		return tokio_tasks__read(h->td, h->bias, h->head_at, &to, &m, l);
	}
	if (!h->go) {
		memcpy(l->note, h->note, sizeof(l->note));
		return h->err ? h->err : -ENOENT;
	}
	if (r->flags & WIRE_TASKS_NONE)
		return 0;
	return goroutines__read(&h->gb, h->fc.data, h->fc.size, h->bias, &m, &o, l);
}

static int answer(int32_t status, const struct task_list *l)
{
	uint8_t *b = NULL, *msg;
	size_t len = 0;
	int err = tasks__encode(l, &b, &len);

	if (err)
		return err;
	msg = malloc(sizeof(status) + len);
	if (!msg) {
		free(b);
		return -ENOMEM;
	}
	memcpy(msg, &status, sizeof(status));
	memcpy(msg + sizeof(status), b, len);
	free(b);
	err = wire__send(ANALYSER_FD, WIRE_TASKLIST, msg, sizeof(status) + len);
	free(msg);
	return err;
}

/*
 * A process handed over: its executable read, then its debug file asked
 * for (always: the privileged side expects the exchange, empty or not)
 * and, for tokio, its DWARF indexed. 0, or -errno when the socket cannot go on.
 */
static int take(struct held *h, const struct wire_tasks_req *r, int exe, const char *name)
{
	struct debug_wants w = { 0 };
	struct unwind_file *debug = NULL;
	uint32_t nr_debug = 0;
	int err;

	char looked[PATH_MAX] = "";

	read_exe(h, r, exe);
	want_debug(h, name, &w);
	/* the first path asked for, to say where (the exchange takes those it hands over) */
	if (w.nr)
		snprintf(looked, sizeof(looked), "%s", w.path[0]);
	err = debug_wants__exchange(&w, &debug, &nr_debug);
	if (!err && !h->go && !h->err)
		read_tokio(h, r, debug, nr_debug, looked);
	for (uint32_t i = 0; i < nr_debug; i++) {
		free(debug[i].name);
		if (debug[i].fd >= 0)
			close(debug[i].fd);
	}
	free(debug);
	debug_wants__free(&w);
	return err;
}

int task_reading__read(const struct wire_hdr *h)
{
	struct wire_tasks_req r;
	struct task_list l;
	struct held *kept = NULL;
	uint64_t *threads = NULL;
	char name[PATH_MAX] = "";
	int fds[2] = { -1, -1 }, err;
	int32_t status;

	if (h->len < sizeof(r) ||
	    h->len > sizeof(r) + (uint64_t)WIRE_THREADS_MAX * 8 + sizeof(name) - 1)
		return -EBADMSG;
	err = wire__read(ANALYSER_FD, &r, sizeof(r), 0);
	if (!err && (h->len != sizeof(r) + (uint64_t)r.nr_threads * 8 + r.name_len ||
		     r.name_len >= sizeof(name) || (r.name_len && !(r.flags & WIRE_TASKS_FDS))))
		err = -EBADMSG;
	if (!err && r.nr_threads) {
		threads = calloc(r.nr_threads, sizeof(*threads));
		err = threads ? wire__read(ANALYSER_FD, threads, r.nr_threads * sizeof(*threads), 0)
			      : -ENOMEM;
	}
	if (!err && r.name_len)
		err = wire__read(ANALYSER_FD, name, r.name_len, 0);
	if (!err && (r.flags & WIRE_TASKS_FDS))
		err = wire__take_fds(ANALYSER_FD, fds, 2, 0);
	if (err) {
		free(threads);
		return err;
	}
	task_list__init(&l);
	if (r.flags & WIRE_TASKS_FDS) {
		kept = calloc(1, sizeof(*kept));
		if (kept) {
			kept->mem = fds[0];
			kept->debug_fd = -1;
			err = take(kept, &r, fds[1], name);
		} else {
			close(fds[0]);
			err = -ENOMEM;
		}
		close(fds[1]);
		if (!err && (r.flags & WIRE_TASKS_KEEP)) {
			held_free(u64map__del(&held, (uint64_t)(uint32_t)r.pid));
			if (u64map__set(&held, (uint64_t)(uint32_t)r.pid, kept))
				err = -ENOMEM;
		}
		if (err) {
			held_free(kept);
			free(threads);
			return err;
		}
	} else {
		kept = u64map__get(&held, (uint64_t)(uint32_t)r.pid);
	}
	if (kept) {
		status = list(kept, &r, threads, &l);
	} else {
		snprintf(l.note, sizeof(l.note), "the process was not handed over");
		status = -ENOENT;
	}
	if (kept && !(r.flags & WIRE_TASKS_KEEP) && (r.flags & WIRE_TASKS_FDS))
		held_free(kept);
	free(threads);
	err = answer(status, &l);
	task_list__free(&l);
	return err;
}

void task_reading__forget(int32_t pid)
{
	held_free(u64map__del(&held, (uint64_t)(uint32_t)pid));
}

void task_reading__end(void)
{
	uint64_t key;
	void *val;

	for (size_t i = 0; u64map__next(&held, &i, &key, &val);)
		held_free(val);
	u64map__clear(&held);
}
