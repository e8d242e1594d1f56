// SPDX-License-Identifier: MIT
/*
 * The files a command line names: a trace's format told by its name (a name
 * that says none is refused, not written as JSON), and no two of them one
 * file where one writes it.
 */
#include "cmd/outfiles.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/util.h"

static const char *const format_names[] = {
	[FORMAT_JSON] = "json",
	[FORMAT_PERFETTO] = "perfetto",
};

/* What a trace's name says of its format: the one list -o is checked against and cites. */
static const struct {
	const char *ext;
	enum trace_format format;
} trace_exts[] = {
	{ ".json", FORMAT_JSON },
	{ ".pftrace", FORMAT_PERFETTO },
	{ ".perfetto-trace", FORMAT_PERFETTO },
};

/* ".json, .pftrace<last>.perfetto-trace" */
static void list_exts(char *buf, size_t size, const char *last)
{
	size_t len = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < ARRAY_LEN(trace_exts) && len < size; i++) {
		const char *sep = i + 1 < ARRAY_LEN(trace_exts) ? ", " : last;

		len += snprintf(buf + len, size - len, "%s%s", i ? sep : "", trace_exts[i].ext);
	}
}

static enum trace_format format_of(const char *path)
{
	size_t len = strlen(path);

	if (!strcmp(path, "-"))
		return FORMAT_JSON;
	for (size_t i = 0; i < ARRAY_LEN(trace_exts); i++) {
		size_t n = strlen(trace_exts[i].ext);

		if (len >= n && !strcmp(path + len - n, trace_exts[i].ext))
			return trace_exts[i].format;
	}
	return FORMAT_AUTO;
}

/*
 * A name that says no format is refused rather than written as JSON: x.pb or
 * x.json.gz would otherwise hold something else than their name promises.
 */
int outfiles__trace_format(struct outputs_opts *out)
{
	char exts[128];

	if (!out->output || out->format != FORMAT_AUTO)
		return 0;
	out->format = format_of(out->output);
	if (out->format != FORMAT_AUTO)
		return 0;
	list_exts(exts, sizeof(exts), " nor ");
	err_msg("cannot tell the format of trace '%s' from its name: it ends in neither %s: "
		"give --format %s or --format %s to write it under this name\n",
		out->output, exts, format_names[FORMAT_JSON], format_names[FORMAT_PERFETTO]);
	return EXIT_USAGE;
}

/* A file the command line names, and where it leads. */
struct named_file {
	const char *opt;  /* "-o", "--alerts", ... */
	const char *path; /* "-": standard output */
	bool output;
	bool have_id; /* it exists: dev and ino say which file it is */
	dev_t dev;
	ino_t ino;
	char name[PATH_MAX]; /* else its directory made canonical, and its last component */
};

static void identify(struct named_file *f)
{
	const char *slash = strrchr(f->path, '/');
	char dir[PATH_MAX], *real;
	struct stat st;
	int err;

	snprintf(f->name, sizeof(f->name), "%s", f->path);
	if (!strcmp(f->path, "-"))
		err = fstat(STDOUT_FILENO, &st);
	else
		/* an output that is a symlink will be refused, not followed: itself is the file */
		err = f->output ? lstat(f->path, &st) : stat(f->path, &st);
	if (!err) {
		f->have_id = true;
		f->dev = st.st_dev;
		f->ino = st.st_ino;
		return;
	}
	if (!strcmp(f->path, "-") || errno != ENOENT)
		return;
	/* not there yet: ./F and F, or a/../F, are one name once the directory is canonical */
	if (!slash)
		snprintf(dir, sizeof(dir), ".");
	else if (slash == f->path)
		snprintf(dir, sizeof(dir), "/");
	else
		snprintf(dir, sizeof(dir), "%.*s", (int)(slash - f->path), f->path);
	real = realpath(dir, NULL);
	if (real && strlen(real) + strlen(slash ? slash : f->path) + 2 <= sizeof(f->name))
		snprintf(f->name, sizeof(f->name), "%s/%s", strcmp(real, "/") ? real : "",
			 slash ? slash + 1 : f->path);
	free(real);
}

static bool same_file(const struct named_file *a, const struct named_file *b)
{
	if (a->have_id || b->have_id)
		return a->have_id && b->have_id && a->dev == b->dev && a->ino == b->ino;
	return !strcmp(a->name, b->name);
}

/* "-o 'x.json'", "-o -", "--summary json"; stdout: what it is, when the other is not */
static void describe(char *buf, size_t size, const struct named_file *f, bool say_stdout)
{
	if (strcmp(f->path, "-"))
		snprintf(buf, size, "%s '%s'", f->opt, f->path);
	else
		snprintf(buf, size, "%s%s%s", f->opt, strcmp(f->opt, "--summary json") ? " -" : "",
			 say_stdout ? " (standard output)" : "");
}

/*
 * Two outputs that are one file interleave into garbage, and an output that
 * is an input destroys it as it is read (a capture is mapped: convert dies of
 * SIGBUS). Existing files are told apart by device and inode, whatever the
 * names; files still to create by their canonical directory and name.
 */
int outfiles__distinct(const struct options *o)
{
	struct named_file files[7];
	char a[PATH_MAX + 64], b[PATH_MAX + 64];
	bool both_stdout;
	size_t n = 0;

	memset(files, 0, sizeof(files));
#define NAMED(o, p, out) ((struct named_file){ .opt = (o), .path = (p), .output = (out) })
	if (o->session.out.output)
		files[n++] = NAMED("-o", o->session.out.output, true);
	if (o->session.out.alerts)
		files[n++] = NAMED("--alerts", o->session.out.alerts, true);
	if (o->session.out.summary == SUMMARY_JSON)
		files[n++] = NAMED("--summary json", "-", true);
	if (o->capture)
		files[n++] = NAMED("the capture", o->capture, false);
	if (o->session.btf_path)
		files[n++] = NAMED("--btf", o->session.btf_path, false);
	if (o->junit)
		files[n++] = NAMED("--junit", o->junit, true);
	if (o->gate.baseline)
		files[n++] = NAMED("--baseline", o->gate.baseline, false);
#undef NAMED
	for (size_t i = 0; i < n; i++)
		identify(&files[i]);
	for (size_t i = 0; i < n; i++) {
		for (size_t j = i + 1; j < n; j++) {
			if (!(files[i].output || files[j].output) ||
			    !same_file(&files[i], &files[j]))
				continue;
			both_stdout = !strcmp(files[i].path, "-") && !strcmp(files[j].path, "-");
			describe(a, sizeof(a), &files[i], !both_stdout);
			describe(b, sizeof(b), &files[j], !both_stdout);
			if (both_stdout)
				err_msg("%s and %s both write to standard output\n", a, b);
			else
				err_msg("%s and %s are the same file: %s\n", a, b,
					files[i].output && files[j].output
						? "give each its own"
						: "asynctraced would overwrite what it reads");
			return EXIT_USAGE;
		}
	}
	return 0;
}

void outfiles__print_names(FILE *f)
{
	fprintf(f, "\ntrace formats, by the end of the trace's name (another needs --format):\n");
	for (size_t fmt = FORMAT_JSON; fmt <= FORMAT_PERFETTO; fmt++) {
		fprintf(f, "  %-9s", format_names[fmt]);
		for (size_t i = 0; i < ARRAY_LEN(trace_exts); i++)
			if (trace_exts[i].format == fmt)
				fprintf(f, " %s", trace_exts[i].ext);
		fprintf(f, "\n");
	}
}

enum trace_format outfiles__format_named(const char *word)
{
	if (!strcmp(word, format_names[FORMAT_JSON]))
		return FORMAT_JSON;
	return strcmp(word, format_names[FORMAT_PERFETTO]) ? FORMAT_AUTO : FORMAT_PERFETTO;
}
