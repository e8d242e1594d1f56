// SPDX-License-Identifier: MIT
/*
 * The CPU-clock samples of sample mode and --stacks, taken of the threads of
 * the processes followed and of nothing else: one perf event per thread
 * (pid = tid, any CPU), which ticks only while that thread runs, and which
 * the threads it starts inherit (inherit_thread: threads, not forked
 * processes), BPF program included.
 *
 * Why not one event per CPU: a CPU's event fires whatever runs there, the
 * load generator, the idle loop, every other process of the host, each
 * firing a timer interrupt (docs/performance.md: 997 more a second on each
 * CPU of a host whose followed process is idle; per thread, about none). The
 * followed threads pay instead: their event is stopped and started at each
 * of their context switches.
 *
 * A thread started while the process's threads are being opened may be met
 * by neither (its parent not opened yet when it was cloned): the task list is
 * read again until a pass finds no thread it did not open. A thread whose
 * parent was opened just before that thread was listed gets an event of its
 * own besides the inherited one, and is sampled twice as often: one thread,
 * at attach, only in that race, and a sample twice changes no reading.
 */
#include <dirent.h>
#include <errno.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <bpf/libbpf.h>

#include "source/tracer_priv.h"

/* Passes over the task list at most: each one opens the threads cloned meanwhile. */
#define PASSES 8

static long samples_owner(pid_t pid)
{
	return THREAD_SAMPLES_OWNER + (long)pid;
}

static bool opened(const pid_t *tids, size_t n, pid_t tid)
{
	for (size_t i = 0; i < n; i++)
		if (tids[i] == tid)
			return true;
	return false;
}

/* One thread's event with the sampling program. 0; -ESRCH when it has exited; or -errno. */
static int sample_thread(struct tracer *t, pid_t pid, pid_t tid)
{
	struct perf_event_attr attr = {
		.type = PERF_TYPE_SOFTWARE,
		.size = sizeof(attr),
		.config = PERF_COUNT_SW_CPU_CLOCK,
		.sample_freq = t->sample_hz,
		.freq = 1,
		.inherit = 1,
		.inherit_thread = 1,
	};
	int fd = (int)syscall(__NR_perf_event_open, &attr, tid, -1, -1, PERF_FLAG_FD_CLOEXEC);
	struct bpf_link *link;

	if (fd < 0)
		return -errno;
	link = bpf_program__attach_perf_event(t->skel->progs.on_cpu_sample, fd);
	if (!link) {
		int err = -errno;

		close(fd); /* the link owns it once made */
		return err;
	}
	return tracer__add_link(t, samples_owner(pid), link);
}

int thread_samples__follow(struct tracer *t, pid_t pid)
{
	pid_t *tids = NULL;
	size_t n = 0, cap = 0;
	char path[40];
	int err = 0;

	if (!t->sample_hz)
		return 0;
	for (size_t i = 0; i < t->nr_links; i++)
		if (t->link_owners[i] == samples_owner(pid))
			return 0; /* followed again, with other flags */
	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	for (int pass = 0, more = 1; more && pass < PASSES && !err; pass++) {
		DIR *d = opendir(path);
		struct dirent *de;

		if (!d) {
			err = -errno;
			break;
		}
		more = 0;
		while (!err && (de = readdir(d))) {
			pid_t tid = (pid_t)strtol(de->d_name, NULL, 10);

			if (tid <= 0 || opened(tids, n, tid))
				continue;
			if (n == cap) {
				pid_t *grown = realloc(tids, (cap = cap ? 2 * cap : 64) * sizeof(*tids));

				if (!grown) {
					err = -ENOMEM;
					break;
				}
				tids = grown;
			}
			tids[n++] = tid;
			more = 1;
			err = sample_thread(t, pid, tid);
			if (err == -ESRCH)
				err = 0; /* gone since it was listed */
		}
		closedir(d);
	}
	free(tids);
	if (err)
		thread_samples__unfollow(t, pid);
	return err;
}

void thread_samples__unfollow(struct tracer *t, pid_t pid)
{
	tracer__detach_owner(t, samples_owner(pid));
}
