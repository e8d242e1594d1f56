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
             tokio task) read 997 times a second on each CPU and at each
             switch
  sample+st  the same with --stacks
  probes     --no-trace (probe mode, maps only)
  floor      --empty-programs: probe mode's traps with empty programs

Each mode's median requests/s and p99 latency (wrk --latency) over the
rounds, as ratios to untraced's median, with the spread (min-max over
rounds), and the tracer's CPU time a second of the round. wrk runs on the
same two CPUs as the server: this is a loaded machine, as a busy server's
host is, and a noisy one (untraced rounds differ by up to 30% here); the
spread says how far to trust a ratio.

Then the detection, in sample mode with --stacks: the same server where one
request in 1000 burns 30 ms in its handler (burn30ms) must raise a long-poll
alert within a second of the load starting, with a stack that names
burn30ms, and (--escalate 2) attach the server's probes for 2 s, whose
flight-recorder dump and alerts show what followed (the long polls' victims);
the healthy server under the same load must raise none. On the tokio
server, whose runs on the CPU the samples cannot split into polls, the
escalation's probes must find the 30 ms polls themselves; healthy, nothing.

Usage: sample_mode.py [ROUNDS] (default 3).
       sample_mode.py rates [ROUNDS]: sample mode at 97, 997 and 4999 Hz on the tokio
       server, beside `perf record -e cpu-clock -F HZ -a` (no BPF) at the same rates."""
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


def start_server(server, *args):
    srv = subprocess.Popen([SERVERS[server], *args], stdout=subprocess.PIPE, text=True)
    m = re.match(r"listening on (\d+)", srv.stdout.readline())
    if not m:
        srv.kill()
        sys.exit(f"{server} did not start")
    return srv, int(m[1])


def wrk(port, seconds, path="/"):
    out = subprocess.run(["wrk", "-t1", "-c32", f"-d{seconds}s", "--latency",
                          f"http://127.0.0.1:{port}{path}"],
                         capture_output=True, text=True, check=True).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out)[1])
    m = re.search(r"99%\s+([\d.]+)(us|ms|s)", out)
    p99 = float(m[1]) * {"us": 1e-3, "ms": 1.0, "s": 1e3}[m[2]]
    return rps, p99


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


def one_round(server, mode):
    srv, port = start_server(server)
    try:
        wrk(port, 1)  # warm-up
        tr = attach(srv.pid, MODES[mode]) if MODES[mode] else None
        cpu0 = cpu_seconds(tr.pid) if tr else 0
        rps, p99 = wrk(port, SECONDS)
        cpu = (cpu_seconds(tr.pid) - cpu0) / SECONDS if tr else 0
        if tr:
            stop(tr)
        return rps, p99, cpu
    finally:
        srv.kill()
        srv.wait()


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


def table(server, rounds, modes):
    """The modes' medians on one server, as ratios to untraced."""
    results = {m: [] for m in modes}
    for r in range(rounds):
        order = list(modes)
        random.Random(r).shuffle(order)
        for mode in order:
            results[mode].append(one_round(server, mode))
    base_rps = statistics.median(x[0] for x in results["untraced"])
    base_p99 = statistics.median(x[1] for x in results["untraced"])
    print(f"{server}, wrk -t1 -c32, {SECONDS} s rounds, median of {rounds}:")
    print(f"  {'mode':10} {'req/s':>9} {'ratio':>6} {'spread':>13} {'p99 ms':>7} "
          f"{'ratio':>6} {'tracer CPU':>10}")
    for mode, xs in results.items():
        rps = statistics.median(x[0] for x in xs)
        p99 = statistics.median(x[1] for x in xs)
        cpu = statistics.median(x[2] for x in xs)
        lo, hi = min(x[0] for x in xs) / base_rps, max(x[0] for x in xs) / base_rps
        print(f"  {mode:10} {rps:9.0f} {rps / base_rps:5.2f}x {lo:5.2f}-{hi:4.2f}x "
              f"{p99:7.2f} {p99 / base_p99:5.2f}x {100 * cpu:9.1f}%")


def perf_round(server, hz):
    """One round with `perf record -e cpu-clock -F hz -a` (no BPF) on the host: what a
    CPU-clock sample costs the machine, sample mode's or not."""
    srv, port = start_server(server)
    try:
        wrk(port, 1)
        perf = subprocess.Popen(["perf", "record", "-q", "-e", "cpu-clock", "-F", str(hz), "-a",
                                 "-o", os.path.join(tempfile.gettempdir(), "at-bench-perf.data")],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(1)
        rps, _ = wrk(port, SECONDS)
        perf.send_signal(signal.SIGINT)
        perf.wait(timeout=60)
        return rps
    finally:
        srv.kill()
        srv.wait()


def sample_rates(rounds, server="tokio-http"):
    """Sample mode's cost against its rate, beside perf's own sampling at the same rates."""
    runs = {"untraced": lambda: one_round(server, "untraced")[0]}
    for hz in (97, 997, 4999):
        MODES[f"sample-{hz}"] = ["--mode", "sample", "--no-trace", "--sample-hz", str(hz)]
        runs[f"sample {hz} Hz"] = lambda hz=hz: one_round(server, f"sample-{hz}")[0]
        runs[f"perf record -F {hz}"] = lambda hz=hz: perf_round(server, hz)
    got = {m: [] for m in runs}
    for _ in range(rounds):
        for m in random.sample(list(runs), len(runs)):
            got[m].append(runs[m]())
    base = statistics.median(got["untraced"])
    print(f"{server}, wrk -t1 -c32, {SECONDS} s rounds, median of {rounds}:")
    for m, xs in got.items():
        print(f"  {m:20} {statistics.median(xs):9.0f} {statistics.median(xs) / base:5.3f}x  "
              + " ".join(f"{x / base:.2f}" for x in xs))


def main():
    if sys.argv[1:2] == ["rates"]:
        sample_rates(int(sys.argv[2]) if len(sys.argv) > 2 else 3)
        return
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    table("go-http", rounds, MODES)
    table("tokio-http", rounds, MODES)

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
            or tquiet):
        sys.exit(1)


if __name__ == "__main__":
    main()
