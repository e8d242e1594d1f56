# SPDX-License-Identifier: MIT
"""Unmodified tokio programs (tests/tokio), built three ways: the default
release profile (legacy mangling), fat LTO, v0 mangling. Each run is traced
from the first spawn to exit; the tracer must find tokio in the symbols, name
every future type, count exactly the polls and wakes the program counted
itself, tell the CPU hog from the blocking call, give every task its own
track, and draw wake arrows from the waker's poll."""
import json
import os
import re
import subprocess
import tempfile
import time
import unittest
from collections import Counter, defaultdict

from tests.integration import harness, trace_check
from tests.integration.test_lifecycle import our_progs

APP_LINE = re.compile(r"tokio-app: workers=(\d+) duration=([\d.]+) tasks=(\d+) polls=(\d+) "
                      r"wakes=(\d+)")


def app(variant):
    return os.path.join(harness.BUILD, "tokio-app" + variant)


def traced_tokio_run(variant, duration=3, tracer_args=(), tmpdir=None, trace=True, exe=None,
                     exe_args=()):
    """Starts the app waiting on stdin, attaches, then lets it run to exit;
    trace=False traces in maps-only mode; exe: another program of tests/tokio
    (exe_args: its arguments before the common ones)."""
    tmpdir = tmpdir or tempfile.mkdtemp(prefix="asynctraced-")
    alerts = os.path.join(tmpdir, "alerts.jsonl")
    run = harness.traced_gated_run(
        f"tokio{variant}", [exe or app(variant), *exe_args, "--wait-stdin", "--duration",
                            str(duration)], duration,
        ["--alerts", alerts, *tracer_args,
         *(["-o", os.path.join(tmpdir, "trace.json")] if trace else ["--no-trace"])], tmpdir)
    m = APP_LINE.search(run.executor_stdout)
    if m:
        run.counts = dict(workers=int(m[1]), tasks=int(m[3]), polls=int(m[4]),
                          wakes=int(m[5]))
    return harness.read_outputs(run, alerts)


polls = harness.polls


class TokioBuild(unittest.TestCase):
    variant = None
    mangling = None
    closure = None      # how a future's body is spelled in this mangling
    steal_probed = True
    spawn_probed = True

    @classmethod
    def setUpClass(cls):
        harness.require_root()
        cls.run_ = traced_tokio_run(cls.variant)

    def setUp(self):
        self.run = self.run_
        self.ctx = self.run.describe()

    def test_finds_tokio_and_names_every_future(self):
        self.assertTrue(self.run.attached, self.ctx)
        self.assertEqual(self.run.tracer_rc, 0, self.ctx)
        self.assertEqual(self.run.executor_rc, 0, self.ctx)
        m = re.search(r"tokio in \S+ \((\w+) mangling\): (\d+) raw::poll instances \((\d+) "
                      r"named by future type", self.run.tracer_stderr)
        self.assertIsNotNone(m, self.ctx)
        self.assertEqual(m[1], self.mangling)
        # 8 future types, each instantiated for both schedulers
        self.assertEqual(int(m[2]), 16)
        self.assertEqual(int(m[3]), 16)
        self.assertIn("the worker loop left out", self.run.tracer_stderr)
        self.assertIn("steal_into probed" if self.steal_probed else
                      "steals inferred from migrations", self.run.tracer_stderr)

    def test_no_probe_single_stepped(self):
        """Every probe on an instruction the kernel emulates (placement.h)."""
        self.assertIn("tracing pid", self.run.tracer_stderr, self.ctx)
        self.assertNotIn("probes single-stepped", self.run.tracer_stderr, self.ctx)

    def test_polls_and_wakes_match_the_program(self):
        c, r = self.run.counts, self.run.report["counts"]
        self.assertEqual(r["polls"], c["polls"], self.ctx)
        self.assertEqual(r["wakes"], c["wakes"], self.ctx)
        self.assertEqual(self.run.report["events"]["by_kind"]["poll"], c["polls"])
        self.assertEqual(self.run.report["events"]["dropped"], 0)
        self.assertEqual(len(polls(self.run)), c["polls"])
        if self.spawn_probed:
            self.assertEqual(r["tasks_spawned"], c["tasks"])
            self.assertEqual(r["tasks_completed"], c["tasks"])
        else:
            self.assertEqual(r["tasks_spawned"], 0)  # bind inlined: no spawn probe

    def test_long_polls_name_the_future_and_the_cause(self):
        got = {}
        for a in self.run.alert_log:
            if a["kind"] == "long-poll" and a["state"] == "begin":
                got[a["task"]["name"]] = a["cause"]
        burn = f"tokio_app::counted::Counted<tokio_app::workload::burn_cpu::{self.closure}>"
        block = f"tokio_app::counted::Counted<tokio_app::workload::blocking_call::{self.closure}>"
        self.assertEqual(got, {burn: "cpu-bound", block: "blocked"}, self.ctx)
        self.assertEqual(harness.begun(self.run), {"long-poll"}, self.ctx)

    def test_workers_named_and_ordered(self):
        names = {e["tid"]: e["args"]["name"] for e in self.run.events
                 if e.get("ph") == "M" and e.get("name") == "thread_name"}
        order = {e["tid"]: e["args"]["sort_index"] for e in self.run.events
                 if e.get("ph") == "M" and e.get("name") == "thread_sort_index"}
        workers = {t: n for t, n in names.items() if n.startswith("worker ")}
        self.assertEqual(sorted(workers.values()),
                         ["worker 0 (tokio-runtime-w)", "worker 1 (tokio-runtime-w)"])
        for tid, name in workers.items():
            self.assertEqual(order[tid], int(name.split()[1]))
        self.assertTrue(all(p["tid"] in workers for p in polls(self.run)))

    def test_each_task_its_own_track(self):
        per_task = Counter(p["args"]["task"] for p in polls(self.run))
        tracks = defaultdict(set)
        for e in self.run.events:
            if e.get("ph") == "b" and e.get("cat") == "task":
                tracks[int(e["id2"]["local"], 16)].add(e["name"])
        self.assertEqual(set(tracks), set(per_task))
        # tokio's own task ids: small, dense, one per spawned task
        self.assertGreaterEqual(len(per_task), self.run.counts["tasks"] - 2)
        self.assertLess(max(per_task), 10 * self.run.counts["tasks"])
        for task, names in tracks.items():
            self.assertEqual(len(names), 1)
            self.assertTrue(next(iter(names)).endswith(f" #{task}"), names)
            self.assertTrue(next(iter(names)).startswith("tokio_app::"), names)

    def test_wake_arrows_go_from_the_wakers_poll(self):
        # handle_request wakes backend through the channel, backend answers
        self.assertGreater(harness.check_wake_arrows(self, self.run, at_least=1000), 1000)

    def test_steals(self):
        steals = [e for e in self.run.events if e.get("ph") == "X" and e.get("cat") == "steal"
                  and e["name"].startswith("steal")]
        self.assertGreater(len(steals), 0)
        self.assertTrue(all(e["args"]["inferred"] != self.steal_probed for e in steals))

    def test_trace_follows_importer_rules(self):
        self.assertEqual(trace_check.check(self.run.events), [])


class Legacy(TokioBuild):
    variant = ""
    mangling = "legacy"
    closure = "{{closure}}"


class FatLTO(TokioBuild):
    variant = "-lto"
    mangling = "legacy"
    closure = "{{closure}}"
    steal_probed = False
    spawn_probed = False


class V0(TokioBuild):
    variant = "-v0"
    mangling = "v0"
    closure = "{closure#0}"


class Cet(TokioBuild):
    """Built with CET: every function starts with endbr64, which the kernel
    single-steps under a uprobe. Every probe goes past it to the emulated
    instruction after it (src/targets/placement.c), and reads the same arguments
    there: the counts, names and causes of the inherited tests prove it."""
    variant = "-cet"
    mangling = "legacy"
    closure = "{{closure}}"

    def test_probes_placed_past_endbr64(self):
        m = re.search(r"(\d+) probes placed past a single-stepped entry", self.run.tracer_stderr)
        self.assertIsNotNone(m, self.ctx)
        # every site: 16 poll instances and the wake, schedule, spawn, remove, steal functions
        self.assertGreaterEqual(int(m[1]), 16 + 2 + 3 + 2 + 1 + 1)

    def test_at_the_entry_the_same_counts(self):
        """--probe-at entry: the single-stepped entry, the same events."""
        run = traced_tokio_run(self.variant, duration=2, tracer_args=["--probe-at", "entry"])
        self.assertNotIn("placed past", run.tracer_stderr)
        self.assertIn("probes single-stepped (-v says why)", run.tracer_stderr)
        c, r = run.counts, run.report["counts"]
        self.assertEqual((r["polls"], r["wakes"], r["tasks_spawned"]),
                         (c["polls"], c["wakes"], c["tasks"]), run.describe())


PATHS_LINE = re.compile(r"tokio-paths: mode=(\w+) workers=\d+ duration=[\d.]+ tasks=(\d+) "
                        r"polls=(\d+) ops=(\d+)")


def traced_paths_run(variant, mode, duration):
    """tokio-paths (tests/tokio/src/bin/tokio-paths.rs) in one mode, traced
    maps-only from its first spawn to its exit; run.counts: its own. The
    lost-waker threshold stays 10 s: tasks here wait on JoinHandles for the
    whole run, so any lost waker is one the runtime says nothing can wake."""
    exe = os.path.join(harness.BUILD, "tokio-paths" + variant)
    run = traced_tokio_run(variant, duration=duration, trace=False, exe=exe, exe_args=[mode],
                           tracer_args=["--long-poll", "15ms"])
    m = PATHS_LINE.search(run.executor_stdout)
    run.counts = m and dict(tasks=int(m[2]), polls=int(m[3]), ops=int(m[4]))
    return run


class Paths(unittest.TestCase):
    """tokio's everyday paths, one program each way (tokio-paths): yield_now()
    loops, mpsc and Notify ping-pong, 1 ms timers, spawn and await. Every
    probe on an emulated instruction, in the release build and with fat LTO
    (where raw::schedule is a thunk that moves its argument before its tail
    jump); every poll counted as the program counts them; a yield loop's
    wakes, which its worker makes after the poll from the defer list, are the
    task's own (a self-wake loop), and no other path's are."""
    variant = ""
    spawn_probed = True

    @classmethod
    def setUpClass(cls):
        harness.require_root()
        cls.mixed = traced_paths_run(cls.variant, "all", 3)
        cls.yields = traced_paths_run(cls.variant, "yield", 3)
        cls.others = {m: traced_paths_run(cls.variant, m, 2) for m in ("timer", "mpsc", "join")}

    def every_run(self):
        return [("all", self.mixed), ("yield", self.yields), *self.others.items()]

    def test_no_lost_waker(self):
        """Every task keeps its waker where it waits (a channel, a timer, a
        Notify, a JoinHandle, the defer list): none is unwakeable."""
        for mode, run in self.every_run():
            self.assertNotIn("lost-waker", harness.begun(run), f"{mode}: {run.describe()}")

    def test_every_probe_emulated(self):
        for mode, run in self.every_run():
            self.assertTrue(run.attached, run.describe())
            self.assertNotIn("probes single-stepped", run.tracer_stderr, run.describe())

    def test_polls_match_the_program(self):
        for mode, run in self.every_run():
            self.assertIsNotNone(run.counts, run.describe())
            r = run.report["counts"]
            self.assertEqual(r["polls"], run.counts["polls"], f"{mode}: {run.describe()}")
            if self.spawn_probed:
                self.assertEqual(r["tasks_spawned"], run.counts["tasks"], run.describe())
            self.assertEqual(run.report["events"]["dropped"], 0, run.describe())

    def test_yield_loops_wake_themselves(self):
        run = self.yields
        r = run.report["counts"]
        # every yield is a wake of the yielding task by its worker, after the poll
        self.assertGreaterEqual(r["self_wakes"], 0.99 * r["polls"], run.describe())
        thrash = [a for a in run.alert_log if a["kind"] == "waker-thrash" and a["state"] == "begin"]
        self.assertEqual({a["reason"] for a in thrash}, {"self-wake loop"}, run.describe())
        self.assertTrue(all("yielder" in a["task"]["name"] for a in thrash), run.describe())
        # the program's 16 yield loops, each named
        self.assertEqual(len({a["task"]["id"] for a in thrash}), 16, run.describe())
        self.assertEqual(harness.begun(run), {"waker-thrash"}, run.describe())

    def test_other_paths_are_not_self_wakes(self):
        """Timers fire and channels wake from the worker too, between polls:
        not the task's own wakes, and no thrash."""
        for mode, run in self.others.items():
            r = run.report["counts"]
            self.assertLess(r["self_wakes"], 0.05 * r["wakes"], f"{mode}: {run.describe()}")
            self.assertNotIn("waker-thrash", harness.begun(run), f"{mode}: {run.describe()}")
        # all at once: only yield loops may thrash
        for a in self.mixed.alert_log:
            if a["kind"] == "waker-thrash":
                self.assertIn("yielder", a["task"]["name"], self.mixed.describe())


class PathsLTO(Paths):
    variant = "-lto"
    spawn_probed = False  # bind inlined


class LostWaker(unittest.TestCase):
    """Two tasks return Pending without keeping their waker (one detached,
    one whose JoinHandle main holds): tokio's reference count says nothing
    can wake them, and the alert comes at their poll's end, not after
    --lost-waker (10 s) of silence; tasks that wait as long with their
    waker kept (a oneshot answered at the end, 700 ms sleeps) raise nothing.
    In the release build and with fat LTO, where OwnedTasks::remove is
    inlined and the silence-based detector cannot tell a finished task.
    `forgotten` has the layout of `child`, whose drop glue LLVM merges with
    its own under fat LTO: named by that glue, it would be called `child`.
    A name must be right or absent: `forgotten` in the release build, and
    with fat LTO `forgotten` or none ("task")."""

    def check(self, variant, named):
        exe = os.path.join(harness.BUILD, "tokio-paths" + variant)
        run = traced_tokio_run(variant, duration=3, trace=False, exe=exe, exe_args=["lost"])
        self.assertIn("tokio-paths: lost=2", run.executor_stdout, run.describe())
        begins = [a for a in run.alert_log if a["state"] == "begin"]
        self.assertEqual(len(begins), 2, run.describe())
        for a in begins:
            self.assertEqual(a["kind"], "lost-waker", run.describe())
            self.assertTrue(a["unwakeable"], run.describe())
            name = a["task"]["name"]
            if named or name != "task":
                self.assertIn("forgotten", name, run.describe())
            self.assertIn("nothing can ever wake it", a["message"], run.describe())
        self.assertEqual(len({a["task"]["id"] for a in begins}), 2, run.describe())
        # still lost when the program ended (the runtime dropped them at shutdown)
        self.assertIn("lost-waker 2", run.tracer_stderr, run.describe())

    def test_release(self):
        harness.require_root()
        self.check("", named=True)

    def test_fat_lto(self):
        harness.require_root()
        self.check("-lto", named=False)


class Neighbour(unittest.TestCase):
    """A task wakes another, then blocks its worker for 30 ms: the woken one
    waits in that worker's LIFO slot, which no other worker steals from. The
    long poll's end names it, and how long it waited. In the release build
    and with fat LTO."""

    @classmethod
    def setUpClass(cls):
        harness.require_root()

    def check(self, trace, variant=""):
        exe = os.path.join(harness.BUILD, "tokio-neighbour" + variant)
        run = traced_tokio_run(variant, tracer_args=harness.DETECTOR_ARGS, trace=trace, exe=exe)
        m = re.search(r"rounds=(\d+) woken=(\d+) worst_wait_ms=([\d.]+)", run.executor_stdout)
        self.assertIsNotNone(m, run.describe())
        woken, worst_ms = int(m[2]), float(m[3])
        self.assertGreaterEqual(woken, 8, run.describe())
        ends = [a for a in run.alert_log if a["kind"] == "long-poll" and a["state"] == "end"]
        self.assertEqual(len(ends), 1, run.describe())
        end = ends[0]
        self.assertIn("noisy_neighbour", end["task"]["name"])
        self.assertEqual([v["task"]["name"].split("::")[1] for v in end["victims"]], ["victim"],
                         run.describe())
        # the program's own worst wake-to-answer, and ours: the part the hold covered
        self.assertGreater(end["victims"][0]["waited_ns"], 25e6)
        # the blocker woke it into its own worker's LIFO slot, which no other worker steals from
        self.assertTrue(end["victims"][0]["woken_by_holder"], run.describe())
        self.assertTrue(end["victims"][0]["lifo_slot"], run.describe())
        self.assertIn("into its LIFO slot", end["message"], run.describe())
        self.assertLessEqual(end["victims"][0]["waited_ns"], worst_ms * 1e6 + 1e6)
        # one wait per round (the first may precede the attach)
        self.assertIn(end["waits_behind"], (woken - 1, woken), run.describe())
        self.assertIn("it kept waiting 'tokio_neighbour::victim::{{closure}}'",
                      end["message"])
        begins = [a for a in run.alert_log if a["state"] == "begin"]
        self.assertTrue(all(a["kind"] == "long-poll" for a in begins), run.describe())
        self.assertNotIn("victims", begins[0])

    def test_full_trace(self):
        self.check(True)

    def test_maps_only(self):
        """The victim's late poll crosses the ring even maps-only."""
        self.check(False)

    def test_fat_lto(self):
        self.check(False, "-lto")


class Attach(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        harness.require_root()

    def test_stripped_binary_says_what_is_missing(self):
        p = subprocess.Popen([app("-stripped"), "--duration", "5"], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        try:
            self.assertTrue(harness.wait_line(p, rf"^tokio-app: pid {p.pid} "),
                            "tokio-app did not start")
            r = harness.run_tracer("-p", p.pid)
            self.assertEqual(r.returncode, 1, r.stderr)
            self.assertIn("no known runtime in pid", r.stderr)
            self.assertIn("its binary is stripped (no symbol table)", r.stderr)
            self.assertIn("rebuild without `strip = true`", r.stderr)
            self.assertEqual(r.stderr.count("\n"), 1, r.stderr)
        finally:
            harness.kill(p)
            p.communicate()

    def test_attach_and_detach_under_load_again_and_again(self):
        p = subprocess.Popen([app(""), "--duration", "16", "--rate", "4000"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            self.assertTrue(harness.wait_line(p, rf"^tokio-app: pid {p.pid} "),
                            "tokio-app did not start")
            for i in range(3):
                r = harness.run_tracer("-p", p.pid, "-d", "1.5", "--summary", "json", "-q")
                self.assertEqual(r.returncode, 0, r.stderr)
                report = json.loads(r.stdout)
                self.assertGreater(report["counts"]["polls"], 5000, f"attach {i}")
                names = {t["name"] for t in report["tasks"]}
                self.assertTrue(any("burn_cpu" in n for n in names), names)
                self.assertTrue(harness.wait_for(lambda: not our_progs()), f"attach {i}")
                time.sleep(0.5)  # deliberate: it runs on untraced a while between attaches
            out, err = p.communicate(timeout=30)
            # the program never noticed: it finishes and counts as always
            self.assertEqual(p.returncode, 0, err)
            self.assertRegex(out, APP_LINE)
        finally:
            harness.kill(p)
            p.communicate()

    def test_hundreds_of_futures(self):
        """200 future types: 400 raw::poll instances, all probed, all named,
        all gone after detach."""
        links = harness.wait_for(lambda: not our_progs()) and len(json.loads(
            subprocess.run(["bpftool", "-j", "link", "show"], capture_output=True,
                           text=True).stdout or "[]"))
        p = subprocess.Popen([os.path.join(harness.BUILD, "tokio-many"), "--duration", "8"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            self.assertTrue(harness.wait_line(p, rf"^tokio-many: pid {p.pid}$"),
                            "tokio-many did not start")
            r = harness.run_tracer("-p", p.pid, "-d", "2", "--summary", "json", "-q")
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("400 raw::poll instances (400 named by future type", r.stderr)
            report = json.loads(r.stdout)
            names = {t["name"] for t in report["tasks"]}
            self.assertEqual(len(names), 50, names)  # the report's top 50, all distinct
            self.assertTrue(all(re.fullmatch(r"tokio_many::futures::f\d{3}::\{\{closure\}\}", n)
                                for n in names), names)
            self.assertGreater(report["counts"]["polls"], 2 * 200)
            self.assertTrue(harness.wait_for(lambda: not our_progs()))
            after = len(json.loads(subprocess.run(["bpftool", "-j", "link", "show"],
                                                  capture_output=True, text=True).stdout or "[]"))
            self.assertEqual(after, links)
            out, _ = p.communicate(timeout=30)
            self.assertEqual(p.returncode, 0)
            self.assertIn("tasks=200", out)
        finally:
            harness.kill(p)
            p.communicate()

    def test_maps_only_counts_exactly(self):
        run = traced_tokio_run("", trace=False)
        self.assertEqual(run.tracer_rc, 0, run.describe())
        r = run.report
        self.assertEqual(r["counts"]["polls"], run.counts["polls"])
        self.assertEqual(r["counts"]["wakes"], run.counts["wakes"])
        self.assertEqual(sum(w["poll"]["count"] for w in r["workers"]), run.counts["polls"])
        self.assertLess(r["events"]["received"], 100)  # the long polls only
        self.assertEqual(harness.begun(run), {"long-poll"})


del TokioBuild

if __name__ == "__main__":
    unittest.main()
