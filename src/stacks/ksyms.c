// SPDX-License-Identifier: MIT
#include "stacks/ksyms.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/util.h"

struct ksym {
	uint64_t addr;
	uint32_t name;		/* offsets into names: the function, its module */
	uint32_t module;
};

struct ksyms {
	struct ksym *syms;	/* by address */
	size_t nr;
	char *names;		/* "name\0" ... */
	size_t names_len, names_cap;
};

static int add_name(struct ksyms *k, const char *s, size_t n, uint32_t *off)
{
	if (k->names_len + n + 1 > k->names_cap) {
		size_t cap = k->names_cap ? k->names_cap * 2 : 1 << 20;
		char *p;

		while (cap < k->names_len + n + 1)
			cap *= 2;
		p = realloc(k->names, cap);
		if (!p)
			return -ENOMEM;
		k->names = p;
		k->names_cap = cap;
	}
	memcpy(k->names + k->names_len, s, n);
	k->names[k->names_len + n] = '\0';
	*off = (uint32_t)k->names_len;
	k->names_len += n + 1;
	return 0;
}

static int by_addr(const void *a, const void *b)
{
	const struct ksym *x = a, *y = b;

	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

/* One line, "ffffffff81000000 T name [module]": kept if it is code. */
static int parse(struct ksyms *k, char *line, size_t *cap)
{
	char *type, *name, *end;
	uint64_t addr = strtoull(line, &end, 16);
	struct ksym *s;

	if (end == line || *end != ' ')
		return 0;
	type = end + 1;
	/* strchr() finds the NUL too: a line that ends there is no symbol */
	if (!*type || !strchr("tTwW", *type) || type[1] != ' ')
		return 0;
	name = type + 2;
	name[strcspn(name, "\n")] = '\0';
	if (k->nr == *cap) {
		size_t n = *cap ? *cap * 2 : 65536;

		s = realloc(k->syms, n * sizeof(*s));
		if (!s)
			return -ENOMEM;
		k->syms = s;
		*cap = n;
	}
	s = &k->syms[k->nr];
	s->addr = addr;
	if (add_name(k, name, strlen(name), &s->name))
		return -ENOMEM;
	s->module = 0; /* offset 0: "[kernel]", the image itself */
	k->nr++;
	return 0;
}

int ksyms__load(struct ksyms **out, const char *path)
{
	FILE *f = fopen(path ? path : "/proc/kallsyms", "re");
	int err;

	if (!f)
		return -errno;
	err = ksyms__load_file(out, f);
	fclose(f);
	return err;
}

int ksyms__load_file(struct ksyms **out, FILE *f)
{
	struct ksyms *k = calloc(1, sizeof(*k));
	/* a name of KSYM_NAME_LEN (512 since Linux 6.1, for Rust), its address, module: one read */
	char line[1024];
	size_t cap = 0;
	uint32_t empty, last_module = 0;
	bool any = false;
	int err = 0;

	if (!k)
		return -ENOMEM;
	if (add_name(k, "[kernel]", strlen("[kernel]"), &empty)) {
		err = -ENOMEM;
		goto fail;
	}
	while (fgets(line, sizeof(line), f)) {
		char *tab = strchr(line, '\t');
		uint32_t before = (uint32_t)k->nr;

		/* "name\t[module]": the module goes in before the line is parsed */
		if (tab) {
			char *m = tab + 1, *close;

			*tab = '\0';
			if (*m == '[' && (close = strchr(m, ']'))) {
				close[1] = '\0'; /* "[ext4]", as perf names them */
				if (!last_module || strcmp(k->names + last_module, m))
					if (add_name(k, m, strlen(m), &last_module)) {
						err = -ENOMEM;
						goto fail;
					}
			}
		}
		if ((err = parse(k, line, &cap)))
			goto fail;
		if (k->nr > before) {
			any |= k->syms[before].addr != 0;
			if (tab)
				k->syms[before].module = last_module;
		}
	}
	if (!any) { /* every address 0: kptr_restrict hides them from us */
		err = k->nr ? -EPERM : -ENOENT;
		goto fail;
	}
	qsort(k->syms, k->nr, sizeof(*k->syms), by_addr);
	*out = k;
	return 0;
fail:
	ksyms__free(k);
	return err;
}

const char *ksyms__find(const struct ksyms *k, uint64_t addr, const char **module)
{
	/* one past the last symbol at or below addr */
	size_t lo = upper_bound_u64(k->syms, k->nr, sizeof(*k->syms), addr);

	if (!lo)
		return NULL;
	if (module)
		*module = k->names + k->syms[lo - 1].module;
	return k->names + k->syms[lo - 1].name;
}

void ksyms__free(struct ksyms *k)
{
	if (!k)
		return;
	free(k->syms);
	free(k->names);
	free(k);
}
