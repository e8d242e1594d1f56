#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Reads and writes capture files (docs/capture.md) for the tests.

    header(data)           -> (version, header_size)
    chunks(data)           -> [(offset, size, records, crc, hdr_crc)], version 2 on
    records(data)          -> [(offset, kind, bytes)]: every record, chunked or not,
                              as written (versions 1 and 2: 16-byte headers)
    build(version, recs)   -> a capture of those records (bytes each, header
                              included): version 2 on in chunks of at most
                              chunk_bytes, version 1 back to back

Independent of the C reader on purpose: a test that damages or rebuilds a
capture does it the way the format says, not the way the code happens to.
"""
import struct
import zlib

MAGIC = b"\x89ATCAP\r\n"
CHUNK = struct.Struct("<IIII")    # size, records, crc, hdr_crc
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
    while off + CHUNK.size <= len(data):
        size, records, crc, hdr_crc = CHUNK.unpack_from(data, off)
        out.append((off, size, records, crc, hdr_crc))
        off += CHUNK.size + size
    return out


def _records_in(data, off, end, hdr):
    while off + hdr.size <= end:
        kind, size = struct.unpack_from("<HH", data, off)
        if size < hdr.size or off + size > end:
            break
        yield off, kind, data[off:off + size]
        off += size


def records(data):
    version, off = header(data)
    hdr = HDR if version >= 3 else HDR_V2
    if version < 2:
        return list(_records_in(data, off, len(data), hdr))
    out = []
    for coff, size, _, _, _ in chunks(data):
        start = coff + CHUNK.size
        out += _records_in(data, start, min(start + size, len(data)), hdr)
    return out


def chunk(payload, records):
    head = struct.pack("<III", len(payload), records, zlib.crc32(payload))
    return head + struct.pack("<I", zlib.crc32(head)) + payload


def build(version, recs, chunk_bytes=CHUNK_BYTES):
    out = [MAGIC + struct.pack("<II", version, 16)]
    if version < 2:
        return b"".join(out + list(recs))
    payload, n = b"", 0
    for r in recs:
        if payload and len(payload) + len(r) > chunk_bytes:
            out.append(chunk(payload, n))
            payload, n = b"", 0
        payload += r
        n += 1
    if payload:
        out.append(chunk(payload, n))
    return b"".join(out)
