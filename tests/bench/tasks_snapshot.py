#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""What `asynctraced tasks` costs (issue 31): a snapshot of a Go process
with 100,000 idle goroutines (go-app -idle 100000) beside a channel
ping-pong, and of a tokio one with 100,000 idle tasks (tokio-parked --idle
100000 --pingpong, built with debug = 2), measured side by side in one run:

- each snapshot's wall time and CPU (asynctraced and its analyser: the
  children's rusage), and how many goroutines it listed;
- what the target lost meanwhile: its ping-pong round trips a second while
  snapshots are taken back to back, against rounds without them, and
  against rounds where a busy loop takes one CPU as long instead (the
  control: a snapshot keeps one of the two CPUs busy, which alone changes
  how a runtime's workers share the ping-pong).

    BUILD=build python3 tests/bench/tasks_snapshot.py [ROUNDS] [IDLE] [go|tokio]
"""
import json
import os
import resource
import subprocess
import sys
import time

BUILD = os.environ.get("BUILD", "build")
GO_APP = os.path.join(BUILD, "go-app")
TOKIO_PARKED = os.path.join(BUILD, "tokio-parked")
TRACER = os.path.join(BUILD, "asynctraced")
DURATION = 8.0


def counts(out):
    return dict(kv.split("=") for kv in out.split())


def target(runtime, idle):
    """The program's command line, and what it says on stderr once its tasks wait."""
    if runtime == "go":
        return [GO_APP, "-scenario", "pingpong", "-idle", str(idle),
                "-duration", f"{DURATION}s"], "idle"
    return [TOKIO_PARKED, "--idle", str(idle), "--pingpong", f"{DURATION:.0f}"], "parked"


def run(runtime, idle, mode):
    """One run of DURATION s (its ping-pong's, once its idle tasks wait); mode
    "snap": snapshots taken back to back from 1 s in to 2 s before its end;
    "hog": a busy loop as long; "plain": neither. Its round trips a second
    and the snapshots'."""
    argv, ready = target(runtime, idle)
    app = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for line in app.stderr:
        if ready in line:
            break
    began = time.monotonic()
    taken = []
    if mode == "hog":
        time.sleep(1)
        hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
        time.sleep(max(0.0, DURATION - 2 - (time.monotonic() - began)))
        hog.kill()
        hog.wait()
    if mode == "snap":
        time.sleep(1)
        while time.monotonic() - began < DURATION - 2:
            ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
            t0 = time.monotonic()
            r = subprocess.run([TRACER, "tasks", "-p", str(app.pid), "--json"],
                               capture_output=True, text=True)
            wall = time.monotonic() - t0
            ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            if r.returncode:
                raise SystemExit(f"tasks failed: {r.stderr}")
            d = json.loads(r.stdout)
            if "note" in d:
                raise SystemExit(f"tasks said: {d['note']}")
            taken.append({"wall": wall, "cpu": (ru1.ru_utime - ru0.ru_utime) +
                          (ru1.ru_stime - ru0.ru_stime),
                          "tasks": len(d["tasks"]), "torn": d["torn"],
                          "bytes": len(r.stdout)})
    out, _ = app.communicate()
    if app.returncode:
        raise SystemExit(f"{argv[0]} failed: exit {app.returncode}")
    c = counts(out.strip().splitlines()[-1])
    return int(c["pings"]) / float(c["duration"]), taken


def bench(runtime, rounds, idle):
    print(f"== asynctraced tasks: {os.path.basename(target(runtime, idle)[0][0])} pingpong with "
          f"{idle} idle {'goroutines' if runtime == 'go' else 'tasks'}, "
          f"{rounds} rounds of {DURATION:.0f} s each way")
    rates = {"plain": [], "snap": [], "hog": []}
    shots = []
    order = ["plain", "snap", "hog"]
    for i in range(rounds):
        for mode in order[i % 3:] + order[:i % 3]:
            rate, taken = run(runtime, idle, mode)
            rates[mode].append(rate)
            shots.extend(taken)
    plain, snap, hog = rates["plain"], rates["snap"], rates["hog"]
    walls = sorted(s["wall"] for s in shots)
    cpus = sorted(s["cpu"] for s in shots)
    med = lambda v: v[len(v) // 2]
    print(f"snapshots: {len(shots)}, tasks listed {min(s['tasks'] for s in shots)}-"
          f"{max(s['tasks'] for s in shots)}, torn {sum(s['torn'] for s in shots)}, "
          f"JSON {med(sorted(s['bytes'] for s in shots)) / 1e6:.1f} MB")
    print(f"snapshot wall: median {med(walls) * 1e3:.0f} ms (min {walls[0] * 1e3:.0f}, "
          f"max {walls[-1] * 1e3:.0f}); CPU median {med(cpus) * 1e3:.0f} ms")
    mean = lambda v: sum(v) / len(v)
    print(f"target round trips/s: untraced {mean(plain):,.0f}, "
          f"while snapshotting {mean(snap):,.0f} ({mean(snap) / mean(plain):.2f}x), "
          f"beside a busy loop instead {mean(hog):,.0f} ({mean(hog) / mean(plain):.2f}x); "
          f"snapshotting against the busy loop {mean(snap) / mean(hog):.2f}x")
    for p, s, h in zip(plain, snap, hog):
        print(f"  round: {p:,.0f} vs {s:,.0f} vs {h:,.0f} ({s / p:.2f}x, {s / h:.2f}x)")


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    idle = int(sys.argv[2]) if len(sys.argv) > 2 else 100000
    for runtime in sys.argv[3:] or ("go", "tokio"):
        bench(runtime, rounds, idle)


if __name__ == "__main__":
    main()
