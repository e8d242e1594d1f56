#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Runs every scenario of the sample executor, and the tokio test program,
four ways, side by side in one run: untraced, traced with a full trace
written to disk, traced in maps-only mode (--no-trace), and recorded to a
capture (asynctraced record). Prints, per run: the executor's poll rate and
its own CPU time per poll (what tracing adds to the target), the tracer's CPU
(from the moment it attached: loading the programs is startup) and peak
memory, the events that crossed the ring buffer and the drops.

A benchmark, not a test: it prints numbers and asserts nothing
(docs/performance.md records them).

Usage: sudo python3 tests/bench/scenarios.py [SECONDS] [SCENARIO...]
"""
import os
import re
import subprocess
import sys
import tempfile
import time

from overhead import wait_attached  # tests/bench, the script's own directory

BUILD = os.environ.get("BUILD", "build")
SCENARIOS = ["healthy", "noisy", "blocking", "starve", "thrash", "fanout", "lost", "delay",
             "tokio"]
MODES = ["untraced", "full", "maps", "record"]


def read(path):
    with open(path) as f:
        return f.read()


def cpu_of(pid):
    """Waits for a child; returns (exit code, CPU seconds, peak RSS in MB)."""
    _, status, usage = os.wait4(pid, 0)
    return (os.waitstatus_to_exitcode(status), usage.ru_utime + usage.ru_stime,
            usage.ru_maxrss / 1024)


def start(scenario, seconds, traced):
    """The target, waiting for the tracer when traced."""
    if scenario == "tokio":
        # the tokio program waits on stdin; 4000 requests/s for more polls
        args = [f"{BUILD}/tokio-app", "--duration", str(seconds), "--rate", "4000"]
        args += ["--wait-stdin"] if traced else []
        return subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, text=True)
    args = [f"{BUILD}/sample-executor", "--scenario", scenario, "--duration", str(seconds),
            "--workers", "2"]
    args += ["--wait-traced", "30"] if traced else []
    return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)


def run(scenario, mode, seconds, tmp):
    ex = start(scenario, seconds, mode != "untraced")
    tr = None
    trace = os.path.join(tmp, f"{scenario}.json")
    if mode != "untraced":
        err_path = os.path.join(tmp, "tracer.err")
        targs = [f"{BUILD}/asynctraced", "-p", str(ex.pid), "-q"]
        if mode == "record":
            targs = [f"{BUILD}/asynctraced", "record", "-p", str(ex.pid), "-o", trace]
        else:
            targs += ["-o", trace] if mode == "full" else ["--no-trace"]
        with open(err_path, "w") as err:
            tr = subprocess.Popen(targs, stderr=err, text=True)
        load_cpu = wait_attached(tr, err_path)
        if scenario == "tokio":
            ex.stdin.write("go\n")
            ex.stdin.flush()
    ex_out = ex.stdout.read()
    _, ex_cpu, _ = cpu_of(ex.pid)
    polls = int(re.search(r"polls=(\d+)", ex_out).group(1))
    r = dict(scenario=scenario, mode=mode, polls_s=polls / seconds,
             ns_per_poll=1e9 * ex_cpu / max(polls, 1), tracer_cpu=0.0, rss=0.0, events_s=0.0,
             dropped=0)
    if tr:
        _, tr_cpu, rss = cpu_of(tr.pid)
        err = read(err_path)
        r["tracer_cpu"] = 100 * (tr_cpu - load_cpu) / seconds
        r["rss"] = rss
        if mode == "record":  # "... N records, X MB in FILE; D dropped"
            r["events_s"] = int(re.search(r"(\d+) records", err).group(1)) / seconds
            r["dropped"] = int(re.search(r"(\d+) dropped", err).group(1))
        else:
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
