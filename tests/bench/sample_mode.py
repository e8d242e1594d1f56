#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Sample mode against probe mode on real servers under load, side by side.

Two servers, each on 127.0.0.1 with a few microseconds of work a request:
Go's net/http (tests/go/cmd/go-http) and a tokio HTTP/1.1 keep-alive server
(tests/tokio/src/bin/tokio-http.rs, a task a connection, 2 workers). Each
loaded by wrk (Debian's) at saturation: one thread, 32 keep-alive
connections, 5 s a round after a second's warm-up, the tracer attached to
the running server before the round. Modes, interleaved round by round in a
new order each time (the machine is shared and noisy):

  untraced   the server alone
  sample     --mode sample --no-trace: no probe, the running goroutine (or
             tokio task) read 997 times a second of each thread's CPU time
             and at each switch
  sample+st  the same with --stacks
  probes     --no-trace (probe mode, maps only)
  floor      --empty-programs: probe mode's traps with empty programs

Each mode's median requests/s and p99 latency (wrk --latency) over the
rounds, as ratios to untraced's median, with the spread (min-max over
rounds); "paired", the median of each round's ratio to that round's
untraced run (the machine's slow swings cancel); the server's CPU time a
request (its threads pay the samples' interrupts and our programs), as a
ratio too; and the tracer's CPU time a second of the round. wrk runs on the
same two CPUs as the server: this is a loaded machine, as a busy server's
host is, and a noisy one (untraced rounds differ by up to 30% here); the
spread says how far to trust a ratio.

Then the same at a fixed moderate rate (`fixed`): each of the 32 connections
waits 2 ms (wrk's Lua `delay()`) before each request, some 15,000 requests a
second, a quarter to a sixth of what either server does at saturation. The
rate is the load's, so the throughput ratio says little; what the tracer
costs shows as latency (p50 and p99: wrk's timer starts when a request is
written, after the delay) and as the server's CPU time a request.

Then the detection, in sample mode with --stacks: the same server where one
request in 1000 burns 30 ms in its handler (burn30ms) must raise a long-poll
alert within a second of the load starting, with a stack that names
burn30ms, and (--escalate 2) attach the server's probes for 2 s, whose
flight-recorder dump and alerts show what followed (the long polls' victims);
the healthy server under the same load must raise none. On the tokio
server, whose runs on the CPU the samples cannot split into polls, the
escalation's probes must find the 30 ms polls themselves; healthy, nothing.

Usage: sample_mode.py [ROUNDS] (default 3): both servers at saturation, then at the
       fixed rate, then the detection.
       sample_mode.py fixed [ROUNDS]: the fixed rate alone.
       sample_mode.py rates [ROUNDS]: sample mode at 97, 997 and 4999 Hz on the tokio
       server, beside `perf record -e cpu-clock -F HZ` (no BPF) at the same rates, of
       the server's threads (-p, as sample mode) and of every CPU (-a).
       sample_mode.py interrupts: the local timer interrupts a second the host takes
       with sample mode following a nearly idle process, beside perf's -p and -a."""
import datetime
import json
import os
import random
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time

BUILD = os.environ.get("BUILD", "build")
TRACER = os.path.join(BUILD, "asynctraced")
SERVERS = {name: os.path.join(BUILD, name) for name in ("go-http", "tokio-http")}
MODES = {
    "untraced": None,
    "sample": ["--mode", "sample", "--no-trace"],
    "sample+st": ["--mode", "sample", "--no-trace", "--stacks"],
    "probes": ["--no-trace"],
    "floor": ["--empty-programs"],
}
SECONDS = 5
# The fixed moderate rate: each connection waits this long before each request.
FIXED_DELAY_MS = 2


def start_server(server, *args):
    srv = subprocess.Popen([SERVERS[server], *args], stdout=subprocess.PIPE, text=True)
    m = re.match(r"listening on (\d+)", srv.stdout.readline())
    if not m:
        srv.kill()
        sys.exit(f"{server} did not start")
    return srv, int(m[1])


def wrk(port, seconds, path="/", delay_ms=0):
    """wrk's requests/s, p50 and p99 (ms); delay_ms: each connection waits so long
    before each request (a fixed rate, about 32 / (delay + latency) a second)."""
    args = ["wrk", "-t1", "-c32", f"-d{seconds}s", "--latency"]
    script = None
    if delay_ms:
        fd, script = tempfile.mkstemp(prefix="at-bench-", suffix=".lua")
        with os.fdopen(fd, "w") as f:
            f.write(f"function delay() return {delay_ms} end\n")
        args += ["-s", script]
    try:
        out = subprocess.run([*args, f"http://127.0.0.1:{port}{path}"],
                             capture_output=True, text=True, check=True).stdout
    finally:
        if script:
            os.unlink(script)
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out)[1])

    def pct(p):
        m = re.search(rf"\b{p}%\s+([\d.]+)(us|ms|s)", out)
        return float(m[1]) * {"us": 1e-3, "ms": 1.0, "s": 1e3}[m[2]]
    return rps, pct(50), pct(99)


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def attach(pid, args, alerts=None):
    cmd = [TRACER, "-p", str(pid), *args, *(["--alerts", alerts] if alerts else [])]
    tr = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    seen = ""
    deadline = time.monotonic() + 30
    while "tracing pid" not in seen:
        line = tr.stderr.readline()
        if not line or time.monotonic() > deadline:
            tr.kill()
            sys.exit(f"the tracer did not attach: {seen}{line}")
        seen += line
    return tr


def stop(tr):
    tr.send_signal(signal.SIGINT)
    tr.communicate(timeout=60)


class Round:
    """One round's numbers: requests/s, p50 and p99 (ms), the tracer's CPU
    share and the server's CPU time a request (µs: the tracer's programs and
    the samples' interrupts run on its threads' time)."""

    def __init__(self, rps, p50, p99, tracer_cpu, server_us):
        self.rps, self.p50, self.p99 = rps, p50, p99
        self.tracer_cpu, self.server_us = tracer_cpu, server_us


def loaded(server, watcher, delay_ms=0):
    """A round on a fresh server: a second's warm-up, then watcher(pid) started
    (a Popen to SIGINT at the end, or None) and SECONDS of wrk (delay_ms: at
    the fixed rate)."""
    srv, port = start_server(server)
    try:
        wrk(port, 1, delay_ms=delay_ms)
        w = watcher(srv.pid)
        cpu0, srv0 = (cpu_seconds(w.pid) if w else 0), cpu_seconds(srv.pid)
        rps, p50, p99 = wrk(port, SECONDS, delay_ms=delay_ms)
        cpu = (cpu_seconds(w.pid) - cpu0) / SECONDS if w else 0
        server_us = (cpu_seconds(srv.pid) - srv0) / (rps * SECONDS) * 1e6
        if w:
            stop(w)
        return Round(rps, p50, p99, cpu, server_us)
    finally:
        srv.kill()
        srv.wait()


def one_round(server, mode, delay_ms=0):
    return loaded(server, lambda pid: attach(pid, MODES[mode]) if MODES[mode] else None,
                  delay_ms)


def detection(noisy, server="go-http"):
    """Sample mode with --stacks and --escalate 2 on the server (noisy: one
    request in 1000 burns 30 ms): the alerts and how long after the load's
    start the first one came."""
    tmp = tempfile.mkdtemp(prefix="at-bench-")
    alerts = os.path.join(tmp, "alerts.jsonl")
    flag = "-noisy-every" if server == "go-http" else "--noisy-every"
    srv, port = start_server(server, *([flag, "1000"] if noisy else []))
    escalating = ["--mode", "sample", "--stacks", "--escalate", "2", "--flight-recorder", "2",
                  "--dump-dir", tmp]
    try:
        tr = attach(srv.pid, escalating, alerts)
        started = time.time()
        wrk(port, 3)
        stop(tr)
    finally:
        srv.kill()
        srv.wait()
    with open(alerts) as f:
        log = [json.loads(line) for line in f if line.strip()]
    return log, started


def table(server, rounds, runs, load=None):
    """Each of runs (a name: a callable making a Round; "untraced" among them)
    once a round, in a new order each round; each mode's medians, as ratios to
    untraced's, and the median of its ratios to the untraced run of the same
    round (paired: the machine's slow swings cancel)."""
    got = {m: [] for m in runs}
    for r in range(rounds):
        for m in random.Random(r).sample(list(runs), len(runs)):
            got[m].append(runs[m]())
    base = got["untraced"]
    med = statistics.median
    b_rps, b_p50, b_p99, b_us = (med(x.rps for x in base), med(x.p50 for x in base),
                                 med(x.p99 for x in base), med(x.server_us for x in base))
    print(f"{server}, {load or 'wrk -t1 -c32'}, {SECONDS} s rounds, median of {rounds}:")
    print(f"  {'mode':22} {'req/s':>8} {'ratio':>6} {'paired':>6} {'spread':>11} "
          f"{'p50 ms':>7} {'ratio':>6} {'p99 ms':>7} {'ratio':>6} {'CPU/req':>8} {'ratio':>6} "
          f"{'tracer':>6}")
    for m, xs in got.items():
        rps, p50, p99 = med(x.rps for x in xs), med(x.p50 for x in xs), med(x.p99 for x in xs)
        us = med(x.server_us for x in xs)
        paired = med(x.rps / b.rps for x, b in zip(xs, base))
        lo, hi = min(x.rps for x in xs) / b_rps, max(x.rps for x in xs) / b_rps
        print(f"  {m:22} {rps:8.0f} {rps / b_rps:5.2f}x {paired:5.2f}x {lo:4.2f}-{hi:4.2f}x "
              f"{p50:7.3f} {p50 / b_p50:5.2f}x {p99:7.2f} {p99 / b_p99:5.2f}x "
              f"{us:6.2f}us {us / b_us:5.2f}x {100 * med(x.tracer_cpu for x in xs):5.1f}%")


def fixed_rate(rounds):
    """Both servers at the fixed moderate rate, every mode."""
    for server in ("go-http", "tokio-http"):
        table(server, rounds,
              {m: lambda m=m, s=server: one_round(s, m, FIXED_DELAY_MS) for m in MODES},
              f"wrk -t1 -c32 at a fixed rate ({FIXED_DELAY_MS} ms before each request)")


def perf_round(server, hz, which):
    """One round with `perf record -e cpu-clock -F hz` (no BPF), which: "-a" every CPU
    of the host, "-p" the server's threads (as sample mode samples): what a CPU-clock
    sample costs the machine, sample mode's or not."""
    def perf(pid):
        whom = ["-a"] if which == "-a" else ["-p", str(pid)]
        p = subprocess.Popen(["perf", "record", "-q", "-e", "cpu-clock", "-F", str(hz), *whom,
                              "-o", os.path.join(tempfile.gettempdir(), "at-bench-perf.data")],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(1)
        return p
    return loaded(server, perf)


def sample_rates(rounds, server="tokio-http"):
    """Sample mode's cost against its rate, beside perf's own sampling at the same rates."""
    runs = {"untraced": lambda: one_round(server, "untraced")}
    for hz in (97, 997, 4999):
        MODES[f"sample-{hz}"] = ["--mode", "sample", "--no-trace", "--sample-hz", str(hz)]
        runs[f"sample {hz} Hz"] = lambda hz=hz: one_round(server, f"sample-{hz}")
        for which in ("-p", "-a"):
            runs[f"perf record -F {hz} {which}"] = lambda hz=hz, w=which: perf_round(server, hz, w)
    table(server, rounds, runs)


def local_timer_interrupts():
    """The local timer interrupts taken so far, all CPUs (/proc/interrupts' LOC)."""
    with open("/proc/interrupts") as f:
        for line in f:
            if line.strip().startswith("LOC:"):
                return sum(int(x) for x in line.split()[1:] if x.isdigit())
    sys.exit("no LOC line in /proc/interrupts")


def interrupts(seconds=10):
    """What sampling costs the rest of the host: the local timer interrupts a
    second while the sample executor runs nearly idle (--rate 50), with
    nothing attached, in sample mode, and under perf record's CPU-clock
    sampling of its threads (-p) and of every CPU (-a), at 997 Hz."""
    executor = os.path.join(BUILD, "sample-executor")
    watchers = {
        "nothing": lambda pid: None,
        "sample mode": lambda pid: attach(pid, ["--mode", "sample", "--no-trace"]),
        "perf record -F 997 -p": lambda pid: subprocess.Popen(
            ["perf", "record", "-q", "-e", "cpu-clock", "-F", "997", "-p", str(pid), "-o",
             os.path.join(tempfile.gettempdir(), "at-bench-perf.data")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL),
        "perf record -F 997 -a": lambda pid: subprocess.Popen(
            ["perf", "record", "-q", "-e", "cpu-clock", "-F", "997", "-a", "-o",
             os.path.join(tempfile.gettempdir(), "at-bench-perf.data")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL),
    }
    print(f"local timer interrupts a second, all {os.cpu_count()} CPUs, {seconds} s, "
          "the sample executor nearly idle:")
    for name, watch in watchers.items():
        ex = subprocess.Popen([executor, "--scenario", "healthy", "--duration", str(seconds + 30),
                               "--rate", "50"], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
        try:
            w = watch(ex.pid)
            time.sleep(1)
            n0, t0 = local_timer_interrupts(), time.monotonic()
            time.sleep(seconds)
            rate = (local_timer_interrupts() - n0) / (time.monotonic() - t0)
            if w:
                stop(w)
        finally:
            ex.kill()
            ex.wait()
        print(f"  {name:24} {rate:8.0f}")


def main():
    if sys.argv[1:2] == ["rates"]:
        sample_rates(int(sys.argv[2]) if len(sys.argv) > 2 else 3)
        return
    if sys.argv[1:2] == ["interrupts"]:
        interrupts()
        return
    if sys.argv[1:2] == ["fixed"]:
        fixed_rate(int(sys.argv[2]) if len(sys.argv) > 2 else 3)
        return
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    for server in ("go-http", "tokio-http"):
        table(server, rounds, {m: lambda m=m, s=server: one_round(s, m) for m in MODES})
    fixed_rate(rounds)

    log, started = detection(True)
    begins = [a for a in log if a["kind"] == "long-poll" and a["state"] == "begin"]
    first = begins[0] if begins else None
    named = any(f["function"].startswith("main.burn30ms")
                for a in begins for f in a.get("stack", []))
    after = first and datetime.datetime.fromisoformat(
        first["time"].replace("Z", "+00:00")).timestamp() - started
    print(f"noisy (one request in 1000 burns 30 ms), sample mode with --stacks: "
          f"{len(begins)} long-poll episode(s); the first "
          + (f"{after:.2f} s after the load began: "
             f"'{first['task']['name']}' for {first['value_ns'] / 1e6:.1f} ms, "
             f"measured by {first['measured_by']}; their stacks "
             f"{'name' if named else 'do NOT name'} main.burn30ms"
             if first else "never came"))
    quiet, _ = detection(False)
    # the escalation the first alert set off: the probes' view of what followed
    probed = [a for a in log if a["measured_by"] == "probes"]
    victims = {v["task"]["name"] for a in log if a["state"] == "end"
               for v in a.get("victims", [])}
    dump = first.get("dump") if first else None
    print(f"escalation (--escalate 2): "
          + (f"probes for {first['escalated_s']} s, {len(probed)} alert line(s) measured by "
             f"them, victims named {sorted(victims) or 'none'}; dump {dump} "
             f"({os.path.getsize(dump) if dump and os.path.exists(dump) else 0} bytes)"
             if first and first.get("escalated_s") else "none"))
    print(f"healthy, the same load: {len(quiet)} alert line(s)")

    # tokio: a run on the CPU is not one poll for all the samples tell; the
    # escalation's probes measure the next long polls themselves
    tlog, _ = detection(True, "tokio-http")
    probed_long = [a for a in tlog if a["kind"] == "long-poll" and a["state"] == "begin"
                   and a["measured_by"] == "probes" and a["cause"] == "cpu-bound"]
    tnamed = any(f["function"].startswith("tokio_http::burn30ms")
                 for a in probed_long for f in a.get("stack", []))
    print(f"tokio-http noisy, sample mode with --stacks and --escalate 2: "
          f"{len(probed_long)} cpu-bound long-poll episode(s) measured by the escalation's "
          f"probes" + (f", the first '{probed_long[0]['task']['name']}' "
                       f"{probed_long[0]['value_ns'] / 1e6:.1f} ms; their stacks "
                       f"{'name' if tnamed else 'do NOT name'} burn30ms" if probed_long else ""))
    tquiet, _ = detection(False, "tokio-http")
    print(f"tokio-http healthy, the same load: {len(tquiet)} alert line(s)")
    if (not named or quiet or not dump or not os.path.exists(dump) or not probed_long
            or not tnamed or tquiet):
        sys.exit(1)


if __name__ == "__main__":
    main()
