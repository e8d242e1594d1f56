#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""What tracing costs, against the physical floor, side by side in one run.

Two targets at their highest poll rate: the sample executor's `spin`
scenario (--rate max) and tokio-spin (a real tokio runtime). Each runs five
ways, interleaved over several rounds, each round in another order (the
machine is shared and noisy; traces and captures are written to /dev/shm,
so that one run's disk writeback does not land in the next):

  untraced   the target alone
  floor      asynctraced --empty-programs: empty BPF programs on exactly the
             same probes and hooks; what is left is the probe traps themselves
  maps       asynctraced --no-trace: aggregates in BPF maps, no event traffic
  full       asynctraced -o FILE.pftrace: every event, written as protobuf
             live (model, detectors and writer run as the events come)
  record     asynctraced record -o FILE.atcap: every event, copied to a
             capture (the full trace at its cheapest; convert it later)
  stacks     maps with --stacks: the CPU-clock samples of each traced thread, which
             record a stack only in a poll that has run long (spin has none;
             tokio-app, below, a 20 ms poll every 250 ms)

tokio-app, the tokio test program (requests, a CPU-bound long poll every
250 ms, a blocking one, a starved worker), runs the same ways: what
--stacks costs with long polls to sample (spin: with none).

tokio's everyday paths, from tests/tokio/src/bin/tokio-paths.rs: tokio-yield
(a yield_now() loop: the deferred wake), tokio-mpsc (ping-pong over bounded
channels), tokio-timer (1 ms sleeps), tokio-notify (ping-pong over Notify),
tokio-join (spawn and await a JoinHandle), tokio-all (all of them at once),
and tokio-all-lto (the same built with fat LTO), with the same five modes.

The Go test program (tests/go) runs two of its scenarios the same ways:
go-pingpong (two goroutines trading over unbuffered channels: every round
trip parks and wakes each) and go-timers (goroutines sleeping 1 ms); for
them polls/s is the program's own work done (round trips, ticks) a second.

A last target, tokio-spin built with CET (tokio-spin-cet: every function
starts with endbr64, which the kernel single-steps under a uprobe), compares
the probes placed past it (the default, src/targets/placement.c) with probes at
the function entries (--probe-at entry), for the floor and maps-only.

Per mode (the median of the rounds): polls per second, the target's own CPU
time per poll (user + system: the traps and BPF programs run in the target's
context), the throughput against untraced, the tracer's CPU and peak memory,
its events per second and drops. Paired by round (each round's runs against
that round's untraced and floor runs, then the median over the rounds, and
the lowest and highest round): what a mode adds per poll over untraced, and
that as a multiple of what the floor adds.

Then maps-only at about 100k polls/s: the healthy scenario at --rate max
(requests with timers and pipe I/O, about 100-150k polls/s when saturated:
its throughput against untraced), and spin held at 100k polls/s (the rate
is kept: what it costs is target CPU).

Then the sustained run: spin held at the poll rate that makes the given
event rate (default 250k events/s) for the given time (default 60 s) in
full-trace mode, the trace streamed to /dev/null; it reports drops and the
tracer's memory at the start and at the end.

A benchmark: it prints numbers and ratios and asserts nothing
(docs/performance.md records them).

Usage: sudo python3 tests/bench/overhead.py [--seconds S] [--rounds N]
                                             [--sustain-seconds S] [--sustain-rate EV/S]
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
MODES = ["untraced", "floor", "maps", "full", "record", "stacks"]
# tokio built with CET (every function starts with endbr64, single-stepped
# under a uprobe): the probes past it (the default) against at the entry.
CET_MODES = ["untraced", "floor", "maps", "floor@entry", "maps@entry"]


def read(path):
    with open(path, errors="replace") as f:
        return f.read()


def wait_usage(proc):
    """(exit code, CPU seconds, peak RSS MB) of a child."""
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


PATHS = {"tokio-yield": "yield", "tokio-mpsc": "mpsc", "tokio-timer": "timer",
         "tokio-notify": "notify", "tokio-join": "join", "tokio-all": "all",
         "tokio-all-lto": "all"}


def start_target(target, seconds, traced, rate="max"):
    if target == "healthy":
        args = [os.path.join(BUILD, "sample-executor"), "--scenario", "healthy", "--rate", "max",
                "--duration", str(seconds), "--workers", "2"]
        args += ["--wait-traced", "30"] if traced else []
        return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                text=True)
    if target == "tokio-app":
        args = [os.path.join(BUILD, "tokio-app"), "--duration", str(seconds), "--workers", "2"]
        args += ["--wait-stdin"] if traced else []
        return subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, text=True)
    if target.startswith("go-"):
        args = [os.path.join(BUILD, "go-app"), "-scenario", target[3:], "-duration",
                f"{seconds}s", "-procs", "2"]
        args += ["-wait-stdin"] if traced else []
        return subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, text=True)
    if target in PATHS:
        binary = "tokio-paths-lto" if target.endswith("-lto") else "tokio-paths"
        args = [os.path.join(BUILD, binary), PATHS[target], "--duration", str(seconds),
                "--workers", "2"]
        args += ["--wait-stdin"] if traced else []
        return subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, text=True)
    if target.startswith("tokio"):
        binary = "tokio-spin-cet" if target == "tokio-cet" else "tokio-spin"
        args = [os.path.join(BUILD, binary), "--duration", str(seconds), "--workers", "2"]
        args += ["--wait-stdin"] if traced else []
        return subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, text=True)
    args = [os.path.join(BUILD, "sample-executor"), "--scenario", "spin", "--rate", str(rate),
            "--duration", str(seconds), "--workers", "2"]
    args += ["--wait-traced", "30"] if traced else []
    return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)


def tracer_args(mode, pid, tmp):
    args = [TRACER, "-p", str(pid), "-q", "--thrash-rate", "0"]
    mode, _, at = mode.partition("@")
    if at:
        args += ["--probe-at", at]
    if mode == "floor":
        return args + ["--empty-programs"]
    if mode == "maps":
        return args + ["--no-trace"]
    if mode == "stacks":
        return args + ["--no-trace", "--stacks"]
    if mode == "record":
        return [TRACER, "record"] + args[1:] + ["-o", os.path.join(tmp, "capture.atcap")]
    return args + ["-o", os.path.join(tmp, "trace.pftrace")]


def wait_attached(tr, err_path):
    """Waits until the tracer says it traces; returns the CPU seconds it took
    to get there (loading and verifying the programs), which the tracer's CPU
    while tracing leaves out."""
    while "Ctrl-C to stop" not in read(err_path):
        if tr.poll() is not None:
            raise SystemExit(read(err_path))
        time.sleep(0.02)
    stat = read(f"/proc/{tr.pid}/stat").split(")")[-1].split()
    return (int(stat[11]) + int(stat[12])) / os.sysconf("SC_CLK_TCK")


def scratch():
    """Where traces and captures go: memory, where the system has it, so that
    writing back one run's file to disk does not run in the next one."""
    return tempfile.TemporaryDirectory(dir="/dev/shm" if os.path.isdir("/dev/shm") else None)


def rotated(modes, i):
    """Round i runs the modes in another order: no mode always runs right
    after the same one (later runs in a round were measured slower)."""
    return modes[i % len(modes):] + modes[:i % len(modes)]


def run(target, mode, seconds, tmp, rate="max", tracer_out=None, watch_rss=False):
    ex = start_target(target, seconds, mode != "untraced", rate)
    tr, err_path, rss_seen = None, os.path.join(tmp, "tracer.err"), []
    if mode != "untraced":
        args = tracer_args(mode, ex.pid, tmp)
        if tracer_out:
            # asynctraced writes only regular files: a device gets the trace on stdout
            args = args[:-2] + ["-o", "-", "--format", "perfetto"]
        with open(err_path, "w") as err, open(tracer_out or os.devnull, "wb") as out:
            tr = subprocess.Popen(args, stderr=err, stdout=out if tracer_out else None)
        load_cpu = wait_attached(tr, err_path)
        if target.startswith(("tokio", "go-")):
            ex.stdin.write("go\n")
            ex.stdin.flush()
        if watch_rss:
            # (not ex.poll(): that would reap the target before wait4 reads its usage)
            while read(f"/proc/{ex.pid}/stat").split(")")[-1].split()[0] != "Z":
                m = re.search(r"VmRSS:\s+(\d+)", read(f"/proc/{tr.pid}/status"))
                rss_seen.append((time.monotonic(), int(m.group(1)) / 1024))
                time.sleep(1)
    out = ex.stdout.read()
    _, ex_cpu, _ = wait_usage(ex)
    # Go: the program's units of work (channel round trips, ticks), not its run slices
    polls = int(re.search(r"(?:polls|ops)=(\d+)", out).group(1))
    m = re.search(r"polls_per_s=(\d+)", out)
    pps = float(m.group(1)) if m else polls / float(re.search(r"duration=([\d.]+)", out).group(1))
    r = dict(polls_s=pps, cpu_poll=1e9 * ex_cpu / max(polls, 1), cpu_pct=100 * ex_cpu / seconds,
             tracer_cpu=0.0, rss=0.0,
             events_s=0.0, dropped=0, rss_seen=rss_seen)
    if tr:
        _, tr_cpu, rss = wait_usage(tr)
        err = read(err_path)
        if mode == "record":
            m = re.search(r"recorded pid \d+ \(.*\) for ([\d.]+) s, .*?: (\d+) records, "
                          r".*; (\d+) dropped", err)
            secs, events, dropped = float(m.group(1)), int(m.group(2)), int(m.group(3))
        else:
            secs = float(re.search(r"summary for pid \d+ \(.*\): ([\d.]+) s", err).group(1))
            events = int(re.search(r"events\s+(\d+)", err).group(1))
            dropped = int(re.search(r"dropped\s+(\d+)", err).group(1))
        r.update(tracer_cpu=100 * (tr_cpu - load_cpu) / secs, rss=rss, events_s=events / secs,
                 dropped=dropped)
    for f in os.listdir(tmp):
        os.unlink(os.path.join(tmp, f))
    return r


def compare(targets, seconds, rounds, only=None):
    print(f"# {seconds:g} s per run, 2 workers, {rounds} interleaved rounds; CPU/poll is the "
          f"target's user+system time per poll (median); added and x floor are the medians "
          f"of each round's own, x floor's lowest and highest after it")
    print(f"{'target':13} {'mode':11} {'polls/s':>9} {'vs untraced':>11} {'CPU/poll':>9} "
          f"{'added':>8} {'x floor':>7} {'(rounds)':>11} {'tracer CPU':>10} {'peak RSS':>8} "
          f"{'events/s':>9} {'dropped':>7}")
    with scratch() as tmp:
        for target in targets:
            modes = CET_MODES if target == "tokio-cet" else (MODES if not only else only)
            runs = {m: [] for m in modes}
            for i in range(rounds):
                for mode in rotated(modes, i):
                    runs[mode].append(run(target, mode, seconds, tmp))
            med = {m: {k: statistics.median(r[k] for r in runs[m])
                       for k in ("polls_s", "cpu_poll", "tracer_cpu", "rss", "events_s")}
                   for m in modes}
            for m in modes:
                med[m]["dropped"] = max(r["dropped"] for r in runs[m])
            # Paired by round: what a mode adds over that round's untraced run,
            # and that over what the round's floor adds. The machine drifts
            # between rounds; within one it drifts less.
            added = {m: [runs[m][i]["cpu_poll"] - runs["untraced"][i]["cpu_poll"]
                         for i in range(rounds)] for m in modes}
            base = med["untraced"]
            for m in modes:
                r = med[m]
                times = spread = ""
                if m != "untraced":
                    # a round whose floor added nothing has no ratio: say so
                    ratios = [a / f for a, f in zip(added[m], added["floor"]) if f > 0]
                    if ratios:
                        times = f"{statistics.median(ratios):6.2f}x"
                        spread = f"{min(ratios):.2f}-{max(ratios):.2f}"
                    if len(ratios) < rounds:
                        spread += f" ({rounds - len(ratios)} no floor)"
                print(f"{target:13} {m:11} {r['polls_s']:9.0f} {r['polls_s'] / base['polls_s']:10.1%} "
                      f"{r['cpu_poll']:7.0f}ns {statistics.median(added[m]):6.0f}ns {times:>7} "
                      f"{spread:>11} {r['tracer_cpu']:9.1f}% {r['rss']:6.1f}MB "
                      f"{r['events_s']:9.0f} {r['dropped']:7d}", flush=True)


def at_100k(seconds, rounds):
    """Maps-only at about 100k polls/s: a saturated realistic load, and a held rate."""
    print(f"# about 100k polls/s, {seconds:g} s per run, median of {rounds} rounds")
    print(f"{'load':34} {'mode':9} {'polls/s':>9} {'vs untraced':>11} {'target CPU':>10}")
    with scratch() as tmp:
        for label, target, rate in (("healthy --rate max (saturated)", "healthy", "max"),
                                    ("spin --rate 100000 (held)", "spin", 100000)):
            modes = ["untraced", "floor", "maps"]
            runs = {m: [] for m in modes}
            for i in range(rounds):
                for m in rotated(modes, i):
                    runs[m].append(run(target, m, seconds, tmp, rate=rate))
            base = statistics.median(r["polls_s"] for r in runs["untraced"])
            for m, rs in runs.items():
                pps = statistics.median(r["polls_s"] for r in rs)
                cpu = statistics.median(r["cpu_pct"] for r in rs)
                print(f"{label:34} {m:9} {pps:9.0f} {pps / base:10.1%} {cpu:9.0f}%", flush=True)


def sustain(seconds, event_rate):
    """spin at event_rate (a poll is a poll record and a wake record) in full-trace mode."""
    rate = event_rate // 2
    with scratch() as tmp:
        r = run("spin", "full", seconds, tmp, rate=rate, tracer_out="/dev/null",
                watch_rss=True)
    seen = r["rss_seen"]
    first = [rss for t, rss in seen if t - seen[0][0] >= 5][:1] or [seen[0][1]]
    print(f"# sustained: spin --rate {rate} (polls/s) for {seconds:g} s, full trace "
          f"streamed as protobuf to /dev/null")
    print(f"polls/s {r['polls_s']:.0f}  events/s {r['events_s']:.0f}  dropped {r['dropped']}  "
          f"tracer CPU {r['tracer_cpu']:.1f}%  tracer RSS after 5 s {first[0]:.1f} MB, at the "
          f"end {seen[-1][1]:.1f} MB, peak {r['rss']:.1f} MB")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=4)
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--targets", default="spin,tokio-app,tokio,tokio-yield,tokio-mpsc,"
                    "tokio-timer,tokio-notify,tokio-join,tokio-all,tokio-all-lto,tokio-cet,"
                    "go-pingpong,go-timers")
    ap.add_argument("--sustain-seconds", type=float, default=60)
    ap.add_argument("--sustain-rate", type=int, default=250000)
    ap.add_argument("--no-100k", action="store_true")
    ap.add_argument("--modes", help="only these modes (comma-separated), e.g. "
                    "untraced,floor,maps,stacks")
    a = ap.parse_args()
    if a.rounds:
        compare(a.targets.split(","), a.seconds, a.rounds,
                a.modes.split(",") if a.modes else None)
    if a.rounds and not a.no_100k:
        at_100k(a.seconds, a.rounds)
    if a.sustain_seconds:
        sustain(a.sustain_seconds, a.sustain_rate)


if __name__ == "__main__":
    main()
