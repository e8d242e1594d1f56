#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Cuts small, whole seed captures for the fuzzer out of a real capture.

    python3 tests/fuzz/seeds.py CAPTURE OUTDIR [PREFIX]

Each seed is the file header, the process record, a window of the capture's
records (names, threads, events, samples, ticks) and its final snapshot and
end record, in chunks of at most 4 KiB (so that a seed has several, each
with its checksums): valid captures of a few KiB that reach every record
kind, for libFuzzer to mutate, in version 3's format (stored chunks, whose
records the fuzzer mutates) and in this version's with deflated chunks
(PREFIX-z-N: the inflating reader). (Cut and damaged inputs are the
fuzzer's own job.)
"""
import os
import struct
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from tests.integration import capfile  # noqa: E402

CAP_BASE = 0x8000
SNAPSHOT = range(0x8005, 0x800B)   # runtime .. end
VERSION = 3
DEFLATED_VERSION = 5
SEED_CHUNK = 4096


def records(data):
    for _, kind, rec in capfile.records(data):
        yield kind, rec


def main():
    src, outdir = sys.argv[1], sys.argv[2]
    prefix = sys.argv[3] if len(sys.argv) > 3 else os.path.basename(src).split(".")[0]
    data = open(src, "rb").read()
    body = list(records(data))
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
        recs = [proc] + meta[:32] + window + small
        with open(os.path.join(outdir, "%s-%d.atcap" % (prefix, n)), "wb") as f:
            f.write(capfile.build(VERSION, recs, SEED_CHUNK))
        if n < 2:
            with open(os.path.join(outdir, "%s-z-%d.atcap" % (prefix, n)), "wb") as f:
                f.write(capfile.build(DEFLATED_VERSION, recs, SEED_CHUNK, deflate=True))
        n += 1
    print("%d seeds of %s in %s" % (n, src, outdir))


if __name__ == "__main__":
    main()
