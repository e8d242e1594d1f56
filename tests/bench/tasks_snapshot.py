#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""What `asynctraced tasks` costs (issue 31): a snapshot of a Go process
with 100,000 idle goroutines (go-app -idle 100000) beside a channel
ping-pong, measured side by side in one run:

- each snapshot's wall time and CPU (asynctraced and its analyser: the
  children's rusage), and how many goroutines it listed;
- what the target lost meanwhile: its ping-pong round trips a second while
  snapshots are taken back to back, against rounds without them.

    BUILD=build python3 tests/bench/tasks_snapshot.py [ROUNDS] [IDLE]
"""
import json
import os
import resource
import subprocess
import sys
import time

BUILD = os.environ.get("BUILD", "build")
GO_APP = os.path.join(BUILD, "go-app")
TRACER = os.path.join(BUILD, "asynctraced")
DURATION = 8.0


def counts(out):
    return dict(kv.split("=") for kv in out.split())


def run(idle, snapshots):
    """One go-app run of DURATION s; with snapshots, taken back to back from
    1 s in to 1 s before its end. Its round trips a second and the snapshots'."""
    app = subprocess.Popen([GO_APP, "-scenario", "pingpong", "-idle", str(idle),
                            "-duration", f"{DURATION}s"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for line in app.stderr:
        if "idle" in line:
            break
    began = time.monotonic()
    taken = []
    if snapshots:
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
            taken.append({"wall": wall, "cpu": (ru1.ru_utime - ru0.ru_utime) +
                          (ru1.ru_stime - ru0.ru_stime),
                          "tasks": len(d["tasks"]), "torn": d["torn"],
                          "bytes": len(r.stdout)})
    out, _ = app.communicate()
    c = counts(out.strip().splitlines()[-1])
    return int(c["pings"]) / float(c["duration"]), taken


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    idle = int(sys.argv[2]) if len(sys.argv) > 2 else 100000
    print(f"== asynctraced tasks: go-app pingpong with {idle} idle goroutines, "
          f"{rounds} rounds of {DURATION:.0f} s each way")
    plain, snap, shots = [], [], []
    for i in range(rounds):
        for with_snaps in ((False, True) if i % 2 == 0 else (True, False)):
            rate, taken = run(idle, with_snaps)
            (snap if with_snaps else plain).append(rate)
            shots.extend(taken)
    walls = sorted(s["wall"] for s in shots)
    cpus = sorted(s["cpu"] for s in shots)
    med = lambda v: v[len(v) // 2]
    print(f"snapshots: {len(shots)}, goroutines listed {min(s['tasks'] for s in shots)}-"
          f"{max(s['tasks'] for s in shots)}, torn {sum(s['torn'] for s in shots)}, "
          f"JSON {med(sorted(s['bytes'] for s in shots)) / 1e6:.1f} MB")
    print(f"snapshot wall: median {med(walls) * 1e3:.0f} ms (min {walls[0] * 1e3:.0f}, "
          f"max {walls[-1] * 1e3:.0f}); CPU median {med(cpus) * 1e3:.0f} ms")
    print(f"target round trips/s: untraced {sum(plain) / len(plain):,.0f}, "
          f"while snapshotting {sum(snap) / len(snap):,.0f} "
          f"({sum(snap) / len(snap) / (sum(plain) / len(plain)):.2f}x)")
    for p, s in zip(plain, snap):
        print(f"  round: {p:,.0f} vs {s:,.0f} ({s / p:.2f}x)")


if __name__ == "__main__":
    main()
