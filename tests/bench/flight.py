#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""What the flight recorder costs the tracer, side by side in one run.

The sample executor's `healthy` scenario (requests, timers, pipe I/O) at
its saturated rate and its `thrash` scenario (healthy, plus 8 tasks that
yield 1000 times per unit of progress), each traced four ways, interleaved over the rounds: maps only
(`--no-trace`), the full trace streamed to /dev/null (`-o - --format
perfetto`), the flight recorder (`--flight-recorder 10`, no trace file),
and both. Per way: the tracer's CPU (user + system, from when it is
attached) and its peak resident memory, and the ring's events per second.
The flight recorder keeps every record in memory: its cost is the full
trace's traffic plus what the ring holds (at most --flight-recorder-size).

A benchmark: it prints numbers and asserts nothing (docs/performance.md).

Usage: sudo python3 tests/bench/flight.py [--seconds S] [--rounds N]
"""
import argparse
import os
import re
import statistics
import subprocess
import tempfile
import time

BUILD = os.environ.get("BUILD", "build")
TRACER = os.path.join(BUILD, "asynctraced")
EXECUTOR = os.path.join(BUILD, "sample-executor")
WAYS = {
    "maps": ["--no-trace"],
    "full": ["-o", "-", "--format", "perfetto"],
    "flight": ["--flight-recorder", "10", "--dump-dir", "{dir}"],
    "full+flight": ["-o", "-", "--format", "perfetto", "--flight-recorder", "10",
                    "--dump-dir", "{dir}"],
}


def read(path):
    with open(path, errors="replace") as f:
        return f.read()


def run(scenario, way, seconds, tmp):
    rate = ["--rate", "max"] if scenario == "healthy" else []
    ex = subprocess.Popen([EXECUTOR, "--scenario", scenario, *rate, "--duration",
                           str(seconds), "--workers", "2", "--wait-traced", "30"],
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    err = os.path.join(tmp, "tracer.err")
    args = [a.format(dir=tmp) for a in WAYS[way]]
    with open(err, "w") as f, open(os.devnull, "wb") as null:
        tr = subprocess.Popen([TRACER, "-p", str(ex.pid), "-q", "--thrash-rate", "0",
                               "--long-poll", "0", "--sched-delay", "0", "--starve-depth", "0",
                               "--lost-waker", "0", *args], stdout=null, stderr=f)
    while "Ctrl-C to stop" not in read(err):
        if tr.poll() is not None:
            raise SystemExit(read(err))
        time.sleep(0.02)
    stat = read(f"/proc/{tr.pid}/stat").split(")")[-1].split()
    load = (int(stat[11]) + int(stat[12])) / os.sysconf("SC_CLK_TCK")
    ex.communicate()
    _, status, usage = os.wait4(tr.pid, 0)
    tr.returncode = os.waitstatus_to_exitcode(status)
    text = read(err)
    secs = float(re.search(r"summary for pid \d+ \(.*\): ([\d.]+) s", text).group(1))
    events = int(re.search(r"events\s+(\d+)", text).group(1))
    dropped = int(re.search(r"dropped\s+(\d+)", text).group(1))
    for f in os.listdir(tmp):
        if f.startswith("asynctraced-"):
            os.unlink(os.path.join(tmp, f))
    return dict(cpu=100 * (usage.ru_utime + usage.ru_stime - load) / secs,
                rss=usage.ru_maxrss / 1024, events=events / secs, dropped=dropped)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=12)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    print(f"# {a.seconds:g} s per run (the flight recorder's 10 s window fills), 2 workers, "
          f"{a.rounds} interleaved rounds, medians")
    print(f"{'scenario':9} {'way':12} {'tracer CPU':>10} {'peak RSS':>9} {'events/s':>9} "
          f"{'dropped':>7}")
    with tempfile.TemporaryDirectory(dir="/dev/shm") as tmp:
        for scenario in ("healthy", "thrash"):
            runs = {w: [] for w in WAYS}
            ways = list(WAYS)
            for i in range(a.rounds):
                for w in ways[i % len(ways):] + ways[:i % len(ways)]:
                    runs[w].append(run(scenario, w, a.seconds, tmp))
            for w, rs in runs.items():
                print(f"{scenario:9} {w:12} {statistics.median(r['cpu'] for r in rs):9.1f}% "
                      f"{statistics.median(r['rss'] for r in rs):7.1f}MB "
                      f"{statistics.median(r['events'] for r in rs):9.0f} "
                      f"{max(r['dropped'] for r in rs):7d}", flush=True)


if __name__ == "__main__":
    main()
