# SPDX-License-Identifier: MIT
"""make soak: two tracers attached for an hour, watched for leaks.

One traces the sample executor's healthy load with worker threads that come
and go (`--thread-churn`), every event through userspace (the default mode);
the other traces the tokio test program (build/tokio-app: about 1000
short-lived request tasks a second) in maps-only mode (`--no-trace`, the
production mode). Every minute it prints each tracer's resident memory, open
file descriptors, and the BPF programs, links and maps it holds (counted
from /proc/PID/fd, their ids from /proc/PID/fdinfo); at the end, each
tracer's counts against the target's own (polls, wakes, tasks), how each
resource moved from the first minute to the last, and whether any program
or link the tracers held is still loaded once they are gone. Exits 1 when a
count differs, a file descriptor, program or link was gained or lost, memory
grew by more than half, or something was left behind. Not in CI.

    sudo make soak                    # an hour (SOAK_S=3600)
    sudo make soak SOAK_S=600         # ten minutes
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
from tests.integration import harness  # noqa: E402

APP_LINE = re.compile(r"tokio-app: workers=(\d+) duration=([\d.]+) tasks=(\d+) polls=(\d+) "
                      r"wakes=(\d+)")
BPF_KINDS = {"anon_inode:bpf-prog": "progs", "anon_inode:bpf_link": "links",
             "anon_inode:bpf-link": "links", "anon_inode:bpf-map": "maps"}
# Memory may grow this much from the first minute to the end, and no more.
RSS_SLACK = 1.5


def resources(pid):
    """What one process holds now: rss (kB), fds, cpu (s), progs, links, maps,
    and the kernel's ids of the programs and links."""
    out = {"progs": 0, "links": 0, "maps": 0, "prog_ids": set(), "link_ids": set()}
    with open(f"/proc/{pid}/status") as f:
        out["rss"] = int(re.search(r"^VmRSS:\s+(\d+) kB", f.read(), re.M).group(1))
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
        out["cpu"] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    fds = os.listdir(f"/proc/{pid}/fd")
    out["fds"] = len(fds)
    for fd in fds:
        try:
            kind = BPF_KINDS.get(os.readlink(f"/proc/{pid}/fd/{fd}"))
            if not kind:
                continue
            out[kind] += 1
            if kind in ("progs", "links"):
                with open(f"/proc/{pid}/fdinfo/{fd}") as f:
                    m = re.search(r"^(prog|link)_id:\s+(\d+)", f.read(), re.M)
                if m:
                    out[kind[:-1] + "_ids"].add(int(m.group(2)))
        except OSError:
            pass  # closed meanwhile
    return out


def loaded_ids():
    """The ids of every BPF program and link loaded on the machine."""
    ids = {}
    for what in ("prog", "link"):
        r = subprocess.run(["bpftool", "-j", what, "show"], capture_output=True, text=True)
        ids[what] = {x["id"] for x in json.loads(r.stdout or "[]")} if r.returncode == 0 \
            else set()
    return ids


class Soak:
    """One target and the tracer attached to it."""

    def __init__(self, name, tmp):
        self.name = name
        self.tmp = tmp
        self.samples = []
        self.prog_ids, self.link_ids = set(), set()

    def start_tracer(self, pid, *args):
        self.err_path = os.path.join(self.tmp, f"{self.name}.err")
        self.alerts = os.path.join(self.tmp, f"{self.name}.alerts")
        self.err = open(self.err_path, "w")
        self.tracer = subprocess.Popen([harness.TRACER, "-p", str(pid), "-q", "--summary",
                                        "json", "--alerts", self.alerts, *args],
                                       stdout=subprocess.PIPE, stderr=self.err, text=True)
        if not harness.wait_for(lambda: "tracing pid" in harness.read(self.err_path), 60):
            raise RuntimeError(f"{self.name}: the tracer did not attach:\n"
                               f"{harness.read(self.err_path)}")

    def sample(self):
        if self.tracer.poll() is not None:
            return None
        try:
            r = resources(self.tracer.pid)
        except (OSError, AttributeError):
            return None
        self.prog_ids |= r.pop("prog_ids")
        self.link_ids |= r.pop("link_ids")
        self.samples.append(r)
        return r

    def finish(self, timeout):
        out, _ = self.tracer.communicate(timeout=timeout)
        self.err.close()
        self.report = json.loads(out) if out.strip() else {}
        return self.tracer.returncode


class Executor(Soak):
    def start(self, seconds, churn, rate):
        self.out_path = os.path.join(self.tmp, "executor.out")
        with open(self.out_path, "w") as out:
            self.target = subprocess.Popen(
                [harness.EXECUTOR, "--scenario", "healthy", "--duration", str(seconds),
                 "--workers", "2", "--rate", str(rate), "--thread-churn", str(churn),
                 "--wait-traced", "60"], stdout=out, stderr=subprocess.DEVNULL)
        time.sleep(0.3)
        self.start_tracer(self.target.pid)  # every event through userspace

    def counts(self, timeout):
        self.target.wait(timeout=timeout)
        c = harness.parse_executor(harness.read(self.out_path))
        threads = len(re.findall(r"^sample-executor: thread ", harness.read(self.out_path),
                                 re.M))
        return {"polls": c.get("polls"), "wakes": c.get("wakes"), "tasks": c.get("tasks"),
                "threads": threads}


class Tokio(Soak):
    def start(self, seconds, rate):
        self.target = subprocess.Popen(
            [os.path.join(harness.BUILD, "tokio-app"), "--wait-stdin", "--duration",
             str(seconds), "--rate", str(rate), "--workers", "2"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            text=True)
        time.sleep(0.3)
        self.start_tracer(self.target.pid, "--no-trace")
        self.target.stdin.write("go\n")
        self.target.stdin.flush()

    def counts(self, timeout):
        out, _ = self.target.communicate(timeout=timeout)
        m = APP_LINE.search(out)
        if not m:
            return {}
        return {"polls": int(m[4]), "wakes": int(m[5]), "tasks": int(m[3])}


def row(minute, soak, r):
    return (f"{minute:6.1f}  {soak.name:<8} {r['rss'] / 1024:8.1f} {r['fds']:5d} "
            f"{r['progs']:6d} {r['links']:6d} {r['maps']:5d} {r['cpu']:9.1f}")


def judge(soak, own):
    """The end: counts against the target's, resources first to last; the problems."""
    problems = []
    counts = soak.report.get("counts", {})
    traced = {"polls": counts.get("polls"), "wakes": counts.get("wakes"),
              "tasks": counts.get("tasks_spawned")}
    print(f"{soak.name}: the target counted {own}; the tracer "
          f"{traced}, {soak.report.get('events', {}).get('received')} events received, "
          f"{soak.report.get('events', {}).get('dropped')} dropped, "
          f"{sum(soak.report.get('alerts', {}).get('episodes', {}).values())} alert episodes "
          f"{soak.report.get('alerts', {}).get('episodes')}")
    for k, v in traced.items():
        if v != own.get(k):
            problems.append(f"{soak.name}: {k}: the tracer counted {v}, the target {own.get(k)}")
    if len(soak.samples) < 2:
        problems.append(f"{soak.name}: fewer than two samples")
        return problems
    first, last = soak.samples[0], soak.samples[-1]
    print(f"{soak.name}: start -> end: rss {first['rss'] / 1024:.1f} -> "
          f"{last['rss'] / 1024:.1f} MB (peak {max(s['rss'] for s in soak.samples) / 1024:.1f})"
          f", fds {first['fds']} -> {last['fds']}, progs {first['progs']} -> "
          f"{last['progs']}, links {first['links']} -> {last['links']}, maps "
          f"{first['maps']} -> {last['maps']}; cpu {last['cpu']:.1f} s")
    for k in ("fds", "progs", "links", "maps"):
        if {s[k] for s in soak.samples} != {first[k]}:
            problems.append(f"{soak.name}: {k} moved: "
                            f"{[s[k] for s in soak.samples]}")
    # from the first minute: the tables are sized at attach, but their pages
    # are touched as they fill
    settled = soak.samples[1]
    if last["rss"] > settled["rss"] * RSS_SLACK:
        problems.append(f"{soak.name}: rss grew from {settled['rss']} kB at the first "
                        f"minute to {last['rss']} kB")
    return problems


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=float(os.environ.get("SOAK_S", 3600)))
    ap.add_argument("--every", type=float, default=float(os.environ.get("SOAK_EVERY", 60)),
                    help="seconds between samples (default 60)")
    ap.add_argument("--churn", type=float, default=0.01,
                    help="the executor's --thread-churn, seconds (default 0.01)")
    ap.add_argument("--rate", type=int, default=2000,
                    help="the executor's requests per second (default 2000)")
    ap.add_argument("--tokio-rate", type=int, default=1000,
                    help="tokio-app's requests per second (default 1000)")
    args = ap.parse_args()
    harness.require_root()

    print(f"soak: {args.seconds:.0f} s; sample-executor healthy --rate {args.rate} "
          f"--thread-churn {args.churn} (full event stream), tokio-app --rate "
          f"{args.tokio_rate} (--no-trace)", flush=True)
    with tempfile.TemporaryDirectory(prefix="asynctraced-soak-") as tmp:
        ex, tk = Executor("executor", tmp), Tokio("tokio", tmp)
        try:
            ex.start(args.seconds, args.churn, args.rate)
            tk.start(args.seconds, args.tokio_rate)
            start = time.monotonic()
            # every minute from the start, and once more just before the targets stop
            due = [i * args.every for i in range(int((args.seconds - 3) // args.every) + 1)]
            due.append(max(args.seconds - 3, 0))
            print("minute  tracer     rss MB   fds  progs  links  maps     cpu s", flush=True)
            for when in due:
                time.sleep(max(0, start + when - time.monotonic()))
                for soak in (ex, tk):
                    r = soak.sample()
                    if r:
                        print(row((time.monotonic() - start) / 60, soak, r), flush=True)
            problems = []
            for soak in (ex, tk):
                own = soak.counts(timeout=args.seconds + 300)
                rc = soak.finish(timeout=300)
                if rc:
                    problems.append(f"{soak.name}: the tracer exited {rc}:\n"
                                    f"{harness.read(soak.err_path)[-2000:]}")
                problems += judge(soak, own)
                if "threads" in own:
                    print(f"{soak.name}: {own['threads']} worker threads came and went")
            time.sleep(1)
            left = loaded_ids()
            behind = [f"prog {i}" for i in (ex.prog_ids | tk.prog_ids) & left["prog"]]
            behind += [f"link {i}" for i in (ex.link_ids | tk.link_ids) & left["link"]]
            print(f"after: {len(ex.prog_ids | tk.prog_ids)} programs and "
                  f"{len(ex.link_ids | tk.link_ids)} links held; "
                  f"{len(behind)} still loaded", flush=True)
            if behind:
                problems.append("left loaded: " + ", ".join(behind))
        finally:
            for soak in (ex, tk):
                for p in (getattr(soak, "tracer", None), getattr(soak, "target", None)):
                    if p and p.poll() is None:
                        p.kill()
                        p.wait()
    for p in problems:
        print(f"PROBLEM {p}")
    print("soak: " + ("ok" if not problems else f"{len(problems)} problems"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
