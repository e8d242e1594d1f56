#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""--stacks, two builds side by side: what the tracer (and the analysers it
starts and waits for) spends unwinding the same workload.

Runs the sample executor's `noisy` scenario (a 20 ms CPU-bound poll again and
again, 2 workers) and traces it `-p PID --stacks -d SECONDS` with each build
in turn, alternating, ROUNDS times: user and system CPU seconds and peak RSS
(as getrusage of the tracer and its waited-for children reports them), and
the summary's stacks unwound and lost. A benchmark: it prints numbers and
asserts nothing (docs/performance.md records them).

Usage: sudo python3 tests/bench/stacks_ab.py OLD_TRACER NEW_TRACER [ROUNDS]
"""
import json
import os
import subprocess
import sys
import time

BUILD = os.environ.get("BUILD", "build")
EXECUTOR = os.path.join(BUILD, "sample-executor")
SECONDS = 5


def one(tracer):
    ex = subprocess.Popen([EXECUTOR, "--scenario", "noisy", "--duration", str(SECONDS + 2),
                           "--workers", "2"], stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL)
    time.sleep(0.3)
    tr = subprocess.Popen([tracer, "-p", str(ex.pid), "--stacks", "-d", str(SECONDS),
                           "--summary", "json", "-o", os.devnull],
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    out = tr.stdout.read()
    _, status, use = os.wait4(tr.pid, 0)  # the tracer, and the analysers it waited for
    tr.returncode = os.waitstatus_to_exitcode(status)
    ex.wait()
    stacks = json.loads(out)["stacks"] if tr.returncode == 0 else None
    return use.ru_utime + use.ru_stime, use.ru_maxrss, stacks


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    builds = {"old": sys.argv[1], "new": sys.argv[2]}
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    print(f"noisy, 2 workers, -p --stacks -d {SECONDS}, {rounds} rounds alternating")
    for r in range(rounds):
        for name, tracer in builds.items():
            cpu, rss, stacks = one(tracer)
            print(f"  {name} round {r + 1}: {cpu:.2f} CPU s, peak RSS {rss // 1024} MB, "
                  f"stacks {stacks}")


if __name__ == "__main__":
    main()
