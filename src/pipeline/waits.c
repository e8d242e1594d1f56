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
#include <stdlib.h>

#include "lib/util.h"
#include "pipeline/model.h"
#include "stacks/unwind.h"

uint32_t model__idle_place(const struct model *m, const struct task *t, uint64_t until)
{
	(void)m;
	if (!t || !t->wait_at || !t->last_end || t->wait_span != t->last_end ||
	    t->wait_read > until)
		return 0;
	return t->wait_at;
}

static uint64_t clock_now(const struct model *m)
{
	return m->clock ? m->clock() : now_ns();
}

/* One read of where idle task t waits; the time it took. */
static uint64_t read_wait(struct model *m, struct task *t)
{
	struct stack_frame frames[CALLSTACK_FRAMES];
	uint64_t begin = clock_now(m), end;
	bool waits = false;
	int n = m->where(m->where_ctx, t->id, frames, CALLSTACK_FRAMES, &waits);

	end = clock_now(m);
	m->waits_read++;
	m->waits_ns += end - begin;
	if (end - begin > m->waits_max_ns)
		m->waits_max_ns = end - begin;
	t->wait_span = t->last_end;
	t->wait_read = end;
	/* running (its future changes under the reader), torn, or gone: not placed */
	t->wait_at = n > 0 && waits ? callstacks__intern(&m->places, frames, n) : 0;
	m->waits_placed += t->wait_at != 0;
	return end - begin;
}

uint64_t model__read_waits(struct model *m, uint64_t now, uint64_t min_idle_ns, uint64_t budget_ns)
{
	uint64_t spent = 0, key;
	size_t seen = 0, len = m->tasks.len;
	void *val;

	if (!m->where)
		return 0;
	/* round the table from where the last round stopped: every task gets its turn */
	while (seen < len && spent < budget_ns) {
		struct task *t;

		if (!u64map__next(&m->tasks, &m->wait_cursor, &key, &val)) {
			if (!m->wait_cursor)
				break;
			m->wait_cursor = 0;
			continue;
		}
		seen++;
		t = val;
		/* idle since a pending poll it was not read after, for long enough */
		if (t->done || !t->last_end || t->wait_span == t->last_end ||
		    now < t->last_end + min_idle_ns)
			continue;
		spent += read_wait(m, t);
	}
	return spent;
}

uint32_t model__commonest_wait(const struct model *m, uint64_t task, uint64_t until, uint64_t *ns,
			       uint64_t *total)
{
	const struct task_stacks *ts = u64map__get(&m->task_waits, task);
	const struct task *t = model__task(m, task);
	uint32_t open = model__idle_place(m, t, until);
	uint64_t open_ns = open && until > t->last_end ? until - t->last_end : 0;
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
