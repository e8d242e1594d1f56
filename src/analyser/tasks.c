// SPDX-License-Identifier: MIT
/*
 * The privileged side of `asynctraced tasks` and of an alert's place: the
 * target's executable and memory opened here and handed to the analyser,
 * which reads them; its answer checked as it is decoded (tasks/tasks.c)
 * before any of it is used.
 */
#include "analyser/analyser.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "analyser/debug_files.h"
#include "analyser/wire.h"
#include "lib/util.h"
#include "stacks/unwind.h"
#include "tasks/tasks.h"

/* How long an alert's question may take, in milliseconds. */
#define WHERE_TIMEOUT_MS 3000

/* The request (threads' pointers after it), with t's memory and executable when fds; the answer into l. */
static int ask(struct analyser *a, const struct target *t, struct wire_tasks_req *r,
	       const uint64_t *fsbase, unsigned int timeout_ms, struct task_list *l)
{
	uint64_t deadline = now_ns() + (uint64_t)timeout_ms * 1000000;
	struct target_files fs = { 0 };
	size_t len;
	struct wire_hdr h;
	int32_t status;
	uint8_t *b = NULL, *msg;
	bool unread = false;	/* an answer's body left in the socket */
	int err = 0;

	task_list__init(l);
	if (a->pid <= 0)
		return -EIO;
	if (r->flags & WIRE_TASKS_FDS) {
		if (t->memfd < 0)
			return -EACCES;
		err = target__open_files(t, &fs);
		if (err)
			return err;
		if (fs.exe < 0) {
			target_files__close(&fs);
			return -ENOENT;
		}
		r->start = fs.f[fs.exe].map.start;
		r->end = fs.f[fs.exe].map.end;
		r->offset = fs.f[fs.exe].map.offset;
		r->name_len = (uint32_t)strnlen(fs.f[fs.exe].target_path, PATH_MAX - 1);
	}
	r->pid = t->pid;
	len = sizeof(*r) + (size_t)r->nr_threads * sizeof(*fsbase) + r->name_len;
	msg = malloc(len);
	if (!msg) {
		target_files__close(&fs);
		return -ENOMEM; /* nothing said yet: the socket is as it was */
	}
	memcpy(msg, r, sizeof(*r));
	if (r->nr_threads)
		memcpy(msg + sizeof(*r), fsbase, (size_t)r->nr_threads * sizeof(*fsbase));
	if (r->name_len)
		memcpy(msg + len - r->name_len, fs.f[fs.exe].target_path, r->name_len);
	err = wire__send(a->sock, WIRE_TASKS, msg, len);
	free(msg);
	if (!err && (r->flags & WIRE_TASKS_FDS))
		err = wire__send_fds(a->sock, (int[]){ t->memfd, fs.f[fs.exe].fd }, 2);
	target_files__close(&fs);
	/* the debug file its executable names, when it has no DWARF of its own */
	if (!err && (r->flags & WIRE_TASKS_FDS))
		err = analyser__give_debug(a, t->pid, deadline);
	if (!err)
		err = wire__read_hdr(a->sock, &h, deadline);
	if (err == 0)
		err = -EPIPE; /* the analyser ended without an answer */
	else if (err > 0)
		err = h.kind == WIRE_TASKLIST && h.len >= sizeof(status) && h.len <= WIRE_TASKLIST_MAX
			      ? 0
			      : -EBADMSG;
	if (!err) {
		b = malloc(h.len);
		unread = !b;
		err = b ? wire__read(a->sock, b, h.len, deadline) : -ENOMEM;
	}
	if (!err) {
		memcpy(&status, b, sizeof(status));
		err = tasks__decode(b + sizeof(status), h.len - sizeof(status), l);
		if (!err && (status > 0 || status < -4095))
			err = -EBADMSG;
		free(b);
		b = NULL;
		/* the answer read whole and sound: the analyser's own status is the result */
		if (!err)
			return status;
	}
	free(b);
	/*
	 * once the request is on its way, any failure leaves the exchange
	 * part done (an answer out of bounds or not read whole, a debug file
	 * not handed over): what is left would be read as the next answer; the
	 * analyser goes (started again when asked, but not once confined)
	 */
	{
		char ended[64];

		task_list__free(l);
		analyser__kill(a, ended, sizeof(ended));
		if (err == -EBADMSG)
			err_msg("the analyser answered out of bounds reading pid %d's tasks\n",
				t->pid);
		else
			err_msg("the analyser %s reading pid %d's tasks\n",
				err == -ETIMEDOUT ? "took too long"
				: unread	  ? "answered more than fits"
				: err == -EPIPE	  ? ended
						  : strerror(-err),
				t->pid);
	}
	return -EIO;
}

int analyser__tasks(struct analyser *a, const struct target *t, bool system,
		    const uint64_t *fsbase, uint32_t nr_threads, struct task_list *l)
{
	struct wire_tasks_req r = { .flags = WIRE_TASKS_FDS | (system ? WIRE_TASKS_SYSTEM : 0),
				    .nr_threads = nr_threads <= WIRE_THREADS_MAX ? nr_threads : 0 };

	return ask(a, t, &r, fsbase, a->timeout_ms, l);
}

int analyser__tasks_prime(struct analyser *a, const struct target *t, const uint64_t *fsbase,
			  uint32_t nr_threads, char *why, size_t len)
{
	struct wire_tasks_req r = { .flags = WIRE_TASKS_FDS | WIRE_TASKS_KEEP | WIRE_TASKS_NONE,
				    .nr_threads = nr_threads <= WIRE_THREADS_MAX ? nr_threads : 0 };
	struct task_list l;
	int err = ask(a, t, &r, fsbase, a->timeout_ms, &l);

	snprintf(why, len, "%s", l.note[0] ? l.note : err ? strerror(-err) : "");
	task_list__free(&l);
	return err;
}

int analyser__task_where(struct analyser *a, const struct target *t, uint64_t id,
			 const struct where_opts *o, struct stack_frame *frames, int max, bool *waits)
{
	struct wire_tasks_req r = { .flags = WIRE_TASKS_SYSTEM, .only = id,
				    .nr_threads = o->nr_threads <= WIRE_THREADS_MAX ? o->nr_threads
										: 0,
				    .bound_ms = o->bound_ms };
	struct task_list l;
	const struct task_info *ti;
	size_t bytes = 0;
	char *q;
	int n = 0;
	bool outer_first;

	/* an alert waits for it: a short bound (a process of a million goroutines takes ~1 s) */
	if (ask(a, t, &r, o->fsbase,
		a->timeout_ms < WHERE_TIMEOUT_MS ? a->timeout_ms : WHERE_TIMEOUT_MS, &l)) {
		task_list__free(&l);
		return -EIO;
	}
	/* tokio whose list was not found (its runtime not running yet): no list to look in */
	if (!strcmp(l.note, TASKS_NOTE_NO_RUNTIME_YET) || !strcmp(l.note, TASKS_NOTE_NO_THREADS)) {
		task_list__free(&l);
		return -EAGAIN;
	}
	/* looked for as long as allowed: not known whether it is there */
	if (!l.nr_tasks && !strncmp(l.note, TASKS_NOTE_GAVE_UP, strlen(TASKS_NOTE_GAVE_UP))) {
		task_list__free(&l);
		return -ETIMEDOUT;
	}
	if (l.nr_tasks != 1 || l.tasks[0].id != id || (l.tasks[0].flags & TASK_TORN)) {
		task_list__free(&l);
		return 0;
	}
	ti = &l.tasks[0];
	/* a tokio task's awaits go outermost first: turned innermost first, as stacks go */
	outer_first = !strcmp(l.runtime, "tokio");
	/*
	 * still where it waited: parked, or a tokio task notified and not yet
	 * polled (a runnable goroutine may have been stopped anywhere instead)
	 */
	if (waits)
		*waits = ti->state == TASK_WAITING || (outer_first && ti->state == TASK_RUNNABLE);
	/* the frames' strings, kept until the next answer */
	for (uint32_t i = 0; i < ti->nr_frames; i++) {
		const struct task_frame *f = &l.frames[ti->first_frame + i];
		const char *fn = task_list__at(&l, f->function), *file = task_list__at(&l, f->file);

		bytes += (fn ? strlen(fn) + 1 : 0) + (file ? strlen(file) + 1 : 0);
	}
	free(a->frames);
	a->frames = q = malloc(bytes + 1);
	for (uint32_t i = 0; q && i < ti->nr_frames && n < max; i++) {
		const struct task_frame *f =
			&l.frames[ti->first_frame + (outer_first ? ti->nr_frames - 1 - i : i)];
		const char *fn = task_list__at(&l, f->function), *file = task_list__at(&l, f->file);

		frames[n] = (struct stack_frame){ .pc = f->pc, .line = f->line, .module = "",
						  .inlined = f->inlined != 0 };
		if (fn) {
			frames[n].function = strcpy(q, fn);
			q += strlen(fn) + 1;
		}
		if (file) {
			frames[n].file = strcpy(q, file);
			q += strlen(file) + 1;
		}
		n++;
	}
	task_list__free(&l);
	return n;
}
