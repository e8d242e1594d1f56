// SPDX-License-Identifier: MIT
#include "alerts.h"

#include <errno.h>
#include <stdlib.h>

struct alert_printer {
	struct sink sink;
	FILE *out;
};

static double ms(uint64_t ns)
{
	return (double)ns / 1e6;
}

void alert__format(char *buf, size_t size, const struct model *m, const struct alert *a)
{
	const struct task *t = model__task(m, a->task);
	const struct thread *th = u64map__get(&m->threads, a->tid);
	const struct at_poll *p = a->poll;

	switch (a->kind) {
	case ALERT_LONG_POLL:
		snprintf(buf, size,
			 "long poll: task '%s' #%llu held worker %d (tid %u, %s) for %.2f ms: %s "
			 "(on-CPU %.2f ms, blocked %.2f ms, runnable %.2f ms)",
			 t ? t->name : "task", (unsigned long long)a->task, a->worker, a->tid,
			 th ? th->comm : "?", ms(a->duration_ns), poll_cause_str(a->cause),
			 ms(p->oncpu_ns), ms(p->blocked_ns), ms(p->runnable_ns));
		return;
	}
	snprintf(buf, size, "%s", alert_kind_str(a->kind));
}

static void ap_alert(struct sink *s, struct model *m, const struct alert *a)
{
	struct alert_printer *ap = (struct alert_printer *)s;
	char line[512];

	alert__format(line, sizeof(line), m, a);
	fprintf(ap->out, "asynctraced: alert: %s\n", line);
	fflush(ap->out);
}

static void ap_free(struct sink *s)
{
	free(s);
}

static const struct sink_ops alert_printer_ops = {
	.name = "alerts",
	.alert = ap_alert,
	.free = ap_free,
};

int alert_printer__new(struct sink **s, FILE *out)
{
	struct alert_printer *ap = calloc(1, sizeof(*ap));

	if (!ap)
		return -ENOMEM;
	ap->sink.ops = &alert_printer_ops;
	ap->out = out;
	*s = &ap->sink;
	return 0;
}
