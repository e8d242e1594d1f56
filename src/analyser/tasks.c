// SPDX-License-Identifier: MIT
/*
 * The privileged side of `asynctraced tasks`: the target's executable and
 * memory opened here and handed to the analyser, which reads them; its
 * answer checked as it is decoded (tasks/tasks.c) before any of it is
 * printed.
 */
#include "analyser/analyser.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "analyser/wire.h"
#include "lib/util.h"
#include "tasks/tasks.h"

int analyser__tasks(struct analyser *a, const struct target *t, bool system, struct task_list *l)
{
	struct wire_tasks_req r = { .pid = t->pid, .flags = system ? WIRE_TASKS_SYSTEM : 0 };
	uint64_t deadline = now_ns() + (uint64_t)a->timeout_ms * 1000000;
	struct target_files fs;
	struct wire_hdr h;
	int32_t status;
	uint8_t *b = NULL;
	int err;

	task_list__init(l);
	if (t->memfd < 0)
		return -EACCES;
	err = target__open_files(t, &fs);
	if (err)
		return err;
	if (fs.exe < 0) {
		target_files__close(&fs);
		return -ENOENT;
	}
	r.start = fs.f[fs.exe].map.start;
	r.end = fs.f[fs.exe].map.end;
	r.offset = fs.f[fs.exe].map.offset;
	err = wire__send(a->sock, WIRE_TASKS, &r, sizeof(r));
	if (!err)
		err = wire__send_fds(a->sock, (int[]){ t->memfd, fs.f[fs.exe].fd }, 2);
	target_files__close(&fs);
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
		err = b ? wire__read(a->sock, b, h.len, deadline) : -ENOMEM;
	}
	if (!err) {
		memcpy(&status, b, sizeof(status));
		err = tasks__decode(b + sizeof(status), h.len - sizeof(status), l) ?: status;
		if (status > 0 || status < -4095)
			err = -EBADMSG;
	}
	free(b);
	if (err == -EBADMSG) {
		task_list__free(l);
		err_msg("the analyser answered out of bounds reading pid %d's tasks\n", t->pid);
	} else if (err == -EPIPE || err == -ETIMEDOUT) {
		char ended[64];

		analyser__kill(a, ended, sizeof(ended));
		err_msg("the analyser %s reading pid %d's tasks\n",
			err == -ETIMEDOUT ? "took too long" : ended, t->pid);
		err = -EIO;
	}
	return err;
}
