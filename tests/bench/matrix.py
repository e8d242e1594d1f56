#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""What tracing costs on every build of the tokio matrix (docs/tokio.md,
"Builds tested"): tokio-paths `all` (yield_now loops, mpsc and Notify
ping-pong, 1 ms timers, spawn and await: tokio's everyday paths at once) run
untraced, with empty programs on the probes (the floor: the traps alone) and
maps-only, interleaved over several rounds, each in another order. Per
build: polls/s against untraced, what the floor and maps-only add per poll
(the target's user+system CPU per poll, paired by round with that round's
untraced run), maps-only as a multiple of the floor, and where the probes
went as the attach line says: placed past a single-stepped entry, still
single-stepped (each for a reason its code gives: -v), refused by the
kernel (0 on every build: placement follows the kernel's rules).

A benchmark: it prints numbers and asserts nothing (docs/performance.md).

Usage: sudo python3 tests/bench/matrix.py [--seconds S] [--rounds N] [--builds a,b]
"""
import argparse
import os
import re
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
from tests.bench import overhead  # noqa: E402
from tests.integration.test_tokio_matrix import builds  # noqa: E402

MODES = ["untraced", "floor", "maps"]


def run(paths, mode, seconds, tmp):
    """One run of tokio-paths all: (polls/s, CPU ns per poll, the attach line or '')."""
    ex = subprocess.Popen([paths, "all", "--duration", str(seconds), "--workers", "2",
                           *(["--wait-stdin"] if mode != "untraced" else [])],
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          stderr=subprocess.DEVNULL, text=True)
    tr, err_path = None, os.path.join(tmp, "tracer.err")
    if mode != "untraced":
        with open(err_path, "w") as err:
            tr = subprocess.Popen(overhead.tracer_args(mode, ex.pid, tmp), stderr=err)
        overhead.wait_attached(tr, err_path)
        ex.stdin.write("go\n")
        ex.stdin.flush()
    out = ex.stdout.read()
    _, cpu, _ = overhead.wait_usage(ex)
    attach = ""
    if tr:
        overhead.wait_usage(tr)
        attach = next((line for line in overhead.read(err_path).splitlines()
                       if "tracing pid" in line), "")
    polls = int(re.search(r"polls=(\d+)", out).group(1))
    pps = float(re.search(r"polls_per_s=(\d+)", out).group(1))
    return pps, 1e9 * cpu / max(polls, 1), attach


def placed(attach):
    """(moved, single-stepped, refused) from an attach line."""
    def count(pattern):
        m = re.search(pattern, attach)
        return int(m.group(1)) if m else 0
    return (count(r"(\d+) probes placed past"), count(r"(\d+) probes single-stepped"),
            count(r"(\d+) probes refused"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=3)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--builds", help="only these builds (comma-separated)")
    a = ap.parse_args()
    todo = builds()
    if a.builds:
        todo = {n: todo[n] for n in a.builds.split(",")}
    print(f"# tokio-paths all, {a.seconds:g} s per run, 2 workers, {a.rounds} interleaved "
          f"rounds; added: the target's CPU per poll over untraced (median of the rounds' "
          f"own); probes: placed past a single-stepped entry / single-stepped / refused")
    print(f"{'build':15} {'untraced':>9} {'floor':>7} {'maps':>7} {'floor +':>8} {'maps +':>8} "
          f"{'x floor':>7} {'probes':>12}")
    with overhead.scratch() as tmp:
        for name, (_, paths) in todo.items():
            runs = {m: [] for m in MODES}
            attach = ""
            for i in range(a.rounds):
                for mode in overhead.rotated(MODES, i):
                    pps, cpu, line = run(paths, mode, a.seconds, tmp)
                    runs[mode].append((pps, cpu))
                    attach = line or attach
            pps = {m: statistics.median(r[0] for r in runs[m]) for m in MODES}
            added = {m: [runs[m][i][1] - runs["untraced"][i][1] for i in range(a.rounds)]
                     for m in ("floor", "maps")}
            ratios = [m / f for m, f in zip(added["maps"], added["floor"]) if f > 0]
            moved, stepped, refused = placed(attach)
            print(f"{name:15} {pps['untraced']:9.0f} {pps['floor'] / pps['untraced']:7.1%} "
                  f"{pps['maps'] / pps['untraced']:7.1%} "
                  f"{statistics.median(added['floor']):6.0f}ns "
                  f"{statistics.median(added['maps']):6.0f}ns "
                  f"{statistics.median(ratios) if ratios else 0:6.2f}x "
                  f"{moved:4d}/{stepped}/{refused}", flush=True)


if __name__ == "__main__":
    main()
