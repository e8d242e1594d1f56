// SPDX-License-Identifier: MIT
#include "sinks/metrics.h"

#include <arpa/inet.h>
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <microhttpd.h>

#include "lib/util.h"
#include "pipeline/unseen.h"

/* The log2 buckets exported as `le` bounds: 2^10 ns (1 µs) to 2^36 ns (69 s), then +Inf. */
#define BUCKET_FIRST 9
#define BUCKET_LAST 35
/* An exited process's series go once a scrape has seen them, or after this long. */
#define GONE_KEEP_NS (60 * 1000000000ull)
/*
 * Connections at once: in all (each holds up to 32 KiB, libmicrohttpd's
 * pool), and from one client address. A scrape needs one (the server
 * closes it after its answer); an HA pair of Prometheus servers, or a look
 * by hand, come from other addresses. So a client that opens connections
 * and leaves them idle (each then held 10 s) cannot take every one. A unix
 * socket's clients have no address: only the total holds there, and the
 * socket's mode says who may connect.
 */
#define MAX_CONNECTIONS 32u
#define MAX_PER_CLIENT 4u
#define IDLE_TIMEOUT_S 10u
#define UNIX_PREFIX "unix:"
/* sun_path, its NUL included */
#define SUN_PATH_LEN (sizeof(((struct sockaddr_un *)0)->sun_path))
_Static_assert(SUN_PATH_LEN == 108, "metrics__bad_listen says 107 bytes");

/* A task's series (--metrics-tasks): one of the busiest. */
struct task_series {
	uint64_t id, name_addr;
	char name[AT_TASK_NAME_LEN];
	uint64_t polls, poll_ns, oncpu_ns, wakes, self_wakes;
};

/* One process's latest values, copied out of the session's snapshot. */
struct series {
	uint32_t pid;
	char comm[32];
	char runtime[16];
	struct at_runtime_stats rt;
	struct at_worker_stats *workers;
	uint32_t nr_workers;
	struct steal_entry *steals;
	size_t nr_steals;
	uint64_t dropped;
	uint64_t begun[ALERT_KIND_MAX], active[ALERT_KIND_MAX];
	struct task_series *tasks;	/* the busiest, by poll time */
	size_t nr_tasks;
	uint32_t sample_hz;		/* sample mode (0: probes); what it cannot see is left out */
	bool gone;
	uint64_t gone_at;		/* CLOCK_MONOTONIC */
	uint64_t gone_scrapes;		/* scrapes answered when it went */
};

struct metrics {
	struct MHD_Daemon *daemon;
	pthread_mutex_t lock;		/* the published texts */
	char *text, *om;		/* Prometheus text 0.0.4, OpenMetrics 1.0 */
	size_t text_len, om_len;
	uint64_t scrapes;		/* atomic */
	struct series **sets;		/* the session's thread only */
	size_t nr;
	int statm;			/* /proc/self/statm, opened before the sandbox */
	bool top_tasks;			/* some process has task series */
	char *sock_path;		/* unix:PATH: the socket we made there, */
	dev_t sock_dev;			/* ... which is ours while this inode is there */
	ino_t sock_ino;
};

static int parse_tcp(const char *listen, char *addr, size_t addr_len, uint16_t *port)
{
	const char *colon, *p;
	char *end;
	unsigned long n;

	if (!listen || !*listen)
		return -EINVAL;
	if (listen[0] == '[') {
		const char *close = strchr(listen, ']');

		if (!close || close[1] != ':' || (size_t)(close - listen - 1) >= addr_len)
			return -EINVAL;
		snprintf(addr, addr_len, "%.*s", (int)(close - listen - 1), listen + 1);
		p = close + 2;
	} else if ((colon = strrchr(listen, ':'))) {
		if ((size_t)(colon - listen) >= addr_len || colon == listen)
			return -EINVAL;
		snprintf(addr, addr_len, "%.*s", (int)(colon - listen), listen);
		p = colon + 1;
	} else {
		snprintf(addr, addr_len, "127.0.0.1");
		p = listen;
	}
	errno = 0;
	n = strtoul(p, &end, 10);
	if (errno || *end || end == p || n == 0 || n > 65535 || *p == '-' || *p == '+')
		return -EINVAL;
	*port = (uint16_t)n;
	return 0;
}

const char *metrics__bad_listen(const char *listen)
{
	char addr[128];
	uint16_t port;

	if (!listen || strncmp(listen, UNIX_PREFIX, strlen(UNIX_PREFIX)))
		return listen && !parse_tcp(listen, addr, sizeof(addr), &port)
			       ? NULL
			       : "PORT, ADDR:PORT, [ADDR]:PORT or unix:PATH";
	listen += strlen(UNIX_PREFIX);
	if (!*listen)
		return "unix:PATH, the socket to make";
	if (strlen(listen) >= SUN_PATH_LEN)
		return "unix:PATH, a path of at most 107 bytes (a unix socket's)";
	return NULL;
}

static bool wants_openmetrics(struct MHD_Connection *c)
{
	const char *accept = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Accept");

	return accept && strstr(accept, "application/openmetrics-text");
}

static enum MHD_Result reply(struct MHD_Connection *c, unsigned status, const char *type,
			     const char *body, size_t len)
{
	struct MHD_Response *r =
		MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);
	enum MHD_Result ret;

	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, "Content-Type", type);
	ret = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	return ret;
}

/* libmicrohttpd's thread: the latest rendering, copied under the lock. */
static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
				  const char *method, const char *version, const char *upload,
				  size_t *upload_len, void **con_cls)
{
	static const char index[] = "asynctraced: metrics at /metrics\n";
	static const char not_found[] = "not found: asynctraced serves /metrics\n";
	struct metrics *m = cls;
	enum MHD_Result ret;
	bool om;

	(void)version, (void)upload, (void)upload_len, (void)con_cls;
	if (strcmp(method, "GET") && strcmp(method, "HEAD"))
		return reply(c, MHD_HTTP_METHOD_NOT_ALLOWED, "text/plain; charset=utf-8",
			     "GET /metrics\n", 13);
	if (!strcmp(url, "/"))
		return reply(c, MHD_HTTP_OK, "text/plain; charset=utf-8", index,
			     sizeof(index) - 1);
	if (strcmp(url, "/metrics"))
		return reply(c, MHD_HTTP_NOT_FOUND, "text/plain; charset=utf-8", not_found,
			     sizeof(not_found) - 1);
	om = wants_openmetrics(c);
	pthread_mutex_lock(&m->lock);
	if (om)
		ret = reply(c, MHD_HTTP_OK, "application/openmetrics-text; version=1.0.0; charset=utf-8",
			    m->om ? m->om : "# EOF\n", m->om ? m->om_len : 6);
	else
		ret = reply(c, MHD_HTTP_OK, "text/plain; version=0.0.4; charset=utf-8",
			    m->text ? m->text : "", m->text ? m->text_len : 0);
	__atomic_add_fetch(&m->scrapes, 1, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&m->lock);
	return ret;
}

/*
 * libmicrohttpd's messages, as ours are said. A refused connection (over a
 * limit) is said once: a client knocking on and on would fill the journal.
 */
static void mhd_log(void *cls, const char *fmt, va_list ap)
{
	static bool said_limit;
	char msg[256];

	(void)cls;
	if (strstr(fmt, "connection limit")) {
		if (__atomic_exchange_n(&said_limit, true, __ATOMIC_RELAXED))
			return;
		warn_msg("--metrics: a connection over the limits (%u in all, %u from one "
			 "client) closed unanswered; later ones are not said\n",
			 MAX_CONNECTIONS, MAX_PER_CLIENT);
		return;
	}
	vsnprintf(msg, sizeof(msg), fmt, ap);
	msg[strcspn(msg, "\n")] = '\0';
	warn_msg("--metrics: %s\n", msg);
}

/*
 * unix:PATH: the socket made, bound and listening before the sandbox
 * (which lets the server accept on it, never bind), 0660 whatever the
 * umask. What is at PATH is replaced only when it is a socket nobody
 * answers on: one an earlier run left (metrics__close). The listening
 * descriptor, or -errno after a message.
 */
static int listen_unix(struct metrics *m, const char *arg)
{
	const char *path = arg + strlen(UNIX_PREFIX);
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct stat st;
	mode_t mask;
	int fd, probe, err;

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	if (!lstat(path, &st)) {
		if (!S_ISSOCK(st.st_mode)) {
			err_msg("--metrics %s: exists and is not a socket: not replaced\n", arg);
			return -EEXIST;
		}
		/* stale: nothing listens (ECONNREFUSED); connected, or a full backlog: in use */
		probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		err = probe < 0 ? errno : 0;
		if (probe >= 0) {
			if (connect(probe, (struct sockaddr *)&sa, sizeof(sa)))
				err = errno;
			close(probe);
		}
		if (!err || err == EAGAIN) {
			err_msg("--metrics %s: in use (something answers there): not replaced\n",
				arg);
			return -EADDRINUSE;
		}
		if (err != ECONNREFUSED) {
			err_msg("--metrics %s: a socket, which cannot be told stale (%s): not "
				"replaced\n",
				arg, strerror(err));
			return -err;
		}
		if (unlink(path)) {
			err = -errno;
			err_msg("--metrics %s: cannot remove the stale socket there: %s\n", arg,
				strerror(-err));
			return err;
		}
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0) {
		err = -errno;
		err_msg("--metrics %s: cannot make a socket: %s\n", arg, strerror(-err));
		return err;
	}
	mask = umask(0117);
	err = bind(fd, (struct sockaddr *)&sa, sizeof(sa)) ? -errno : 0;
	umask(mask);
	if (err) {
		err_msg("--metrics %s: cannot bind there: %s\n", arg, strerror(-err));
		close(fd);
		return err;
	}
	/* what metrics__close may remove: this inode, no other made there since */
	err = lstat(path, &st) || listen(fd, SOMAXCONN) ? -errno : 0;
	if (!err && !(m->sock_path = strdup(path)))
		err = -ENOMEM;
	if (err) {
		err_msg("--metrics %s: cannot listen there: %s\n", arg, strerror(-err));
		unlink(path);
		close(fd);
		return err;
	}
	m->sock_dev = st.st_dev;
	m->sock_ino = st.st_ino;
	return fd;
}

/* [ADDR:]PORT: the address libmicrohttpd binds (sa), and its flags. 0, or -EINVAL. */
static int tcp_address(const char *listen, struct sockaddr_storage *sa, unsigned *flags)
{
	char addr[128];
	uint16_t port;

	if (parse_tcp(listen, addr, sizeof(addr), &port))
		return -EINVAL; /* metrics__bad_listen has said it */
	if (inet_pton(AF_INET, addr, &((struct sockaddr_in *)sa)->sin_addr) == 1) {
		((struct sockaddr_in *)sa)->sin_family = AF_INET;
		((struct sockaddr_in *)sa)->sin_port = htons(port);
	} else if (inet_pton(AF_INET6, addr, &((struct sockaddr_in6 *)sa)->sin6_addr) == 1) {
		((struct sockaddr_in6 *)sa)->sin6_family = AF_INET6;
		((struct sockaddr_in6 *)sa)->sin6_port = htons(port);
		*flags |= MHD_USE_IPv6;
	} else {
		err_msg("--metrics %s: %s is not an IPv4 or IPv6 address\n", listen, addr);
		return -EINVAL;
	}
	return 0;
}

static void metrics_free(struct metrics *m)
{
	if (m->statm >= 0)
		close(m->statm);
	pthread_mutex_destroy(&m->lock);
	free(m->sock_path);
	free(m);
}

int metrics__open(struct metrics **out, const char *listen)
{
	/* epoll: select() takes no descriptor from 1024 up */
	unsigned flags = MHD_USE_EPOLL_INTERNAL_THREAD | MHD_USE_ERROR_LOG;
	struct sockaddr_storage sa = { 0 };
	bool unix_socket = !strncmp(listen, UNIX_PREFIX, strlen(UNIX_PREFIX));
	const char *bad = metrics__bad_listen(listen);
	struct metrics *m;
	int fd = -1, err;

	*out = NULL;
	if (bad) {
		err_msg("--metrics %s: want %s\n", listen, bad);
		return -EINVAL;
	}
	err = unix_socket ? 0 : tcp_address(listen, &sa, &flags);
	if (err)
		return err;
	m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	pthread_mutex_init(&m->lock, NULL);
	m->statm = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
	if (unix_socket && (fd = listen_unix(m, listen)) < 0) {
		metrics_free(m);
		return fd;
	}
	{
		struct MHD_OptionItem opts[] = {
			{ MHD_OPTION_EXTERNAL_LOGGER, (intptr_t)mhd_log, NULL }, /* first */
			unix_socket ? (struct MHD_OptionItem){ MHD_OPTION_LISTEN_SOCKET, fd, NULL }
				    : (struct MHD_OptionItem){ MHD_OPTION_SOCK_ADDR, 0, &sa },
			{ MHD_OPTION_CONNECTION_LIMIT, MAX_CONNECTIONS, NULL },
			{ MHD_OPTION_PER_IP_CONNECTION_LIMIT, MAX_PER_CLIENT, NULL },
			{ MHD_OPTION_CONNECTION_TIMEOUT, IDLE_TIMEOUT_S, NULL },
			{ MHD_OPTION_END, 0, NULL },
		};

		/* the port is sa's (libmicrohttpd's argument is for when it has no address) */
		m->daemon = MHD_start_daemon(flags, 0, NULL, NULL, on_request, m, MHD_OPTION_ARRAY,
					     opts, MHD_OPTION_END);
	}
	if (!m->daemon) {
		if (unix_socket) {
			err_msg("--metrics %s: cannot serve there\n", listen);
			unlink(m->sock_path);
			close(fd);
		} else {
			err_msg("--metrics %s: cannot listen there (in use, or not this host's "
				"address)\n",
				listen);
		}
		metrics_free(m);
		return unix_socket ? -EIO : -EADDRINUSE;
	}
	*out = m;
	return 0;
}

static struct series *series_of(struct metrics *m, uint32_t pid, bool create)
{
	struct series **sets, *s;

	for (size_t i = 0; i < m->nr; i++)
		if (m->sets[i]->pid == pid)
			return m->sets[i];
	if (!create)
		return NULL;
	s = calloc(1, sizeof(*s));
	sets = s ? realloc(m->sets, (m->nr + 1) * sizeof(*sets)) : NULL;
	if (!sets) {
		free(s);
		return NULL;
	}
	m->sets = sets;
	s->pid = pid;
	m->sets[m->nr++] = s;
	return s;
}

static void series_free(struct series *s)
{
	free(s->tasks);
	free(s->workers);
	free(s->steals);
	free(s);
}

/* The top_tasks busiest tasks (by poll time) of the snapshot, named. */
static void take_tasks(struct series *s, const struct metrics_target *t)
{
	const struct stats *snap = t->snap;
	size_t n = 0;

	s->nr_tasks = 0;
	if (!t->top_tasks || !snap->nr_tasks)
		return;
	if (!s->tasks && !(s->tasks = calloc(t->top_tasks, sizeof(*s->tasks))))
		return;
	/* a partial selection: keep the n busiest seen so far, sorted */
	for (size_t i = 0; i < snap->nr_tasks; i++) {
		const struct task_entry *e = &snap->tasks[i];
		size_t at = n < t->top_tasks ? n++ : t->top_tasks;

		if (at == t->top_tasks && e->s.poll_ns <= s->tasks[at - 1].poll_ns)
			continue;
		if (at == t->top_tasks)
			at--;
		for (; at > 0 && s->tasks[at - 1].poll_ns < e->s.poll_ns; at--)
			s->tasks[at] = s->tasks[at - 1];
		s->tasks[at] = (struct task_series){
			.id = e->id,
			.polls = e->s.polls,
			.poll_ns = e->s.poll_ns,
			.oncpu_ns = e->s.oncpu_ns,
			.wakes = e->s.wakes,
			.self_wakes = e->s.self_wakes,
			.name_addr = e->s.name_addr,
		};
	}
	for (size_t i = 0; i < n; i++)
		model__task_name(t->model, s->tasks[i].id, s->tasks[i].name_addr, s->tasks[i].name,
				 sizeof(s->tasks[i].name));
	s->nr_tasks = n;
}

void metrics__update(struct metrics *m, const struct metrics_target *t)
{
	struct series *s = series_of(m, t->pid, true);
	const struct stats *snap = t->snap;
	void *w, *st;

	if (!s)
		return;
	snprintf(s->comm, sizeof(s->comm), "%s", t->comm);
	snprintf(s->runtime, sizeof(s->runtime), "%s", t->runtime);
	s->rt = snap->rt;
	s->sample_hz = t->sample_hz;
	s->dropped = snap->dropped;
	w = realloc(s->workers, (snap->nr_workers + 1) * sizeof(*snap->workers));
	st = realloc(s->steals, (snap->nr_steals + 1) * sizeof(*snap->steals));
	if (w)
		s->workers = w;
	if (st)
		s->steals = st;
	if (w && snap->nr_workers) {
		memcpy(s->workers, snap->workers, snap->nr_workers * sizeof(*snap->workers));
		s->nr_workers = snap->nr_workers;
	}
	if (st && snap->nr_steals) {
		memcpy(s->steals, snap->steals, snap->nr_steals * sizeof(*snap->steals));
		s->nr_steals = snap->nr_steals;
	}
	for (int k = 0; k < ALERT_KIND_MAX; k++) {
		s->begun[k] = t->det->begun[k];
		s->active[k] = t->det->begun[k] - t->det->ended[k];
	}
	take_tasks(s, t);
	m->top_tasks |= t->top_tasks > 0;
}

/* Scrapes answered so far. */
static uint64_t scrapes_so_far(const struct metrics *m)
{
	return __atomic_load_n(&m->scrapes, __ATOMIC_RELAXED);
}

void metrics__gone(struct metrics *m, uint32_t pid)
{
	struct series *s = series_of(m, pid, false);

	if (!s || s->gone)
		return;
	s->gone = true;
	s->gone_at = now_ns();
	s->gone_scrapes = scrapes_so_far(m);
	/* nothing is open any more: the last report ended every episode */
	memset(s->active, 0, sizeof(s->active));
}

/* ---- rendering -------------------------------------------------------- */

/* A label value, escaped as the text format wants (backslash, quote, newline). */
static void label_value(FILE *f, const char *v)
{
	for (; *v; v++) {
		if (*v == '\\' || *v == '"')
			fputc('\\', f), fputc(*v, f);
		else if (*v == '\n')
			fputs("\\n", f);
		else
			fputc(*v, f);
	}
}

static void process_labels(FILE *f, const struct series *s)
{
	fprintf(f, "pid=\"%u\",comm=\"", s->pid);
	label_value(f, s->comm);
	fprintf(f, "\",runtime=\"");
	label_value(f, s->runtime);
	fputc('"', f);
}

/*
 * A family's HELP and TYPE. A counter's samples end in _total; its family
 * name does too in the text format, and does not in OpenMetrics.
 */
static void family(FILE *f, bool om, const char *name, const char *type, const char *help)
{
	const char *total = !om && !strcmp(type, "counter") ? "_total" : "";

	fprintf(f, "# HELP asynctraced_%s%s %s\n# TYPE asynctraced_%s%s %s\n", name, total, help,
		name, total, type);
}

static double seconds(uint64_t ns)
{
	return (double)ns / 1e9;
}

/* One histogram's series: log2 slots as cumulative `le` buckets. */
static void histogram(FILE *f, const char *name, const struct series *s, uint32_t worker,
		      const struct at_hist *h, uint64_t sum_ns)
{
	uint64_t cum = 0, count = hist_count(h);

	for (int i = 0; i < AT_HIST_SLOTS; i++) {
		cum += h->slot[i];
		if (i < BUCKET_FIRST || i > BUCKET_LAST)
			continue;
		/* slot i holds [2^i, 2^(i+1)) ns */
		fprintf(f, "asynctraced_%s_bucket{", name);
		process_labels(f, s);
		fprintf(f, ",worker=\"%u\",le=\"%.9g\"} %llu\n", worker, seconds(2ull << i),
			(unsigned long long)cum);
	}
	fprintf(f, "asynctraced_%s_bucket{", name);
	process_labels(f, s);
	fprintf(f, ",worker=\"%u\",le=\"+Inf\"} %llu\n", worker, (unsigned long long)count);
	fprintf(f, "asynctraced_%s_sum{", name);
	process_labels(f, s);
	fprintf(f, ",worker=\"%u\"} %.9g\n", worker, seconds(sum_ns));
	fprintf(f, "asynctraced_%s_count{", name);
	process_labels(f, s);
	fprintf(f, ",worker=\"%u\"} %llu\n", worker, (unsigned long long)count);
}

/* A worker that has polled, stolen or parked: one the runtime has. */
static bool worker_seen(const struct at_worker_stats *w)
{
	return w->polls || w->steals || w->parks || w->tid;
}

/* What a worker value is: a field of at_worker_stats, as a number. */
typedef double (*worker_value)(const struct at_worker_stats *w);

static double w_polls(const struct at_worker_stats *w) { return (double)w->polls; }
static double w_busy(const struct at_worker_stats *w) { return seconds(w->busy_ns); }
static double w_oncpu(const struct at_worker_stats *w) { return seconds(w->oncpu_ns); }
static double w_wakes(const struct at_worker_stats *w) { return (double)w->wakes; }
static double w_self(const struct at_worker_stats *w) { return (double)w->self_wakes; }
static double w_parks(const struct at_worker_stats *w) { return (double)w->parks; }
static double w_park_s(const struct at_worker_stats *w) { return seconds(w->park_ns); }
static double w_depth(const struct at_worker_stats *w) { return (double)w->queue.depth; }
static double w_peak(const struct at_worker_stats *w) { return (double)w->queue.peak; }

/*
 * What sample mode does not see (pipeline/unseen.h) has no series for a
 * sampled process: absent, never a 0 that reads as "none happened"
 * (asynctraced_target_info says the mode). Each family names the item it
 * stands on (SEEN: samples see it too).
 */
#define SEEN NULL

static bool unseen(const struct series *s, const char *item)
{
	assert(!item || unseen__known(item));
	return item && s->sample_hz && unseen__for(item, s->runtime);
}

static void per_worker(FILE *f, bool om, struct series **sets, size_t nr, const char *name,
		       const char *type, const char *help, const char *seen, worker_value value)
{
	bool counter = !strcmp(type, "counter");

	family(f, om, name, type, help);
	for (size_t i = 0; i < nr; i++)
		for (uint32_t k = 0; k < sets[i]->nr_workers && !unseen(sets[i], seen); k++) {
			if (!worker_seen(&sets[i]->workers[k]))
				continue;
			fprintf(f, "asynctraced_%s%s{", name, counter ? "_total" : "");
			process_labels(f, sets[i]);
			fprintf(f, ",worker=\"%u\"} %.9g\n", k, value(&sets[i]->workers[k]));
		}
}

/* What a process value is. */
typedef double (*process_value)(const struct series *s);

static double p_spawns(const struct series *s) { return (double)s->rt.spawns; }
static double p_completed(const struct series *s) { return (double)s->rt.completed; }
static double p_outside(const struct series *s) { return (double)s->rt.outside_wakes; }
static double p_inject(const struct series *s) { return (double)s->rt.inject.depth; }
static double p_inject_peak(const struct series *s) { return (double)s->rt.inject.peak; }
static double p_dropped(const struct series *s) { return (double)s->dropped; }

static void per_process(FILE *f, bool om, struct series **sets, size_t nr, const char *name,
			const char *type, const char *help, const char *seen, process_value value)
{
	bool counter = !strcmp(type, "counter");

	family(f, om, name, type, help);
	for (size_t i = 0; i < nr; i++) {
		if (unseen(sets[i], seen))
			continue;
		fprintf(f, "asynctraced_%s%s{", name, counter ? "_total" : "");
		process_labels(f, sets[i]);
		fprintf(f, "} %.9g\n", value(sets[i]));
	}
}

static void histograms(FILE *f, bool om, struct series **sets, size_t nr)
{
	static const struct {
		const char *name, *help, *seen;
	} h[] = {
		{ "poll_duration_seconds", "Polls by how long they held their worker.",
		  "poll_bounds" },
		{ "poll_on_cpu_seconds", "Polls by their time on the CPU.", "poll_bounds" },
		{ "wake_to_poll_delay_seconds", "Polls by the wait from the wake that queued the task.",
		  "wake_delays" },
	};

	for (size_t k = 0; k < sizeof(h) / sizeof(h[0]); k++) {
		family(f, om, h[k].name, "histogram", h[k].help);
		for (size_t i = 0; i < nr; i++)
			for (uint32_t w = 0; w < sets[i]->nr_workers; w++) {
				const struct at_worker_stats *ws = &sets[i]->workers[w];

				if (!worker_seen(ws) || unseen(sets[i], h[k].seen))
					continue;
				if (k == 0)
					histogram(f, h[k].name, sets[i], w, &ws->poll, ws->busy_ns);
				else if (k == 1)
					histogram(f, h[k].name, sets[i], w, &ws->oncpu, ws->oncpu_ns);
				else
					histogram(f, h[k].name, sets[i], w, &ws->delay, ws->delay_ns);
			}
	}
}

/* Steals by thief and victim: operations, or the tasks they took. */
static void steal_family(FILE *f, bool om, struct series **sets, size_t nr, const char *name,
			 const char *help, bool tasks)
{
	family(f, om, name, "counter", help);
	for (size_t i = 0; i < nr; i++)
		for (size_t k = 0; k < sets[i]->nr_steals && !unseen(sets[i], "steals");
		     k++) {
			const struct steal_entry *e = &sets[i]->steals[k];
			char victim[16];

			if (e->key.victim == AT_WORKER_UNKNOWN)
				snprintf(victim, sizeof(victim), "unknown");
			else
				snprintf(victim, sizeof(victim), "%u", e->key.victim);
			fprintf(f, "asynctraced_%s_total{", name);
			process_labels(f, sets[i]);
			fprintf(f, ",thief=\"%u\",victim=\"%s\"} %llu\n", e->key.thief, victim,
				(unsigned long long)(tasks ? e->s.tasks : e->s.ops));
		}
}

/* Alert episodes by kind: begun so far (a counter), or open now (a gauge). */
static void alert_family(FILE *f, bool om, struct series **sets, size_t nr, bool open)
{
	const char *name = open ? "alerts_active" : "alerts";

	family(f, om, name, open ? "gauge" : "counter",
	       open ? "Alert episodes open now, by kind." : "Alert episodes begun, by kind.");
	for (size_t i = 0; i < nr; i++)
		for (int k = ALERT_LONG_POLL; k < ALERT_KIND_MAX; k++) {
			fprintf(f, "asynctraced_%s%s{", name, open ? "" : "_total");
			process_labels(f, sets[i]);
			fprintf(f, ",kind=\"%s\"} %llu\n", alert_kind_str((enum alert_kind)k),
				(unsigned long long)(open ? sets[i]->active[k] : sets[i]->begun[k]));
		}
}

/* --metrics-tasks: the busiest tasks of each process, by id and name. */
static double t_polls(const struct task_series *t) { return (double)t->polls; }
static double t_poll_s(const struct task_series *t) { return seconds(t->poll_ns); }
static double t_oncpu_s(const struct task_series *t) { return seconds(t->oncpu_ns); }
static double t_wakes(const struct task_series *t) { return (double)t->wakes; }
static double t_self(const struct task_series *t) { return (double)t->self_wakes; }

static void tasks(FILE *f, bool om, struct series **sets, size_t nr)
{
	static const struct {
		const char *name, *help;
		const char *seen;
		double (*value)(const struct task_series *t);
	} fam[] = {
		{ "task_polls", "Polls of one of the busiest tasks (--metrics-tasks).", SEEN,
		  t_polls },
		{ "task_poll_seconds", "Time one of the busiest tasks spent in polls.", SEEN,
		  t_poll_s },
		{ "task_on_cpu_seconds", "Time its polls spent on the CPU.", SEEN, t_oncpu_s },
		{ "task_wakes", "Wakes of it by others.", "wakes", t_wakes },
		{ "task_self_wakes", "Wakes of it by itself.", "wakes", t_self },
	};

	for (size_t k = 0; k < sizeof(fam) / sizeof(fam[0]); k++) {
		family(f, om, fam[k].name, "counter", fam[k].help);
		for (size_t i = 0; i < nr; i++)
			for (size_t j = 0; j < sets[i]->nr_tasks && !unseen(sets[i], fam[k].seen);
			     j++) {
				const struct task_series *t = &sets[i]->tasks[j];

				fprintf(f, "asynctraced_%s_total{", fam[k].name);
				process_labels(f, sets[i]);
				fprintf(f, ",task=\"%llu\",name=\"", (unsigned long long)t->id);
				label_value(f, t->name);
				fprintf(f, "\"} %.9g\n", fam[k].value(t));
			}
	}
}

/* The tracer's own: CPU, memory, targets. */
static void self_metrics(FILE *f, bool om, const struct metrics *m, const struct metrics_self *self)
{
	struct rusage ru;
	char statm[128] = "";
	long pages = 0, rss = 0;
	ssize_t n;

	getrusage(RUSAGE_SELF, &ru);
	if (m->statm >= 0 && (n = pread(m->statm, statm, sizeof(statm) - 1, 0)) > 0) {
		statm[n] = '\0';
		sscanf(statm, "%ld %ld", &pages, &rss);
	}
	fprintf(f, "# HELP process_cpu_seconds%s asynctraced's own CPU time, user and system.\n"
		   "# TYPE process_cpu_seconds%s counter\nprocess_cpu_seconds_total %.6f\n",
		om ? "" : "_total", om ? "" : "_total",
		(double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
			(double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6);
	fprintf(f, "# HELP process_resident_memory_bytes asynctraced's resident memory.\n"
		   "# TYPE process_resident_memory_bytes gauge\nprocess_resident_memory_bytes %lld\n",
		(long long)rss * sysconf(_SC_PAGESIZE));
	family(f, om, "targets", "gauge", "Processes traced now.");
	fprintf(f, "asynctraced_targets %zu\n", self->traced);
	family(f, om, "targets_missed", "counter", "Processes left out by --max-targets.");
	fprintf(f, "asynctraced_targets_missed_total %llu\n", (unsigned long long)self->missed);
	family(f, om, "attach_failures", "counter", "Processes found and not traced.");
	fprintf(f, "asynctraced_attach_failures_total %llu\n",
		(unsigned long long)self->attach_failures);
}

/* How each process is measured: by probes, or by samples at a rate. */
static void target_info(FILE *f, bool om, struct series **sets, size_t nr)
{
	family(f, om, "target_info", "gauge",
	       "Each traced process, and how it is measured (probes, or samples).");
	for (size_t i = 0; i < nr; i++) {
		fprintf(f, "asynctraced_target_info{");
		process_labels(f, sets[i]);
		if (sets[i]->sample_hz)
			fprintf(f, ",measured_by=\"samples\",sample_hz=\"%u\"} 1\n",
				sets[i]->sample_hz);
		else
			fprintf(f, ",measured_by=\"probes\"} 1\n");
	}
}

static char *render(struct metrics *m, const struct metrics_self *self, bool om, size_t *len)
{
	char *buf = NULL;
	FILE *f = open_memstream(&buf, len);
	struct series **s = m->sets;
	size_t nr = m->nr;

	if (!f)
		return NULL;
	target_info(f, om, s, nr);
	per_worker(f, om, s, nr, "polls", "counter", "Polls, by worker.", SEEN, w_polls);
	per_worker(f, om, s, nr, "busy_seconds", "counter",
		   "Time spent in polls (held by a task), by worker.", SEEN, w_busy);
	per_worker(f, om, s, nr, "on_cpu_seconds", "counter",
		   "Time polls spent on the CPU, by worker.", SEEN, w_oncpu);
	histograms(f, om, s, nr);
	per_worker(f, om, s, nr, "wakes", "counter", "Wakes made on the worker's thread.",
		   "wakes", w_wakes);
	per_worker(f, om, s, nr, "self_wakes", "counter",
		   "Wakes of a task by itself (a yield), on the worker's thread.", "wakes",
		   w_self);
	per_worker(f, om, s, nr, "parks", "counter", "Times the worker parked (idle).",
		   "parks", w_parks);
	per_worker(f, om, s, nr, "parked_seconds", "counter", "Time the worker spent parked.",
		   "parks", w_park_s);
	per_worker(f, om, s, nr, "queue_depth", "gauge", "Tasks in the worker's local queue.",
		   "queue_depths", w_depth);
	per_worker(f, om, s, nr, "queue_depth_max", "gauge",
		   "The most tasks the worker's local queue held.", "queue_depths", w_peak);
	per_process(f, om, s, nr, "inject_queue_depth", "gauge",
		    "Tasks in the runtime's injection (global) queue.", "injection_queue", p_inject);
	per_process(f, om, s, nr, "inject_queue_depth_max", "gauge",
		    "The most tasks the injection queue held.", "injection_queue", p_inject_peak);
	per_process(f, om, s, nr, "tasks_spawned", "counter", "Tasks spawned.", "spawns",
		    p_spawns);
	per_process(f, om, s, nr, "tasks_completed", "counter", "Tasks completed.",
		    "completions", p_completed);
	per_process(f, om, s, nr, "outside_wakes", "counter",
		    "Wakes made by threads that are not workers.", "wakes", p_outside);
	steal_family(f, om, s, nr, "steals", "Steal operations, by thief and victim worker.", false);
	steal_family(f, om, s, nr, "stolen_tasks", "Tasks taken by steals, by thief and victim worker.",
		     true);
	alert_family(f, om, s, nr, false);
	alert_family(f, om, s, nr, true);
	per_process(f, om, s, nr, "dropped_records", "counter",
		    "Records the ring buffer had no room for (counted, never silent).", SEEN,
		    p_dropped);
	if (m->top_tasks)
		tasks(f, om, s, nr);
	self_metrics(f, om, m, self);
	if (om)
		fputs("# EOF\n", f);
	if (fclose(f)) {
		free(buf);
		return NULL;
	}
	return buf;
}

void metrics__publish(struct metrics *m, const struct metrics_self *self)
{
	uint64_t now = now_ns(), scrapes = scrapes_so_far(m);
	char *text, *om;
	size_t text_len = 0, om_len = 0;

	/* an exited process's last values, once a scrape has taken them, go */
	for (size_t i = m->nr; i-- > 0;) {
		struct series *s = m->sets[i];

		if (s->gone && (scrapes > s->gone_scrapes + 1 || now > s->gone_at + GONE_KEEP_NS)) {
			series_free(s);
			m->sets[i] = m->sets[--m->nr];
		}
	}
	text = render(m, self, false, &text_len);
	om = render(m, self, true, &om_len);
	if (!text || !om) {
		free(text);
		free(om);
		return;
	}
	pthread_mutex_lock(&m->lock);
	free(m->text);
	free(m->om);
	m->text = text;
	m->text_len = text_len;
	m->om = om;
	m->om_len = om_len;
	pthread_mutex_unlock(&m->lock);
}

void metrics__close(struct metrics *m, bool remove_socket)
{
	struct stat st;

	if (!m)
		return;
	MHD_stop_daemon(m->daemon); /* closes the listening socket */
	if (remove_socket && m->sock_path && !lstat(m->sock_path, &st) &&
	    st.st_dev == m->sock_dev && st.st_ino == m->sock_ino)
		unlink(m->sock_path);
	for (size_t i = 0; i < m->nr; i++)
		series_free(m->sets[i]);
	free(m->sets);
	free(m->text);
	free(m->om);
	metrics_free(m);
}
