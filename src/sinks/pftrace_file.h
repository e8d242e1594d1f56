/* SPDX-License-Identifier: MIT */
/*
 * A Perfetto protobuf trace file, shared by its writers (one packet sequence
 * per process traced): their packets, the file's track uuids, and the
 * packets' compression. Compressed, the packets go out in batches of up to
 * PFTRACE_BATCH bytes, each deflated (zlib format, libdeflate's fastest
 * level) into one TracePacket.compressed_packets, which Perfetto's importer
 * inflates and reads as the packets themselves (docs/trace-format.md).
 */
#ifndef PFTRACE_FILE_H
#define PFTRACE_FILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct outbuf;
struct pftrace_file;

/* Packets of a batch before it is deflated (Perfetto asks for < 512 KB a batch). */
#define PFTRACE_BATCH (256u << 10)

/* A trace written into ob (a holder of its own: outbuf__get); deflate: compressed. */
int pftrace_file__new(struct pftrace_file **f, struct outbuf *ob, bool deflate);
/* Another holder (a writer); each lets go with pftrace_file__free. */
struct pftrace_file *pftrace_file__get(struct pftrace_file *f);
void pftrace_file__free(struct pftrace_file *f);
/* A track uuid no other writer of the file has: 1 and up, a byte or two on the wire. */
uint64_t pftrace_file__uuid(struct pftrace_file *f);
/* One whole Trace.packet field (tag, length, packet). */
void pftrace_file__packet(struct pftrace_file *f, const void *data, size_t len);
/* Everything so far to the file (the batch deflated, however small): 0 or -errno. */
int pftrace_file__flush(struct pftrace_file *f);

#endif
