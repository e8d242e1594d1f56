# SPDX-License-Identifier: MIT
"""The tokio build matrix: tests/tokio's programs built the ways users build
theirs (scripts/tokio-matrix.sh: both of Debian 12's compilers, a small
service's features and full, opt-level 2, 3 and "s", codegen-units 1 and 16,
thin and fat LTO, panic=abort, debug 0 and 1, x86-64-v3, CET; and the
release, fat-LTO and CET builds of the Makefile), each traced as a user
would, with the default placement. For every build: every probe attached
where placement put it (none refused by the kernel, none moved to its entry
after a refusal: the kernel agreed with the rules placement followed), every
poll and wake counted as the program counts them, every future named (or the
ambiguity said), the CPU hog and the blocking call named with their cause, the
two lost wakers exact, yield_now loops found as waker thrash, and timer wakes
not taken for the task's own."""
import os
import re
import subprocess
import unittest

from tests.integration import harness
from tests.integration.test_tokio import PATHS_LINE, traced_tokio_run

TOP = os.path.join(os.path.dirname(__file__), "..", "..")


def builds():
    """{name: (tokio-app, tokio-paths)} for every build of the matrix."""
    b = harness.BUILD
    out = {
        "release": (f"{b}/tokio-app", f"{b}/tokio-paths"),
        "fat-lto": (f"{b}/tokio-app-lto", f"{b}/tokio-paths-lto"),
        "cet": (f"{b}/tokio-app-cet", f"{b}/tokio-paths-cet"),
    }
    names = os.environ.get("TOKIO_MATRIX") or subprocess.run(
        [os.path.join(TOP, "scripts", "tokio-matrix.sh"), "--list"], capture_output=True,
        text=True, check=True).stdout
    for line in names.split("\n") if "\n" in names else names.split():
        name = line.split(" ")[0]
        if name:
            out[name] = (f"{b}/matrix/{name}/tokio-app", f"{b}/matrix/{name}/tokio-paths")
    return out


# Why a probe may stay on a single-stepped entry (placement.c): the function itself
SOUND_REASONS = ("may change what the probe reads", "overwrites the argument it reads",
                 "a branch lands between", "moves the stack pointer, which its return probe reads",
                 "no instruction the kernel emulates in its first")


class MatrixBuild(unittest.TestCase):
    name = None
    app = paths = None

    @classmethod
    def setUpClass(cls):
        harness.require_root()
        cls.app_run = traced_tokio_run("", duration=3, trace=False, exe=cls.app,
                                       tracer_args=["-v"])
        cls.lost = cls.paths_run("lost")
        cls.yields = cls.paths_run("yield")
        cls.timers = cls.paths_run("timer")

    @classmethod
    def paths_run(cls, mode):
        run = traced_tokio_run("", duration=3, trace=False, exe=cls.paths, exe_args=[mode],
                               tracer_args=["--long-poll", "15ms"])
        m = PATHS_LINE.search(run.executor_stdout)
        run.counts = m and dict(tasks=int(m[2]), polls=int(m[3]), ops=int(m[4]))
        return run

    def runs(self):
        return [self.app_run, self.lost, self.yields, self.timers]

    def test_every_probe_where_placement_put_it(self):
        for run in self.runs():
            ctx = f"{self.name}: {run.describe()}"
            self.assertTrue(run.attached, ctx)
            self.assertEqual(run.tracer_rc, 0, ctx)
            self.assertNotIn("refused", run.tracer_stderr, ctx)
            self.assertNotIn("failed", run.tracer_stderr, ctx)
        # -v: a probe still single-stepped is so for a reason its function gives
        for line in self.app_run.tracer_stderr.splitlines():
            m = re.search(r"single-stepped: (.*)\)", line)
            if m:
                self.assertTrue(any(r in m[1] for r in SOUND_REASONS), f"{self.name}: {line}")

    def test_counts_match_the_program(self):
        run = self.app_run
        c, r = run.counts, run.report["counts"]
        ctx = f"{self.name}: {run.describe()}"
        self.assertEqual((r["polls"], r["wakes"]), (c["polls"], c["wakes"]), ctx)
        self.assertEqual(run.report["events"]["dropped"], 0, ctx)
        # (the lost mode's program counts a task's polls when it completes: lost ones never do)
        self.assertEqual(self.yields.report["counts"]["polls"], self.yields.counts["polls"],
                         f"{self.name}: {self.yields.describe()}")

    def test_futures_named(self):
        m = re.search(r"(\d+) raw::poll instances \((\d+) named by future type(, some share)?",
                      self.app_run.tracer_stderr)
        self.assertIsNotNone(m, self.app_run.describe())
        # 8 future types for each of tokio's two schedulers; unnamed only where code is shared
        self.assertEqual(int(m[1]), 16, f"{self.name}: {m[0]}")
        if int(m[2]) < 16:
            self.assertTrue(m[3], f"{self.name}: {m[0]}: unnamed, and no ambiguity said")

    def test_long_polls_named_with_their_cause(self):
        """The hog and the blocking call, each with its cause, in every round
        (one every 250 ms). Another task may be held up by its host (CI's
        virtual machines have stretches where the worker threads run at a
        fraction of their speed, and the kernel charges them for it): its long
        polls are let be only if the program, timing each poll on the wall
        clock itself, saw them too."""
        seen = {m[1]: (int(m[2]), float(m[3])) for m in re.finditer(
            r"tokio-app: long polls (\w+)=(\d+) longest=([\d.]+)ms",
            self.app_run.executor_stderr)}
        got, tracer_counts = {}, {}
        ends = {a["episode"]: a for a in self.app_run.alert_log if a["state"] == "end"}
        for a in self.app_run.alert_log:
            if a["kind"] == "long-poll" and a["state"] == "begin":
                name = re.sub(r".*workload::(\w+)::.*", r"\1", a["task"]["name"])
                end = ends.get(a["episode"], a)
                tracer_counts[name] = tracer_counts.get(name, 0) + end.get("count", 1)
                if name in ("burn_cpu", "blocking_call"):
                    got[name] = a["cause"]
        ctx = f"{self.name}: the program saw {seen}; {self.app_run.describe()}"
        for name, count in tracer_counts.items():
            self.assertIn(name, seen, f"a false alert: {name} ({count} long polls) {ctx}")
            if name not in ("burn_cpu", "blocking_call"):
                print(f"\n{self.name}: {name} was slowed by the machine: {count} long polls, "
                      f"the program saw {seen[name]}")
        self.assertEqual(got, {"burn_cpu": "cpu-bound", "blocking_call": "blocked"}, ctx)
        # their rounds (eleven in the 3 s), every one a long poll but for a few
        for name in ("burn_cpu", "blocking_call"):
            self.assertGreaterEqual(tracer_counts[name], 8, ctx)
            self.assertGreaterEqual(seen[name][0], tracer_counts[name] - 1, ctx)
        self.assertEqual(harness.begun(self.app_run), {"long-poll"}, self.app_run.describe())

    def test_lost_wakers_exact(self):
        run = self.lost
        ctx = f"{self.name}: {run.describe()}"
        self.assertIn("tokio-paths: lost=2", run.executor_stdout, ctx)
        begins = [a for a in run.alert_log if a["state"] == "begin"]
        self.assertEqual([a["kind"] for a in begins], ["lost-waker"] * 2, ctx)
        self.assertTrue(all(a["unwakeable"] for a in begins), ctx)
        # a name is right or absent: both lost tasks run `forgotten`
        self.assertTrue(all(a["task"]["name"] == "task" or "forgotten" in a["task"]["name"]
                            for a in begins), ctx)
        self.assertEqual(len({a["task"]["id"] for a in begins}), 2, ctx)

    def test_yield_loops_are_waker_thrash(self):
        run = self.yields
        r = run.report["counts"]
        ctx = f"{self.name}: {run.describe()}"
        self.assertGreaterEqual(r["self_wakes"], 0.99 * r["polls"], ctx)
        thrash = [a for a in run.alert_log if a["kind"] == "waker-thrash" and a["state"] == "begin"]
        self.assertEqual({a["reason"] for a in thrash}, {"self-wake loop"}, ctx)
        self.assertEqual(len({a["task"]["id"] for a in thrash}), 16, ctx)
        self.assertEqual(harness.begun(run), {"waker-thrash"}, ctx)

    def test_timer_wakes_are_not_the_tasks_own(self):
        """1 ms timers fire from the worker between polls, as a deferred wake
        does: not self-wakes, and no thrash."""
        run = self.timers
        r = run.report["counts"]
        ctx = f"{self.name}: {run.describe()}"
        self.assertGreater(r["wakes"], 1000, ctx)
        self.assertLess(r["self_wakes"], 0.05 * r["wakes"], ctx)
        self.assertEqual(harness.begun(run), set(), ctx)


for _name, (_app, _paths) in builds().items():
    _cls = type(f"Build_{_name.replace('-', '_')}", (MatrixBuild,),
                {"name": _name, "app": _app, "paths": _paths,
                 "__doc__": f"The {_name} build of the tokio matrix."})
    globals()[_cls.__name__] = _cls
del MatrixBuild, _cls, _name, _app, _paths

if __name__ == "__main__":
    unittest.main()
