#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""What tracing costs the processes it does not trace: their context switches.

asynctraced hooks sched_switch, which every context switch of the host runs,
traced or not. `pingpong` (tests/bench/pingpong.c) is two untraced processes
on CPU 0 handing a byte back and forth through pipes: a round trip is two
context switches and little else. It runs, interleaved over several rounds
(each in another order; the machine is shared and noisy), with:

  none        no tracer
  floor       asynctraced --empty-programs on TARGETS idle sample executors
              (empty BPF programs on the same probes and hooks: the cost of
              the hook itself)
  maps        asynctraced --no-trace on them: the programs as they run

with 1 target, and with --many targets. Targets and tracers run on CPU 1, so
CPU 0 holds only the ping-pong. Today one tracer traces one process: N
targets are N tracers, each with its own sched_switch program.

Per mode, the median over the rounds (and the lowest and highest round) of
the time a switch takes and what it adds over `none` in the same round.

A benchmark: it prints numbers and asserts nothing (docs/performance.md).

Usage: sudo python3 tests/bench/switches.py [--rounds N] [--switches N] [--many N]
"""
import argparse
import os
import re
import statistics
import subprocess
import time

BUILD = os.environ.get("BUILD", "build")
TRACER = os.path.join(BUILD, "asynctraced")
EXECUTOR = os.path.join(BUILD, "sample-executor")
PINGPONG = os.path.join(BUILD, "pingpong")


def start_targets(n):
    """n sample executors, each serving a trickle of requests on CPU 1."""
    return [subprocess.Popen(["taskset", "-c", "1", EXECUTOR, "--scenario", "healthy",
                              "--rate", "50", "--duration", "3600"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            for _ in range(n)]


def start_tracers(targets, args):
    tracers = []
    for t in targets:
        p = subprocess.Popen(["taskset", "-c", "1", TRACER, "-p", str(t.pid), "-q",
                              "--no-sandbox", *args],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        tracers.append(p)
    # attached once each says so, or fails
    for p in tracers:
        for line in p.stderr:
            if "tracing pid" in line or "failed" in line or "error" in line:
                break
    return tracers


def stop(procs):
    for p in procs:
        if p.poll() is None:
            p.terminate()
    for p in procs:
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def pingpong(rounds):
    out = subprocess.run([PINGPONG, str(rounds), "0"], capture_output=True, text=True,
                         check=True).stdout
    return float(re.search(r"ns_per_switch=(\d+)", out).group(1))


MODES = {"none": None, "floor": ["--no-trace", "--empty-programs"], "maps": ["--no-trace"]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--switches", type=int, default=400000,
                    help="context switches a measurement (default 400000)")
    ap.add_argument("--many", type=int, default=20, help="the many-targets case (default 20)")
    a = ap.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("switches.py: needs root (it loads BPF)")
    cases = [(1, m) for m in MODES] + [(a.many, m) for m in MODES if m != "none"]
    results = {c: [] for c in cases}
    print(f"pingpong on CPU 0, {a.switches} switches a measurement; targets and tracers on "
          f"CPU 1; {a.rounds} rounds")
    for r in range(a.rounds):
        order = cases[r % len(cases):] + cases[:r % len(cases)]
        for n, mode in order:
            targets = start_targets(n) if MODES[mode] else []
            tracers = start_tracers(targets, MODES[mode]) if MODES[mode] else []
            try:
                time.sleep(0.5)
                results[(n, mode)].append(pingpong(a.switches // 2))
            finally:
                stop(tracers)
                stop(targets)
        print(f"round {r + 1}/{a.rounds} done", flush=True)
    base = results[(1, "none")]
    print()
    print(f"{'targets':>7} {'mode':<6} {'ns/switch':>9} {'added':>7} {'lowest':>7} {'highest':>7}")
    for n, mode in cases:
        vals = results[(n, mode)]
        added = [v - b for v, b in zip(vals, base)]
        print(f"{(n if mode != 'none' else 0):>7} {mode:<6} {statistics.median(vals):>9.0f} "
              f"{statistics.median(added):>7.0f} {min(added):>7.0f} {max(added):>7.0f}")


if __name__ == "__main__":
    main()
