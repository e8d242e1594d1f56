#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Go programs, unmodified (issue 17, its first working part): goroutines are
tasks, Ps workers, Ms threads, from uprobes on runtime.casgstatus, the
returns of runtime.newproc1 and runtime.runqsteal. The Go test program
(tests/go, built by Debian's golang-go) waits on stdin until the tracer is
attached, runs one scenario, and prints its own counts. Needs root."""
import json
import os
import re
import subprocess
import tempfile
import unittest

from tests.integration import harness

# go-app's exit line: its counts, key=value
COUNTS = re.compile(r"^burns=\d+ .*$", re.M)
# Go's sysmon preempts a goroutine that ran 10 ms: a CPU hog's slices end there
# (or at the next sysmon tick, up to 20 ms), so the threshold is under it. No
# --lost-waker: each scenario's goroutine waits on a stop channel for the
# whole run, which that option would call lost (docs/go.md); Leak gives it.
GO_DETECTOR_ARGS = ["--long-poll", "8ms"]


def traced_go_run(scenario, duration=2, exe="go-app", tracer_args=(), trace=True,
                  detector_args=GO_DETECTOR_ARGS, app_args=()):
    """Starts the Go program waiting on stdin, attaches, lets it run to its
    exit: the run, with its counts and the trace's events."""
    tmp = tempfile.mkdtemp(prefix="at-go-")
    alerts = os.path.join(tmp, "alerts.jsonl")
    run = harness.traced_gated_run(
        f"go-{scenario}", [os.path.join(harness.BUILD, exe), "-scenario", scenario,
                           "-duration", f"{duration}s", "-wait-stdin", *app_args], duration,
        ["--alerts", alerts, *detector_args, *tracer_args,
         *(["-o", os.path.join(tmp, "trace.json")] if trace else ["--no-trace"])], tmp)
    m = COUNTS.search(run.executor_stdout)
    run.counts = {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)(?=\s|$)", m[0])} if m else {}
    return harness.read_outputs(run, alerts)


def begins(run, kind="long-poll"):
    return [a for a in run.alert_log if a["kind"] == kind and a["state"] == "begin"]


def task_names(run):
    """task id -> name, from the polls on the worker threads."""
    return {e["args"]["task"]: e["name"] for e in run.events
            if e.get("ph") == "X" and e.get("cat") == "poll"}


class GoRun(unittest.TestCase):
    scenario = None
    exe = "go-app"
    detector_args = GO_DETECTOR_ARGS
    tracer_args = ()
    # a scenario as fast as the host goes: the tracer may get too little of a
    # shared 2-CPU machine to keep up, and the ring buffer overflows; then
    # what is checked is what the product guarantees (every event received
    # or counted as dropped, and said), not that none was
    saturates = False

    @classmethod
    def setUpClass(cls):
        harness.require_root()
        cls.run_ = traced_go_run(cls.scenario, exe=cls.exe, detector_args=cls.detector_args,
                                 tracer_args=cls.tracer_args)

    def test_runs_clean(self):
        r = self.run_
        self.assertTrue(r.attached, r.describe())
        self.assertEqual(r.executor_rc, 0, r.describe())
        self.assertEqual(r.tracer_rc, 0, r.describe())
        self.assertIn("Go go1.", r.tracer_stderr)
        if self.saturates:
            harness.check_every_event_accounted(self, r)
        else:
            self.assertEqual(r.report["events"]["dropped"], 0)
        self.assertGreater(r.report["counts"]["polls"], 0)


class CpuHog(GoRun):
    """A goroutine that burns 20 ms every 250 ms: a long poll, cpu-bound, named by
    its function."""
    scenario = "cpu"

    def test_long_poll_names_the_goroutine(self):
        b = begins(self.run_)
        self.assertTrue(b, self.run_.describe())
        self.assertEqual({a["task"]["name"] for a in b}, {"main.burnCPU"})
        self.assertEqual(b[0]["cause"], "cpu-bound")
        self.assertGreaterEqual(self.run_.counts["burns"], 6)


class PreemptedHog(unittest.TestCase):
    """With a threshold far above the hog's 20 ms, its slices are long polls all
    the same when Go preempted it for running too long (sysmon, at 10 ms)."""

    def test_preempted_by_the_runtime(self):
        harness.require_root()
        run = traced_go_run("cpu", duration=3, trace=False,
                            detector_args=["--long-poll", "50ms"])
        b = begins(run)
        self.assertTrue(b, run.describe())
        self.assertEqual({a["task"]["name"] for a in b}, {"main.burnCPU"})
        self.assertTrue(all(a.get("runtime_preempted") for a in b), b)
        self.assertTrue(all(10_000_000 <= a["value_ns"] < 50_000_000 for a in b), b)
        self.assertIn(", preempted by its runtime", b[0]["message"])


class CpuHogStripped(CpuHog):
    """The same, stripped of .symtab and DWARF: names from .gopclntab, offsets
    from the version table."""
    exe = "go-app-stripped"

    def test_from_the_table(self):
        self.assertIn("offsets from the version table", self.run_.tracer_stderr)


class CpuHogPie(CpuHog):
    """The same, position-independent: loaded away from its link-time
    addresses, its goroutines named all the same."""
    exe = "go-app-pie"


class RawSyscall(GoRun):
    """A goroutine blocked 20 ms in a raw nanosleep (the P held): blocked."""
    scenario = "syscall"

    def test_long_poll_blocked(self):
        b = begins(self.run_)
        self.assertTrue(b, self.run_.describe())
        self.assertEqual({a["task"]["name"] for a in b}, {"main.blockInSyscall"})
        self.assertEqual(b[0]["cause"], "blocked")
        self.assertGreater(b[0]["blocked_ns"], 8_000_000)
        self.assertGreater(b[0]["blocked_ns"], 4 * b[0]["on_cpu_ns"])


def check_through_syscalls(test, run, alerts=True):
    """main.sleepThenBurn: 20 ms asleep in a system call the runtime knows of
    (no part of any run: its thread's sleep ends the run, its return resumes
    it), then 20 ms on the CPU making a system call every 50 µs, its P held
    throughout: runs of milliseconds (Go's preemption cuts them at 10 ms),
    not split at each system call, with nothing of the sleep in them; where
    the host is not crowded (alerts), long polls, cpu-bound."""
    ids = {t for t, n in task_names(run).items() if n == "main.sleepThenBurn"}
    polls = [e for e in run.events if e.get("ph") == "X" and e.get("cat") == "poll"
             and e["args"]["task"] in ids]
    test.assertTrue(polls, run.counts)
    test.assertEqual([e for e in polls if e["args"]["blocked_us"] > 5000], [])
    test.assertGreaterEqual(sum(1 for e in polls if e["dur"] >= 8000),
                            max(1, run.counts["gosyscalls"] // 2), (run.counts, polls))
    if not alerts:
        return
    b = [a for a in begins(run) if a["task"]["name"] == "main.sleepThenBurn"]
    ends = [a for a in run.alert_log if a["kind"] == "long-poll" and a["state"] == "end"
            and a["task"]["name"] == "main.sleepThenBurn"]
    test.assertTrue(b, (run.counts, run.alert_log))
    # an episode counts its long polls: about one a burn
    test.assertGreaterEqual(sum(a["count"] for a in ends), max(1, run.counts["gosyscalls"] // 2),
                            (run.counts, run.alert_log))
    for a in b:
        test.assertEqual(a["cause"], "cpu-bound", a)
        test.assertLess(a["blocked_ns"], 5_000_000, a)


class ThroughSyscalls(GoRun):
    """A run goes on through the system calls its goroutine makes, and ends
    where its thread sleeps in one (casgstatus probed at its calls, the
    system calls' own not: docs/go.md)."""
    scenario = "gosyscall"

    def test_runs_through_syscalls(self):
        check_through_syscalls(self, self.run_)

    def test_said(self):
        self.assertRegex(self.run_.tracer_stderr,
                         r"\d+ calls of casgstatus \([1-9]\d* let be: system calls\)")


class CpuBoundSyscall(GoRun):
    """main.cpuSyscalls: one system call of 30 ms or more on the CPU (a read
    of /dev/urandom) every 250 ms. Go's sysmon takes the goroutine's P meanwhile
    (runtime.handoffp): the run, which goes on through its system calls,
    holds no worker from then on, and is no long poll; the goroutine's other
    runs are short. Nothing is alerted (before handoffp was probed: a 30 ms
    cpu-bound long poll at each read)."""
    scenario = "cpusyscall"

    def test_no_long_poll(self):
        r = self.run_
        self.assertGreaterEqual(r.counts["cpusyscalls"], 2, r.describe())
        # what makes this a test: each read was long enough to be a long poll
        self.assertGreaterEqual(r.counts["cpusyscall_longest_us"], 25_000, r.counts)
        self.assertEqual(begins(r), [], r.alert_log)

    def test_reads_in_runs(self):
        # the runs are seen: each read lies in one, none of them blocked
        ids = {t for t, n in task_names(self.run_).items() if n == "main.cpuSyscalls"}
        polls = [e for e in self.run_.events if e.get("ph") == "X" and e.get("cat") == "poll"
                 and e["args"]["task"] in ids]
        self.assertGreaterEqual(sum(1 for e in polls if e["dur"] >= 25_000),
                                self.run_.counts["cpusyscalls"] // 2, polls)

    def test_handoffp_probed(self):
        self.assertIn("handoffp and stopTheWorldWithSema", self.run_.tracer_stderr)


class StopTheWorld(unittest.TestCase):
    """The same reads with a garbage collection every few milliseconds
    beside them (go-app -collect): a stop of the world takes every P, the
    P of a goroutine in a system call too, with no handoffp (and sysmon
    then has none to take). The stops are probed
    (runtime.stopTheWorldWithSema): nothing is alerted (without that probe,
    a long poll in each run of 3 s). The collector also stops running
    goroutines to scan their stacks, from running with no casgstatus
    (runtime.preemptPark, probed): their runs end there (unseen, a run
    stayed open on its thread, and a wake of its goroutine there later was
    taken for a self-wake, dropped with the run: a few each run)."""

    def test_no_long_poll(self):
        harness.require_root()
        run = traced_go_run("cpusyscall", duration=3, app_args=["-collect"])
        self.assertEqual(run.tracer_rc, 0, run.describe())
        self.assertEqual(run.report["events"]["dropped"], 0, run.describe())
        self.assertGreaterEqual(run.counts["cpusyscalls"], 4, run.describe())
        self.assertGreaterEqual(run.counts["cpusyscall_longest_us"], 25_000, run.counts)
        self.assertIn("handoffp and stopTheWorldWithSema", run.tracer_stderr)
        self.assertEqual(begins(run), [], run.alert_log)


class ThroughSyscallsAtEntry(GoRun):
    """--probe-at entry: casgstatus probed at its entry sees every change,
    system calls' too (two traps each): a run ends at each system call, so
    the 20 ms burn is many short runs, and nothing is alerted for it."""
    scenario = "gosyscall"
    tracer_args = ("--probe-at", "entry")

    def test_split_at_each_syscall(self):
        self.assertIn("casgstatus at its entry", self.run_.tracer_stderr)
        self.assertEqual([a for a in begins(self.run_)
                          if a["task"]["name"] == "main.sleepThenBurn"], [], self.run_.alert_log)


class PingPong(GoRun):
    """Two goroutines passing a token over unbuffered channels: each wake is
    made by the other goroutine, arrows link them. (On two Ps they may trade
    for many milliseconds without parking, a P held the while: a long poll,
    as Go's own preemption would judge it.) As fast as the host goes: with a
    CPU taken by something else, the tracer drops events (counted)."""
    scenario = "pingpong"
    saturates = True

    def test_wakes_link_the_right_goroutines(self):
        names = task_names(self.run_)
        wakes = [e for e in self.run_.events if e.get("ph") == "X" and e.get("cat") == "wake"]
        self.assertGreater(len(wakes), 100)
        pairs = {(names.get(e["args"].get("waker_task")), names.get(e["args"]["task"]))
                 for e in wakes if e["args"].get("waker_task")}
        self.assertIn(("main.pingPong", "main.pingPong.func1"), pairs)
        self.assertIn(("main.pingPong.func1", "main.pingPong"), pairs)


class Timers(GoRun):
    """Goroutines sleeping 1 ms over and over: healthy, nothing alerted."""
    scenario = "timers"

    def test_no_alert(self):
        self.assertEqual(self.run_.alert_log, [])
        names = set(task_names(self.run_).values())
        self.assertIn("main.timers.func1", names)


class FanOut(GoRun):
    """A parent spawning 16 children and waiting for them: every child's spawn
    is seen, with its parent, as many as the program made."""
    scenario = "fanout"

    def test_children_and_their_parent(self):
        names = task_names(self.run_)
        spawns = [e for e in self.run_.events if e.get("ph") == "X" and e.get("cat") == "spawn"
                  and e["name"].startswith("spawn main.child")]
        self.assertEqual(len(spawns), self.run_.counts["children"], self.run_.counts)
        parents = {names.get(e["args"].get("parent")) for e in spawns}
        self.assertEqual(parents, {"main.fanOut"})

    def test_steals_between_ps(self):
        """Sixteen children queued on the parent's P: the other P steals half."""
        counts = self.run_.report["counts"]
        self.assertGreater(counts["steals"], 0, counts)
        self.assertGreaterEqual(counts["stolen"], counts["steals"], counts)
        # probed where a steal took something: each one a P from another, the
        # victim where the first goroutine taken was queued
        self.assertIn("runqsteal's steals that took something", self.run_.tracer_stderr)
        # (the thief's slice; the one on the stolen tasks' side names neither)
        steals = [e["args"] for e in self.run_.events if e.get("ph") == "X"
                  and e.get("cat") == "steal" and "thief" in e.get("args", {})]
        self.assertTrue(steals)
        self.assertTrue(all(s["count"] >= 1 and s["thief"] != s.get("victim") for s in steals),
                        steals)
        self.assertGreaterEqual(sum(1 for s in steals if s.get("victim") is not None),
                                len(steals) * 8 // 10, steals)
        self.assertEqual(len([w for w in self.run_.report["workers"] if w["polls"]]), 2)

    def test_no_alert(self):
        self.assertEqual(begins(self.run_), [])


def lost(run):
    """name -> the lost-waker alerts begun on goroutines of that name."""
    out = {}
    for a in begins(run, "lost-waker"):
        out.setdefault(a["task"]["name"], []).append(a)
    return out


class Leak(GoRun):
    """Two goroutines leaked: one parked on a channel nobody writes to, one on
    a channel never made (nil). With --lost-waker 1s both are lost wakers:
    the nil channel's at once (nothing can wake it: unwakeable), the other
    after the threshold. Nothing else is: the main goroutine asleep, the
    runtime's own parked goroutines (GC workers, sweeper) are waits by
    design."""
    scenario = "leak"
    detector_args = ["--lost-waker", "1s", *GO_DETECTOR_ARGS]

    def test_both_leaks_and_nothing_else(self):
        by_name = lost(self.run_)
        self.assertEqual(set(by_name), {"main.leaked", "main.leakedOnNil"},
                         self.run_.alert_log)
        nil, = by_name["main.leakedOnNil"]
        self.assertTrue(nil.get("unwakeable"), nil)
        chan, = by_name["main.leaked"]
        self.assertFalse(chan.get("unwakeable"), chan)
        self.assertGreaterEqual(chan["value_ns"], 1_000_000_000)
        self.assertIn("main.leaked", chan["message"])
        # each says where it waits, read from the live process: the line in main.go
        lines = harness.source_lines(os.path.join(harness.GO_APP_SRC, "main.go"), "leak")
        for alert, func, kind in ((nil, "main.leakedOnNil", "nil"), (chan, "main.leaked", "chan")):
            parked = alert.get("parked_at")
            self.assertTrue(parked, alert)
            self.assertEqual(parked[0]["function"], "runtime.gopark", parked)
            own = [f for f in parked if f["function"] == func]
            self.assertEqual(len(own), 1, parked)
            self.assertEqual(own[0]["line"], lines[kind], parked)
            self.assertTrue(own[0]["file"].endswith("/go-app/main.go"), parked)
            self.assertIn(f"; parked at {func} (", alert["message"])
            self.assertIn(f"main.go:{lines[kind]})", alert["message"])


class LeakByDefault(unittest.TestCase):
    """Without --lost-waker a goroutine parked on a channel is not called lost
    (a worker waiting for its next job looks the same): only the one on a
    nil channel, which nothing can wake, is."""

    def test_only_the_nil_channel(self):
        harness.require_root()
        run = traced_go_run("leak", duration=2, trace=False)
        self.assertEqual(run.tracer_rc, 0, run.describe())
        by_name = lost(run)
        self.assertEqual(set(by_name), {"main.leakedOnNil"}, run.alert_log)
        self.assertTrue(by_name["main.leakedOnNil"][0].get("unwakeable"))


class EveryGoVersion(unittest.TestCase):
    """The same program built by each Go Debian ships (make go-versions:
    1.21 to 1.27) and stripped (-s -w: no DWARF, no .symtab), so that the
    offsets come from the version table and the names from .gopclntab:
    traced as Go 1.19's is. Every scenario at once: the CPU hog alerted by
    name, the ping-pong's wakes linked, the children counted as the program
    counts them, the nil channel's leak found and no other lost waker. A full
    trace of this busy program can outrun the ring buffer on a small host:
    then every event is still either received or counted as dropped, kind by
    kind, against the maps' exact counts, and no child's spawn is missing
    from the trace that was not counted as dropped."""

    def test_each_version(self):
        harness.require_root()
        versions = os.environ.get("GO_VERSIONS", "").split()
        self.assertTrue(versions, "GO_VERSIONS is not set: run the tests through make")
        for v in versions:
            with self.subTest(go=v):
                run = traced_go_run("all", duration=2, exe=f"go-versions/go-app-{v}-stripped")
                self.assertEqual((run.executor_rc, run.tracer_rc), (0, 0), run.describe())
                self.assertIn(f"Go go{v}", run.tracer_stderr)
                self.assertIn("offsets from the version table", run.tracer_stderr)
                # a busy Go program can outrun the ring: every drop counted, the maps exact
                harness.check_every_event_accounted(self, run)
                spawns_lost = run.report["events"]["dropped_by_kind"]["spawn"]
                names = task_names(run)
                self.assertIn("main.burnCPU", {a["task"]["name"] for a in begins(run)},
                              run.alert_log)
                wakes = {(names.get(e["args"].get("waker_task")), names.get(e["args"]["task"]))
                         for e in run.events if e.get("ph") == "X" and e.get("cat") == "wake"}
                self.assertIn(("main.pingPong", "main.pingPong.func1"), wakes)
                spawns = [e for e in run.events if e.get("ph") == "X" and e.get("cat") == "spawn"
                          and e["name"].startswith("spawn main.child")]
                self.assertLessEqual(len(spawns), run.counts["children"], run.counts)
                self.assertGreaterEqual(len(spawns), run.counts["children"] - spawns_lost,
                                        run.counts)
                self.assertEqual(set(lost(run)), {"main.leakedOnNil"}, run.alert_log)
                # every scenario at once on two CPUs: the burn's thread waits for one
                # (runnable), and a slice may not be a long poll by its time on it
                check_through_syscalls(self, run, alerts=False)
                self.assertIn("runqsteal's steals that took something", run.tracer_stderr)
                self.assertGreater(run.report["counts"]["steals"], 0)


class FollowingTheHost(unittest.TestCase):
    """Following the host (no -p), a Go program that starts later is found and
    traced like any other: its CPU hog alerted, named."""

    def test_a_go_program_that_starts_later(self):
        harness.require_root()
        tmp = tempfile.mkdtemp(prefix="at-go-host-")
        log = os.path.join(tmp, "tracer.log")
        with open(log, "w") as err:
            tr = subprocess.Popen([harness.TRACER, "--comm", "^go-app$", "--no-trace", "-q",
                                   "--summary", "json", *GO_DETECTOR_ARGS],
                                  stdout=subprocess.PIPE, stderr=err, text=True)
        try:
            self.assertTrue(harness.wait_for(lambda: "watching for one" in harness.read(log),
                                             20), harness.read(log))
            ex = subprocess.run([os.path.join(harness.BUILD, "go-app"), "-scenario", "cpu",
                                 "-duration", "2s"], capture_output=True, text=True,
                                timeout=60)
            self.assertEqual(ex.returncode, 0, ex.stderr)
            self.assertTrue(harness.wait_for(lambda: "target exited" in harness.read(log), 20),
                            harness.read(log))
        finally:
            tr.send_signal(2)
            out, _ = tr.communicate(timeout=30)
        said = harness.read(log)
        self.assertEqual(tr.returncode, 0, said)
        self.assertIn("(go-app): Go go1.", said)
        reports = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
        self.assertEqual([r["comm"] for r in reports], ["go-app"])
        self.assertGreater(reports[0]["alerts"]["episodes"]["long-poll"], 0)
        names = {a["task"]["name"] for a in reports[0]["alerts"]["log"] if "task" in a}
        self.assertEqual(names, {"main.burnCPU"})


class Recorded(unittest.TestCase):
    """record, then convert without the process: the goroutines keep their
    names (written as name records when recording) and the CPU hog is
    alerted as live."""

    def test_record_then_convert(self):
        harness.require_root()
        tmp = tempfile.mkdtemp(prefix="at-go-rec-")
        cap = os.path.join(tmp, "go.atcap")
        ex = subprocess.Popen([os.path.join(harness.BUILD, "go-app"), "-scenario", "cpu",
                               "-duration", "2s", "-wait-stdin"], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        log = os.path.join(tmp, "record.log")
        with open(log, "w") as err:
            tr = subprocess.Popen([harness.TRACER, "record", "-p", str(ex.pid), "-o", cap,
                                   *GO_DETECTOR_ARGS], stdout=subprocess.DEVNULL, stderr=err)
        try:
            self.assertTrue(harness.wait_for(lambda: "recording pid" in harness.read(log), 30),
                            harness.read(log))
            ex.communicate("go\n", timeout=60)
            tr.wait(timeout=60)
        finally:
            harness.reap(ex, tr)
        self.assertEqual(tr.returncode, 0, harness.read(log))
        alerts = os.path.join(tmp, "alerts.jsonl")
        r = harness.run_tracer("convert", cap, "-o", os.path.join(tmp, "go.json"),
                               "--alerts", alerts)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(alerts) as f:
            b = [a for a in map(json.loads, f) if a["kind"] == "long-poll"
                 and a["state"] == "begin"]
        self.assertTrue(b, r.stderr)
        self.assertEqual({a["task"]["name"] for a in b}, {"main.burnCPU"})


del GoRun

if __name__ == "__main__":
    unittest.main()
