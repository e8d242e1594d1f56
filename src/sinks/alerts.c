// SPDX-License-Identifier: MIT
#include "sinks/alerts.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lib/outbuf.h"

static double ms(uint64_t ns)
{
	return (double)ns / 1e6;
}

static double secs(uint64_t ns)
{
	return (double)ns / 1e9;
}

static void queue_name(char *buf, size_t size, int32_t queue)
{
	if (queue >= 0)
		snprintf(buf, size, "worker %d", queue);
	else
		snprintf(buf, size, "%s", queue == AT_QUEUE_INJECT ? "inject" : "unknown");
}

static const char *comm_of(const struct model *m, uint32_t tid)
{
	const struct thread *th = u64map__get(&m->threads, tid);

	return th ? th->comm : "?";
}

static void format_begin(char *buf, size_t size, const struct model *m, const struct alert *a)
{
	char q[32];
	size_t len;

	switch (a->kind) {
	case ALERT_LONG_POLL:
		snprintf(buf, size,
			 "long poll: task '%s' #%llu held worker %d (tid %u, %s) for %s%.2f ms: %s "
			 "(on-CPU %.2f ms, blocked %.2f ms, runnable %.2f ms)",
			 a->task_name, (unsigned long long)a->task, a->worker, a->tid,
			 comm_of(m, a->tid), a->sampled_ns ? "at least " : "", ms(a->value_ns),
			 poll_cause_str(a->cause), ms(a->oncpu_ns), ms(a->blocked_ns),
			 ms(a->runnable_ns));
		len = strlen(buf);
		if (a->sampled_ns && len < size)
			len += (size_t)snprintf(buf + len, size - len, ", seen by samples %.2f ms apart",
						ms(a->sampled_ns));
		if (a->runtime_preempted && len < size)
			len += (size_t)snprintf(buf + len, size - len, ", preempted by its runtime");
		if (len >= size)
			return;
		callstacks__where(&m->stacks, a->stack, a->stack_blocked, buf + len, size - len);
		return;
	case ALERT_SCHED_DELAY:
		queue_name(q, sizeof(q), a->queued_on);
		snprintf(buf, size,
			 "scheduling delay: task '%s' #%llu waited %.2f ms from its wake to its poll "
			 "on worker %d (queued on %s behind %u tasks); no long poll or backlog "
			 "explains it",
			 a->task_name, (unsigned long long)a->task, ms(a->value_ns), a->worker, q,
			 a->queued_depth ? a->queued_depth - 1 : 0);
		return;
	case ALERT_STARVATION:
		snprintf(buf, size,
			 "starvation: worker %d (tid %u) has held %.1f tasks in its queue on average "
			 "for %.2f s while worker %d was idle %.0f%% of the time",
			 a->worker, a->tid, a->depth_avg, secs(a->value_ns), a->idle_worker,
			 a->idle_pct);
		return;
	case ALERT_THRASH:
		snprintf(buf, size,
			 "waker thrash: task '%s' #%llu (%s): %.0f wakes/s, %.0f of them by itself, "
			 "for %.0f polls/s",
			 a->task_name, (unsigned long long)a->task, thrash_reason_str(a->reason),
			 a->wakes_per_s, a->self_wakes_per_s, a->polls_per_s);
		return;
	case ALERT_LOST_WAKER:
		if (a->unwakeable)
			snprintf(buf, size,
				 "lost waker: task '%s' #%llu returned Pending on worker %d and "
				 "nothing holds its waker: nothing can ever wake it",
				 a->task_name, (unsigned long long)a->task, a->worker);
		else
			snprintf(buf, size,
				 "lost waker: task '%s' #%llu returned Pending %.2f s ago and "
				 "nothing has woken it since",
				 a->task_name, (unsigned long long)a->task, secs(a->value_ns));
		len = strlen(buf);
		if (len < size)
			callstacks__parked(&m->places, a->parked_at, buf + len, size - len);
		return;
	case ALERT_KIND_MAX:
		break;
	}
	snprintf(buf, size, "%s", alert_kind_str(a->kind));
}

static const char *plural(uint64_t n, const char *one, const char *many)
{
	return n == 1 ? one : many;
}

/*
 * "; it kept waiting 'request' #12 (up to 30.01 ms), 'echo' #2 (12.50 ms,
 * waited at echo::serve (src/main.rs:42)): 14 waits"
 */
static void format_victims(char *buf, size_t size, const struct alert *a,
			   const struct callstacks *places)
{
	size_t off = 0;

	if (!a->nr_victims)
		return;
	for (uint32_t i = 0; i < a->nr_victims && off < size; i++) {
		const struct alert_victim *v = &a->victims[i];
		char idle[48] = "", at[384] = "";

		if (v->idle_pct >= 0)
			snprintf(idle, sizeof(idle), ", another worker idle %d%% of it", v->idle_pct);
		if (v->waited_at)
			callstacks__waiting(places, v->waited_at, ", waited at", at, sizeof(at));
		off += (size_t)snprintf(buf + off, size - off, "%s'%s' #%llu (%s%.2f ms%s%s%s)",
					i ? ", " : "; it kept waiting ", v->name,
					(unsigned long long)v->task, i ? "" : "up to ",
					ms(v->waited_ns),
					!v->woken_by_holder ? ""
					: a->lifo_slot	    ? ", woken by it into its LIFO slot"
							    : ", woken by it",
					idle, at);
	}
	if (off < size)
		snprintf(buf + off, size - off, ": %llu %s in all",
			 (unsigned long long)a->waits_behind,
			 a->waits_behind == 1 ? "wait" : "waits");
}

/*
 * An END says how the episode went. One that tracing stopped is not over:
 * it says "still going" where an ended one says "over".
 */
static void format_end(char *buf, size_t size, const struct model *m, const struct alert *a)
{
	uint64_t span = a->ts > a->begin_ts ? a->ts - a->begin_ts : 0;
	unsigned long long n = (unsigned long long)a->count;
	const char *stopped = "still going when tracing stopped";

	switch (a->kind) {
	case ALERT_LONG_POLL: {
		int len = snprintf(buf, size,
				   "long poll%s: task '%s' #%llu%s%s: %llu long %s in %.2f s, the "
				   "longest %.2f ms",
				   a->ongoing ? "" : " over", a->task_name,
				   (unsigned long long)a->task, a->ongoing ? " " : "",
				   a->ongoing ? stopped : "", n, plural(n, "poll", "polls"),
				   secs(span), ms(a->worst_ns));

		if (len > 0 && (size_t)len < size)
			format_victims(buf + len, size - (size_t)len, a, &m->places);
		return;
	}
	case ALERT_SCHED_DELAY:
		snprintf(buf, size,
			 "scheduling delay %s: %llu late %s in %.2f s, the longest wait %.2f ms",
			 a->ongoing ? stopped : "over", n, plural(n, "poll", "polls"), secs(span),
			 ms(a->worst_ns));
		return;
	case ALERT_STARVATION:
		snprintf(buf, size,
			 "starvation%s: worker %d %s for %.2f s, at worst %.1f tasks queued on "
			 "average",
			 a->ongoing ? "" : " over", a->worker,
			 a->ongoing ? "still starving when tracing stopped, starved" : "starved",
			 secs(span), a->depth_avg);
		return;
	case ALERT_THRASH:
		snprintf(buf, size, "waker thrash%s: task '%s' #%llu %s for %.2f s",
			 a->ongoing ? "" : " over", a->task_name, (unsigned long long)a->task,
			 a->ongoing ? "still thrashing when tracing stopped, thrashed" : "thrashed",
			 secs(span));
		return;
	case ALERT_LOST_WAKER:
		if (a->ongoing)
			snprintf(buf, size,
				 "lost waker: task '%s' #%llu still not woken when tracing stopped, "
				 "%.2f s after it returned Pending",
				 a->task_name, (unsigned long long)a->task, secs(span));
		else
			snprintf(buf, size, "lost waker over: task '%s' #%llu %s after %.2f s",
				 a->task_name, (unsigned long long)a->task,
				 a->unwakeable ? "ran again or ended" : "was woken", secs(span));
		return;
	case ALERT_KIND_MAX:
		break;
	}
	snprintf(buf, size, "%s %s", alert_kind_str(a->kind), a->ongoing ? stopped : "over");
}

void alert__format(char *buf, size_t size, const struct model *m, const struct alert *a)
{
	if (a->state == ALERT_END)
		format_end(buf, size, m, a);
	else
		format_begin(buf, size, m, a);
}

/* ---- JSON lines ------------------------------------------------------- */

static void kv_num(struct outbuf *ob, const char *key, double v)
{
	char num[32];

	snprintf(num, sizeof(num), "%.1f", v);
	ob_puts(ob, key);
	ob_puts(ob, num);
}

static void wall_time(char *buf, size_t size, const struct model *m, uint64_t ts)
{
	uint64_t wall = ts + m->realtime_offset;
	time_t sec = (time_t)(wall / 1000000000ull);
	struct tm tm;

	gmtime_r(&sec, &tm);
	snprintf(buf, size, "%04d-%02d-%02dT%02d:%02d:%02d.%06lluZ", tm.tm_year + 1900,
		 tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
		 (unsigned long long)(wall % 1000000000ull / 1000));
}

void alert__stack_json(struct outbuf *ob, const struct callstacks *c, uint32_t id)
{
	const struct callstack *cs = callstacks__get(c, id);

	ob_putc(ob, '[');
	for (uint32_t i = 0; cs && i < cs->nr; i++) {
		const struct cs_frame *f = callstacks__frame(c, cs->frames[i]);

		ob_key_str(ob, i ? ",{\"function\":" : "{\"function\":", f->function);
		if (c->by_line) {
			/* a place (where a task waits): a task's frame, no image, maybe no line */
			if (f->file[0])
				ob_key_str(ob, ",\"file\":", f->file);
			if (f->line)
				ob_key_u64(ob, ",\"line\":", f->line);
		} else {
			ob_key_str(ob, ",\"module\":", f->module);
			if (f->file[0]) {
				ob_key_str(ob, ",\"file\":", f->file);
				ob_key_u64(ob, ",\"line\":", f->line);
			}
		}
		if (f->inlined)
			ob_puts(ob, ",\"inlined\":true");
		if (f->kernel)
			ob_puts(ob, ",\"kernel\":true");
		ob_putc(ob, '}');
	}
	ob_putc(ob, ']');
}

void alert__json_object(struct outbuf *ob, const struct model *m, const struct alert *a)
{
	char buf[1024];

	ob_puts(ob, "{\"schema\":\"asynctraced.alert/1\"");
	ob_key_u64(ob, ",\"episode\":", a->episode);
	ob_key_str(ob, ",\"kind\":", alert_kind_str(a->kind));
	ob_key_str(ob, ",\"state\":", a->state == ALERT_END ? "end" : "begin");
	wall_time(buf, sizeof(buf), m, a->ts);
	ob_key_str(ob, ",\"time\":", buf);
	ob_key_u64(ob, ",\"ts_ns\":", model__rel(m, a->ts));
	ob_key_u64(ob, ",\"begin_ns\":", model__rel(m, a->begin_ts));
	ob_key_u64(ob, ",\"pid\":", m->pid);
	ob_key_u64(ob, ",\"count\":", a->count);
	ob_key_u64(ob, ",\"value_ns\":", a->value_ns);
	ob_key_u64(ob, ",\"worst_ns\":", a->worst_ns);
	ob_key_str(ob, ",\"measured_by\":", a->sampled_ns ? "samples" : "probes");
	if (a->sampled_ns)
		ob_key_u64(ob, ",\"sample_period_ns\":", a->sampled_ns);
	if (a->state == ALERT_END)
		ob_puts(ob, a->ongoing ? ",\"ongoing\":true" : ",\"ongoing\":false");
	if (a->task) {
		ob_key_u64(ob, ",\"task\":{\"id\":", a->task);
		ob_key_str(ob, ",\"name\":", a->task_name);
		ob_putc(ob, '}');
	}
	if (a->worker >= 0)
		ob_key_u64(ob, ",\"worker\":", (uint64_t)a->worker);
	if (a->tid)
		ob_key_u64(ob, ",\"tid\":", a->tid);
	switch (a->kind) {
	case ALERT_LONG_POLL:
		ob_key_str(ob, ",\"cause\":", poll_cause_str(a->cause));
		ob_key_u64(ob, ",\"on_cpu_ns\":", a->oncpu_ns);
		ob_key_u64(ob, ",\"blocked_ns\":", a->blocked_ns);
		ob_key_u64(ob, ",\"runnable_ns\":", a->runnable_ns);
		if (a->runtime_preempted)
			ob_puts(ob, ",\"runtime_preempted\":true");
		if (a->stack) {
			/* where it was when sampled, innermost first */
			ob_puts(ob, a->stack_blocked ? ",\"stack_when\":\"asleep\""
						     : ",\"stack_when\":\"on-cpu\"");
			ob_puts(ob, ",\"stack\":");
			alert__stack_json(ob, &m->stacks, a->stack);
		}
		if (a->state != ALERT_END)
			break;
		/* the tasks it kept waiting, the longest waits first */
		ob_puts(ob, ",\"victims\":[");
		for (uint32_t i = 0; i < a->nr_victims; i++) {
			ob_key_u64(ob, i ? ",{\"task\":{\"id\":" : "{\"task\":{\"id\":",
				   a->victims[i].task);
			ob_key_str(ob, ",\"name\":", a->victims[i].name);
			ob_key_u64(ob, "},\"waited_ns\":", a->victims[i].waited_ns);
			ob_puts(ob, a->victims[i].woken_by_holder ? ",\"woken_by_holder\":true"
								  : ",\"woken_by_holder\":false");
			ob_puts(ob, a->victims[i].woken_by_holder && a->lifo_slot
					    ? ",\"lifo_slot\":true"
					    : ",\"lifo_slot\":false");
			if (a->victims[i].idle_pct >= 0)
				ob_key_u64(ob, ",\"other_worker_idle_pct\":",
					   (uint64_t)a->victims[i].idle_pct);
			if (a->victims[i].waited_at) {
				ob_puts(ob, ",\"waited_at\":");
				alert__stack_json(ob, &m->places, a->victims[i].waited_at);
			}
			ob_putc(ob, '}');
		}
		ob_key_u64(ob, "],\"waits_behind\":", a->waits_behind);
		break;
	case ALERT_SCHED_DELAY:
		queue_name(buf, sizeof(buf), a->queued_on);
		ob_key_str(ob, ",\"queued_on\":", buf);
		ob_key_u64(ob, ",\"queued_depth\":", a->queued_depth);
		break;
	case ALERT_STARVATION:
		kv_num(ob, ",\"depth_avg\":", a->depth_avg);
		if (a->idle_worker >= 0)
			ob_key_u64(ob, ",\"idle_worker\":", (uint64_t)a->idle_worker);
		kv_num(ob, ",\"idle_pct\":", a->idle_pct);
		break;
	case ALERT_THRASH:
		ob_key_str(ob, ",\"reason\":", thrash_reason_str(a->reason));
		kv_num(ob, ",\"polls_per_s\":", a->polls_per_s);
		kv_num(ob, ",\"wakes_per_s\":", a->wakes_per_s);
		kv_num(ob, ",\"self_wakes_per_s\":", a->self_wakes_per_s);
		break;
	case ALERT_LOST_WAKER:
		ob_puts(ob, a->unwakeable ? ",\"unwakeable\":true" : ",\"unwakeable\":false");
		if (a->parked_at) {
			ob_puts(ob, ",\"parked_at\":");
			alert__stack_json(ob, &m->places, a->parked_at);
		}
		break;
	case ALERT_KIND_MAX:
		break;
	}
	if (a->dump[0])
		ob_key_str(ob, ",\"dump\":", a->dump);
	if (a->escalated_ns)
		kv_num(ob, ",\"escalated_s\":", (double)a->escalated_ns / 1e9);
	alert__format(buf, sizeof(buf), m, a);
	ob_key_str(ob, ",\"message\":", buf);
	ob_putc(ob, '}');
}

void alert__json(struct outbuf *ob, const struct model *m, const struct alert *a)
{
	alert__json_object(ob, m, a);
	ob_putc(ob, '\n');
}

struct alert_log {
	struct sink sink;
	struct outbuf *ob;
};

static void log_alert(struct sink *s, struct model *m, const struct alert *a)
{
	struct alert_log *al = (struct alert_log *)s;

	alert__json(al->ob, m, a);
	/* one line per alert, there as soon as raised: `tail -f` works */
	outbuf__flush(al->ob);
}

static int log_finish(struct sink *s, struct model *m)
{
	return outbuf__flush(((struct alert_log *)s)->ob);
}

static void log_free(struct sink *s)
{
	outbuf__free(((struct alert_log *)s)->ob);
	free(s);
}

static const struct sink_ops alert_log_ops = {
	.name = "alerts-json",
	.alert = log_alert,
	.finish = log_finish,
	.free = log_free,
};

int alert_log__new(struct sink **s, struct outbuf *ob)
{
	struct alert_log *al = calloc(1, sizeof(*al));

	if (!al)
		return -ENOMEM;
	al->ob = outbuf__get(ob);
	al->sink.ops = &alert_log_ops;
	*s = &al->sink;
	return 0;
}

void alert__title(char *buf, size_t size, const struct alert *a)
{
	const char *over = a->state != ALERT_END ? "" : a->ongoing ? " still going" : " over";

	/* a scheduling delay's episode is the runtime's: the task and the worker of
	 * its first late poll are not what ended */
	if (a->kind == ALERT_SCHED_DELAY && a->state == ALERT_END)
		snprintf(buf, size, "%s%s", alert_kind_str(a->kind), over);
	else if (a->task)
		snprintf(buf, size, "%s%s: %s #%llu", alert_kind_str(a->kind), over, a->task_name,
			 (unsigned long long)a->task);
	else if (a->worker >= 0)
		snprintf(buf, size, "%s%s: worker %d", alert_kind_str(a->kind), over, a->worker);
	else
		snprintf(buf, size, "%s%s", alert_kind_str(a->kind), over);
}
