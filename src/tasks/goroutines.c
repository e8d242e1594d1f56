// SPDX-License-Identifier: MIT
/*
 * Reading goroutines while they run. A g is read whole, then its stack,
 * then the g's status, id and saved stack pointer again: a goroutine that
 * woke, moved its stack (the GC shrinks parked stacks) or was being scanned
 * (the _Gscan bit) meanwhile is read again, and said torn if it keeps
 * changing. Every stack pointer is checked against the g's own stack
 * bounds, every pc against the function table.
 *
 * Where a goroutine stopped (docs/go.md): parked through mcall, g.sched
 * holds the pc after mcall's call in gopark (a return address) and gopark's
 * stack pointer; in a system call, g.syscallpc and g.syscallsp; a goroutine
 * not yet started, its function's entry. Each frame's caller is at sp plus
 * the frame's size there (pcsp); a frame's pc is a return address, looked
 * up at pc - 1 (the call's line), but for the entry and for the frame a
 * signal interrupted (below asyncPreempt, sigpanic), whose pc is where it
 * stopped.
 */
#include "tasks/goroutines.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/util.h"
#include "tasks/gopcln.h"

/* g.atomicstatus (runtime2.go) */
enum {
	G_IDLE, G_RUNNABLE, G_RUNNING, G_SYSCALL, G_WAITING, G_MORIBUND, G_DEAD, G_ENQUEUE,
	G_COPYSTACK, G_PREEMPTED, G_LEAKED, G_DEADEXTRA,
	G_SCAN = 0x1000,
};

/* How often a changing goroutine is read again before it is called torn. */
#define TRIES 4
/* Inlined calls at one pc at most. */
#define INLINE_MAX 32
/* The bytes of a g read: past every field read in every version. */
#define G_BYTES 512

struct walk {
	const struct go_binary *gb;
	const struct go_task_offsets *off;
	struct gopcln pcl;
	uint64_t bias;
	const struct task_mem *m;
	struct task_list *l;
	uint8_t *frame_buf;	/* a stack's frames before they are kept */
};

static int mem(const struct walk *w, uint64_t addr, void *buf, size_t len)
{
	return w->m->read(w->m->ctx, addr, buf, len);
}

static uint64_t g_u64(const uint8_t *g, int32_t off)
{
	uint64_t v = 0;

	if (off >= 0 && off + 8 <= G_BYTES)
		memcpy(&v, g + off, 8);
	return v;
}

static uint32_t g_u32(const uint8_t *g, int32_t off)
{
	uint32_t v = 0;

	if (off >= 0 && off + 4 <= G_BYTES)
		memcpy(&v, g + off, 4);
	return v;
}

static const char *func_name(const struct walk *w, const struct gofunc *f)
{
	return gopcln__name(&w->pcl, f->name);
}

/* The frames of pc (link-time) in f, inlined calls first: how many were added. */
static int add_frames(struct walk *w, const struct gofunc *f, uint64_t pc, uint64_t rpc, int room)
{
	uint32_t tree = gopcln__funcdata(&w->pcl, f, GO_FUNCDATA_INLTREE);
	uint32_t pcd = gopcln__pcdata(&w->pcl, f, GO_PCDATA_INLTREE);
	size_t esize = gopcln__inline_size(&w->pcl);
	int32_t ix = tree != UINT32_MAX && pcd && w->gb->walk.gofunc
			     ? gopcln__value(&w->pcl, f, pcd, pc)
			     : -1;
	int n = 0;

	for (int k = 0; ix >= 0 && k < INLINE_MAX && n < room - 1; k++) {
		uint8_t e[20];
		struct goinline in;
		const char *file = gopcln__file(&w->pcl, f, pc);
		struct task_frame fr = { .pc = rpc, .inlined = 1,
					 .line = gopcln__value(&w->pcl, f, f->pcln, pc) };

		if (mem(w, w->gb->walk.gofunc + w->bias + tree + (uint64_t)ix * esize, e, esize))
			break;
		gopcln__inline(&w->pcl, e, &in);
		fr.function = task_list__str(w->l, gopcln__name(&w->pcl, in.name), 4096);
		fr.file = task_list__str(w->l, file, 4096);
		if (fr.line < 0)
			fr.line = 0;
		if (task_list__frame(w->l, &fr))
			return n;
		n++;
		if (in.parent_pc < 0 || (uint64_t)in.parent_pc >= f->end - f->entry)
			break;
		pc = f->entry + (uint64_t)in.parent_pc;
		ix = gopcln__value(&w->pcl, f, pcd, pc);
	}
	struct task_frame fr = { .pc = rpc,
				 .function = task_list__str(w->l, func_name(w, f), 4096),
				 .file = task_list__str(w->l, gopcln__file(&w->pcl, f, pc), 4096),
				 .line = gopcln__value(&w->pcl, f, f->pcln, pc) };
	if (fr.line < 0)
		fr.line = 0;
	return task_list__frame(w->l, &fr) ? n : n + 1;
}

static bool named(const char *name, const char *s)
{
	return name && !strcmp(name, s);
}

/* A function a signal's handler makes look called: the frame below it stopped, not called. */
static bool injected(const char *name)
{
	return named(name, "runtime.asyncPreempt") || named(name, "runtime.sigpanic") ||
	       named(name, "runtime.debugCallV2");
}

/* Where a stack ends: nothing called these. */
static bool outermost(const char *name)
{
	return named(name, "runtime.goexit") || named(name, "runtime.mstart") ||
	       named(name, "runtime.rt0_go") || named(name, "runtime.systemstack");
}

/*
 * The stack from pc and sp (run-time addresses), within [lo, hi): its
 * frames added to the last task. 0, or -EAGAIN when what was read does
 * not hold together (the goroutine moved on meanwhile).
 */
static int unwind(struct walk *w, uint64_t pc, uint64_t sp, uint64_t lo, uint64_t hi)
{
	bool after_injected = false;
	int frames = 0;

	for (int depth = 0; depth < GO_STACK_MAX && frames < GO_STACK_MAX; depth++) {
		uint64_t lpc = pc - w->bias, ret;
		struct gofunc f;
		const char *name;
		int32_t size;

		/* a pc in no Go function: the stack goes on in C (cgo), or ends */
		if (!gopcln__find(&w->pcl, lpc, &f))
			return 0;
		name = func_name(w, &f);
		if (outermost(name))
			return 0;
		frames += add_frames(w, &f, lpc > f.entry && !after_injected ? lpc - 1 : lpc, pc,
				     GO_STACK_MAX - frames);
		after_injected = injected(name);
		size = gopcln__value(&w->pcl, &f, f.pcsp, lpc);
		if (size < 0 || sp < lo || sp >= hi || hi - sp < 8 || (uint64_t)size > hi - sp - 8)
			return -EAGAIN;
		if (mem(w, sp + (uint64_t)size, &ret, sizeof(ret)))
			return -EAGAIN;
		sp += (uint64_t)size + 8;
		pc = ret;
	}
	return 0;
}

/* The start function's name: a system goroutine's is the runtime's (but runtime.main). */
static bool system_goroutine(const char *start)
{
	return start && ((!strncmp(start, "runtime.", 8) && strcmp(start, "runtime.main")) ||
			 strstr(start, "runtime_registerUniqueMapCleanup"));
}

/* Where go statement gopc made it: its frame. */
static void created_at(struct walk *w, uint64_t gopc, struct task_frame *out)
{
	uint64_t lpc = gopc - w->bias;
	struct gofunc f;

	if (!gopc || !gopcln__find(&w->pcl, lpc, &f))
		return;
	if (lpc > f.entry)
		lpc--;
	*out = (struct task_frame){
		.pc = gopc,
		.function = task_list__str(w->l, func_name(w, &f), 4096),
		.file = task_list__str(w->l, gopcln__file(&w->pcl, &f, lpc), 4096),
		.line = gopcln__value(&w->pcl, &f, f.pcln, lpc),
	};
	if (out->line < 0)
		out->line = 0;
}

/* The state a status says; -1 for a goroutine not alive. */
static int state_of(uint32_t status)
{
	switch (status & ~(uint32_t)G_SCAN) {
	case G_RUNNABLE:
	case G_PREEMPTED:
		return TASK_RUNNABLE;
	case G_RUNNING:
		return TASK_RUNNING;
	case G_SYSCALL:
		return TASK_SYSCALL;
	case G_WAITING:
	case G_LEAKED:
		return TASK_WAITING;
	case G_DEAD:
	case G_DEADEXTRA:
		return -1;
	default:
		return TASK_OTHER;
	}
}

/* What tells a read that held together from one that did not. */
struct g_mark {
	uint64_t goid, sp, lo;
	uint32_t status;
};

static struct g_mark mark_of(const struct walk *w, const uint8_t *g)
{
	const struct go_offsets *o = &w->gb->off;

	return (struct g_mark){ .goid = g_u64(g, o->g_goid), .sp = g_u64(g, w->off->g_sched_sp),
				.lo = g_u64(g, w->off->g_stack_lo),
				.status = g_u32(g, o->g_atomicstatus) };
}

static bool same(const struct walk *w, const uint8_t *g, const uint8_t *again)
{
	struct g_mark a = mark_of(w, g), b = mark_of(w, again);

	return a.goid == b.goid && a.sp == b.sp && a.lo == b.lo && a.status == b.status;
}

static bool unsettled(uint32_t status)
{
	return status & G_SCAN || status == G_COPYSTACK;
}

/* Whether the g at addr is goroutine id's (its id alone read), kept in found (may be NULL). */
static bool is_goroutine(const struct walk *w, uint64_t addr, uint64_t id, struct u64map *found)
{
	uint64_t goid;

	if (mem(w, addr + (uint64_t)w->gb->off.g_goid, &goid, sizeof(goid)))
		return false;
	if (found && goid) {
		/* full: begun again, with what is met from now on */
		if (found->len >= GO_FOUND_MAX && !u64map__get(found, goid))
			u64map__clear(found);
		u64map__set(found, goid, (void *)(uintptr_t)addr);
	}
	return goid == id;
}


/*
 * One goroutine (its g at addr) as the last task of the list, or none when
 * it is dead. 0, -EAGAIN when it changed as it was read (its task then has
 * no frames), -errno.
 */
static int read_one(struct walk *w, uint64_t addr, const struct goroutines_opts *o, bool last_try)
{
	const struct go_offsets *go = &w->gb->off;
	const struct go_task_offsets *to = w->off;
	uint8_t g[G_BYTES], again[G_BYTES];
	uint64_t pc, sp, startpc, waitsince;
	const char *start;
	struct task_info *t;
	size_t first;
	int state, err = 0;
	uint32_t status;
	bool system;

	if (mem(w, addr, g, sizeof(g)))
		return -EAGAIN;
	status = g_u32(g, go->g_atomicstatus);
	state = state_of(status);
	if (state < 0)
		return 0;
	/* being scanned, or its stack moved: read again (or, the last time, torn) */
	if (unsettled(status) && !last_try)
		return -EAGAIN;
	startpc = g_u64(g, go->g_startpc);
	start = golang__func_at(w->gb, startpc - w->bias);
	system = system_goroutine(start);
	if (system && !o->system) {
		w->l->nr_hidden++;
		return 0;
	}
	first = w->l->nr_frames;
	t = task_list__add(w->l);
	if (!t)
		return -ENOMEM;
	t->id = g_u64(g, go->g_goid);
	t->state = (uint8_t)state;
	t->flags = system ? TASK_SYSTEM : 0;
	t->name = task_list__str(w->l, golang__goroutine_name(w->gb, startpc - w->bias), 4096);
	created_at(w, g_u64(g, to->g_gopc), &t->created);
	if (state == TASK_WAITING) {
		uint8_t r = g[go->g_waitreason];

		if (r < GO_WAIT_MAX && w->gb->walk.wait_names[r][0])
			t->wait = task_list__str(w->l, w->gb->walk.wait_names[r], GO_WAIT_NAME);
		waitsince = g_u64(g, to->g_waitsince);
		if (waitsince && o->now_ns > waitsince) {
			t->waited_ns = (int64_t)(o->now_ns - waitsince);
			t->flags |= TASK_WAIT_ESTIMATE;
		}
	}
	if (state == TASK_RUNNING || state == TASK_SYSCALL) {
		uint64_t m = g_u64(g, go->g_m), tid = 0;

		if (m && !mem(w, m + (uint64_t)to->m_procid, &tid, sizeof(tid)))
			t->thread = (uint32_t)tid;
	}
	/* a running goroutine's saved registers are stale: where it runs is not known */
	if (state == TASK_RUNNING || state == TASK_OTHER)
		return 0;
	if (unsettled(status))
		err = -EAGAIN;
	if (state == TASK_SYSCALL) {
		pc = g_u64(g, to->g_syscallpc);
		sp = g_u64(g, to->g_syscallsp);
	} else {
		pc = g_u64(g, to->g_sched_pc);
		sp = g_u64(g, to->g_sched_sp);
	}
	if (!err)
		err = unwind(w, pc, sp, g_u64(g, to->g_stack_lo), g_u64(g, to->g_stack_hi));
	if (!err && mem(w, addr, again, sizeof(again)))
		err = -EAGAIN;
	if (!err && !same(w, g, again))
		err = -EAGAIN;
	if (err == -EAGAIN) {
		/* what it read is not kept: read again, or torn */
		t = &w->l->tasks[w->l->nr_tasks - 1];
		w->l->nr_frames = first;
		t->nr_frames = 0;
		if (!last_try)
			w->l->nr_tasks--;
		else
			t->flags |= TASK_TORN;
	}
	return err;
}

/* One goroutine read, again while it changes under the reader, then torn. */
static int read_again(struct walk *w, uint64_t addr, const struct goroutines_opts *o)
{
	int err = -EAGAIN;

	for (int k = 0; err == -EAGAIN && k < TRIES; k++)
		err = read_one(w, addr, o, k == TRIES - 1);
	if (err == -EAGAIN)
		w->l->nr_torn++;
	return err;
}

int goroutines__read(const struct go_binary *gb, const uint8_t *file, size_t file_size,
		     uint64_t bias, const struct task_mem *m, const struct goroutines_opts *o,
		     struct task_list *l)
{
	const struct go_walk *gw = &gb->walk;
	struct walk w = { .gb = gb, .off = &gw->off, .bias = bias, .m = m, .l = l };
	uint64_t n, array;
	uint64_t *gs;

	snprintf(l->runtime, sizeof(l->runtime), "go");
	snprintf(l->version, sizeof(l->version), "%s", gb->version);
	if (!gw->allglen || !gw->allgptr) {
		snprintf(l->note, sizeof(l->note),
			 "runtime.allglen and allgptr not found in %s's code (runtime.forEachGRace): "
			 "goroutines cannot be listed", gb->version);
		return -ENOTSUP;
	}
	if (gw->off.g_sched_sp < 0 || gw->off.g_sched_pc < 0 || gw->off.g_stack_hi < 0 ||
	    gw->off.g_syscallsp < 0 || gb->off.g_goid < 0 || gb->off.g_atomicstatus < 0 ||
	    gb->off.g_waitreason < 0 || gb->off.g_waitreason >= G_BYTES) {
		snprintf(l->note, sizeof(l->note),
			 "where %s keeps a goroutine's saved registers is not known (no DWARF, and "
			 "not a version asynctraced knows)", gb->version);
		return -ENOTSUP;
	}
	if (gw->pclntab_off > file_size || gw->pclntab_size > file_size - gw->pclntab_off ||
	    gopcln__init(&w.pcl, file + gw->pclntab_off, gw->pclntab_size, gw->text)) {
		snprintf(l->note, sizeof(l->note), ".gopclntab not readable: no stacks");
		return -ENOTSUP;
	}
	/* one asked for and met before: its g, if it still is its */
	if (o->only && o->found) {
		uint64_t at = (uint64_t)(uintptr_t)u64map__get(o->found, o->only);

		if (at && is_goroutine(&w, at, o->only, NULL)) {
			read_again(&w, at, o);
			return 0;
		}
		/* that g is another goroutine's now */
		if (at)
			u64map__del(o->found, o->only);
	}
	/* allglen first: the array it counts is never shorter */
	if (mem(&w, gw->allglen + bias, &n, sizeof(n)) ||
	    mem(&w, gw->allgptr + bias, &array, sizeof(array)))
		return -EIO;
	if (n > GO_GOROUTINES_MAX)
		return -EIO;
	gs = malloc((n ? n : 1) * sizeof(*gs));
	if (!gs)
		return -ENOMEM;
	if (n && mem(&w, array, gs, n * sizeof(*gs))) {
		free(gs);
		return -EIO;
	}
	/* one looked for goes on from where the last given up stopped, round the array */
	uint64_t from = o->only && o->resume && *o->resume < n ? *o->resume : 0;

	for (uint64_t k = 0; k < n; k++) {
		uint64_t i = (from + k) % n;
		int err;

		if (o->only && o->deadline_ns && k && k % 256 == 0 && now_ns() > o->deadline_ns) {
			if (o->resume)
				*o->resume = i;
			snprintf(l->note, sizeof(l->note), "%s, after %llu goroutines",
				 TASKS_NOTE_GAVE_UP, (unsigned long long)k);
			break;
		}
		if (o->only && !is_goroutine(&w, gs[i], o->only, o->found))
			continue;
		/* the next look begins here, past what this one met */
		if (o->only && o->resume)
			*o->resume = i;
		err = read_again(&w, gs[i], o);
		if (err == -ENOMEM || o->only)
			break;
	}
	free(gs);
	if (!gw->gofunc && !l->note[0])
		snprintf(l->note, sizeof(l->note),
			 "the moduledata was not found: inlined calls are not shown as frames");
	return 0;
}
