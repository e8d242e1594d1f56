#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Sample mode (--mode sample, issue 30): no uprobe at all. The running
goroutine is read from Go's own state (g from the thread pointer, m.curg,
g.trackingSeq, p.schedtick) by a CPU-clock sample of each of its threads and at
each switch-out of a followed thread. Checked on the Go test program against what
it does (its CPU hog burns 20 ms every 250 ms, its blocking call sleeps
20 ms in a raw syscall) and against probe mode on the same program. Needs
root."""
import collections
import json
import os
import subprocess
import re
import tempfile
import unittest

from tests.integration import harness, pftrace_check
from tests.integration.test_go import begins, traced_go_run
from tests.integration.test_record import PROTO
from tests.integration.test_tokio import traced_tokio_run
from tests.integration.test_tokio_matrix import builds as tokio_builds

SAMPLE = ["--mode", "sample"]


def long_polls(run, name):
    """How many long polls of the goroutine called name the alerts counted."""
    ends = [a for a in run.alert_log if a["kind"] == "long-poll" and a["state"] == "end"
            and a["task"]["name"] == name]
    return sum(a["count"] for a in ends)


def bpf_held(pid):
    """The BPF links and programs process pid holds, as the kernel says
    (/proc/PID/fdinfo: link_type, prog_type; 2 is BPF_PROG_TYPE_KPROBE, which
    uprobes are)."""
    held = []
    for fd in os.listdir(f"/proc/{pid}/fdinfo"):
        try:
            with open(f"/proc/{pid}/fdinfo/{fd}") as f:
                for line in f:
                    key, _, value = line.partition(":")
                    if key in ("link_type", "prog_type"):
                        held.append(f"{key}={value.strip()}")
        except OSError:
            pass
    return held


class GoSampled(unittest.TestCase):
    """Every scenario at once, sampled: the CPU hog and the blocking call, and
    nothing else, each named with its cause, measured by samples."""

    @classmethod
    def setUpClass(cls):
        harness.require_root()
        cls.run_ = traced_go_run("all", duration=3, tracer_args=SAMPLE)

    def test_the_hog_and_the_blocking_call_and_nothing_else(self):
        run = self.run_
        self.assertEqual((run.executor_rc, run.tracer_rc), (0, 0), run.describe())
        self.assertIn("sample mode, no probe", run.tracer_stderr)
        got = {a["task"]["name"]: a["cause"] for a in begins(run)}
        self.assertEqual(got, {"main.burnCPU": "cpu-bound", "main.blockInSyscall": "blocked"},
                         run.describe())
        self.assertEqual(harness.begun(run), {"long-poll"}, run.describe())
        for a in run.alert_log:
            self.assertEqual(a["measured_by"], "samples", a)
            self.assertEqual(a["sample_period_ns"], 1_000_000_000 // 997, a)
        blocked = [a for a in begins(run) if a["cause"] == "blocked"][0]
        self.assertGreater(blocked["blocked_ns"], 8_000_000, blocked)
        self.assertIn("for at least ", blocked["message"])

    def test_the_report_says_what_it_cannot_see(self):
        r = self.run_.report
        self.assertEqual(r["measured_by"], "samples")
        self.assertEqual(r["sample_hz"], 997)
        for unseen in ("wakes", "steals", "tasks_spawned", "parks"):
            self.assertIsNone(r["counts"][unseen], unseen)
        self.assertIn("wakes", r["unseen"])
        self.assertGreater(r["counts"]["polls"], 0)
        self.assertIn("mode     sample, 997 Hz of each thread's CPU time: no probe; not seen:",
                      self.run_.tracer_stderr)

    def test_its_runs_in_the_trace(self):
        """The runs the samples saw are poll slices, each of one goroutine, on
        the thread that ran it; the hog's are there, 8 ms and more."""
        hog = [e for e in harness.polls(self.run_) if e["name"] == "main.burnCPU"]
        self.assertTrue(any(e["dur"] >= 8000 for e in hog), hog[:5])


class AgreesWithProbes(unittest.TestCase):
    """The same CPU hog in both modes: every 20 ms burn of it a long poll (one,
    or two where Go's sysmon cut it at 10 ms), sampled as probed; and no
    probe at all in sample mode (the kernel's fdinfo of the tracer's
    descriptors), where probe mode has them."""

    def test_every_burn_in_both_modes(self):
        harness.require_root()
        for mode in ([], SAMPLE):
            with self.subTest(mode=mode or "probes"):
                run = traced_go_run("cpu", duration=3, trace=False, tracer_args=mode)
                self.assertEqual((run.executor_rc, run.tracer_rc), (0, 0), run.describe())
                burns, seen = run.counts["burns"], long_polls(run, "main.burnCPU")
                # the last burn may be cut short by the program's exit
                self.assertGreaterEqual(seen, burns - 1, run.describe())
                self.assertLessEqual(seen, 2 * burns, run.describe())
                self.assertEqual({a["task"]["name"] for a in begins(run)}, {"main.burnCPU"})

    def test_no_uprobe_in_sample_mode(self):
        harness.require_root()
        held = {}
        for name, mode in (("probes", []), ("sample", SAMPLE)):
            app = subprocess.Popen([os.path.join(harness.BUILD, "go-app"), "-scenario", "cpu",
                                    "-duration", "4s"], stdout=subprocess.PIPE, text=True)
            tr = subprocess.Popen([harness.TRACER, "-p", str(app.pid), "--no-trace", *mode], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                  text=True)
            try:
                self.assertTrue(harness.wait_line(tr, "tracing pid", timeout=30))
                held[name] = bpf_held(tr.pid)
                threads = len(os.listdir(f"/proc/{app.pid}/task"))
            finally:
                app.communicate(timeout=30)
                tr.communicate(timeout=30)
        uprobes = ("link_type=uprobe_multi", "prog_type=2")
        self.assertTrue(set(held["probes"]) & set(uprobes), held)
        self.assertFalse(set(held["sample"]) & set(uprobes), held)
        # its CPU-clock samples: a perf link for each thread it had when attached
        # (those it starts later inherit their creator's), none for a CPU
        self.assertGreaterEqual(held["sample"].count("link_type=perf"), 2, held)
        self.assertLessEqual(held["sample"].count("link_type=perf"), threads, held)


class QuietSampled(unittest.TestCase):
    """A busy program doing nothing wrong (channels, timers, fan-out): sampled,
    not one alert."""

    def test_nothing_raised(self):
        harness.require_root()
        for scenario in ("pingpong", "timers", "fanout"):
            with self.subTest(scenario=scenario):
                run = traced_go_run(scenario, duration=2, trace=False, tracer_args=SAMPLE)
                self.assertEqual((run.executor_rc, run.tracer_rc), (0, 0), run.describe())
                self.assertEqual(run.alert_log, [], run.describe())


def sampled_executor(scenario, duration=4, extra=()):
    """The sample executor (no --wait-traced: no probe is attached to wait
    for) traced in sample mode from shortly after its start to its exit:
    (executor rc, stdout), (tracer rc, stderr), its alerts, its report. The
    executor times its own polls (--time-polls), a third under the threshold."""
    tmp = tempfile.mkdtemp(prefix="at-sampled-")
    alerts = os.path.join(tmp, "alerts.jsonl")
    ex = harness.start_executor(scenario, duration, wait_traced=False,
                                extra=["--time-polls", "0.010", *extra])
    tr = subprocess.Popen([harness.TRACER, "-p", str(ex.pid), *SAMPLE, "--no-trace",
                           "--summary", "json", "--alerts", alerts, *harness.DETECTOR_ARGS],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        ex_out, _ = ex.communicate(timeout=duration + 60)
        tr_out, tr_err = tr.communicate(timeout=60)
    finally:
        harness.reap(ex, tr)
    with open(alerts) as f:
        log = [json.loads(line) for line in f if line.strip()]
    return (ex.returncode, ex_out), (tr.returncode, tr_err), log, json.loads(tr_out or "{}")


class ExecutorSampled(unittest.TestCase):
    """The sample executor keeps asynctrace_current (docs/usdt-abi.md): its
    noisy task's 20 ms polls and its blocking task's 20 ms sleeps found with
    no probe, each named and with its cause; a healthy run raises nothing."""

    def check(self, scenario, name, cause):
        (erc, eout), (trc, terr), log, report = sampled_executor(scenario)
        ctx = f"{eout}\n{terr}"
        self.assertEqual((erc, trc), (0, 0), ctx)
        self.assertIn("asynctrace_current read", terr)
        got = {(a["task"]["name"], a["cause"]) for a in log
               if a["kind"] == "long-poll" and a["state"] == "begin"}
        self.assertIn((name, cause), got, ctx)
        self.assertIn(name, harness.executor_long_polls(eout), ctx)
        # another task only where the executor timed a poll of it that long
        timed = harness.executor_long_polls(eout)
        self.assertTrue(all(n == name or n in timed for n, _ in got), ctx)
        self.assertTrue(all(a["measured_by"] == "samples" for a in log), log)
        self.assertEqual(report["measured_by"], "samples")
        self.assertIsNone(report["counts"]["wakes"])

    def test_noisy(self):
        harness.require_root()
        self.check("noisy", "noisy", "cpu-bound")

    def test_blocking(self):
        harness.require_root()
        self.check("blocking", "blocking", "blocked")

    def test_threads_started_since(self):
        """Only the followed process's threads are sampled, each by its own
        perf event, and a thread started after the tracer attached is
        sampled through its creator's (inherited). Here every worker moves
        to a new thread every 0.25 s (--thread-churn): some 40 threads in
        5 s, and the noisy task's 20 ms runs must be in the trace on threads
        started after the tracer attached (tids above the highest then; on a
        machine whose pids wrapped meanwhile, fewer count), as on the first."""
        harness.require_root()
        tmp = tempfile.mkdtemp(prefix="at-sampled-")
        trace, said = os.path.join(tmp, "trace.json"), os.path.join(tmp, "tracer.err")
        ex = harness.start_executor("noisy", 5, wait_traced=False,
                                    extra=["--thread-churn", "0.25"])
        with open(said, "w") as f:
            tr = subprocess.Popen([harness.TRACER, "-p", str(ex.pid), *SAMPLE, "-o", trace,
                                   *harness.DETECTOR_ARGS],
                                  stdout=subprocess.DEVNULL, stderr=f, text=True)
        try:
            self.assertTrue(harness.wait_for(lambda: "tracing pid" in harness.read(said), 30),
                            harness.read(said))
            before = max(int(t) for t in os.listdir(f"/proc/{ex.pid}/task"))
            eout, _ = ex.communicate(timeout=60)
            tr.communicate(timeout=60)
        finally:
            harness.reap(ex, tr)
        ctx = f"{eout}\n{harness.read(said)}"
        self.assertEqual((ex.returncode, tr.returncode), (0, 0), ctx)
        threads = set(re.findall(r"thread (\d+) worker \d+ polls \d+", eout))
        self.assertGreater(len(threads), 12, ctx)
        with open(trace) as f:
            runs = [e for e in json.load(f) if e.get("ph") == "X" and e.get("cat") == "poll"]
        noisy = [e for e in runs if e["name"] == "noisy" and e["dur"] >= 15000]
        later = {e["tid"] for e in noisy if e["tid"] > before}
        # about 14 burns after the attach, one thread each at most
        self.assertGreaterEqual(len(later), 5, (before, [(e["tid"], e["dur"]) for e in noisy]))

    def test_healthy(self):
        """Nothing, unless the executor itself timed a poll that long: a
        shared VM can stall an innocent poll, and the tracer is right to say
        so (the program is the oracle, not "never")."""
        harness.require_root()
        (erc, eout), (trc, terr), log, _ = sampled_executor("healthy", duration=3)
        self.assertEqual((erc, trc), (0, 0), f"{eout}\n{terr}")
        timed = harness.executor_long_polls(eout)
        for a in log:
            self.assertEqual(a["kind"], "long-poll", log)
            self.assertIn(a["task"]["name"], timed, f"{log}\n{eout}")
        episodes = collections.Counter(a["task"]["name"] for a in log if a["state"] == "begin")
        for name, n in episodes.items():
            self.assertLessEqual(n, timed[name][0], f"{log}\n{eout}")


def escalated(test, argv, seconds, *tracer_args):
    """Runs argv traced in sample mode with --escalate seconds, checked by
    test: the tracer's stderr, its alerts, the dumps, and its BPF links
    before, during and after."""
    tmp = tempfile.mkdtemp(prefix="at-escalate-")
    dumps = os.path.join(tmp, "dumps")
    os.mkdir(dumps)
    alerts = os.path.join(tmp, "alerts.jsonl")
    said = os.path.join(tmp, "tracer.err")
    app = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    with open(said, "w") as f:
        tr = subprocess.Popen([harness.TRACER, "-p", str(app.pid), *SAMPLE, "--escalate",
                               str(seconds), "--flight-recorder", "2", "--dump-dir", dumps,
                               "--alerts", alerts, *tracer_args],
                              stdout=subprocess.DEVNULL, stderr=f, text=True)
    links = {}
    try:
        for when, line in (("before", "tracing pid"), ("during", "probes attached for"),
                           ("after", "probes detached")):
            test.assertTrue(harness.wait_for(lambda: line in harness.read(said), 60),
                            (when, harness.read(said)))
            if when == "after":
                # links are closed off the loop's thread (each waits for RCU)
                harness.wait_for(lambda: "link_type=uprobe_multi" not in bpf_held(tr.pid),
                                 10)
            links[when] = [h for h in bpf_held(tr.pid) if h.startswith("link_type")]
        app.communicate(timeout=60)
        tr.communicate(timeout=60)
    finally:
        harness.reap(app, tr)
    err = harness.read(said)
    test.assertEqual((app.returncode, tr.returncode), (0, 0), err)
    test.assertNotIn("refused", err)  # by the seccomp filter: -p keeps it
    with open(alerts) as f:
        log = [json.loads(line) for line in f if line.strip()]
    return err, log, sorted(os.path.join(dumps, d) for d in os.listdir(dumps)), links



class Escalation(unittest.TestCase):
    """--escalate: a sampled alert attaches that process's probes for a while
    (their links in the tracer's fdinfo then, and not before or after), once
    a minute at most; the alert names the flight recorder's dump, which
    holds the runs the samples saw and then the probes' polls, with what only
    probes see (wake-to-poll delays) and the probes' own long polls."""

    def check_dump(self, path):
        """A valid trace holding runs seen by samples and polls the probes
        bounded after them: those slices, (sampled, probed)."""
        packets = pftrace_check.decode(path)
        self.assertEqual(pftrace_check.check(packets), [])
        self.assertEqual(pftrace_check.protoc_check(path, PROTO), [])
        polls = [s for s in pftrace_check.slices(packets) if "result" in s[4]]
        sampled = [s for s in polls if s[4].get("measured_by") == "samples"]
        probed = [s for s in polls if "measured_by" not in s[4]]
        self.assertTrue(sampled and probed, (len(sampled), len(probed)))
        self.assertLess(min(s[1] for s in sampled), min(s[1] for s in probed))
        # only probes see wakes
        self.assertTrue(any("wake_delay_ns" in s[4] for s in probed))
        return sampled, probed, pftrace_check.events(packets)

    def test_go(self):
        harness.require_root()
        err, log, dumps, links = escalated(
            self, [os.path.join(harness.BUILD, "go-app"), "-scenario", "all", "-duration", "7s"],
            2, "--long-poll", "8ms")
        uprobes = "link_type=uprobe_multi"
        self.assertNotIn(uprobes, links["before"], links)
        self.assertIn(uprobes, links["during"], links)
        self.assertNotIn(uprobes, links["after"], links)
        # once in the run, though sampled episodes begin again after it (--escalate-every 60)
        self.assertEqual(err.count("probes attached for 2.0 s after a long-poll alert"), 1, err)
        first = next(a for a in log if a["state"] == "begin")
        self.assertEqual((first["measured_by"], first["escalated_s"]), ("samples", 2.0), first)
        self.assertEqual([first["dump"]], dumps, err)
        self.assertEqual(sum(1 for a in log if "escalated_s" in a), 1, log)
        # the probes' view in the dump: the hog's long polls (20 ms every 250 ms), bounded
        _, probed, _ = self.check_dump(dumps[0])
        self.assertGreaterEqual(sum(1 for s in probed if s[3] == "main.burnCPU"
                                    and s[2] - s[1] >= 8e6), 4, probed)
        # and the tasks kept waiting behind them, which only the probes' wakes show
        self.assertTrue(any(a.get("victims") for a in log if a["state"] == "end"), log)

    def test_asynctrace_executor(self):
        """Its USDT probes (their semaphores raised meanwhile): every poll
        the probes bounded, the wakes with them."""
        harness.require_root()
        err, log, dumps, links = escalated(
            self, [harness.EXECUTOR, "--scenario", "noisy", "--duration", "6", "--workers", "2"],
            1, *harness.DETECTOR_ARGS)
        self.assertIn("link_type=uprobe_multi", links["during"], links)
        self.assertNotIn("link_type=uprobe_multi", links["after"], links)
        first = next(a for a in log if a["state"] == "begin")
        self.assertEqual((first["task"]["name"], first["escalated_s"]), ("noisy", 1.0), first)
        self.assertEqual([first["dump"]], dumps, err)
        _, probed, _ = self.check_dump(dumps[0])
        self.assertTrue({"request", "echo"} <= {s[3] for s in probed}, {s[3] for s in probed})

    def test_bad_options(self):
        for args, said in (
                (["--escalate", "2", "--flight-recorder", "2", "--dump-dir", "/tmp"],
                 "--escalate attaches the probes to a sampled process when it raises an alert: "
                 "it needs --mode sample"),
                ([*SAMPLE, "--escalate", "2"],
                 "--escalate keeps what the probes saw in the flight recorder's dump: give "
                 "--flight-recorder SECONDS and --dump-dir DIR"),
                ([*SAMPLE, "--escalate-every", "30"],
                 "--escalate-every is --escalate's: give --escalate SECONDS"),
                ([*SAMPLE, "--escalate", "0.01"], "--escalate")):
            with self.subTest(args=args):
                r = harness.run_tracer("-p", "1", *args)
                self.assertEqual(r.returncode, 2, r.stderr)
                self.assertIn(said, r.stderr)


class TokioSampled(unittest.TestCase):
    """tokio read from its own thread-local CONTEXT (the current task's id, the
    coop budget), on every build of the tokio matrix: the blocking call (a
    20 ms sleep inside a poll) is a long poll the samples prove, a sleep
    ending no poll; the CPU hog is not alerted, as samples cannot tell one
    20 ms poll from a loop of short ones in tokio, but said once; a yield_now
    loop and a program of timers raise nothing. Stripped, it is refused,
    saying why (tokio is found by its symbols in either mode)."""

    def test_every_build(self):
        harness.require_root()
        for name, (app, paths) in sorted(tokio_builds().items()):
            with self.subTest(build=name):
                run = traced_tokio_run("", duration=3, trace=False, exe=app, tracer_args=SAMPLE)
                ctx = f"{name}: {run.describe()}"
                self.assertEqual((run.executor_rc, run.tracer_rc), (0, 0), ctx)
                self.assertIn("sample mode, no probe: each thread's CONTEXT", run.tracer_stderr,
                              ctx)
                self.assertEqual(run.report["measured_by"], "samples", ctx)
                self.assertGreater(run.report["counts"]["polls"], 0, ctx)
                got = [(a["cause"], a["measured_by"]) for a in begins(run)]
                self.assertEqual(got, [("blocked", "samples")], ctx)
                self.assertEqual(harness.begun(run), {"long-poll"}, ctx)
                blocked = begins(run)[0]
                self.assertGreaterEqual(blocked["value_ns"], 15_000_000, ctx)
                self.assertIn("in polls of its own: one long poll or a loop of short ones",
                              run.tracer_stderr, ctx)
                for mode in ("yield", "timer"):
                    quiet = traced_tokio_run("", duration=2, trace=False, exe=paths,
                                             exe_args=[mode], tracer_args=SAMPLE)
                    self.assertEqual((quiet.executor_rc, quiet.tracer_rc), (0, 0),
                                     f"{name} {mode}: {quiet.describe()}")
                    self.assertEqual(quiet.alert_log, [], f"{name} {mode}: {quiet.describe()}")
                    self.assertGreater(quiet.report["counts"]["polls"], 0, quiet.describe())

    def test_stripped_is_refused(self):
        harness.require_root()
        app = subprocess.Popen([os.path.join(harness.BUILD, "tokio-app-stripped"), "--duration",
                                "10"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            r = harness.run_tracer("-p", app.pid, *SAMPLE, "--no-trace", "-d", "2")
        finally:
            app.kill()
            app.wait()
        self.assertNotEqual(r.returncode, 0, r.stderr)
        # found by its symbols, as in probe mode: what tokio_current.c would say comes after
        self.assertIn("its binary is stripped (no symbol table), so tokio cannot be looked for",
                      r.stderr)

    def test_stacks_name_the_tasks(self):
        """--stacks: a long run's stack runs in code only one raw::poll
        instance's polls run in (the instance, where fat LTO keeps it a frame
        of its own; its Harness::poll, which a release build's raw::poll
        tail-calls), which names the task by its future type, as its probe
        would."""
        harness.require_root()
        for variant in ("", "-lto"):
            with self.subTest(build=variant or "release"):
                run = traced_tokio_run(variant, duration=3, trace=False,
                                       tracer_args=[*SAMPLE, "--stacks"])
                self.assertEqual((run.executor_rc, run.tracer_rc), (0, 0), run.describe())
                names = [a["task"]["name"] for a in begins(run)]
                self.assertEqual(len(names), 1, run.describe())
                self.assertIn("blocking_call", names[0], run.describe())
                self.assertIn("'tokio_app::counted::Counted<tokio_app::workload::burn_cpu",
                              run.tracer_stderr, run.describe())

    def test_escalation_measures_the_hog(self):
        """--escalate: a run past --long-poll (the hog's, or the blocking
        call's alert) attaches the probes, which then bound the hog's polls
        themselves and name both futures; their queue depths start from
        nothing and stop with the probes (no starvation from counts the
        probes left behind)."""
        harness.require_root()
        err, log, dumps, links = escalated(
            self, [os.path.join(harness.BUILD, "tokio-app"), "--duration", "6"], 1,
            "--escalate-every", "2")
        self.assertNotIn("link_type=uprobe_multi", links["before"], links)
        self.assertIn("link_type=uprobe_multi", links["during"], links)
        self.assertIn("probes attached for 1.0 s", err)
        self.assertEqual({a["kind"] for a in log if a["state"] == "begin"}, {"long-poll"}, err)
        hog = [a for a in log if a["state"] == "begin" and a["measured_by"] == "probes"
               and a["cause"] == "cpu-bound"]
        self.assertTrue(hog, err)
        self.assertTrue(all("burn_cpu" in a["task"]["name"] for a in hog), hog)
        self.assertTrue(dumps, err)
        self.assertEqual(pftrace_check.check(pftrace_check.decode(dumps[0])), [])


class EveryGoVersionSampled(unittest.TestCase):
    """Each Go Debian ships, stripped (offsets from the version table, g's
    slot read from the code) and position-independent: the hog found by
    samples alone."""

    def test_each_build(self):
        harness.require_root()
        versions = os.environ.get("GO_VERSIONS", "").split()
        self.assertTrue(versions, "GO_VERSIONS is not set: run the tests through make")
        exes = ["go-app-stripped", "go-app-pie"] + [f"go-versions/go-app-{v}-stripped"
                                                    for v in versions]
        for exe in exes:
            with self.subTest(exe=exe):
                run = traced_go_run("cpu", duration=2, exe=exe, trace=False, tracer_args=SAMPLE)
                self.assertEqual((run.executor_rc, run.tracer_rc), (0, 0), run.describe())
                self.assertEqual({a["task"]["name"] for a in begins(run)}, {"main.burnCPU"},
                                 run.describe())
                self.assertTrue(all(a["measured_by"] == "samples" for a in run.alert_log))


if __name__ == "__main__":
    unittest.main()
