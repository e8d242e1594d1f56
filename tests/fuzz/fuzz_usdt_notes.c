// SPDX-License-Identifier: MIT
/*
 * libFuzzer target: any bytes as an ELF file whose .note.stapsdt the tracer
 * reads (src/targets/usdt/usdt_notes.c), then each probe's argument string through the
 * operand parser, as discovery does. Whatever the bytes: no crash, hang,
 * leak or UB, and every probe comes back with NUL-terminated strings.
 *
 *   build/fuzz/fuzz_usdt_notes -runs=0 tests/fuzz/usdt_notes   replay the corpus
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ro_buf.h"
#include "targets/usdt/usdt_notes.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct usdt_probe *probes;
	struct ro_buf b;
	const uint8_t *file = ro_buf__copy(&b, data, size);
	uint64_t current;
	size_t nr;

	if (!usdt__list_mem(file, size, NULL, &probes, &nr, &current)) {
		for (size_t i = 0; i < nr; i++) {
			const struct usdt_probe *p = &probes[i];
			struct at_usdt_spec spec;

			CHECK(strnlen(p->provider, sizeof(p->provider)) < sizeof(p->provider));
			CHECK(strnlen(p->name, sizeof(p->name)) < sizeof(p->name));
			CHECK(strnlen(p->args, sizeof(p->args)) < sizeof(p->args));
			/* what a uprobe and a semaphore are attached at: inside the file */
			CHECK(p->offset < size && p->sema_offset < size);
			if (p->args_known)
				usdt__parse_args(p->args, &spec);
		}
		free(probes);
	}
	ro_buf__free(&b);
	return 0;
}
