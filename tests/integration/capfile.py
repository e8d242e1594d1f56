#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Reads and writes capture files (docs/capture.md) for the tests.

    header(data)           -> (version, header_size)
    chunks(data)           -> [Chunk(offset, size, records, crc, hdr_crc, raw_size,
                              encoding, head)], version 2 on (before version 5:
                              16-byte headers, records stored)
    records(data)          -> [(offset, kind, bytes)]: every record, chunked or not,
                              as written (versions 1 and 2: 16-byte headers); the
                              offset is the file's, or the inflated chunk's
    build(version, recs)   -> a capture of those records (bytes each, header
                              included): version 2 on in chunks of at most
                              chunk_bytes (deflate=True: deflated, version 5 on),
                              version 1 back to back

Independent of the C reader on purpose: a test that damages or rebuilds a
capture does it the way the format says, not the way the code happens to.
"""
import collections
import struct
import zlib

MAGIC = b"\x89ATCAP\r\n"
CHUNK_V2 = struct.Struct("<IIII")     # size, records, crc, hdr_crc: versions 2 to 4
CHUNK = struct.Struct("<IIIIII")      # size, records, raw_size, encoding, crc, hdr_crc
STORED, DEFLATE = 0, 1
Chunk = collections.namedtuple("Chunk", "off size records crc hdr_crc raw_size encoding head")
HDR = struct.Struct("<HHIQII")    # kind, size, tid, ts, pid, pad (version 3 on)
HDR_V2 = struct.Struct("<HHIQ")   # versions 1 and 2: no pid
CHUNK_BYTES = 64 << 10


def header(data):
    if data[:8] != MAGIC:
        raise ValueError("not a capture")
    return struct.unpack_from("<II", data, 8)


def chunks(data):
    version, off = header(data)
    out = []
    if version < 2:
        return out
    fmt = CHUNK if version >= 5 else CHUNK_V2
    while off + fmt.size <= len(data):
        if version >= 5:
            size, records, raw, enc, crc, hdr_crc = fmt.unpack_from(data, off)
        else:
            size, records, crc, hdr_crc = fmt.unpack_from(data, off)
            raw, enc = size, STORED
        out.append(Chunk(off, size, records, crc, hdr_crc, raw, enc, fmt.size))
        off += fmt.size + size
    return out


def _records_in(data, off, end, hdr):
    while off + hdr.size <= end:
        kind, size = struct.unpack_from("<HH", data, off)
        if size < hdr.size or off + size > end:
            break
        yield off, kind, data[off:off + size]
        off += size


def payload(data, c):
    """A chunk's records, inflated when deflated."""
    stored = data[c.off + c.head:c.off + c.head + c.size]
    if c.encoding == DEFLATE:
        return zlib.decompressobj(-zlib.MAX_WBITS).decompress(stored)
    return stored


def records(data):
    version, off = header(data)
    hdr = HDR if version >= 3 else HDR_V2
    if version < 2:
        return list(_records_in(data, off, len(data), hdr))
    out = []
    for c in chunks(data):
        if c.encoding == DEFLATE:
            raw = payload(data, c)
            out += _records_in(raw, 0, len(raw), hdr)
        else:
            start = c.off + c.head
            out += _records_in(data, start, min(start + c.size, len(data)), hdr)
    return out


def chunk(version, raw, records, deflate=False):
    if version < 5:
        head = struct.pack("<III", len(raw), records, zlib.crc32(raw))
        return head + struct.pack("<I", zlib.crc32(head)) + raw
    stored, enc = raw, STORED
    if deflate:
        z = zlib.compressobj(1, zlib.DEFLATED, -zlib.MAX_WBITS)
        stored, enc = z.compress(raw) + z.flush(), DEFLATE
    head = struct.pack("<IIIII", len(stored), records, len(raw), enc, zlib.crc32(stored))
    return head + struct.pack("<I", zlib.crc32(head)) + stored


def build(version, recs, chunk_bytes=CHUNK_BYTES, deflate=False):
    out = [MAGIC + struct.pack("<II", version, 16)]
    if version < 2:
        return b"".join(out + list(recs))
    payload, n = b"", 0
    for r in recs:
        if payload and len(payload) + len(r) > chunk_bytes:
            out.append(chunk(version, payload, n, deflate))
            payload, n = b"", 0
        payload += r
        n += 1
    if payload:
        out.append(chunk(version, payload, n, deflate))
    return b"".join(out)
