// SPDX-License-Identifier: MIT
/*
 * The snapshot's list: built in the analyser, sent as bytes, decoded (and
 * checked) on the privileged side. The bytes: a header, the strings (each a
 * u32 length and its bytes), the tasks, the frames; all little-endian
 * structs as they are here, both ends being this very binary.
 */
#include "tasks/tasks.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

const char *const task_state_names[TASK_STATE_MAX] = {
	[TASK_WAITING] = "waiting",
	[TASK_RUNNABLE] = "runnable",
	[TASK_RUNNING] = "running",
	[TASK_SYSCALL] = "syscall",
	[TASK_OTHER] = "other",
};

/*
 * What a list may hold at most: far above a process's million goroutines'
 * frames, and all of it within the bytes the privileged side takes
 * (WIRE_TASKLIST_MAX, 1 GiB: 4M tasks of 72 bytes, 16M frames of 24, 256K
 * strings of 1 KiB).
 */
#define TASKS_MAX (1u << 22)
#define FRAMES_MAX (1u << 24)
#define STRS_MAX (1u << 18)
#define STR_MAX 1024	/* a string longer (a deep generic type) is cut */

void task_list__init(struct task_list *l)
{
	memset(l, 0, sizeof(*l));
	u64map__init(&l->interned);
}

void task_list__free(struct task_list *l)
{
	for (size_t i = 0; i < l->nr_strs; i++)
		free(l->strs[i]);
	free(l->strs);
	free(l->tasks);
	free(l->frames);
	u64map__clear(&l->interned);
	task_list__init(l);
}

static bool grow(void **p, size_t *cap, size_t need, size_t size)
{
	size_t n = *cap ? *cap : 64;
	void *more;

	if (need <= *cap)
		return true;
	while (n < need)
		n *= 2;
	more = realloc(*p, n * size);
	if (!more)
		return false;
	*p = more;
	*cap = n;
	return true;
}

static void out_of_memory(struct task_list *l)
{
	if (!l->note[0])
		strcpy(l->note, "out of memory: part of the snapshot is left out");
}

/* Index 0, none: there before any string. */
static bool has_none(struct task_list *l)
{
	if (l->nr_strs)
		return true;
	if (!grow((void **)&l->strs, &l->cap_strs, 1, sizeof(*l->strs)))
		return false;
	l->strs[l->nr_strs++] = NULL;
	return true;
}

/* A string of its own, the next index; 0 when memory ran out. */
static uint32_t push_str(struct task_list *l, const char *s, size_t len)
{
	char *copy;

	if (!has_none(l) || l->nr_strs >= STRS_MAX ||
	    !grow((void **)&l->strs, &l->cap_strs, l->nr_strs + 1, sizeof(*l->strs)) ||
	    !(copy = strndup(s, len)))
		return 0;
	l->strs[l->nr_strs] = copy;
	return (uint32_t)l->nr_strs++;
}

uint32_t task_list__str(struct task_list *l, const char *s, size_t len)
{
	uintptr_t key = (uintptr_t)s;
	void *known;
	uint32_t i;

	if (!s)
		return 0;
	if (len > STR_MAX - 1)
		len = STR_MAX - 1;
	if ((known = u64map__get(&l->interned, key)))
		return (uint32_t)((uintptr_t)known - 1);
	i = push_str(l, s, strnlen(s, len));
	if (!i || u64map__set(&l->interned, key, (void *)(uintptr_t)(i + 1))) {
		out_of_memory(l);
		return i;
	}
	return i;
}

const char *task_list__at(const struct task_list *l, uint32_t i)
{
	return i && i < l->nr_strs ? l->strs[i] : NULL;
}

struct task_info *task_list__add(struct task_list *l)
{
	struct task_info *t;

	if (l->nr_tasks >= TASKS_MAX ||
	    !grow((void **)&l->tasks, &l->cap_tasks, l->nr_tasks + 1, sizeof(*l->tasks))) {
		out_of_memory(l);
		return NULL;
	}
	t = &l->tasks[l->nr_tasks++];
	memset(t, 0, sizeof(*t));
	t->waited_ns = -1;
	t->first_frame = (uint32_t)l->nr_frames;
	return t;
}

int task_list__frame(struct task_list *l, const struct task_frame *f)
{
	if (!l->nr_tasks || l->nr_frames >= FRAMES_MAX ||
	    !grow((void **)&l->frames, &l->cap_frames, l->nr_frames + 1, sizeof(*l->frames))) {
		out_of_memory(l);
		return -ENOMEM;
	}
	l->frames[l->nr_frames++] = *f;
	l->tasks[l->nr_tasks - 1].nr_frames++;
	return 0;
}

struct wire_tasks {
	char runtime[16];
	char version[32];
	char note[256];
	uint64_t nr_strs, nr_tasks, nr_frames;
	uint32_t nr_torn, nr_hidden;
};

int tasks__encode(const struct task_list *l, uint8_t **out, size_t *len)
{
	struct wire_tasks h = { .nr_strs = l->nr_strs, .nr_tasks = l->nr_tasks,
				.nr_frames = l->nr_frames, .nr_torn = l->nr_torn,
				.nr_hidden = l->nr_hidden };
	size_t n = sizeof(h) + l->nr_tasks * sizeof(*l->tasks) + l->nr_frames * sizeof(*l->frames);
	uint8_t *b, *p;

	memcpy(h.runtime, l->runtime, sizeof(h.runtime));
	memcpy(h.version, l->version, sizeof(h.version));
	memcpy(h.note, l->note, sizeof(h.note));
	for (size_t i = 1; i < l->nr_strs; i++)
		n += sizeof(uint32_t) + strlen(l->strs[i]);
	b = p = malloc(n);
	if (!b)
		return -ENOMEM;
	memcpy(p, &h, sizeof(h));
	p += sizeof(h);
	for (size_t i = 1; i < l->nr_strs; i++) {
		uint32_t k = (uint32_t)strlen(l->strs[i]);

		memcpy(p, &k, sizeof(k));
		memcpy(p + sizeof(k), l->strs[i], k);
		p += sizeof(k) + k;
	}
	if (l->nr_tasks) /* no memcpy from NULL, even of 0 bytes */
		memcpy(p, l->tasks, l->nr_tasks * sizeof(*l->tasks));
	p += l->nr_tasks * sizeof(*l->tasks);
	if (l->nr_frames)
		memcpy(p, l->frames, l->nr_frames * sizeof(*l->frames));
	*out = b;
	*len = n;
	return 0;
}

static bool str_ok(const struct task_list *l, uint32_t i)
{
	return i < l->nr_strs;
}

static bool frame_ok(const struct task_list *l, const struct task_frame *f)
{
	return str_ok(l, f->function) && str_ok(l, f->file) && f->inlined <= 1;
}

int tasks__decode(const uint8_t *b, size_t len, struct task_list *l)
{
	struct wire_tasks h;
	size_t at = sizeof(h);

	task_list__init(l);
	if (len < sizeof(h))
		return -EBADMSG;
	memcpy(&h, b, sizeof(h));
	if (h.nr_strs > STRS_MAX || h.nr_tasks > TASKS_MAX || h.nr_frames > FRAMES_MAX ||
	    memchr(h.runtime, 0, sizeof(h.runtime)) == NULL ||
	    memchr(h.version, 0, sizeof(h.version)) == NULL ||
	    memchr(h.note, 0, sizeof(h.note)) == NULL)
		goto bad;
	memcpy(l->runtime, h.runtime, sizeof(h.runtime));
	memcpy(l->version, h.version, sizeof(h.version));
	memcpy(l->note, h.note, sizeof(h.note));
	l->nr_torn = h.nr_torn;
	l->nr_hidden = h.nr_hidden;
	if (!has_none(l))
		goto bad;
	for (uint64_t i = 1; i < h.nr_strs; i++) {
		uint32_t k;

		if (len - at < sizeof(k))
			goto bad;
		memcpy(&k, b + at, sizeof(k));
		at += sizeof(k);
		if (k > len - at || k >= STR_MAX || memchr(b + at, 0, k) ||
		    push_str(l, (const char *)b + at, k) != i)
			goto bad;
		at += k;
	}
	if ((len - at) / sizeof(*l->tasks) < h.nr_tasks)
		goto bad;
	if (h.nr_tasks) {
		l->tasks = malloc(h.nr_tasks * sizeof(*l->tasks));
		if (!l->tasks)
			goto bad;
		memcpy(l->tasks, b + at, h.nr_tasks * sizeof(*l->tasks));
	}
	l->nr_tasks = l->cap_tasks = h.nr_tasks;
	at += h.nr_tasks * sizeof(*l->tasks);
	if (len - at != h.nr_frames * sizeof(*l->frames))
		goto bad;
	if (h.nr_frames) {
		l->frames = malloc(h.nr_frames * sizeof(*l->frames));
		if (!l->frames)
			goto bad;
		memcpy(l->frames, b + at, h.nr_frames * sizeof(*l->frames));
	}
	l->nr_frames = l->cap_frames = h.nr_frames;
	for (size_t i = 0; i < l->nr_tasks; i++) {
		const struct task_info *t = &l->tasks[i];

		if (!str_ok(l, t->name) || !str_ok(l, t->wait) || t->state >= TASK_STATE_MAX ||
		    !frame_ok(l, &t->created) || t->first_frame > l->nr_frames ||
		    t->nr_frames > l->nr_frames - t->first_frame)
			goto bad;
	}
	for (size_t i = 0; i < l->nr_frames; i++)
		if (!frame_ok(l, &l->frames[i]))
			goto bad;
	return 0;
bad:
	task_list__free(l);
	return -EBADMSG;
}
