// SPDX-License-Identifier: MIT
#include "stacks/unwind.h"

#include <dwarf.h>
#include <elfutils/libdwfl.h>
#include <errno.h>
#include <fcntl.h>
#include <libiberty/demangle.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/u64map.h"
#include "stacks/debug_file.h"
#include "stacks/func_index.h"

/* x86-64's DWARF register numbers */
enum { DWARF_RBP = 6, DWARF_RSP = 7 };

/* Frames of one stack, before inlined ones are expanded. */
#define MAX_PCS 128

struct proc {
	Dwfl *dwfl;
	/* given (unwinder__prime_from): its images and debug files, open, by name */
	struct unwind_file *files;
	size_t nr_files;
	struct unwind_file *debug;
	size_t nr_debug;
	bool attached;		/* dwfl_attach_state done */
	bool refreshed;		/* its modules read again for a pc none covered */
	struct u64map demangled; /* a mangled name's address -> its demangled copy */
	struct u64map funcs;	/* a Dwfl_Module's address -> its struct func_index */
	struct u64map frames;	/* pc -> struct pc_frames: what symbolise() made of it */
};

/* A pc symbolised: its frames, innermost first (the strings are the proc's). */
struct pc_frames {
	int n;
	int8_t fp_link;		/* its frame-pointer link is sound: 1 yes, 0 no, -1 not known yet */
	struct stack_frame f[];
};
/* pcs whose frames are kept, a process; past this, symbolised each time. */
#define MAX_PC_FRAMES 65536

struct unwinder {
	struct u64map procs;	/* pid + 1 -> struct proc * */
	const struct stack_sample *cur; /* the sample being unwound */
};

static const Dwfl_Callbacks proc_callbacks = {
	.find_elf = dwfl_linux_proc_find_elf,
	.find_debuginfo = dwfl_standard_find_debuginfo,
};

/*
 * The process whose modules libdwfl reads now: given_elf() and
 * given_debuginfo() hand it the descriptors it was given (libdwfl's
 * callbacks are told the module, not the process). Set by every entry
 * point that may make libdwfl read an image.
 */
static __thread struct proc *current;

static void files_close(struct unwind_file *f, size_t nr)
{
	for (size_t i = 0; i < nr; i++) {
		free(f[i].name);
		if (f[i].fd >= 0)
			close(f[i].fd);
	}
	free(f);
}

/* A copy of a descriptor given for name, for libdwfl to own; -1: none. */
static int given_fd(const struct unwind_file *f, size_t nr, const char *name)
{
	for (size_t i = 0; name && i < nr; i++)
		if (f[i].fd >= 0 && !strcmp(f[i].name, name))
			return fcntl(f[i].fd, F_DUPFD_CLOEXEC, 0);
	return -1;
}

/* An image: the file of that name the process was given, never one opened by name. */
static int given_elf(Dwfl_Module *mod, void **userdata, const char *modname, Dwarf_Addr base,
		     char **file_name, Elf **elfp)
{
	const struct proc *p = current;
	int fd;

	(void)mod, (void)userdata, (void)base;
	*elfp = NULL;
	fd = p ? given_fd(p->files, p->nr_files, modname) : -1;
	if (fd >= 0 && !(*file_name = strdup(modname))) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Its debug file: one of those given for its paths, of its build. */
static int given_debuginfo(Dwfl_Module *mod, void **userdata, const char *modname,
			   Dwarf_Addr base, const char *file_name, const char *debuglink_file,
			   GElf_Word debuglink_crc, char **debuginfo_file_name)
{
	const struct proc *p = current;
	char paths[DEBUG_FILE_PATHS][PATH_MAX];
	GElf_Addr bias;
	Elf *elf = p && p->nr_debug ? dwfl_module_getelf(mod, &bias) : NULL;
	int n, fd = -1;

	(void)userdata, (void)base, (void)file_name, (void)debuglink_file, (void)debuglink_crc;
	n = elf ? debug_file__paths(elf, modname, paths) : 0;
	for (int i = 0; fd < 0 && i < n; i++) {
		fd = given_fd(p->debug, p->nr_debug, paths[i]);
		if (fd >= 0 && !debug_file__same_build(elf, fd)) {
			close(fd);
			fd = -1;
		}
		if (fd >= 0 && !(*debuginfo_file_name = strdup(paths[i]))) {
			close(fd);
			fd = -1;
		}
	}
	return fd;
}

static const Dwfl_Callbacks given_callbacks = {
	.find_elf = given_elf,
	.find_debuginfo = given_debuginfo,
};

int unwinder__new(struct unwinder **up)
{
	struct unwinder *u = calloc(1, sizeof(*u));

	if (!u)
		return -ENOMEM;
	u64map__init(&u->procs);
	*up = u;
	return 0;
}

static void funcs_clear(struct proc *p)
{
	uint64_t key;
	void *val;

	for (size_t i = 0; u64map__next(&p->funcs, &i, &key, &val);)
		func_index__free(val);
	u64map__clear_free(&p->funcs);
}

static void proc_free(struct proc *p)
{
	if (!p)
		return;
	if (current == p)
		current = NULL;
	u64map__clear_free(&p->demangled);
	u64map__clear_free(&p->frames);
	funcs_clear(p);
	if (p->dwfl)
		dwfl_end(p->dwfl);
	files_close(p->files, p->nr_files);
	files_close(p->debug, p->nr_debug);
	free(p);
}

/* The images a process maps, as its maps text (/proc/PID/maps) says, from the files given. */
static Dwfl *report_maps(const char *maps, size_t len)
{
	Dwfl *dwfl = len ? dwfl_begin(&given_callbacks) : NULL;
	FILE *f = dwfl ? fmemopen((void *)maps, len, "r") : NULL;
	int err = !f;

	if (f) {
		dwfl_report_begin(dwfl);
		err = dwfl_linux_proc_maps_report(dwfl, f) || dwfl_report_end(dwfl, NULL, NULL);
		fclose(f);
	}
	if (err && dwfl) {
		dwfl_end(dwfl);
		dwfl = NULL;
	}
	return dwfl;
}

/* The process's images, as it maps them now. */
static Dwfl *report(uint32_t pid)
{
	Dwfl *dwfl = dwfl_begin(&proc_callbacks);

	if (!dwfl)
		return NULL;
	dwfl_report_begin(dwfl);
	if (dwfl_linux_proc_report(dwfl, (pid_t)pid) || dwfl_report_end(dwfl, NULL, NULL)) {
		dwfl_end(dwfl);
		return NULL;
	}
	return dwfl;
}

static int load_elf(Dwfl_Module *mod, void **userdata, const char *name, Dwarf_Addr start,
		    void *arg)
{
	Dwarf_Addr bias;

	/* and its DWARF, which may be in a separate debug file found by its build id */
	if (dwfl_module_getelf(mod, &bias))
		dwfl_module_getdwarf(mod, &bias);
	return DWARF_CB_OK;
}

/* A process's state, empty. */
static struct proc *proc_new(void)
{
	struct proc *p = calloc(1, sizeof(*p));

	if (p) {
		u64map__init(&p->demangled);
		u64map__init(&p->funcs);
		u64map__init(&p->frames);
	}
	return p;
}

static struct proc *proc_of(struct unwinder *u, uint32_t pid)
{
	struct proc *p = u64map__get(&u->procs, (uint64_t)pid + 1);

	if (p)
		return current = p;
	p = proc_new();
	if (!p)
		return NULL;
	p->dwfl = report(pid);
	if (!p->dwfl || u64map__set(&u->procs, (uint64_t)pid + 1, p)) {
		proc_free(p);
		return NULL;
	}
	return current = p;
}

/* --- the thread libdwfl unwinds: the sample's registers and stack copy --- */

static pid_t next_thread(Dwfl *dwfl, void *arg, void **thread_argp)
{
	struct unwinder *u = arg;

	if (*thread_argp)
		return 0;
	*thread_argp = arg;
	return (pid_t)u->cur->tid;
}

static bool get_thread(Dwfl *dwfl, pid_t tid, void *arg, void **thread_argp)
{
	*thread_argp = arg;
	return true;
}

/* Only what the copy holds: an unwinder reads return addresses and saved registers. */
static bool memory_read(Dwfl *dwfl, Dwarf_Addr addr, Dwarf_Word *result, void *arg)
{
	const struct stack_sample *s = ((struct unwinder *)arg)->cur;

	if (addr < s->sp || addr - s->sp > s->len || s->len - (addr - s->sp) < sizeof(*result))
		return false;
	memcpy(result, s->stack + (addr - s->sp), sizeof(*result));
	/* a return address a uretprobe took over: the kernel's trampoline there, not the caller */
	for (size_t i = 0; i < s->nr_returns; i++)
		if (s->returns[i].slot == addr)
			*result = s->returns[i].ret;
	return true;
}

static bool set_initial_registers(Dwfl_Thread *thread, void *arg)
{
	const struct stack_sample *s = ((struct unwinder *)arg)->cur;
	Dwarf_Word regs[2] = { s->bp, s->sp }; /* rbp, rsp: what the CFA rules start from */

	if (!dwfl_thread_state_registers(thread, DWARF_RBP, 2, regs))
		return false;
	dwfl_thread_state_register_pc(thread, s->ip);
	return true;
}

static const Dwfl_Thread_Callbacks thread_callbacks = {
	.next_thread = next_thread,
	.get_thread = get_thread,
	.memory_read = memory_read,
	.set_initial_registers = set_initial_registers,
};

struct walk {
	uint64_t pcs[MAX_PCS];
	int n;
	int max;
};

static int on_frame(Dwfl_Frame *state, void *arg)
{
	struct walk *w = arg;
	Dwarf_Addr pc;
	bool activation;

	if (!dwfl_frame_pc(state, &pc, &activation) || !pc)
		return DWARF_CB_ABORT;
	/* a caller's pc is a return address: the call is the byte before */
	w->pcs[w->n++] = activation ? pc : pc - 1;
	return w->n < w->max ? DWARF_CB_OK : DWARF_CB_ABORT;
}

/* --- symbols -------------------------------------------------------------- */

/* A symbol's name for people: demangled, without its version (foo@@GLIBC_2.34). */
static const char *demangle(struct proc *p, const char *name)
{
	const char *at;
	char *d, *plain = NULL;

	if (!name)
		return NULL;
	d = u64map__get(&p->demangled, (uintptr_t)name);
	if (d)
		return d;
	at = strchr(name, '@');
	if (at && at != name) {
		plain = strndup(name, (size_t)(at - name));
		if (!plain)
			return name;
	}
	d = cplus_demangle(plain ? plain : name, DMGL_RUST | DMGL_PARAMS);
	if (d)
		free(plain);
	else
		d = plain;
	if (!d)
		return name;
	if (u64map__set(&p->demangled, (uintptr_t)name, d)) {
		free(d);
		return name;
	}
	return d;
}

/* An image's file name; libdwfl calls the vDSO "[vdso: PID]": one name for all. */
static const char *base_name(const char *path)
{
	const char *slash = path ? strrchr(path, '/') : NULL;

	if (path && !strncmp(path, "[vdso", 5))
		return "[vdso]";
	return slash ? slash + 1 : path;
}

/* The name DWARF gives a function's DIE: its linkage name demangled, else its name. */
static const char *die_name(struct proc *p, Dwarf_Die *die)
{
	Dwarf_Attribute attr;
	const char *linkage = NULL;

	if (dwarf_attr_integrate(die, DW_AT_linkage_name, &attr) ||
	    dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name, &attr))
		linkage = dwarf_formstring(&attr);
	return linkage ? demangle(p, linkage) : dwarf_diename(die);
}

/* mod's index, built the first time it is asked for; NULL: no memory. */
static struct func_index *func_index_of(struct proc *p, Dwfl_Module *mod)
{
	struct func_index *ix = u64map__get(&p->funcs, (uintptr_t)mod);

	if (ix)
		return ix;
	ix = calloc(1, sizeof(*ix));
	if (!ix)
		return NULL;
	/* out of memory half way: what was found is kept, as good as it gets */
	func_index__build(ix, mod);
	if (u64map__set(&p->funcs, (uintptr_t)mod, ix)) {
		func_index__free(ix);
		free(ix);
		return NULL;
	}
	return ix;
}

/* pc's frames: the inlined calls at pc, innermost first, then the function. */
static int symbolise(struct proc *p, uint64_t pc, struct stack_frame *out, int room)
{
	Dwfl_Module *mod = dwfl_addrmodule(p->dwfl, pc);
	const char *module = NULL, *file = NULL, *name;
	Dwarf_Die cu, scopes[FUNC_INDEX_MAX_SCOPES];
	const struct func_index *ix;
	Dwarf_Addr start = 0;
	Dwfl_Line *src;
	GElf_Off off;
	GElf_Sym sym;
	int line = 0, n = 0, nscopes;

	if (mod) {
		module = base_name(dwfl_module_info(mod, NULL, &start, NULL, NULL, NULL, NULL,
						    NULL));
		src = dwfl_module_getsrc(mod, pc);
		if (src)
			file = dwfl_lineinfo(src, NULL, &line, NULL, NULL, NULL);
		ix = func_index_of(p, mod);
		nscopes = ix && ix->nr ? func_index__scopes(ix, pc - ix->bias, scopes, &cu) : 0;
		for (int i = nscopes - 1; i >= 0 && n < room - 1; i--) {
			if (dwarf_tag(&scopes[i]) == DW_TAG_subprogram)
				break;
			if (dwarf_tag(&scopes[i]) != DW_TAG_inlined_subroutine)
				continue;
			out[n++] = (struct stack_frame){ .pc = pc, .function = die_name(p, &scopes[i]),
							 .rel_pc = pc - start, .module = module,
							 .file = file, .line = line, .inlined = true };
			file = func_index__call_file(&cu, &scopes[i], &line);
		}
	}
	name = mod ? dwfl_module_addrinfo(mod, pc, &off, &sym, NULL, NULL, NULL) : NULL;
	out[n++] = (struct stack_frame){ .pc = pc, .rel_pc = pc - start,
					 .function = demangle(p, name), .module = module,
					 .file = file, .line = line };
	return n;
}

/*
 * pc's frames, as symbolise() makes them, into out (at most room: the
 * innermost inlined calls and the function); kept per pc, as the same
 * return addresses come back in sample after sample.
 */
static int frames_of(struct proc *p, uint64_t pc, struct stack_frame *out, int room)
{
	struct pc_frames *c = pc ? u64map__get(&p->frames, pc) : NULL;
	struct stack_frame f[FUNC_INDEX_MAX_SCOPES + 1];
	int n;

	if (!c) {
		n = symbolise(p, pc, f, FUNC_INDEX_MAX_SCOPES + 1);
		if (pc && p->frames.len < MAX_PC_FRAMES &&
		    (c = malloc(sizeof(*c) + (size_t)n * sizeof(*f)))) {
			c->n = n;
			c->fp_link = -1;
			memcpy(c->f, f, (size_t)n * sizeof(*f));
			if (u64map__set(&p->frames, pc, c)) {
				free(c);
				c = NULL;
			}
		}
	}
	if (c)
		memcpy(f, c->f, (size_t)c->n * sizeof(*f));
	n = c ? c->n : n;
	if (n > room) { /* the function itself stays */
		f[room - 1] = f[n - 1];
		n = room;
	}
	memcpy(out, f, (size_t)n * sizeof(*f));
	return n;
}

/*
 * Whether the frame-pointer walk leaves the function at pc for its caller
 * soundly: the call-frame information says its frame is the frame
 * pointer's at pc (CFA = rbp + 16: it pushed rbp and set it), so the return
 * address and the caller's rbp are where the walk read them. A pc no
 * call-frame information covers (code built without it, JIT code) is taken
 * on trust: there is nothing better to go on.
 */
static bool fp_link_sound(struct proc *p, uint64_t pc)
{
	Dwfl_Module *mod = dwfl_addrmodule(p->dwfl, pc);
	Dwarf_CFI *cfi = NULL;
	Dwarf_Frame *frame;
	Dwarf_Addr bias;
	Dwarf_Op *ops;
	size_t nops;
	bool sound;

	if (mod && !(cfi = dwfl_module_eh_cfi(mod, &bias)))
		cfi = dwfl_module_dwarf_cfi(mod, &bias);
	if (!cfi || dwarf_cfi_addrframe(cfi, pc - bias, &frame))
		return true;
	sound = !dwarf_frame_cfa(frame, &ops, &nops) && nops == 1 &&
		((ops[0].atom == DW_OP_breg6 && ops[0].number == 16) ||
		 (ops[0].atom == DW_OP_bregx && ops[0].number == DWARF_RBP && ops[0].number2 == 16));
	free(frame);
	return sound;
}

/* As fp_link_sound(), kept with pc's frames. */
static bool fp_link(struct proc *p, uint64_t pc)
{
	struct pc_frames *c;
	struct stack_frame f;

	frames_of(p, pc, &f, 1); /* its entry, if there is room for one */
	c = u64map__get(&p->frames, pc);
	if (!c)
		return fp_link_sound(p, pc);
	if (c->fp_link < 0)
		c->fp_link = fp_link_sound(p, pc);
	return c->fp_link;
}

/*
 * Where a thread's own code begins: what is beyond (clone3, _start) is the
 * same in every stack, and not where frame pointers lead (the C library
 * sets none up), so a stack ends here whichever way it was unwound.
 */
static bool thread_root(const char *function)
{
	static const char *const roots[] = { "start_thread", "__libc_start_call_main" };

	for (size_t i = 0; function && i < sizeof(roots) / sizeof(roots[0]); i++)
		if (!strcmp(function, roots[i]))
			return true;
	return false;
}

/*
 * The frame-pointer walk as pcs (callers' a byte back, on their call), if
 * every link of it is sound: each function had its frame on the frame
 * pointer where it was (see fp_link_sound()), so the walk ended where the
 * stack does, or at the thread's root. How many, 0: not sound.
 */
static int fp_walk(struct proc *p, const struct stack_sample *s, uint64_t *pcs, int max)
{
	size_t n = s->nr_fp;
	struct stack_frame root;

	if (n < 2 || n > (size_t)max || s->fp[0] != s->ip)
		return 0;
	for (size_t i = 0; i < n; i++) {
		pcs[i] = i ? s->fp[i] - 1 : s->fp[i];
		if (!s->fp[i] || (i + 1 < n && !fp_link(p, pcs[i])))
			return 0;
	}
	frames_of(p, pcs[n - 1], &root, 1);
	return thread_root(root.function) || fp_link(p, pcs[n - 1]) ? (int)n : 0;
}

int unwinder__unwind(struct unwinder *u, const struct stack_sample *s, struct stack_frame *frames,
		     int max, bool *by_fp)
{
	struct proc *p = proc_of(u, s->pid);
	struct walk w = { .max = max < MAX_PCS ? max : MAX_PCS };
	int n = 0;

	if (!p || max <= 0)
		return 0;
	/* a pc in no image: something was mapped since (dlopen); read them again once */
	if (!p->files && !dwfl_addrmodule(p->dwfl, s->ip) && !p->refreshed) {
		Dwfl *fresh = report(s->pid);

		p->refreshed = true;
		if (fresh) {
			/* what was kept of the old modules (their names' addresses too) goes with them */
			u64map__clear_free(&p->demangled);
			u64map__clear_free(&p->frames);
			funcs_clear(p);
			dwfl_end(p->dwfl);
			p->dwfl = fresh;
			p->attached = false;
		}
	}
	*by_fp = (w.n = fp_walk(p, s, w.pcs, w.max)) > 0;
	if (!w.n && !p->attached) {
		if (!dwfl_attach_state(p->dwfl, NULL, (pid_t)s->pid, &thread_callbacks, u))
			return 0;
		p->attached = true;
	}
	if (!w.n) {
		u->cur = s;
		dwfl_getthread_frames(p->dwfl, (pid_t)s->tid, on_frame, &w);
		u->cur = NULL;
	}
	if (!w.n) /* not even the first frame: the sampled ip alone */
		w.pcs[w.n++] = s->ip;
	for (int i = 0; i < w.n && n < max; i++) {
		n += frames_of(p, w.pcs[i], frames + n, max - n);
		if (thread_root(frames[n - 1].function))
			break;
	}
	return n;
}

/* Whether an image holds DWARF of its own (a separate debug file would add nothing). */
int unwinder__prime_from(struct unwinder *u, uint32_t pid, const char *maps, size_t len,
			 struct unwind_file *files, size_t nr)
{
	struct proc *p = proc_new();

	unwinder__forget(u, pid);
	if (!p) {
		files_close(files, nr);
		return -ENOMEM;
	}
	p->files = files;
	p->nr_files = nr;
	/* libdwfl may look for an image while reporting: it is this process's */
	current = p;
	p->dwfl = report_maps(maps, len);
	if (!p->files)
		p->files = calloc(1, sizeof(*p->files)); /* none given is still given */
	if (!p->dwfl || !p->files || u64map__set(&u->procs, (uint64_t)pid + 1, p)) {
		proc_free(p);
		current = NULL;
		return -EINVAL;
	}
	return 0;
}

struct wanted {
	void (*fn)(void *ctx, const char *path);
	void *ctx;
};

static int want_debug(Dwfl_Module *mod, void **userdata, const char *name, Dwarf_Addr start,
		      void *arg)
{
	const struct wanted *w = arg;
	char paths[DEBUG_FILE_PATHS][PATH_MAX];
	Dwarf_Addr bias;
	Elf *elf = dwfl_module_getelf(mod, &bias);
	int n;

	(void)userdata, (void)start;
	if (!elf || debug_file__has_dwarf(elf))
		return DWARF_CB_OK;
	n = debug_file__paths(elf, name, paths);
	for (int i = 0; i < n; i++)
		w->fn(w->ctx, paths[i]);
	return DWARF_CB_OK;
}

int unwinder__wanted(struct unwinder *u, uint32_t pid, void (*fn)(void *ctx, const char *path),
		     void *ctx)
{
	struct proc *p = u64map__get(&u->procs, (uint64_t)pid + 1);
	struct wanted w = { fn, ctx };

	if (!p || !p->files)
		return -ENOENT;
	current = p;
	dwfl_getmodules(p->dwfl, want_debug, &w, 0);
	return 0;
}

int unwinder__give_debug(struct unwinder *u, uint32_t pid, struct unwind_file *files, size_t nr)
{
	struct proc *p = u64map__get(&u->procs, (uint64_t)pid + 1);

	if (!p || !p->files) {
		files_close(files, nr);
		return -ENOENT;
	}
	files_close(p->debug, p->nr_debug);
	p->debug = files;
	p->nr_debug = nr;
	current = p;
	dwfl_getmodules(p->dwfl, load_elf, NULL, 0);
	return 0;
}

bool unwinder__covers(struct unwinder *u, uint32_t pid, uint64_t pc)
{
	struct proc *p = u64map__get(&u->procs, (uint64_t)pid + 1);

	return p && dwfl_addrmodule(p->dwfl, pc);
}

int unwinder__prime(struct unwinder *u, uint32_t pid)
{
	struct proc *p = proc_of(u, pid);

	if (!p)
		return -errno ? -errno : -ENOENT;
	dwfl_getmodules(p->dwfl, load_elf, NULL, 0);
	return 0;
}

void unwinder__forget(struct unwinder *u, uint32_t pid)
{
	proc_free(u64map__del(&u->procs, (uint64_t)pid + 1));
}

void unwinder__free(struct unwinder *u)
{
	uint64_t key;
	void *val;

	if (!u)
		return;
	for (size_t i = 0; u64map__next(&u->procs, &i, &key, &val);)
		proc_free(val);
	u64map__clear(&u->procs);
	free(u);
}
