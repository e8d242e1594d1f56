// SPDX-License-Identifier: MIT
/*
 * Where tasks wait between their polls (docs/tasks.md, "In a trace"). No
 * probe sees it: a task's future (a goroutine's stack) does not change
 * while it is idle, so a read of the live target made anywhere inside an
 * idle span says where the whole span waited. The session asks for reads
 * on its tick, within a budget; a read counts for the span it was made in
 * only if the task's next poll began after the read ended, as the poll's
 * record later says (the model lags the target by what the rings hold).
 */
#include <errno.h>
#include <stdlib.h>

#include "lib/util.h"
#include "pipeline/model.h"
#include "stacks/unwind.h"

/*
 * A task never met before is looked for along its runtime's list: the
 * session's loop waits about this long for one at most (the analyser gives
 * up, and the next look goes on from where this one stopped)
 */
#define WAIT_READ_BOUND_MS 3

/* Re-read a span placed this long ago, when the budget allows: is it still there? */
#define WAIT_REFRESH_NS 1000000000ull

uint32_t model__idle_place(const struct model *m, const struct task *t, uint64_t until)
{
	(void)m;
	if (!t || !t->wait_at || !t->last_end || t->wait_span != t->last_end ||
	    t->wait_read > until)
		return 0;
	return t->wait_at;
}

uint64_t model__open_wait_end(const struct model *m, const struct task *t, uint64_t end)
{
	if (!model__idle_place(m, t, end))
		return 0;
	return t->wait_seen < end ? t->wait_seen : end;
}

static uint64_t clock_now(const struct model *m)
{
	return m->clock ? m->clock() : now_ns();
}

/*
 * One read of where idle task t waits; the time it took. A span not read
 * yet is placed by it; one placed is seen there again (wait_seen), or not.
 */
static uint64_t read_wait(struct model *m, struct task *t)
{
	struct stack_frame frames[CALLSTACK_FRAMES];
	uint64_t begin = clock_now(m), end;
	bool waits = false;
	int n = m->where(m->where_ctx, t->id, WAIT_READ_BOUND_MS, frames, CALLSTACK_FRAMES, &waits);
	/* running (its future changes under the reader), torn, or gone: no place */
	uint32_t at = n > 0 && waits ? callstacks__intern(&m->places, frames, n) : 0;

	end = clock_now(m);
	m->waits_read++;
	m->waits_ns += end - begin;
	if (end - begin > m->waits_max_ns)
		m->waits_max_ns = end - begin;
	/* not found in the time given: nothing known, read again later */
	if (n == -ETIMEDOUT) {
		m->waits_given_up++;
		if (t->wait_span == t->last_end)
			t->wait_checked = end;
		return end - begin;
	}
	if (t->wait_span == t->last_end) {
		/* seen there again; elsewhere, or not waiting: a poll came, its record not yet */
		if (at && at == t->wait_at && !t->wait_moved)
			t->wait_seen = end;
		else
			t->wait_moved = true;
		t->wait_checked = end;
		return end - begin;
	}
	t->wait_moved = false;
	t->wait_span = t->last_end;
	t->wait_read = t->wait_seen = t->wait_checked = end;
	t->wait_at = at;
	m->waits_placed += at != 0;
	return end - begin;
}

/*
 * One round of the tasks from where the last stopped (*cursor): those idle
 * min_idle_ns whose span was not read (refresh: whose placed span was not
 * read again for WAIT_REFRESH_NS), until budget_ns is spent. The time
 * spent; *whole: every task was looked at.
 */
static uint64_t round_of(struct model *m, size_t *cursor, uint64_t now, uint64_t min_idle_ns,
			 uint64_t budget_ns, bool refresh, bool *whole)
{
	uint64_t spent = 0, key;
	size_t seen = 0, len = m->tasks.len;
	void *val;

	while (seen < len && spent < budget_ns) {
		struct task *t;

		if (!u64map__next(&m->tasks, cursor, &key, &val)) {
			if (!*cursor)
				break;
			*cursor = 0;
			continue;
		}
		seen++;
		t = val;
		if (t->done || !t->last_end || now < t->last_end + min_idle_ns)
			continue;
		if (refresh ? !model__idle_place(m, t, UINT64_MAX) || t->wait_moved ||
				      now < t->wait_checked + WAIT_REFRESH_NS
			    : t->wait_span == t->last_end)
			continue;
		spent += read_wait(m, t);
		/* t may be gone past this (a record of its end applied) */
		if (m->after_read)
			m->after_read(m->after_read_ctx);
	}
	*whole = seen >= len;
	return spent;
}

uint64_t model__read_waits(struct model *m, uint64_t now, uint64_t min_idle_ns, uint64_t budget_ns)
{
	uint64_t spent;
	bool whole;

	if (!m->where)
		return 0;
	/* spans not read first; what is left, on seeing the placed ones still there */
	spent = round_of(m, &m->wait_cursor, now, min_idle_ns, budget_ns, false, &whole);
	if (whole && spent < budget_ns)
		spent += round_of(m, &m->refresh_cursor, now, min_idle_ns, budget_ns - spent, true,
				  &whole);
	return spent;
}

uint64_t model__confirm_waits(struct model *m, bool gone, uint64_t budget_ns)
{
	uint64_t spent = 0, key;
	void *val;

	for (size_t i = 0; u64map__next(&m->tasks, &i, &key, &val);) {
		struct task *t = val;

		if (!model__idle_place(m, t, UINT64_MAX) || t->done || t->wait_moved)
			continue;
		/* a process gone: its tasks waited where they were until it went */
		if (!gone && spent < budget_ns && m->where) {
			uint64_t seen = t->wait_seen;

			/* seen there by this read: there to the end */
			t->wait_seen = 0;
			spent += read_wait(m, t);
			t->wait_seen = t->wait_seen ? UINT64_MAX : seen;
			/* t may be gone past this (a record of its end applied) */
			if (m->after_read)
				m->after_read(m->after_read_ctx);
			continue;
		} else if (!gone) {
			continue;
		}
		t->wait_seen = UINT64_MAX;
	}
	return spent;
}

uint32_t model__commonest_wait(const struct model *m, uint64_t task, uint64_t until, uint64_t *ns,
			       uint64_t *total)
{
	const struct task_stacks *ts = u64map__get(&m->task_waits, task);
	const struct task *t = model__task(m, task);
	uint32_t open = model__idle_place(m, t, until);
	uint64_t to = model__open_wait_end(m, t, until);
	uint64_t open_ns = open && to > t->last_end ? to - t->last_end : 0;
	uint32_t best = 0;

	*ns = *total = 0;
	for (uint32_t i = 0; ts && i < ts->nr; i++) {
		uint64_t here = ts->s[i].ns + (ts->s[i].id == open ? open_ns : 0);

		*total += ts->s[i].ns;
		if (here > *ns) {
			*ns = here;
			best = ts->s[i].id;
		}
	}
	*total += open_ns + (ts ? ts->untracked_ns : 0);
	if (open_ns > *ns) {
		*ns = open_ns;
		best = open;
	}
	return best;
}
