// SPDX-License-Identifier: MIT
/*
 * The analyser's side of `asynctraced tasks`. It is given two descriptors:
 * the target's executable and its /proc/PID/mem, opened by the privileged
 * side (reads through it need no right of the reader's: the kernel checked
 * the opener's). The executable says which runtime and where its lists
 * are; the memory is read with pread, which never stops the target.
 */
#include "analyser/task_reading.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "analyser/analyser.h"
#include "lib/file_copy.h"
#include "targets/elf_image.h"
#include "targets/go/golang.h"
#include "tasks/goroutines.h"
#include "tasks/tasks.h"

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

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The list of the process whose executable is at exe and memory at mem. */
static int read_tasks(const struct wire_tasks_req *r, int mem, int exe, struct task_list *l)
{
	struct task_mem m = { read_mem, &mem };
	struct goroutines_opts o = { .system = r->flags & WIRE_TASKS_SYSTEM, .now_ns = now_ns() };
	struct file_copy fc;
	struct go_binary gb;
	struct elf_image im;
	char path[32];
	int err;

	snprintf(path, sizeof(path), "/proc/self/fd/%d", exe);
	err = file_copy__read(&fc, path, FILE_COPY_MAX);
	if (err) {
		snprintf(l->note, sizeof(l->note), "its executable could not be read: %s",
			 strerror(-err));
		return err;
	}
	err = golang__detect_mem(fc.data, fc.size, &gb);
	if (err == -ENOENT || err == -ENOEXEC) {
		snprintf(l->note, sizeof(l->note),
			 "no Go runtime in its executable (tokio's tasks are not listed yet)");
		err = -ENOENT;
	} else if (!gb.version[0]) {
		snprintf(l->note, sizeof(l->note), "its Go runtime could not be read: %s",
			 strerror(-err));
	} else if (!(err = elf_image__open_mem(&im, fc.data, fc.size))) {
		/* what the probes need may be missing (-ENOTSUP): the goroutines may still be read */
		golang__name_goroutines(&gb, &im);
		err = goroutines__read(&gb, fc.data, fc.size, load_bias(&gb, &im, r), &m, &o, l);
		elf_image__close(&im);
	}
	golang__free(&gb);
	file_copy__free(&fc);
	return err;
}

int task_reading__read(const struct wire_hdr *h)
{
	struct wire_tasks_req r;
	struct task_list l;
	int fds[2] = { -1, -1 }, err;
	int32_t status;
	uint8_t *b = NULL, *msg;
	size_t len = 0;

	if (h->len != sizeof(r))
		return -EBADMSG;
	err = wire__read(ANALYSER_FD, &r, sizeof(r), 0);
	if (!err)
		err = wire__take_fds(ANALYSER_FD, fds, 2, 0);
	if (err)
		return err;
	task_list__init(&l);
	status = read_tasks(&r, fds[0], fds[1], &l);
	close(fds[0]);
	close(fds[1]);
	err = tasks__encode(&l, &b, &len);
	task_list__free(&l);
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
