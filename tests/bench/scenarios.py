#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Runs every scenario of the sample executor three ways, side by side in one
run: untraced, traced with a full trace written to disk, and traced in
maps-only mode (--no-trace). Prints, per run: the executor's poll rate and
its own CPU time per poll (what tracing adds to the target), the tracer's CPU
and peak memory, the events that crossed the ring buffer and the drops.

A benchmark, not a test: it prints numbers and asserts nothing
(docs/performance.md records them).

Usage: sudo python3 tests/bench/scenarios.py [SECONDS] [SCENARIO...]
"""
import os
import re
import subprocess
import sys
import tempfile

BUILD = os.environ.get("BUILD", "build")
SCENARIOS = ["healthy", "noisy", "blocking", "starve", "thrash", "fanout", "lost", "delay"]
MODES = ["untraced", "full", "maps"]


def cpu_of(pid):
    """Waits for a child; returns (exit code, CPU seconds, peak RSS in MB)."""
    _, status, usage = os.wait4(pid, 0)
    return (os.waitstatus_to_exitcode(status), usage.ru_utime + usage.ru_stime,
            usage.ru_maxrss / 1024)


def run(scenario, mode, seconds, tmp):
    args = [f"{BUILD}/sample-executor", "--scenario", scenario, "--duration", str(seconds),
            "--workers", "2"]
    if mode != "untraced":
        args += ["--wait-traced", "30"]
    ex = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    tr = None
    trace = os.path.join(tmp, f"{scenario}.json")
    if mode != "untraced":
        targs = [f"{BUILD}/asynctraced", "-p", str(ex.pid), "-q"]
        targs += ["-o", trace] if mode == "full" else ["--no-trace"]
        tr = subprocess.Popen(targs, stderr=subprocess.PIPE, text=True)
    ex_out = ex.stdout.read()
    _, ex_cpu, _ = cpu_of(ex.pid)
    polls = int(re.search(r"polls=(\d+)", ex_out).group(1))
    r = dict(scenario=scenario, mode=mode, polls_s=polls / seconds,
             ns_per_poll=1e9 * ex_cpu / max(polls, 1), tracer_cpu=0.0, rss=0.0, events_s=0.0,
             dropped=0)
    if tr:
        err = tr.stderr.read()
        _, tr_cpu, rss = cpu_of(tr.pid)
        r["tracer_cpu"] = 100 * tr_cpu / seconds
        r["rss"] = rss
        r["events_s"] = int(re.search(r"events\s+(\d+)", err).group(1)) / seconds
        r["dropped"] = int(re.search(r"dropped\s+(\d+)", err).group(1))
        if os.path.exists(trace):
            os.unlink(trace)
    return r


def main(argv):
    seconds = float(argv[1]) if len(argv) > 1 else 5
    scenarios = argv[2:] or SCENARIOS
    print(f"# {seconds:g} s per run, 2 workers; target CPU per poll is the executor's own "
          f"user+system time / polls")
    print(f"{'scenario':9} {'mode':8} {'polls/s':>8} {'target CPU/poll':>15} {'added':>8} "
          f"{'tracer CPU':>10} {'peak RSS':>8} {'events/s':>9} {'dropped':>7}")
    with tempfile.TemporaryDirectory() as tmp:
        for s in scenarios:
            base = None
            for mode in MODES:
                r = run(s, mode, seconds, tmp)
                base = base or r
                added = r["ns_per_poll"] - base["ns_per_poll"]
                print(f"{s:9} {mode:8} {r['polls_s']:8.0f} {r['ns_per_poll']:13.0f}ns "
                      f"{added:6.0f}ns {r['tracer_cpu']:9.1f}% {r['rss']:6.1f}MB "
                      f"{r['events_s']:9.0f} {r['dropped']:7d}", flush=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
