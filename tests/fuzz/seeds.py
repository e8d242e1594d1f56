#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Cuts small, whole seed captures for the fuzzer out of a real capture.

    python3 tests/fuzz/seeds.py CAPTURE OUTDIR [PREFIX]

Each seed is the file header, the process record, a window of the capture's
records (names, threads, events, samples, ticks) and its final snapshot and
end record: valid captures of a few KiB that reach every record kind, for
libFuzzer to mutate. (Cut and damaged inputs are the fuzzer's own job.)
"""
import os
import struct
import sys

CAP_BASE = 0x8000
SNAPSHOT = range(0x8005, 0x800B)   # runtime .. end


def records(data):
    off = 16
    while off + 16 <= len(data):
        kind, size = struct.unpack_from("<HH", data, off)
        if size < 16 or off + size > len(data):
            break
        yield kind, data[off:off + size]
        off += size


def main():
    src, outdir = sys.argv[1], sys.argv[2]
    prefix = sys.argv[3] if len(sys.argv) > 3 else os.path.basename(src).split(".")[0]
    data = open(src, "rb").read()
    recs = list(records(data))
    head, body = data[:16], recs
    proc = body[0][1]
    meta = [r for k, r in body if k in (0x8002, 0x8003)]   # names and threads: every one
    events = [(k, r) for k, r in body[1:] if k < CAP_BASE or k == 0x8004]
    snapshot = [r for k, r in body if k in SNAPSHOT]
    # keep the snapshot small: runtime, workers, a few tasks, steals, end
    small = [r for r in snapshot if struct.unpack_from("<H", r)[0] != 0x8007][:16]
    small += [r for r in snapshot if struct.unpack_from("<H", r)[0] == 0x8007][:4]
    small.sort(key=lambda r: struct.unpack_from("<H", r)[0])
    os.makedirs(outdir, exist_ok=True)
    n = 0
    for start in range(0, len(events), max(1, len(events) // 6))[:6]:
        window = [r for _, r in events[start:start + 60]]
        seed = head + proc + b"".join(meta[:32]) + b"".join(window) + b"".join(small)
        with open(os.path.join(outdir, "%s-%d.atcap" % (prefix, n)), "wb") as f:
            f.write(seed)
        n += 1
    print("%d seeds of %s in %s" % (n, src, outdir))


if __name__ == "__main__":
    main()
