# SPDX-License-Identifier: MIT
"""Runs the sample executor under asynctraced and parses what came out."""
import bisect
import json
import os
import re
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field

from tests.integration import trace_check

BUILD = os.environ.get("BUILD", "build")
TRACER = os.path.join(BUILD, "asynctraced")
EXECUTOR = os.path.join(BUILD, "sample-executor")
# Threads the BPF side keeps state for at once in its slots (and as many
# again in a hash), from the header both sides share.
with open(os.path.join(os.path.dirname(__file__), "..", "..", "include", "asynctraced.h")) as _h:
    AT_MAX_THREADS = int(re.search(r"#define AT_MAX_THREADS (\d+)", _h.read()).group(1))

# What each scenario is built to show, and so the only alerts it may raise.
EXPECTED_ALERTS = {
    "healthy": set(),
    "noisy": {"long-poll"},
    "blocking": {"long-poll"},
    "starve": {"starvation"},
    "thrash": {"waker-thrash"},
    "fanout": set(),
    "lost": {"lost-waker"},
    "delay": {"scheduling-delay"},
}
# Detector settings every scenario runs with: the lost-waker default (10 s)
# is longer than a test run; and the culprits' long polls last 20 ms, so a
# 15 ms threshold keeps a shared VM's occasional 10 ms hiccup in an innocent
# poll from reading as a long poll.
DETECTOR_ARGS = ["--lost-waker", "1s", "--long-poll", "15ms"]

ALERT = re.compile(
    r"asynctraced: alert: long poll: task '(?P<name>[^']*)' #(?P<task>\d+) held worker "
    r"(?P<worker>-?\d+) \(tid (?P<tid>\d+), (?P<comm>[^)]*)\) for (?P<ms>[\d.]+) ms: "
    r"(?P<cause>[\w-]+) \(on-CPU (?P<oncpu>[\d.]+) ms, blocked (?P<blocked>[\d.]+) ms, "
    r"runnable (?P<runnable>[\d.]+) ms\)")
SUMMARY_LINE = re.compile(r"^  (\w+)\s+(\d+)")
EXECUTOR_LINE = re.compile(r"^sample-executor: (scenario=.*)$", re.M)


GO_APP_SRC = os.path.join(os.path.dirname(__file__), "..", "go", "cmd", "go-app")


def source_lines(path, tag):
    """KIND -> the line of path marked `// TAG: KIND`: where a test program waits, read
    from its source, not from a table."""
    lines = {}
    with open(path) as f:
        for n, text in enumerate(f, 1):
            m = re.search(rf"// {tag}: ([a-z0-9]+)$", text.rstrip())
            if m:
                lines[m.group(1)] = n
    return lines


def require_root():
    """Integration tests load BPF: without root they fail, they never skip."""
    if os.geteuid() != 0:
        raise AssertionError("integration tests need root to load BPF programs: "
                             "run `make test` as root, or `sudo make test`")


def parse_alerts(stderr):
    return [m.groupdict() for m in ALERT.finditer(stderr)]


def parse_summary(stderr):
    """The summary block: {'polls': 123, 'wakes': ..., 'dropped': 0, ...}."""
    out = {}
    lines = stderr.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("asynctraced: summary for pid"):
            for l in lines[i + 1:]:
                m = SUMMARY_LINE.match(l)
                if not m:
                    break
                out[m.group(1)] = int(m.group(2))
                moved = re.search(r"\((\d+) tasks moved\)", l)
                if moved:
                    out["stolen"] = int(moved.group(1))
                done = re.search(r"(\d+) completed", l)
                if done:
                    out["completed"] = int(done.group(1))
    return out


def parse_executor(stdout):
    """The executor's own counts from its exit line."""
    m = EXECUTOR_LINE.search(stdout)
    if not m:
        return {}
    counts = {}
    for kv in m.group(1).split():
        k, _, v = kv.partition("=")
        try:
            counts[k] = int(v)
        except ValueError:
            counts[k] = v
    return counts


@dataclass
class TracedRun:
    scenario: str
    executor_rc: int
    executor_stdout: str
    executor_stderr: str
    tracer_rc: int
    tracer_stdout: str
    tracer_stderr: str
    trace_path: str
    counts: dict = field(default_factory=dict)     # the executor's own
    summary: dict = field(default_factory=dict)    # the tracer's, from its text
    report: dict = field(default_factory=dict)     # --summary json
    alerts: list = field(default_factory=list)     # long-poll lines on stderr
    alert_log: list = field(default_factory=list)  # --alerts JSON lines
    _events: list = None

    @property
    def events(self):
        if self._events is None:
            self._events = trace_check.load(self.trace_path)
        return self._events

    def describe(self):
        return (f"\n--- executor (rc {self.executor_rc}):\n{self.executor_stdout}"
                f"{self.executor_stderr}\n--- tracer (rc {self.tracer_rc}):\n"
                f"{self.tracer_stderr}")


LONG_POLLS_LINE = re.compile(r"^sample-executor: long polls (\S+)=(\d+) longest=([\d.]+)ms$", re.M)


def executor_long_polls(stdout):
    """{task name: (long polls, the longest in ms)} the executor timed itself
    (--time-polls): what a shared machine stretched, or what a culprit did."""
    return {m.group(1): (int(m.group(2)), float(m.group(3)))
            for m in LONG_POLLS_LINE.finditer(stdout)}


def start_executor(scenario, duration, workers=2, extra=(), wait_traced=True, exe=None):
    args = [exe or EXECUTOR, "--scenario", scenario, "--duration", str(duration),
            "--workers", str(workers), *extra]
    if wait_traced:
        args += ["--wait-traced", "30"]
    return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def traced_run(scenario, duration=3, workers=2, executor_args=(), tracer_args=(),
               tmpdir=None, trace=True, exe=None):
    """Runs one scenario traced from its first poll to its exit, with the
    report as JSON and every alert in a JSON-lines file; trace=False traces
    in maps-only mode; exe: another build of the sample executor."""
    tmpdir = tmpdir or tempfile.mkdtemp(prefix="asynctraced-")
    trace_path = os.path.join(tmpdir, f"{scenario}.json")
    alerts_path = os.path.join(tmpdir, f"{scenario}.alerts")
    ex = start_executor(scenario, duration, workers, executor_args, exe=exe)
    args = [TRACER, "-p", str(ex.pid), "--summary", "json", "--alerts", alerts_path,
            *DETECTOR_ARGS, *tracer_args]
    args += ["-o", trace_path] if trace else ["--no-trace"]
    tr = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        ex_out, ex_err = ex.communicate(timeout=duration + 60)
        tr_out, tr_err = tr.communicate(timeout=60)
    finally:
        reap(ex, tr)
    run = TracedRun(scenario, ex.returncode, ex_out, ex_err, tr.returncode, tr_out, tr_err,
                    trace_path)
    run.counts = parse_executor(ex_out)
    return read_outputs(run, alerts_path)


def traced_gated_run(name, argv, duration, tracer_args, tmpdir):
    """Starts argv (a program that waits for a line on stdin before it works),
    attaches the tracer (-p, --summary json, then tracer_args), lets it go
    once attached and runs it to its exit: the TracedRun, its trace at
    tmpdir/trace.json when tracer_args write one, and whether it was
    attached in time (run.attached)."""
    trace_path = os.path.join(tmpdir, "trace.json")
    err_path = os.path.join(tmpdir, "tracer.err")
    ex = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True)
    with open(err_path, "w") as err:
        tr = subprocess.Popen([TRACER, "-p", str(ex.pid), "--summary", "json", *tracer_args],
                              stdout=subprocess.PIPE, stderr=err, text=True)
    try:
        attached = wait_for(lambda: "tracing pid" in read(err_path), 30)
        ex.stdin.write("go\n")
        ex.stdin.flush()
        ex_out, ex_err = ex.communicate(timeout=duration + 60)
        tr_out, _ = tr.communicate(timeout=60)
    finally:
        reap(ex, tr)
    run = TracedRun(name, ex.returncode, ex_out, ex_err, tr.returncode, tr_out, read(err_path),
                    trace_path)
    run.attached = attached
    return run


def read_outputs(run, alerts_path):
    """Fills in what the tracer said: summary, alert lines, report, alert log."""
    run.summary = parse_summary(run.tracer_stderr)
    run.alerts = parse_alerts(run.tracer_stderr)
    try:
        run.report = json.loads(run.tracer_stdout)
    except ValueError:
        run.report = {}
    if os.path.exists(alerts_path):
        with open(alerts_path) as f:
            run.alert_log = [json.loads(line) for line in f if line.strip()]
    return run


def polls(run):
    """The poll slices of a trace."""
    return [e for e in run.events if e.get("ph") == "X" and e.get("cat") == "poll"]


def check_wake_arrows(test, run, at_least):
    """Every wake arrow ends on a poll of the task it woke, after the wake;
    a wake made from inside a poll sits inside that poll's slice on the same
    thread. Returns how many arrows start in a task's poll."""
    slices = {}
    for p in polls(run):
        slices.setdefault(p["tid"], []).append((p["ts"], p["ts"] + p["dur"], p["args"]["task"]))
    for s in slices.values():
        s.sort()
    begins = {tid: [b for b, _, _ in s] for tid, s in slices.items()}
    out = {e["bind_id"]: e for e in run.events if e.get("flow_out")
           and e.get("cat") in ("wake", "spawn")}
    into = {e["bind_id"]: e for e in polls(run) if e.get("flow_in")}
    test.assertGreater(len(out), at_least)
    test.assertEqual(set(out), set(into))
    from_tasks = 0
    for fid, w in out.items():
        test.assertEqual(into[fid]["args"]["task"], w["args"]["task"])
        test.assertLess(w["ts"], into[fid]["ts"])
        waker = w["args"].get("waker_task") or w["args"].get("parent")
        if not waker or w["tid"] not in slices:
            continue
        # the slices that hold it: the last to begin before it, and any
        # earlier one still open (a thread's polls do not overlap)
        s = slices[w["tid"]]
        i = bisect.bisect_right(begins[w["tid"]], w["ts"])
        inside = [t for (b, e, t) in s[max(0, i - 2):i] if b <= w["ts"] <= e]
        test.assertEqual(inside, [waker], f"wake {w} not inside a poll of task {waker}")
        from_tasks += 1
    return from_tasks


def check_every_event_accounted(test, run):
    """What the product guarantees when the ring buffer overflows (a busy
    program, a full trace, a 2-CPU host): every event either arrived or is
    counted as dropped, kind by kind, against the maps' own counts, which
    are exact whatever the ring lost; and a drop is said. Returns how many
    were dropped."""
    ev, counts = run.report["events"], run.report["counts"]
    got, lost = ev["by_kind"], ev["dropped_by_kind"]
    for kind, count in (("poll", "polls"), ("wake", "wakes"), ("spawn", "tasks_spawned")):
        test.assertEqual(got[kind] + lost[kind], counts[count], f"{kind}: {run.describe()}")
    test.assertEqual(ev["dropped"], sum(lost.values()), run.describe())
    if ev["dropped"]:
        test.assertRegex(run.tracer_stderr, rf"dropped +{ev['dropped']} .*ring buffer was full")
    return ev["dropped"]


def begun(run):
    """The kinds of alert episodes that began, from the JSON lines."""
    return {a["kind"] for a in run.alert_log if a["state"] == "begin"}


def read(path):
    with open(path) as f:
        return f.read()


def run_tracer(*args, timeout=60, **kw):
    return subprocess.run([TRACER, *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, **kw)


def wait_for(pred, timeout=10.0, step=0.05):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(step)
    return False


def reap(*procs):
    """After a test's processes, whatever happened: those still running killed, all waited
    for (their pipes drained)."""
    for p in procs:
        if p.poll() is None:
            p.kill()
        p.communicate()


def kill(p, sig=signal.SIGKILL):
    if p.poll() is None:
        p.send_signal(sig)
    return p.wait(timeout=30)


def wait_line(p, pattern, timeout=30.0, stream="stderr"):
    """Waits until p's stream (a pipe nothing has read yet) has given a line
    that pattern (a regex) matches: the match, or None when the stream ended
    or timeout seconds passed first. Reads the pipe itself, a byte at a time,
    so that everything after that line is left to communicate(); the lines
    up to it are not."""
    import select
    fd = getattr(p, stream).fileno()
    end = time.monotonic() + timeout
    rx = re.compile(pattern)
    line = b""
    while True:
        left = end - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            return None
        c = os.read(fd, 1)
        if not c:
            return None
        if c != b"\n":
            line += c
            continue
        m = rx.search(line.decode(errors="replace"))
        if m:
            return m
        line = b""
