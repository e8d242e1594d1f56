#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""What placing idle spans costs (--wait-reads, docs/tasks.md): go-app's
channel ping-pong, and tokio-parked's (built with debug = 2), each beside
IDLE idle tasks spawned once the tracer is attached (so that every one is
a span to place), traced with --wait-reads 1 (the default) and with
--wait-reads 0 (no read), side by side in one run, the order alternating
from round to round:

- the target's ping-pong round trips a second, each way;
- the tracer's CPU time, its analyser's with it (the children's rusage);
- the reads made, the spans they placed, the time they took (its share of
  the run) and the longest one (the longest the session's loop waited);
- the events received and dropped.

    BUILD=build python3 tests/bench/waits.py [ROUNDS] [IDLE] [go|tokio]
"""
import json
import os
import subprocess
import sys
import tempfile
import time

BUILD = os.environ.get("BUILD", "build")
TRACER = os.path.join(BUILD, "asynctraced")
DURATION = 8


def target(runtime, idle):
    if runtime == "go":
        return [os.path.join(BUILD, "go-app"), "-scenario", "pingpong", "-idle", str(idle),
                "-duration", f"{DURATION}s", "-wait-stdin"]
    return [os.path.join(BUILD, "tokio-parked"), "--idle", str(idle), "--pingpong",
            str(DURATION), "--wait-stdin"]


def run(runtime, idle, pct):
    """One traced run: the target's round trips a second, the tracer's CPU and summary."""
    app = subprocess.Popen(target(runtime, idle), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL, text=True)
    with tempfile.TemporaryFile("w+") as err, tempfile.TemporaryDirectory() as tmp:
        tr = subprocess.Popen([TRACER, "-p", str(app.pid), "-q", "--summary", "json",
                               "-o", os.path.join(tmp, "t.pftrace"), "--wait-reads", str(pct),
                               "-d", "120"],
                              stdout=subprocess.PIPE, stderr=err, text=True)
        began = time.monotonic()
        while True:
            err.seek(0)
            if "Ctrl-C to stop" in err.read():
                break
            if tr.poll() is not None or time.monotonic() - began > 60:
                err.seek(0)
                raise SystemExit(f"the tracer did not start: {err.read()}")
            time.sleep(0.05)
        app.stdin.write("go\n")
        app.stdin.close()
        out = app.stdout.read()
        app.wait()
        summary = tr.stdout.read()
        # the tracer's own rusage, its analyser's with it (not the target's)
        _, status, ru = os.wait4(tr.pid, 0)
        tr.returncode = os.waitstatus_to_exitcode(status)
    if app.returncode or tr.returncode:
        raise SystemExit(f"failed: target {app.returncode}, tracer {tr.returncode}")
    c = dict(kv.split("=") for kv in out.strip().splitlines()[-1].split())
    s = json.loads(summary.strip().splitlines()[-1])
    cpu = ru.ru_utime + ru.ru_stime
    return {"rate": int(c["pings"]) / float(c["duration"]), "seconds": s["seconds"],
            "cpu": cpu, "waits": s["waits"], "events": s["events"]["received"],
            "dropped": s["events"]["dropped"]}


def bench(runtime, rounds, idle):
    print(f"== --wait-reads: {os.path.basename(target(runtime, idle)[0])} pingpong with {idle} "
          f"idle {'goroutines' if runtime == 'go' else 'tasks'} spawned once traced, "
          f"{rounds} rounds of {DURATION} s each way")
    runs = {1: [], 0: []}
    for i in range(rounds):
        for pct in ((1, 0) if i % 2 == 0 else (0, 1)):
            runs[pct].append(run(runtime, idle, pct))
    mean = lambda v: sum(v) / len(v)
    on, off = runs[1], runs[0]
    for pct, rs in ((1, on), (0, off)):
        w = [r["waits"] for r in rs]
        print(f"--wait-reads {pct}: round trips/s {mean([r['rate'] for r in rs]):,.0f}; tracer CPU "
              f"{mean([r['cpu'] for r in rs]):.2f} s in {mean([r['seconds'] for r in rs]):.1f} s; "
              f"reads {mean([x['read'] for x in w]):,.0f}, placed "
              f"{mean([x['placed'] for x in w]):,.0f}, reading "
              f"{mean([x['read_ns'] / 1e9 / r['seconds'] for x, r in zip(w, rs)]) * 100:.2f}% "
              f"of the run, longest read {max(x['read_max_ns'] for x in w) / 1e6:.1f} ms; "
              f"events {mean([r['events'] for r in rs]):,.0f}, dropped "
              f"{sum(r['dropped'] for r in rs)}")
    print(f"reading / not: round trips {mean([r['rate'] for r in on]) / mean([r['rate'] for r in off]):.2f}x, "
          f"tracer CPU {mean([r['cpu'] for r in on]) / mean([r['cpu'] for r in off]):.2f}x")
    for a, b in zip(on, off):
        print(f"  round: {a['rate']:,.0f} vs {b['rate']:,.0f} round trips/s, "
              f"CPU {a['cpu']:.2f} vs {b['cpu']:.2f} s")


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    idle = int(sys.argv[2]) if len(sys.argv) > 2 else 100000
    for runtime in sys.argv[3:] or ("go", "tokio"):
        bench(runtime, rounds, idle)


if __name__ == "__main__":
    main()
