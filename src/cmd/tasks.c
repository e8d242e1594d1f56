// SPDX-License-Identifier: MIT
/*
 * `asynctraced tasks -p PID`: where each task waits, like ps for tasks.
 * Each process's executable and memory are read by the analyser (as
 * tracing's files are), nothing attached and nothing stopped; the list is
 * printed as text, or with --json as one JSON object a process.
 */
#include "cmd/tasks.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "analyser/analyser.h"
#include "lib/outbuf.h"
#include "lib/util.h"
#include "source/thread_ptrs.h"
#include "stacks/callstacks.h"
#include "targets/discover.h"
#include "targets/scan.h"
#include "targets/target.h"
#include "tasks/tasks.h"

/* "350ms", "12.5s", "3m20s", "2h05m" */
static void fmt_wait(char *buf, size_t len, int64_t ns)
{
	uint64_t s = (uint64_t)ns / 1000000000u;

	if (ns < 1000000000)
		snprintf(buf, len, "%" PRId64 "ms", ns / 1000000);
	else if (s < 60)
		snprintf(buf, len, "%.1fs", (double)ns / 1e9);
	else if (s < 3600)
		snprintf(buf, len, "%" PRIu64 "m%02" PRIu64 "s", s / 60, s % 60);
	else
		snprintf(buf, len, "%" PRIu64 "h%02" PRIu64 "m", s / 3600, s / 60 % 60);
}

/*
 * A string of the target's (its names, its files) as text: a control
 * character (a terminal's escape) shown as '?', never written.
 */
static void put_text(struct outbuf *ob, const char *s)
{
	for (; s && *s; s++)
		ob_putc(ob, (unsigned char)*s < 0x20 || *s == 0x7f ? '?' : *s);
}

static const char *str(const struct task_list *l, uint32_t i)
{
	return task_list__at(l, i);
}

/* Whether a list's frames go outermost first (a future and what it awaits), not innermost. */
static bool outer_first(const struct task_list *l)
{
	return !strcmp(l->runtime, "tokio");
}

/*
 * Where a task waits: the innermost frame of the program's own code (not its
 * runtime's or std's) that has a line; else (a wait all in libraries, as a
 * net/http connection's read) the innermost with a line outside the
 * runtime; else the innermost.
 */
static const struct task_frame *wait_point(const struct task_list *l, const struct task_info *t)
{
	bool outer = outer_first(l);

	for (int pass = 0; pass < 2; pass++)
		for (uint32_t k = 0; k < t->nr_frames; k++) {
			const struct task_frame *f =
				&l->frames[t->first_frame + (outer ? t->nr_frames - 1 - k : k)];
			const char *fn = str(l, f->function);

			if (f->line && (pass ? !callstacks__runtime_function(fn)
					     : callstacks__own_function(fn)))
				return f;
		}
	return t->nr_frames ? &l->frames[t->first_frame + (outer ? t->nr_frames - 1 : 0)] : NULL;
}

/* Whether the program made it (the runtime makes the main goroutine, and its own). */
static bool created_by_program(const struct task_list *l, const struct task_info *t)
{
	const char *fn = str(l, t->created.function);

	return fn && strncmp(fn, "runtime.", 8);
}

static void put_where(struct outbuf *ob, const struct task_list *l, const struct task_frame *f)
{
	const char *fn = str(l, f->function), *file = str(l, f->file);

	put_text(ob, fn ? fn : "?");
	if (file) {
		ob_puts(ob, " at ");
		put_text(ob, file);
		if (f->line) {
			ob_putc(ob, ':');
			ob_i64(ob, f->line);
		}
	}
}

static void put_state(struct outbuf *ob, const struct task_list *l, const struct task_info *t)
{
	char when[32];

	ob_puts(ob, task_state_names[t->state]);
	if (t->wait) {
		ob_puts(ob, " (");
		put_text(ob, str(l, t->wait));
		ob_putc(ob, ')');
	}
	if (t->thread) {
		ob_puts(ob, " on thread ");
		ob_u64(ob, t->thread);
	}
	if (t->waited_ns >= 0) {
		fmt_wait(when, sizeof(when), t->waited_ns);
		ob_puts(ob, t->flags & TASK_WAIT_ESTIMATE ? " for ~" : " for ");
		ob_puts(ob, when);
	}
}

static void print_text(struct outbuf *ob, const struct target *tg, const struct task_list *l)
{
	const char *unit = strcmp(l->runtime, "go") ? "tasks" : "goroutines";

	ob_puts(ob, "pid ");
	ob_u64(ob, (uint64_t)tg->pid);
	ob_puts(ob, " (");
	put_text(ob, tg->comm);
	ob_puts(ob, "): ");
	put_text(ob, l->version[0] ? l->version : l->runtime);
	ob_puts(ob, ", ");
	ob_u64(ob, l->nr_tasks);
	ob_putc(ob, ' ');
	ob_puts(ob, unit);
	if (l->nr_hidden) {
		ob_puts(ob, " (and ");
		ob_u64(ob, l->nr_hidden);
		ob_puts(ob, " of the runtime's own: --all shows them)");
	}
	ob_putc(ob, '\n');
	if (l->note[0]) {
		ob_puts(ob, "note: ");
		put_text(ob, l->note);
		ob_putc(ob, '\n');
	}
	for (size_t i = 0; i < l->nr_tasks; i++) {
		const struct task_info *t = &l->tasks[i];
		const struct task_frame *w = wait_point(l, t);

		ob_putc(ob, '\n');
		ob_u64(ob, t->id);
		ob_putc(ob, ' ');
		put_text(ob, str(l, t->name) ? str(l, t->name) : "?");
		ob_puts(ob, ": ");
		put_state(ob, l, t);
		if (t->flags & TASK_TORN)
			ob_puts(ob, "; changed while read, where is not shown");
		else if (w && (t->state == TASK_WAITING || t->state == TASK_SYSCALL)) {
			ob_puts(ob, t->state == TASK_WAITING ? ", parked at " : ", in it at ");
			put_where(ob, l, w);
		}
		ob_putc(ob, '\n');
		for (uint32_t k = 0; k < t->nr_frames; k++) {
			const struct task_frame *f = &l->frames[t->first_frame + k];

			ob_puts(ob, "    ");
			for (int d = 0; d < f->depth && d < 32; d++)
				ob_puts(ob, "  ");
			put_where(ob, l, f);
			if (f->inlined)
				ob_puts(ob, " (inlined)");
			ob_putc(ob, '\n');
		}
		if (created_by_program(l, t)) {
			ob_puts(ob, "    created by ");
			put_where(ob, l, &t->created);
			ob_putc(ob, '\n');
		}
	}
}

static void json_frame(struct outbuf *ob, const struct task_list *l, const struct task_frame *f)
{
	ob_puts(ob, "{\"function\":");
	ob_json_str(ob, str(l, f->function) ? str(l, f->function) : "");
	if (str(l, f->file))
		ob_key_str(ob, ",\"file\":", str(l, f->file));
	if (f->line)
		ob_key_u64(ob, ",\"line\":", (uint64_t)f->line);
	if (f->inlined)
		ob_puts(ob, ",\"inlined\":true");
	if (f->depth)
		ob_key_u64(ob, ",\"depth\":", f->depth);
	ob_putc(ob, '}');
}

static void print_json(struct outbuf *ob, const struct target *tg, const struct task_list *l)
{
	ob_key_u64(ob, "{\"pid\":", (uint64_t)tg->pid);
	ob_key_str(ob, ",\"comm\":", tg->comm);
	ob_key_str(ob, ",\"runtime\":", l->runtime);
	ob_key_str(ob, ",\"version\":", l->version);
	if (l->note[0])
		ob_key_str(ob, ",\"note\":", l->note);
	ob_key_u64(ob, ",\"hidden\":", l->nr_hidden);
	ob_key_u64(ob, ",\"torn\":", l->nr_torn);
	ob_puts(ob, ",\"tasks\":[");
	for (size_t i = 0; i < l->nr_tasks; i++) {
		const struct task_info *t = &l->tasks[i];
		const struct task_frame *w = wait_point(l, t);

		ob_puts(ob, i ? ",{" : "{");
		ob_key_u64(ob, "\"id\":", t->id);
		ob_key_str(ob, ",\"name\":", str(l, t->name) ? str(l, t->name) : "");
		ob_key_str(ob, ",\"state\":", task_state_names[t->state]);
		if (t->wait)
			ob_key_str(ob, ",\"wait\":", str(l, t->wait));
		if (t->waited_ns >= 0) {
			ob_key_u64(ob, ",\"waited_ns\":", (uint64_t)t->waited_ns);
			if (t->flags & TASK_WAIT_ESTIMATE)
				ob_puts(ob, ",\"waited_estimate\":true");
		}
		if (t->thread)
			ob_key_u64(ob, ",\"thread\":", t->thread);
		if (t->flags & TASK_SYSTEM)
			ob_puts(ob, ",\"system\":true");
		if (t->flags & TASK_TORN)
			ob_puts(ob, ",\"torn\":true");
		if (created_by_program(l, t)) {
			ob_puts(ob, ",\"created_at\":");
			json_frame(ob, l, &t->created);
		}
		if (w && (t->state == TASK_WAITING || t->state == TASK_SYSCALL) &&
		    !(t->flags & TASK_TORN)) {
			ob_puts(ob, ",\"waits_at\":");
			json_frame(ob, l, w);
		}
		ob_puts(ob, ",\"stack\":[");
		for (uint32_t k = 0; k < t->nr_frames; k++) {
			if (k)
				ob_putc(ob, ',');
			json_frame(ob, l, &l->frames[t->first_frame + k]);
		}
		ob_puts(ob, "]}");
	}
	ob_puts(ob, "]}\n");
}

/*
 * One process's snapshot printed: 0, or an exit status after a message.
 * host: one of the host's, examined first (its runtime found as tracing
 * finds it); one with none is let be, one that cannot be read only said.
 */
static int one(const struct options *o, struct analyser *a, pid_t pid, struct outbuf *ob,
	       bool host)
{
	struct task_list l;
	struct target t;
	int err = target__open(&t, pid);

	if (host && !err) {
		struct discovery d = { 0 };
		bool known = !analyser__examine(a, &t, &(struct analyser_opts){ .remember = true },
						&d) &&
			     (d.kind == RUNTIME_GO || d.kind == RUNTIME_TOKIO);

		discovery__free(&d);
		if (!known) {
			target__close(&t);
			return -1;
		}
	}
	if (host && err) /* gone meanwhile, or not ours to read */
		return -1;
	if (err == -ESRCH) {
		err_msg("no process %d\n", pid);
		return EXIT_FAIL;
	}
	if (err) {
		err_msg("pid %d: %s (reading a process's memory needs root)\n", pid, strerror(-err));
		return EXIT_FAIL;
	}
	/* its threads' pointers, where their thread-locals are (tokio's CONTEXT) */
	uint64_t *fsbase = NULL;
	size_t nr = 0;

	thread_ptrs__read(pid, &fsbase, &nr);
	err = analyser__tasks(a, &t, o->tasks_all, fsbase, (uint32_t)nr, &l);
	free(fsbase);
	if (err == -EACCES)
		err_msg("pid %d (%s): its memory cannot be read (reading it needs root)\n", pid,
			t.comm);
	else if (err == -ENOENT)
		err_msg("pid %d (%s): %s\n", pid, t.comm,
			l.note[0] ? l.note : "no runtime whose tasks asynctraced reads");
	else if (err && err != -EIO && err != -EBADMSG)
		log_msg(host ? 4 : 3, "pid %d (%s): its tasks cannot be read: %s\n", pid, t.comm,
			l.note[0] ? l.note : strerror(-err));
	if (!err) {
		if (o->tasks_json)
			print_json(ob, &t, &l);
		else
			print_text(ob, &t, &l);
		if (l.nr_torn && !o->tasks_json)
			err_msg("pid %d: %u tasks changed while they were read (shown torn, without "
				"where they wait)\n", pid, l.nr_torn);
	}
	task_list__free(&l);
	target__close(&t);
	return err ? EXIT_FAIL : EXIT_OK;
}

/* The host's processes, once each: their pids into a growing array. */
struct pids {
	pid_t *pid;
	size_t nr, cap;
};

static int add_pid(void *ctx, pid_t pid, const char *comm)
{
	struct pids *p = ctx;

	(void)comm;
	if (pid == getpid())
		return 0;
	if (p->nr == p->cap) {
		size_t cap = p->cap ? p->cap * 2 : 256;
		pid_t *more = realloc(p->pid, cap * sizeof(*more));

		if (!more)
			return -ENOMEM;
		p->pid = more;
		p->cap = cap;
	}
	p->pid[p->nr++] = pid;
	return 0;
}

/*
 * Without -p: every process of the host whose runtime's tasks are read, as
 * tracing the host finds them. EXIT_FAIL when none could be listed.
 */
static int every_process(const struct options *o, struct analyser *a, struct outbuf *ob)
{
	struct scan_filter f;
	struct u64map seen;
	struct pids p = { 0 };
	char why[256];
	int listed = 0, err;

	u64map__init(&seen);
	err = scan_filter__init(&f, NULL, NULL, NULL, why, sizeof(why));
	if (!err)
		err = scan__new_processes(&f, &seen, add_pid, &p);
	scan_filter__free(&f);
	u64map__clear(&seen);
	for (size_t i = 0; !err && i < p.nr; i++) {
		if (a->pid <= 0 && analyser__start(a, a->timeout_ms))
			break;
		if (one(o, a, p.pid[i], ob, true) == EXIT_OK)
			listed++;
	}
	free(p.pid);
	if (err)
		err_msg("the host's processes cannot be listed: %s\n", strerror(-err));
	else if (!listed)
		err_msg("no process of the host runs a runtime whose tasks asynctraced reads "
			"(Go, or tokio built with debug = 2)\n");
	return listed && !err ? EXIT_OK : EXIT_FAIL;
}

int tasks__main(const struct options *o)
{
	const char *path = o->session.out.output ? o->session.out.output : "-";
	struct analyser a = { 0 };
	struct outbuf *ob;
	int status = EXIT_OK, err = outbuf__open(&ob, path);

	if (err) {
		err_msg("%s: %s\n", path, outbuf__strerror(err));
		return EXIT_FAIL;
	}
	u64map__init(&a.primed);
	err = analyser__start(&a, o->session.examine_timeout_ms ? o->session.examine_timeout_ms
								 : ANALYSER_TIMEOUT_MS);
	if (err) {
		outbuf__free(ob);
		return EXIT_FAIL;
	}
	if (!o->session.nr_pids)
		status = every_process(o, &a, ob);
	for (size_t i = 0; i < o->session.nr_pids; i++) {
		if (a.pid <= 0 && analyser__start(&a, a.timeout_ms))
			break;
		if (one(o, &a, o->session.pids[i], ob, false))
			status = EXIT_FAIL;
	}
	analyser__stop(&a);
	err = outbuf__flush(ob);
	if (err) {
		err_msg("%s: %s\n", path, strerror(-err));
		status = EXIT_FAIL;
	}
	outbuf__free(ob);
	return status;
}
