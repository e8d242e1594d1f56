#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""How fast captures convert, and what the outputs cost in bytes.

Records the sample executor's busiest scenario (thrash: ~115k events/s) for a
short and a four times longer run, then converts each capture with no
output (model, detectors and report only), to Chrome JSON and to Perfetto
protobuf (packets deflated, the default, and plain), best of three. Prints events per CPU-second (user + sys of the
convert process), bytes per event and peak memory; the long capture shows
whether memory grows with trace length; and the capture's own bytes per
event and per record (a self-wake rides in its poll's record). A benchmark:
it prints numbers and asserts nothing (docs/performance.md records them).

Usage: sudo python3 tests/bench/convert.py [SECONDS]      (records: needs root)
       python3 tests/bench/convert.py --capture FILE...   (no root)
"""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from tests.integration import capfile  # noqa: E402

BUILD = os.environ.get("BUILD", "build")
TRACER = os.path.join(BUILD, "asynctraced")
OUTPUTS = [("report only", None, []), ("json", ".json", []), ("protobuf", ".pftrace", []),
           ("protobuf plain", ".pftrace", ["--trace-compression", "none"])]


def record(tmp, seconds):
    cap = os.path.join(tmp, "thrash-%gs.atcap" % seconds)
    ex = subprocess.Popen([os.path.join(BUILD, "sample-executor"), "--scenario", "thrash",
                           "--duration", str(seconds), "--workers", "2", "--wait-traced", "30"],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    subprocess.run([TRACER, "record", "-p", str(ex.pid), "-o", cap], check=True,
                   stderr=subprocess.DEVNULL)
    ex.wait()
    return cap


def convert_once(cap, out, extra):
    args = [TRACER, "convert", cap, "-q", "--summary", "json"] + extra
    if out:
        args += ["-o", out]
    p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    stdout = p.stdout.read()
    _, status, usage = os.wait4(p.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit("convert %s failed" % cap)
    events = json.loads(stdout)["events"]
    return (usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024,
            events["received"] + events["samples"])


def main():
    args = sys.argv[1:]
    tmp = tempfile.mkdtemp(prefix="at-bench-convert-")
    if args[:1] == ["--capture"]:
        caps = args[1:]
    else:
        seconds = float(args[0]) if args else 3
        caps = [record(tmp, seconds), record(tmp, 4 * seconds)]
    print("%-28s %-15s %9s %8s %12s %9s %9s %8s" % (
        "capture", "output", "records", "cpu s", "records/s", "MB out", "B/event", "RSS MB"))
    for cap in caps:
        size = os.path.getsize(cap)
        for label, ext, extra in OUTPUTS:
            out = os.path.join(tmp, "out" + ext) if ext else None
            best = min(convert_once(cap, out, extra) for _ in range(3))
            cpu, rss, n = best
            mb = os.path.getsize(out) / 1e6 if out else 0
            print("%-28s %-15s %9d %8.3f %12.0f %9.1f %9s %8.1f" % (
                "%s (%.0f MB)" % (os.path.basename(cap), size / 1e6), label, n, cpu,
                n / cpu if cpu else float("inf"), mb,
                "%.0f" % (mb * 1e6 / n) if out else "-", rss))
            if out:
                os.unlink(out)
        print("%-28s %-15s %9s %8s %12s %9.1f %9.0f" % (
            "", "capture", "", "", "", size / 1e6, size / n))
    # After every conversion: reading a capture here grows this process, whose
    # size a child forked later would count in its own peak RSS.
    for cap in caps:
        size = os.path.getsize(cap)
        with open(cap, "rb") as f:
            records = len(capfile.records(f.read()))
        print("%s: %d records, %.0f bytes a record" % (os.path.basename(cap), records,
                                                       size / records))


if __name__ == "__main__":
    main()
