#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Traces every scenario of the sample executor and prints, side by side:
the event rate the tracer sustained, its drops, its own CPU time and peak
memory, and the executor's poll rate. A benchmark, not a test: it prints
numbers and asserts nothing (docs/performance.md records them).

Usage: sudo python3 tests/bench/scenarios.py [SECONDS] [SCENARIO...]
"""
import os
import re
import subprocess
import sys
import tempfile

BUILD = os.environ.get("BUILD", "build")
SCENARIOS = ["healthy", "noisy", "blocking", "starve", "thrash", "fanout"]


def run(scenario, seconds, tmp):
    ex = subprocess.Popen([f"{BUILD}/sample-executor", "--scenario", scenario, "--duration",
                           str(seconds), "--workers", "2", "--wait-traced", "30"],
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    trace = os.path.join(tmp, f"{scenario}.json")
    tr = subprocess.Popen([f"{BUILD}/asynctraced", "-p", str(ex.pid), "-o", trace],
                          stderr=subprocess.PIPE, text=True)
    ex_out, _ = ex.communicate()
    err = tr.stderr.read()
    _, status, usage = os.wait4(tr.pid, 0)
    tr.returncode = os.waitstatus_to_exitcode(status)
    events = int(re.search(r"events\s+(\d+)", err).group(1))
    dropped = int(re.search(r"dropped\s+(\d+)", err).group(1))
    polls = int(re.search(r"polls=(\d+)", ex_out).group(1))
    size = os.path.getsize(trace)
    os.unlink(trace)
    cpu = usage.ru_utime + usage.ru_stime
    return dict(scenario=scenario, polls_s=polls / seconds, events_s=events / seconds,
                dropped=dropped, cpu_pct=100 * cpu / seconds,
                us_per_event=1e6 * cpu / max(events, 1), rss_mb=usage.ru_maxrss / 1024,
                bytes_per_event=size / max(events, 1))


def main(argv):
    seconds = float(argv[1]) if len(argv) > 1 else 5
    scenarios = argv[2:] or SCENARIOS
    print(f"# {seconds:g} s per scenario, 2 workers, full trace to a JSON file")
    print(f"{'scenario':10} {'polls/s':>9} {'events/s':>9} {'dropped':>7} "
          f"{'tracer CPU':>10} {'us/event':>8} {'peak RSS':>9} {'B/event':>7}")
    with tempfile.TemporaryDirectory() as tmp:
        for s in scenarios:
            r = run(s, seconds, tmp)
            print(f"{r['scenario']:10} {r['polls_s']:9.0f} {r['events_s']:9.0f} "
                  f"{r['dropped']:7d} {r['cpu_pct']:9.1f}% {r['us_per_event']:8.2f} "
                  f"{r['rss_mb']:7.1f}MB {r['bytes_per_event']:7.0f}")


if __name__ == "__main__":
    sys.exit(main(sys.argv))
