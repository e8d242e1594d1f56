// SPDX-License-Identifier: MIT
#include "sinks/flight.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <zlib.h>

#include "lib/outbuf.h"
#include "lib/u64map.h"
#include "lib/util.h"
#include "pipeline/pipeline.h"
#include "sinks/pftrace_file.h"
#include "sinks/trace_proto.h"

/*
 * The ring is a list of chunks, the oldest going first. The chunk being
 * written is raw; a full one is deflated (zlib's fastest level: records of
 * one process repeat themselves, and memory is what bounds the window).
 */
#define CHUNK_BYTES (1u << 20)
#define DUMP_PREFIX "asynctraced-"
#define DUMP_SUFFIX ".pftrace"

struct chunk {
	struct chunk *next;
	uint64_t last_ts;	/* its newest record */
	size_t used;		/* bytes of records */
	size_t zlen;		/* deflated: data holds zlen bytes; 0: data holds the records */
	uint8_t *data;		/* records, each: u32 size, the record, padded to 8 */
};

struct due {
	uint32_t pid;
	uint64_t from, to;	/* the window, the records' clock */
	uint64_t at;		/* when to write it (CLOCK_MONOTONIC) */
	char name[128];		/* in the directory */
};

struct flight {
	struct flight_opts o;
	char dir[256];
	int dirfd;		/* every file is made, renamed and removed relative to it */
	struct chunk *oldest, *newest;
	uint8_t *spare;		/* a raw chunk's buffer, for the next: no page faults anew */
	uint64_t bytes;		/* in the chunks */
	uint64_t newest_ts;
	struct due *due;
	size_t nr_due;
	struct u64map last_dump;	/* pid -> when its last dump was asked (+1) */
};

int flight__new(struct flight **out, const struct flight_opts *o)
{
	struct flight *f;
	int fd;

	*out = NULL;
	fd = open(o->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || faccessat(fd, ".", W_OK | X_OK, AT_EACCESS)) {
		err_msg("--dump-dir %s: %s\n", o->dir,
			fd < 0 && errno == ENOTDIR ? "not a directory" : strerror(errno));
		if (fd >= 0)
			close(fd);
		return -ENOTDIR;
	}
	f = calloc(1, sizeof(*f));
	if (!f) {
		close(fd);
		return -ENOMEM;
	}
	f->dirfd = fd;
	f->o = *o;
	snprintf(f->dir, sizeof(f->dir), "%s", o->dir);
	f->o.dir = f->dir;
	u64map__init(&f->last_dump);
	*out = f;
	return 0;
}

void flight__free(struct flight *f)
{
	if (!f)
		return;
	while (f->oldest) {
		struct chunk *c = f->oldest;

		f->oldest = c->next;
		free(c->data);
		free(c);
	}
	free(f->spare);
	free(f->due);
	u64map__clear(&f->last_dump);
	close(f->dirfd);
	free(f);
}

int flight__dirfd(const struct flight *f)
{
	return f ? f->dirfd : -1;
}

/* The oldest chunk goes while the ring is over its size, or holds only what no dump wants. */
static void evict(struct flight *f)
{
	uint64_t keep = f->o.window_ns + f->o.after_ns;

	while (f->oldest && f->oldest != f->newest &&
	       (f->bytes > f->o.max_bytes ||
		(f->newest_ts > keep && f->oldest->last_ts < f->newest_ts - keep))) {
		struct chunk *c = f->oldest;

		/* a window still due needs it */
		for (size_t i = 0; i < f->nr_due; i++)
			if (c->last_ts >= f->due[i].from && f->bytes <= f->o.max_bytes)
				return;
		f->oldest = c->next;
		f->bytes -= c->zlen ? c->zlen : CHUNK_BYTES;
		free(c->data);
		free(c);
	}
}

/* A full chunk, deflated; its raw buffer kept for the next one. */
static void deflate_chunk(struct flight *f, struct chunk *c)
{
	uLongf len = compressBound(c->used);
	uint8_t *z = malloc(len);

	if (!z || compress2(z, &len, c->data, c->used, Z_BEST_SPEED) != Z_OK) {
		free(z);
		return;
	}
	free(f->spare);
	f->spare = c->data;
	c->data = realloc(z, len) ?: z;
	c->zlen = len;
	f->bytes -= CHUNK_BYTES - len;
}

void flight__record(struct flight *f, const void *rec, size_t size)
{
	size_t need = (sizeof(uint32_t) + size + 7) & ~(size_t)7;
	struct at_hdr h;
	struct chunk *c = f->newest;

	if (size < sizeof(h) || need > CHUNK_BYTES)
		return;
	memcpy(&h, rec, sizeof(h));
	if (!c || c->used + need > CHUNK_BYTES) {
		if (c)
			deflate_chunk(f, c);
		c = calloc(1, sizeof(*c));
		if (!c)
			return;
		c->data = f->spare ? f->spare : malloc(CHUNK_BYTES);
		if (!c->data) {
			free(c);
			return;
		}
		f->spare = NULL;
		if (f->newest)
			f->newest->next = c;
		else
			f->oldest = c;
		f->newest = c;
		f->bytes += CHUNK_BYTES;
		evict(f);
	}
	{
		uint32_t sz = (uint32_t)size;

		memcpy(c->data + c->used, &sz, sizeof(sz));
		memcpy(c->data + c->used + sizeof(sz), rec, size);
		c->used += need;
	}
	if (h.ts > c->last_ts)
		c->last_ts = h.ts;
	if (h.ts > f->newest_ts)
		f->newest_ts = h.ts;
}

static bool exists(const struct flight *f, const char *name)
{
	struct stat st;

	return !fstatat(f->dirfd, name, &st, AT_SYMLINK_NOFOLLOW);
}

/* asynctraced-<UTC time>-<pid>-<kind>.pftrace: sorted by name, sorted by time */
static void dump_name(struct flight *f, uint32_t pid, const char *kind, char *name, size_t len)
{
	time_t now = time(NULL);
	struct tm tm;
	char when[32];

	gmtime_r(&now, &tm);
	strftime(when, sizeof(when), "%Y%m%dT%H%M%SZ", &tm);
	snprintf(name, len, DUMP_PREFIX "%s-%u-%s" DUMP_SUFFIX, when, pid, kind);
	/* two in one second: numbered */
	for (int n = 2; exists(f, name) && n < 100; n++)
		snprintf(name, len, DUMP_PREFIX "%s-%u-%s-%d" DUMP_SUFFIX, when, pid, kind, n);
}

static bool schedule(struct flight *f, uint32_t pid, const char *kind, uint64_t from,
		     uint64_t to, uint64_t at, char *path, size_t len)
{
	struct due *d = realloc(f->due, (f->nr_due + 1) * sizeof(*d));

	if (!d)
		return false;
	f->due = d;
	d = &f->due[f->nr_due++];
	d->pid = pid;
	d->from = from;
	d->to = to;
	d->at = at;
	dump_name(f, pid, kind, d->name, sizeof(d->name));
	snprintf(path, len, "%s/%s", f->dir, d->name);
	u64map__set(&f->last_dump, pid, (void *)(uintptr_t)(now_ns() + 1));
	return true;
}

bool flight__alert(struct flight *f, uint32_t pid, const char *kind, uint64_t ts,
		   uint64_t after_ns, char *path, size_t len)
{
	uintptr_t last = (uintptr_t)u64map__get(&f->last_dump, pid);
	uint64_t now = now_ns();

	path[0] = '\0';
	for (size_t i = 0; i < f->nr_due; i++)
		if (f->due[i].pid == pid)
			return false; /* its window covers this one's start */
	if (last && now < last - 1 + f->o.min_gap_ns)
		return false;
	if (!after_ns)
		after_ns = f->o.after_ns;
	return schedule(f, pid, kind, ts > f->o.window_ns ? ts - f->o.window_ns : 0,
			ts + after_ns, now + after_ns, path, len);
}

void flight__request(struct flight *f, uint32_t pid, uint64_t now, char *path, size_t len)
{
	schedule(f, pid, "request", now > f->o.window_ns ? now - f->o.window_ns : 0, now, 0, path,
		 len);
}

/*
 * The dumps in the directory, oldest first, go until there is room for need
 * more bytes; keep_newest: never the newest (the one just written).
 */
static void make_room(struct flight *f, uint64_t need, bool keep_newest)
{
	struct dumpfile {
		char name[256];
		uint64_t size;
	} *files = NULL;
	size_t nr = 0;
	uint64_t total = 0;
	struct dirent *e;
	int fd = openat(f->dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;

	if (!d) {
		if (fd >= 0)
			close(fd);
		return;
	}
	while ((e = readdir(d))) {
		size_t n = strlen(e->d_name);
		struct stat st;
		struct dumpfile *more;

		/* only ours: asynctraced-<time>-<pid>-<kind>.pftrace, a regular file */
		if (strncmp(e->d_name, DUMP_PREFIX, strlen(DUMP_PREFIX)) || n < strlen(DUMP_SUFFIX) ||
		    strcmp(e->d_name + n - strlen(DUMP_SUFFIX), DUMP_SUFFIX) || n >= 256 ||
		    fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) || !S_ISREG(st.st_mode))
			continue;
		more = realloc(files, (nr + 1) * sizeof(*files));
		if (!more)
			break;
		files = more;
		snprintf(files[nr].name, sizeof(files[nr].name), "%s", e->d_name);
		files[nr].size = (uint64_t)st.st_size;
		total += files[nr].size;
		nr++;
	}
	/* oldest first: the names start with the time */
	for (size_t i = 1; i < nr; i++)
		for (size_t j = i; j > 0 && strcmp(files[j].name, files[j - 1].name) < 0; j--) {
			struct dumpfile t = files[j];

			files[j] = files[j - 1];
			files[j - 1] = t;
		}
	for (size_t i = 0; i + keep_newest < nr && total + need > f->o.dir_max_bytes; i++)
		if (!unlinkat(f->dirfd, files[i].name, 0))
			total -= files[i].size;
	closedir(d);
	free(files);
}

/*
 * A new file: O_EXCL, so that nothing anyone put there under that name (a
 * symlink, a FIFO, a file of theirs) is written; one left by a dump that
 * died half-written is removed (unlinkat removes a symlink, not what it
 * names) and made anew. The descriptor, or -1 and errno.
 */
static int create_tmp(int dirfd, const char *name)
{
	const int flags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
	int fd = openat(dirfd, name, flags, OUTBUF_MODE);

	if (fd < 0 && errno == EEXIST && !unlinkat(dirfd, name, 0))
		fd = openat(dirfd, name, flags, OUTBUF_MODE);
	return fd;
}

/* The window of d, replayed into a trace of its own, with the live model's names. */
static int write_dump(struct flight *f, const struct due *d, const struct model *live)
{
	char tmp[160];
	uint8_t *raw;
	struct pipeline p;
	struct pftrace_file *pf = NULL;
	struct outbuf *ob;
	struct sink *sink;
	uint64_t key, written = 0;
	void *val;
	int err, fd;

	/* room for it first (an estimate: the window's share of the ring), then exactly */
	make_room(f, f->bytes / 2, false);
	/* written under a name no dump has, then renamed: a dump is whole or absent */
	snprintf(tmp, sizeof(tmp), ".%s.tmp", d->name);
	fd = create_tmp(f->dirfd, tmp);
	if (fd < 0 || (err = outbuf__from_fd(&ob, fd))) {
		err = fd < 0 ? -errno : err;
		err_msg("flight recorder: cannot write '%s/%s': %s\n", f->dir, tmp, strerror(-err));
		if (fd >= 0)
			close(fd);
		return err;
	}
	err = pipeline__init(&p, d->pid, live ? live->comm : "gone", d->from, &f->o.detect);
	/* sample mode: runs the samples saw say so; wakes only an escalation's probes saw */
	p.detector.sample_period_ns = f->o.sample_period_ns;
	p.detector.wakes_unseen = f->o.sample_period_ns != 0;
	if (!err)
		err = pftrace_file__new(&pf, ob, true);
	if (!err)
		err = trace_proto__new(&sink, pf, 1);
	if (!err)
		err = pipeline__add_sink(&p, sink);
	if (err) {
		pipeline__free(&p);
		pftrace_file__free(pf);
		outbuf__free(ob);
		unlinkat(f->dirfd, tmp, 0);
		return err;
	}
	if (live) {
		for (size_t i = 0; u64map__next(&live->names, &i, &key, &val);)
			model__name(&p.model, key, val);
		p.model.realtime_offset = live->realtime_offset;
		p.model.thread_comm = live->thread_comm;
		p.model.read_str = live->read_str;
		p.model.target_ctx = live->target_ctx;
	}
	raw = malloc(CHUNK_BYTES);
	for (const struct chunk *c = f->oldest; raw && c; c = c->next) {
		const uint8_t *data = c->data;
		uLongf len = CHUNK_BYTES;

		if (c->last_ts < d->from)
			continue;
		if (c->zlen) {
			if (uncompress(raw, &len, c->data, c->zlen) != Z_OK || len != c->used)
				continue;
			data = raw;
		}
		for (size_t off = 0; off < c->used;) {
			uint32_t sz;
			struct at_hdr h;

			memcpy(&sz, data + off, sizeof(sz));
			memcpy(&h, data + off + sizeof(sz), sizeof(h));
			if (h.pid == d->pid && h.ts >= d->from && h.ts <= d->to) {
				pipeline__push(&p, data + off + sizeof(sz), sz);
				written++;
			}
			off += (sizeof(sz) + sz + 7) & ~(size_t)7;
		}
	}
	free(raw);
	err = pipeline__finish(&p, d->to);
	pipeline__free(&p);
	if (!err)
		err = pftrace_file__flush(pf);
	pftrace_file__free(pf);
	outbuf__free(ob);
	if (!err && renameat(f->dirfd, tmp, f->dirfd, d->name))
		err = -errno;
	if (err) {
		err_msg("flight recorder: cannot write '%s/%s': %s\n", f->dir, d->name,
			strerror(-err));
		unlinkat(f->dirfd, tmp, 0);
		return err;
	}
	make_room(f, 0, true);
	info_msg("flight recorder: wrote %s/%s (%llu records of pid %u, %.1f s)\n", f->dir,
		 d->name, (unsigned long long)written, d->pid, (double)(d->to - d->from) / 1e9);
	return 0;
}

void flight__tick(struct flight *f, uint64_t now, uint32_t pid, flight_live_fn live, void *ctx)
{
	for (size_t i = 0; i < f->nr_due;) {
		struct due d = f->due[i];

		if (now < d.at && d.pid != pid) {
			i++;
			continue;
		}
		f->due[i] = f->due[--f->nr_due];
		write_dump(f, &d, live(ctx, d.pid));
	}
	evict(f);
}
