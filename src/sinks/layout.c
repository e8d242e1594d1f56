// SPDX-License-Identifier: MIT
#include "sinks/layout.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "lib/util.h"

#define CELL_LEN 192	/* a task's name and its id */
#define SEP 2		/* spaces between columns */
#define ELLIPSIS "\xe2\x80\xa6"

int layout__columns(FILE *f, int fallback)
{
	const char *env = getenv("COLUMNS");
	int fd = f ? fileno(f) : -1, cols = fallback, v;
	struct winsize ws;

	if (fd >= 0 && isatty(fd) && !ioctl(fd, TIOCGWINSZ, &ws) && ws.ws_col)
		cols = ws.ws_col;
	else if (env && !parse_int(env, 1, 100000, &v))
		cols = v;
	return cols < LAYOUT_MIN_COLUMNS ? LAYOUT_MIN_COLUMNS : cols;
}

int layout__rows(FILE *f)
{
	int fd = f ? fileno(f) : -1;
	struct winsize ws;

	if (fd >= 0 && isatty(fd) && !ioctl(fd, TIOCGWINSZ, &ws))
		return ws.ws_row;
	return 0;
}

/*
 * The length of the code point at s (at most n bytes, at least 1), and
 * whether it may be shown as it is: not a control character, C1 included (a
 * terminal may read U+009B as the start of an escape sequence), and valid
 * UTF-8 (a byte that is not is taken alone).
 */
static size_t code_point(const unsigned char *s, size_t n, bool *ok)
{
	size_t len;

	*ok = false;
	if (s[0] < 0x80) {
		*ok = s[0] >= 0x20 && s[0] != 0x7f;
		return 1;
	}
	if ((s[0] & 0xe0) == 0xc0 && s[0] >= 0xc2)
		len = 2;
	else if ((s[0] & 0xf0) == 0xe0)
		len = 3;
	else if ((s[0] & 0xf8) == 0xf0 && s[0] <= 0xf4)
		len = 4;
	else
		return 1;
	if (len > n)
		return 1;
	for (size_t i = 1; i < len; i++)
		if ((s[i] & 0xc0) != 0x80)
			return 1;
	*ok = !(s[0] == 0xc2 && s[1] < 0xa0);
	return len;
}

/* Columns of n bytes of a string that layout__fit() made printable. */
static int width_n(const char *s, size_t n)
{
	int w = 0;

	for (size_t i = 0; i < n; i++)
		w += ((unsigned char)s[i] & 0xc0) != 0x80;
	return w;
}

int layout__width(const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t n = strlen(s);
	int w = 0;

	for (size_t i = 0; i < n; w++) {
		bool ok;

		i += code_point(p + i, n - i, &ok); /* shown as '?' when not ok */
	}
	return w;
}

int layout__fit(char *buf, size_t size, const char *s, int cols)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t n = strlen(s), off = 0, i = 0;
	bool cut = layout__width(s) > cols;
	int w = 0, room = cut ? cols - 1 : cols; /* the last column is the ellipsis' */

	if (!size)
		return 0;
	while (i < n && w < room) {
		bool ok;
		size_t len = code_point(p + i, n - i, &ok), out = ok ? len : 1;

		if (off + out + sizeof(ELLIPSIS) > size) {
			cut = true;
			break;
		}
		memcpy(buf + off, ok ? s + i : "?", out);
		off += out;
		w++;
		i += len;
	}
	if (cut && w < cols && off + sizeof(ELLIPSIS) <= size) {
		memcpy(buf + off, ELLIPSIS, sizeof(ELLIPSIS) - 1);
		off += sizeof(ELLIPSIS) - 1;
		w++;
	}
	buf[off] = '\0';
	return w;
}

int layout__fit_tail(char *buf, size_t size, const char *s, int cols, int tail)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t n = strlen(s), i = 0, len;
	int w = layout__width(s), head;
	char *h;

	if (w <= cols || tail <= 0 || cols <= tail + 2)
		return layout__fit(buf, size, s, cols);
	/* where the last tail code points begin */
	for (int skip = w - tail; skip > 0 && i < n; skip--) {
		bool ok;

		i += code_point(p + i, n - i, &ok);
	}
	h = malloc(n + 1);
	if (!h)
		return layout__fit(buf, size, s, cols);
	memcpy(h, s, n + 1);
	h[i] = '\0';
	/* the head ends in the ellipsis: cut one column short of its room */
	head = layout__fit(buf, size, h, cols - tail);
	free(h);
	len = strlen(buf);
	if (len + (n - i) + 1 > size)
		return head;
	memcpy(buf + len, s + i, n - i + 1);
	return head + tail;
}

/* An identifier's character, in a path: letters, digits, _, and the braces of {{closure}}. */
static bool path_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '_' || c == '{' || c == '}' || c == '#';
}

void layout__short_path(char *buf, size_t size, const char *s, int keep)
{
	size_t off = 0, n = strlen(s);

	if (!size)
		return;
	for (size_t i = 0; i < n;) {
		size_t start = i, seg[64], nr = 0, from;
		int k = keep;

		if (!path_char(s[i])) {
			if (off + 1 < size)
				buf[off++] = s[i];
			i++;
			continue;
		}
		/* a path: segments joined by "::" */
		for (;;) {
			if (nr < sizeof(seg) / sizeof(seg[0]))
				seg[nr++] = i;
			while (i < n && path_char(s[i]))
				i++;
			if (i + 2 < n && s[i] == ':' && s[i + 1] == ':' && path_char(s[i + 2]))
				i += 2;
			else
				break;
		}
		/* a closure says little alone: its function's name with it */
		if (nr > 1 && s[seg[nr - 1]] == '{')
			k++;
		from = nr > (size_t)k ? seg[nr - (size_t)k] : start;
		for (size_t j = from; j < i && off + 1 < size; j++)
			buf[off++] = s[j];
	}
	buf[off] = '\0';
}

/* Whether two names that differ came out the same. */
static bool clash(const char *full, const char *shrt, size_t stride, size_t nr)
{
	for (size_t i = 0; i < nr; i++)
		for (size_t j = i + 1; j < nr; j++)
			if (!strcmp(shrt + i * stride, shrt + j * stride) &&
			    strcmp(full + i * stride, full + j * stride))
				return true;
	return false;
}

void layout__short_names(char *names, size_t stride, size_t nr)
{
	char *shrt = malloc(nr * stride + 1);

	if (!shrt)
		return;
	for (int keep = 1; keep <= 8; keep++) {
		for (size_t i = 0; i < nr; i++)
			layout__short_path(shrt + i * stride, stride, names + i * stride, keep);
		if (!clash(names, shrt, stride, nr)) {
			memcpy(names, shrt, nr * stride);
			break;
		}
	}
	free(shrt);
}

void layout__puts(void *ctx, const char *line)
{
	fputs(line, ctx);
	fputc('\n', ctx);
}

struct line {
	char *buf;
	size_t len;
	int width;
};

static void line_add(struct line *l, const char *s, size_t n)
{
	memcpy(l->buf + l->len, s, n);
	l->len += n;
	l->buf[l->len] = '\0';
	l->width += width_n(s, n);
}

static void line_emit(struct line *l, layout_line_fn fn, void *ctx, int indent)
{
	fn(ctx, l->buf);
	l->len = 0;
	l->width = 0;
	l->buf[0] = '\0';
	for (int i = 0; i < indent; i++)
		line_add(l, " ", 1);
}

/* The bytes of the first cols code points of s (n bytes). */
static size_t prefix_of(const char *s, size_t n, int cols)
{
	size_t i = 0;

	for (int w = 0; i < n; i++) {
		if (((unsigned char)s[i] & 0xc0) != 0x80 && w++ == cols)
			break;
	}
	return i;
}

void layout__wrap(layout_line_fn fn, void *ctx, const char *text, int cols, int indent)
{
	size_t size = strlen(text) * 3 + (size_t)indent + 8;
	struct line l = { .buf = malloc(size) };
	char *clean = malloc(size);
	const char *p = clean;
	bool first = true;

	if (!l.buf || !clean) {
		free(l.buf);
		free(clean);
		return;
	}
	layout__fit(clean, size, text, (int)size);
	l.buf[0] = '\0';
	if (indent >= cols)
		indent = 0;
	while (*p) {
		const char *spaces = p, *word;
		size_t nsp, nw;
		int ww;

		while (*p == ' ')
			p++;
		word = p;
		while (*p && *p != ' ')
			p++;
		nsp = (size_t)(word - spaces);
		nw = (size_t)(p - word);
		ww = width_n(word, nw);
		if (!nw)
			break; /* trailing spaces */
		if (first || l.width + (int)nsp + ww <= cols) {
			line_add(&l, spaces, nsp); /* the text's own indentation, or a gap */
		} else {
			line_emit(&l, fn, ctx, indent);
		}
		first = false;
		/* a word longer than what is left of an empty line: broken */
		while (l.width + ww > cols) {
			size_t cut = prefix_of(word, nw, cols - l.width);

			if (!cut && l.width > indent) {
				line_emit(&l, fn, ctx, indent);
				continue;
			}
			line_add(&l, word, cut);
			line_emit(&l, fn, ctx, indent);
			word += cut;
			nw -= cut;
			ww = width_n(word, nw);
		}
		line_add(&l, word, nw);
	}
	if (l.width > indent || first)
		fn(ctx, l.buf);
	free(l.buf);
	free(clean);
}

void layout__fields(char *buf, size_t size, const struct layout_field *f, int nr, int cols)
{
	bool *shown = calloc((size_t)nr + 1, sizeof(*shown));
	size_t off = 0;
	int total = 0;

	if (!size)
		return;
	buf[0] = '\0';
	if (!shown)
		return;
	for (int i = 0; i < nr; i++) {
		shown[i] = true;
		total += layout__width(f[i].text);
	}
	while (total > cols) {
		int worst = -1;

		for (int i = 0; i < nr; i++)
			if (shown[i] && f[i].drop && (worst < 0 || f[i].drop > f[worst].drop))
				worst = i;
		if (worst < 0)
			break;
		shown[worst] = false;
		total -= layout__width(f[worst].text);
	}
	for (int i = 0; i < nr; i++) {
		if (shown[i]) {
			int n = snprintf(buf + off, size - off, "%s", f[i].text);

			if (n < 0 || (size_t)n >= size - off)
				break;
			off += (size_t)n;
		}
	}
	free(shown);
}

struct layout_table {
	const struct layout_col *cols;
	int nr_cols;
	char (*cells)[CELL_LEN];
	size_t nr_cells, cap;
};

int layout_table__new(struct layout_table **t, const struct layout_col *cols, int nr_cols)
{
	*t = calloc(1, sizeof(**t));
	if (!*t)
		return -ENOMEM;
	(*t)->cols = cols;
	(*t)->nr_cols = nr_cols;
	return 0;
}

void layout_table__cell(struct layout_table *t, const char *fmt, ...)
{
	char raw[CELL_LEN];
	va_list ap;

	if (t->nr_cells == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 64;
		void *c = realloc(t->cells, cap * sizeof(*t->cells));

		if (!c)
			return; /* the row comes out short: better than none */
		t->cells = c;
		t->cap = cap;
	}
	va_start(ap, fmt);
	vsnprintf(raw, sizeof(raw), fmt, ap);
	va_end(ap);
	layout__fit(t->cells[t->nr_cells++], CELL_LEN, raw, CELL_LEN);
}

/* Whether column i heads its group among those shown. */
static bool heads_group(const struct layout_table *t, const bool *shown, int i)
{
	const char *g = t->cols[i].group;

	if (!g)
		return false;
	for (int j = 0; j < i; j++)
		if (shown[j] && t->cols[j].group && !strcmp(t->cols[j].group, g))
			return false;
	return true;
}

static void head_text(const struct layout_table *t, const bool *shown, int i, char *buf,
		      size_t size)
{
	if (heads_group(t, shown, i))
		snprintf(buf, size, "%s %s", t->cols[i].group, t->cols[i].head);
	else
		snprintf(buf, size, "%s", t->cols[i].head);
}

/* Each shown column's width, whole; returns the line's. */
static int natural_widths(const struct layout_table *t, const bool *shown, int *w, int indent)
{
	int total = indent, nr = 0;

	for (int i = 0; i < t->nr_cols; i++) {
		char head[CELL_LEN];

		w[i] = 0;
		if (!shown[i])
			continue;
		head_text(t, shown, i, head, sizeof(head));
		w[i] = layout__width(head);
		if (t->cols[i].width > w[i])
			w[i] = t->cols[i].width;
		for (size_t c = (size_t)i; c < t->nr_cells; c += (size_t)t->nr_cols) {
			int cw = layout__width(t->cells[c]);

			if (cw > w[i])
				w[i] = cw;
		}
		total += w[i] + (nr++ ? SEP : 0);
	}
	return total;
}

/* Cuts the columns that may be cut until the line fits; its width then. */
static int shrink(const struct layout_table *t, const bool *shown, int *w, int total, int cols)
{
	for (int i = 0; i < t->nr_cols && total > cols; i++) {
		int give;

		if (!shown[i] || !t->cols[i].min || w[i] <= t->cols[i].min)
			continue;
		give = w[i] - t->cols[i].min;
		if (give > total - cols)
			give = total - cols;
		w[i] -= give;
		total -= give;
	}
	return total;
}

static void pad(struct line *l, int n)
{
	while (n-- > 0)
		line_add(l, " ", 1);
}

static void put_cell(struct line *l, const char *text, int w, bool left, int tail)
{
	char fit[CELL_LEN];
	int fw = layout__fit_tail(fit, sizeof(fit), text, w, tail);

	if (!left)
		pad(l, w - fw);
	line_add(l, fit, strlen(fit));
	if (left)
		pad(l, w - fw);
}

static void emit_trimmed(struct line *l, layout_line_fn fn, void *ctx)
{
	while (l->len && l->buf[l->len - 1] == ' ')
		l->buf[--l->len] = '\0';
	fn(ctx, l->buf);
	l->len = 0;
	l->width = 0;
	l->buf[0] = '\0';
}

int layout_table__print(struct layout_table *t, int cols, int indent, layout_line_fn fn,
			void *ctx)
{
	bool *shown = calloc((size_t)t->nr_cols, sizeof(*shown));
	int *w = calloc((size_t)t->nr_cols, sizeof(*w));
	size_t rows = (t->nr_cells + (size_t)t->nr_cols - 1) / (size_t)t->nr_cols;
	struct line l = { 0 };
	int total, lines = 0;

	if (!shown || !w)
		goto out;
	for (int i = 0; i < t->nr_cols; i++)
		shown[i] = true;
	for (;;) {
		int worst = -1;

		total = shrink(t, shown, w, natural_widths(t, shown, w, indent), cols);
		if (total <= cols)
			break;
		for (int i = 0; i < t->nr_cols; i++)
			if (shown[i] && t->cols[i].drop &&
			    (worst < 0 || t->cols[i].drop > t->cols[worst].drop))
				worst = i;
		if (worst < 0)
			break;
		shown[worst] = false;
	}
	l.buf = malloc((size_t)total * 4 + 1);
	if (!l.buf)
		goto out;
	l.buf[0] = '\0';
	for (size_t r = 0; r <= rows; r++) {
		bool first = true;

		pad(&l, indent);
		for (int i = 0; i < t->nr_cols; i++) {
			char head[CELL_LEN];
			const char *text = head;

			if (!shown[i])
				continue;
			if (!first)
				pad(&l, SEP);
			first = false;
			if (r == 0)
				head_text(t, shown, i, head, sizeof(head));
			else if ((r - 1) * (size_t)t->nr_cols + (size_t)i < t->nr_cells)
				text = t->cells[(r - 1) * (size_t)t->nr_cols + (size_t)i];
			else
				head[0] = '\0';
			put_cell(&l, text, w[i], t->cols[i].min > 0, t->cols[i].keep_tail);
		}
		emit_trimmed(&l, fn, ctx);
		lines++;
	}
out:
	free(l.buf);
	free(w);
	free(shown);
	return lines;
}

void layout_table__free(struct layout_table *t)
{
	if (!t)
		return;
	free(t->cells);
	free(t);
}
