/* SPDX-License-Identifier: MIT */
/*
 * Finding Go's runtime inside an unmodified binary (issue 17, its first
 * part): the Go version (.go.buildinfo), the scheduler functions to probe
 * (from .symtab, or from .gopclntab, which a stripped binary keeps), and
 * where in the runtime's structures the fields the probes read are (g.goid,
 * g.m, m.p, p.id, p's run queue): from DWARF, or, for a binary built
 * without it (-ldflags=-w), from a table of the layouts checked here.
 */
#ifndef GOLANG_H
#define GOLANG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The scheduler functions (docs/go.md says what each one marks). */
enum go_func {
	GO_EXECUTE,		/* runtime.execute(gp): gp starts running on a P */
	GO_CASGSTATUS,		/* runtime.casgstatus(gp, old, new): a status change */
	GO_READY,		/* runtime.ready(gp): the wake */
	GO_RUNQSTEAL,		/* runtime.runqsteal(pp, p2): pp steals from p2 */
	GO_NEWPROC1,		/* runtime.newproc1(fn, callergp): a goroutine is made */
	GO_HANDOFFP,		/* runtime.handoffp(pp): pp taken from a goroutine in a system call */
	GO_STOP_THE_WORLD,	/* runtime.stopTheWorldWithSema: every P taken */
	GO_PREEMPT_PARK,	/* runtime.preemptPark(gp): gp stopped for the GC, no casgstatus */
	GO_FUNC_MAX,
};

/*
 * Whether the probes do without f when a binary lacks it: the functions
 * that tell a run which lost its P (without them, such a run may be called
 * a long poll) or was stopped for the garbage collector (without it, that
 * run's end is seen late).
 */
static inline bool golang__optional(int f)
{
	return f == GO_HANDOFFP || f == GO_STOP_THE_WORLD || f == GO_PREEMPT_PARK;
}

/* Byte offsets of the fields read, -1 unknown. */
struct go_offsets {
	int32_t g_goid, g_m, g_atomicstatus;
	int32_t g_startpc;	/* the goroutine's function: what names it */
	int32_t g_preempt;	/* a preemption was asked of it */
	int32_t g_waitreason;	/* why it is parked (a waitReason, a byte) */
	int32_t m_p, m_curg;	/* an M's P, and the goroutine it runs */
	int32_t p_id, p_runqhead, p_runqtail;
	int32_t p_runq;		/* the local run queue's ring: [256]guintptr */
	/*
	 * What tells one run slice from the next without a probe (sample
	 * mode): g.trackingSeq, a byte casgstatus() bumps each time the
	 * goroutine leaves running (since Go 1.17), and p.schedtick, which
	 * execute() bumps for each slice a P starts anew.
	 */
	int32_t g_tracking_seq, p_schedtick;
};

/* A function of the binary: where it starts (link-time) and its name. */
struct go_func_entry {
	uint64_t addr, size;
	uint32_t name;		/* offset in go_binary.names */
	uint32_t goroutine;	/* ... of the name of a goroutine started in it */
};

/*
 * What `asynctraced tasks` needs besides (src/tasks/goroutines.c): where a
 * goroutine's stack and saved registers are, and how it came to be.
 */
struct go_task_offsets {
	int32_t g_stack_lo, g_stack_hi;	/* its stack's bounds */
	int32_t g_sched_sp, g_sched_pc, g_sched_bp; /* g.sched: where it stopped */
	int32_t g_syscallsp, g_syscallpc; /* ... or entered a system call */
	int32_t g_waitsince;		/* a nanotime the GC sets, 0 until then */
	int32_t g_gopc;			/* the go statement that made it */
	int32_t m_procid;		/* an M's thread id */
};

/* Wait reasons named, at most, and each name's length with its NUL. */
#define GO_WAIT_MAX 64
#define GO_WAIT_NAME 48

/* Where the goroutines are, in a Go binary (link-time addresses; 0: not found). */
struct go_walk {
	/*
	 * runtime.allglen and runtime.allgptr: how many goroutines there are
	 * and the array of them, as the runtime itself reads them without its
	 * lock (forEachGRace): the array only grows, so allglen read first
	 * never indexes past it.
	 */
	uint64_t allglen, allgptr;
	uint64_t text;			/* where pclntab's entry offsets count from */
	uint64_t gofunc;		/* moduledata.gofunc: funcdata offsets count from it */
	uint64_t pclntab_addr;		/* .gopclntab: its address, place in the file, size */
	uint64_t pclntab_off, pclntab_size;
	struct go_task_offsets off;
	char wait_names[GO_WAIT_MAX][GO_WAIT_NAME]; /* by g.waitreason; "" unknown */
};

struct go_binary {
	char version[32];	/* "go1.19.8" */
	int major, minor;	/* 1, 19 */
	bool has_symtab;	/* false: stripped, functions from .gopclntab */
	bool has_dwarf;		/* false: offsets from the version table */
	bool pie;		/* position-independent: loaded away from its link-time addresses */
	uint64_t funcs[GO_FUNC_MAX]; /* link-time addresses; 0: not found */
	struct go_offsets off;
	/*
	 * Where the running g is, from the thread pointer (FS): -8 when Go
	 * links the program itself; in the executable's TLS block when an
	 * external linker did (cgo). Read from the runtime's own code; 0:
	 * not found (sample mode cannot read this binary).
	 */
	int32_t tls_g;
	/*
	 * The wait reasons (g.waitreason's values, which differ between
	 * versions; read from the binary's runtime.waitReasonStrings), as
	 * bit sets: may_lose, the waits only another goroutine ends (a channel,
	 * a select, a lock, a WaitGroup, a sync.Cond), where a goroutine can be
	 * leaked; never_woken, those nothing can end (a nil channel's send or
	 * receive). Both empty if the names were not found.
	 */
	uint64_t may_lose[4], never_woken[4];
	/* every function, by address: goroutines are named by their start function */
	struct go_func_entry *all;
	size_t nr_all, cap_all;
	char *names;
	size_t names_len, names_cap;
	struct go_walk walk;	/* not in the probe plan: tasks read it in the analyser */
};

extern const char *const go_func_names[GO_FUNC_MAX];

/* The layouts of Go major.minor checked here (no DWARF needed): 0, or -ENOENT. */
int golang__layout(int major, int minor, struct go_offsets *off, struct go_task_offsets *toff);

/* The largest file golang__detect reads: Go binaries are tens of MB. */
#define GO_FILE_MAX ((size_t)1 << 30)

/*
 * Reads the Go binary at path. 0: Go, with every function and offset
 * found; -ENOENT: not a Go program; -ENOEXEC: not ELF, or not a regular
 * file; -EFBIG: past GO_FILE_MAX (and said); -ENOTSUP: Go, but a layout we
 * do not know (no DWARF, and a version not in the table) or a function
 * missing; -errno otherwise. gb is filled as far as it was read. The file
 * is read whole into memory of our own, never mapped: its owner may be
 * anyone, and a mapping of it they truncate faults (SIGBUS) where read.
 */
int golang__detect(const char *path, struct go_binary *gb);
/* The same from a file's bytes in memory (size of them). */
int golang__detect_mem(const void *data, size_t size, struct go_binary *gb);
/* The function whose code holds addr (link-time), NULL if none: "main.handleConn". */
const char *golang__func_at(const struct go_binary *gb, uint64_t addr);
/*
 * A goroutine's name, from the function it starts in (link-time startpc):
 * a `go f(x)` statement starts the goroutine in a wrapper the compiler makes
 * (main.main.func1; main.main.gowrap1 from Go 1.21), which calls f: then
 * f's name, when the wrapper calls one function outside the runtime, as
 * golang__name_goroutines() found in the code. Else the function's own
 * name; NULL if none.
 */
const char *golang__goroutine_name(const struct go_binary *gb, uint64_t startpc);
/*
 * Reads in im (the binary's code) what each wrapper calls, for
 * golang__goroutine_name(): once, when the binary is read, so that naming
 * needs no code.
 */
struct elf_image;
void golang__name_goroutines(struct go_binary *gb, const struct elf_image *im);
/* The size of the function starting at addr; 0 if unknown. */
uint64_t golang__func_size(const struct go_binary *gb, uint64_t addr);
/*
 * The ret instructions of code (len bytes of a function at link-time
 * address addr), read with capstone: their addresses into out (at most
 * max); how many, or -errno.
 */
int golang__rets(const uint8_t *code, size_t len, uint64_t addr, uint64_t *out, size_t max);
/*
 * Whether the first len bytes of code (at link-time address addr) leave
 * the registers the Go probes read as they were: RAX, RBX, RCX (the first
 * arguments) and R14 (the current g). A probe may then move past them.
 */
bool golang__keeps_args(const uint8_t *code, size_t len, uint64_t addr);
/*
 * In runqsteal's code (len bytes at link-time addr), where only a steal
 * that took something goes: the instruction after `call runqgrab; test
 * eax, eax; je` (NOPs between; EAX: how many it took; every Go read,
 * 1.19-1.27). 0 if its code is not of that shape.
 */
uint64_t golang__steal_taken(const uint8_t *code, size_t len, uint64_t addr);

/*
 * A call of runtime.casgstatus(gp, old, new) in the binary's code: where
 * (link-time), and the statuses it changes between where the code sets
 * them as constants just before it (-1: not known there).
 */
struct go_status_site {
	uint64_t addr;
	int16_t from, to;
};

/* More calls than this (Go 1.19-1.27 make 38-40): the entry is probed instead. */
#define GO_STATUS_SITES 96

/*
 * Every call of runtime.casgstatus in the binary's code (im), read with
 * capstone, in address order, into out (at most max). How many, -E2BIG
 * past max, -errno.
 */
struct elf_image;
int golang__status_sites(const struct go_binary *gb, const struct elf_image *im,
			 struct go_status_site *out, size_t max);
/*
 * Whether the probes need a site's changes (at_go_change(), for every
 * status an unknown side may hold): no for the ones they ignore, and for
 * the changes into and out of a system call, which the run model takes
 * from the thread's sleeps instead (docs/go.md).
 */
bool golang__status_site_needed(const struct go_status_site *s);
void golang__free(struct go_binary *gb);

#endif
