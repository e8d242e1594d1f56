# SPDX-License-Identifier: MIT
"""Maps-only mode (--no-trace), the report, the live view: the aggregates in
BPF maps must count what the executor did, detect what each scenario was
built to show without per-event traffic, and agree with a full trace of the
same run."""
import fcntl
import json
import math
import os
import pty
import re
import select
import shutil
import signal
import struct
import subprocess
import tempfile
import termios
import unittest

from tests.integration import harness, trace_check

DURATION = 3


class MapsOnly(unittest.TestCase):
    """Every scenario in maps-only mode, traced from its first poll to exit."""
    TRACER_ARGS = ()

    @classmethod
    def setUpClass(cls):
        harness.require_root()
        cls.runs = {s: harness.traced_run(s, DURATION, trace=False,
                                          tracer_args=cls.TRACER_ARGS)
                    for s in harness.EXPECTED_ALERTS}

    def test_raises_exactly_the_alerts_each_scenario_is_built_for(self):
        for scenario, run in self.runs.items():
            with self.subTest(scenario=scenario):
                self.assertEqual(run.tracer_rc, 0, run.describe())
                self.assertEqual(harness.begun(run), harness.EXPECTED_ALERTS[scenario],
                                 run.describe())

    def test_maps_count_what_the_executor_did(self):
        for scenario, run in self.runs.items():
            with self.subTest(scenario=scenario):
                c, r = run.counts, run.report["counts"]
                self.assertEqual(r["polls"], c["polls"])
                self.assertEqual(r["wakes"], c["wakes"])
                self.assertEqual(r["tasks_spawned"], c["tasks"])
                self.assertEqual(r["steals"], c["steals"])
                self.assertEqual(r["stolen"], c["stolen"])
                self.assertEqual(r["parks"], c["parks"])
                self.assertEqual(sum(w["poll"]["count"] for w in run.report["workers"]),
                                 c["polls"])
                self.assertEqual(run.report["mode"], "maps")

    def test_no_per_event_traffic(self):
        """Only the polls a detector needs cross the ring buffer: long ones
        and late ones, which a run where nothing is wrong has few of (a
        request queued behind thrash's yielders on a busy machine can wait
        past --sched-delay: it crosses, to be judged)."""
        for scenario, run in self.runs.items():
            with self.subTest(scenario=scenario):
                ev = run.report["events"]
                self.assertEqual(ev["dropped"], 0)
                for kind in ("spawn", "wake", "steal", "park"):
                    self.assertEqual(ev["by_kind"][kind], 0, kind)
                if scenario in ("healthy", "fanout", "lost", "thrash"):
                    self.assertLess(ev["received"], 0.01 * run.counts["polls"])
                self.assertLess(ev["received"], 0.5 * run.counts["polls"])

    def test_steal_matrix(self):
        run = self.runs["healthy"]
        steals = run.report["steals"]
        self.assertEqual(sum(s["ops"] for s in steals), run.counts["steals"])
        self.assertEqual(sum(s["tasks"] for s in steals), run.counts["stolen"])
        self.assertTrue(all(s["thief"] != s["victim"] for s in steals))
        self.assertEqual(self.runs["starve"].report["steals"], [])

    def test_top_tasks_and_names(self):
        run = self.runs["noisy"]
        top = run.report["tasks"]
        self.assertEqual(top[0]["name"], "noisy")  # most poll time by far
        self.assertEqual(top, sorted(top, key=lambda t: -t["poll_ns"]))
        self.assertGreaterEqual(top[0]["max_poll_ns"], 15e6)
        thrash = [t for t in self.runs["thrash"].report["tasks"] if t["name"] == "thrash"]
        self.assertEqual(len(thrash), 8)
        for t in thrash:
            self.assertGreater(t["self_wakes"], 0.9 * t["wakes"])


class MapsOnlyHashedTasks(MapsOnly):
    """The same with one task slot: every other task's state and statistics
    live in the hash maps, the path tasks take when their slot is held."""
    TRACER_ARGS = ("--task-slots", "1")


def slot(ns):
    """The slot of the summary's histograms a value belongs in, by their documented layout
    (docs/alerts.md: slots[i] counts values in [2^i, 2^(i+1)) ns, slot 0 also 0, slot 39
    all above): what is read from the file, not how the BPF side computes it."""
    return min(39, max(0, int(ns).bit_length() - 1))


def exact_percentile(values, p):
    values = sorted(values)
    rank = max(1, math.ceil(len(values) * p / 100))
    return values[rank - 1]


class SameRun(unittest.TestCase):
    """A maps-only tracer and a full tracer on one run at once. The full
    tracer's histograms (the maps, kept in both modes by the same code
    before the ring is asked for a record) are held against its own trace:
    one window, the same probe hits. The maps-only tracer's windows differ
    by when each attached and detached, and each one's attach and detach
    slow the target while the other watches: its percentiles are only
    checked to be bucket bounds."""

    @classmethod
    def setUpClass(cls):
        harness.require_root()
        cls.tmp = tempfile.mkdtemp(prefix="asynctraced-")
        trace = os.path.join(cls.tmp, "full.json")
        # long enough for both tracers to load, attach and trace 3 s on a busy host: killed after
        ex = harness.start_executor("healthy", 20, wait_traced=False)
        if not harness.wait_line(ex, rf"^sample-executor: pid {ex.pid} "):
            harness.reap(ex)
            raise AssertionError("the executor did not start")
        maps = subprocess.Popen([harness.TRACER, "-p", str(ex.pid), "--no-trace", "-q",
                                 "-d", "3", "--summary", "json"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        full = subprocess.Popen([harness.TRACER, "-p", str(ex.pid), "-q", "-d", "3", "-o",
                                 trace, "--summary", "json"], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        out, cls.maps_err = maps.communicate(timeout=60)
        full_out, cls.full_err = full.communicate(timeout=60)
        harness.kill(ex)
        ex.communicate()
        cls.report = json.loads(out)
        cls.full_report = json.loads(full_out)
        cls.events = trace_check.load(trace)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def merged(self, name):
        """The full tracer's histogram name, its workers' summed."""
        slots = [0] * 40
        for w in self.full_report["workers"]:
            for i, n in enumerate(w[name]["slots"]):
                slots[i] += n
        return slots

    def percentile_slot(self, slots, p):
        total = sum(slots)
        rank = max(1, math.ceil(total * p / 100))
        seen = 0
        for i, n in enumerate(slots):
            seen += n
            if seen >= rank:
                return i
        return len(slots) - 1

    def check(self, hist, exact_us):
        self.assertGreater(len(exact_us), 5000)
        for p in (50, 90, 99):
            got = self.percentile_slot(hist, p)
            want = slot(exact_percentile(exact_us, p) * 1000)
            # the two tracers time each poll a probe hit apart: a value at a
            # slot's edge may land in the neighbour
            self.assertLessEqual(abs(got - want), 1, f"p{p}: slot {got} vs exact slot {want}")

    def test_poll_time_percentiles_agree_with_the_full_trace(self):
        durs = [e["dur"] for e in self.events if e.get("ph") == "X" and e.get("cat") == "poll"]
        self.check(self.merged("poll"), durs)

    def test_wake_delay_percentiles_agree_with_the_full_trace(self):
        delays = [e["args"]["wake_delay_us"] for e in self.events
                  if e.get("ph") == "X" and e.get("cat") == "poll"
                  and "wake_delay_us" in e["args"]]
        self.check(self.merged("delay"), delays)

    def test_report_percentiles_are_bucket_bounds(self):
        for w in self.report["workers"]:
            h = w["poll"]
            self.assertLessEqual(h["p50_ns"], h["p99_ns"])
            self.assertLessEqual(h["p99_ns"], h["p100_ns"])
            self.assertEqual(h["p50_ns"] & (h["p50_ns"] - 1), 0)  # a power of two


class Terminal(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        harness.require_root()

    def setUp(self):
        # outlives any tracer of these tests (attach, then -d 4 at most): killed after
        self.ex = harness.start_executor("noisy", 20, wait_traced=False)
        if not harness.wait_line(self.ex, rf"^sample-executor: pid {self.ex.pid} "):
            harness.reap(self.ex)
            self.fail("the executor did not start")

    def tearDown(self):
        harness.kill(self.ex)
        self.ex.communicate()

    def test_live_view_redraws_every_second(self):
        r = harness.run_tracer("-p", self.ex.pid, "-d", "3.5", "--live")
        self.assertEqual(r.returncode, 0, r.stderr)
        views = r.stderr.count("top tasks by poll time in the last second")
        self.assertGreaterEqual(views, 2, r.stderr)
        # redrawn in place: cursor up over the previous view, clear below
        self.assertRegex(r.stderr, r"\x1b\[\d+A\x1b\[J")
        self.assertRegex(r.stderr, r" worker  busy  queue  polls/s  steals/s  poll p50  ")
        self.assertRegex(r.stderr, r"noisy #\d+")
        # alerts still get their line, and the view is gone before the report
        self.assertIn("asynctraced: alert: long poll: task 'noisy'", r.stderr)
        tail = r.stderr[r.stderr.index("asynctraced: summary"):]
        self.assertNotIn("top tasks by poll time in the last second", tail)

    def test_live_view_in_sample_mode(self):
        """Sample mode's live view: polls and the hog's task as in probe mode;
        what samples cannot see (wakes, steals) a dash, never a rate of 0."""
        r = harness.run_tracer("-p", self.ex.pid, "-d", "3.5", "--live", "--mode", "sample")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertNotRegex(r.stderr, r"wakes \d+/s|steals \d+/s")
        # nor in the report: no steal matrix of zeros
        self.assertNotIn("steal matrix", r.stderr)
        self.assertRegex(r.stderr, r"noisy #\d+")
        row = re.search(r"\n +0 +\d+% .*", r.stderr)
        self.assertIsNotNone(row, r.stderr)
        # worker, busy, queue, polls/s, then steals/s: a dash
        self.assertEqual(row[0].split()[4], "-", row[0])

    def on_terminal(self, cols, *args, rows=40):
        """The tracer's stderr on a pseudo-terminal cols wide and rows high (as
        `stty cols` and `stty rows` set it): as written, and as the lines a
        person sees, without the sequences that redraw the view."""
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
        tr = subprocess.Popen([harness.TRACER, *map(str, args)], stdin=subprocess.DEVNULL,
                              stdout=subprocess.DEVNULL, stderr=slave, env=env)
        os.close(slave)
        out = b""
        try:
            while True:
                ready, _, _ = select.select([master], [], [], 30)
                if not ready:
                    break
                try:
                    data = os.read(master, 65536)
                except OSError:  # EIO: the last writer closed the terminal
                    break
                if not data:
                    break
                out += data
        finally:
            os.close(master)
            rc = harness.kill(tr, signal.SIGINT)
        text = out.decode("utf-8")
        self.assertEqual(rc, 0, text)
        return text, re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", text).replace("\r", "").split("\n")

    def test_live_view_and_report_fit_the_terminal(self):
        """Every line of the live view, the alerts and the report fits the
        terminal's width: columns go, least important first, names are cut,
        long lines wrap at spaces; no row is wrapped by the terminal."""
        for cols in (80, 120):
            with self.subTest(cols=cols):
                ex = harness.start_executor("noisy", 20, wait_traced=False)
                self.addCleanup(ex.communicate)
                self.addCleanup(harness.kill, ex)
                self.assertTrue(harness.wait_line(ex, rf"^sample-executor: pid {ex.pid} "),
                                "the executor did not start")
                raw, lines = self.on_terminal(cols, "-p", ex.pid, "-d", "3.5")
                self.assertGreaterEqual(raw.count("top tasks by poll time in the last second"),
                                        2, raw)
                self.assertIn("asynctraced: summary for pid", raw)
                self.assertIn("steal matrix", raw)
                self.assertIn("asynctraced: alert: long poll: task 'noisy'", raw)
                # the line that says what was attached is src/main.c's own
                wide = [l for l in lines if len(l) > cols
                        and not l.startswith("asynctraced: tracing pid")]
                self.assertEqual(wide, [], raw)
                # the view never reaches the last column, where a terminal may wrap
                view = [l for l in lines if l.startswith(" worker  busy")]
                self.assertTrue(view, raw)
                self.assertTrue(all(len(l) < cols for l in view), view)
        # wider, more columns
        self.assertIn("delay p50", raw)

    def test_live_view_fits_a_short_terminal(self):
        """More workers than rows: the view shows those it has room for and says
        how many more, so that it is never taller than the terminal (moving
        the cursor up over it to redraw cannot go above the screen)."""
        ex = harness.start_executor("noisy", 20, workers=8, wait_traced=False)
        self.addCleanup(ex.communicate)
        self.addCleanup(harness.kill, ex)
        self.assertTrue(harness.wait_line(ex, rf"^sample-executor: pid {ex.pid} "),
                        "the executor did not start")
        raw, lines = self.on_terminal(100, "-p", ex.pid, "-d", "3.5", rows=14)
        heights = [int(n) for n in re.findall(r"\x1b\[(\d+)A", raw)]
        self.assertGreaterEqual(len(heights), 2, raw)
        self.assertLessEqual(max(heights), 13, raw)
        self.assertRegex(raw, r" \.\.\. \d+ more workers: a taller terminal shows them")
        # the report still lists every worker
        self.assertRegex(raw, r"\n +7 +\d+ +[\d.]+%")

    def test_quiet_and_no_live_view_when_not_a_terminal(self):
        r = harness.run_tracer("-p", self.ex.pid, "-d", "1.5")
        self.assertNotIn("in the last second", r.stderr)  # stderr is a pipe here
        self.assertIn("asynctraced: alert: long poll", r.stderr)
        r = harness.run_tracer("-p", self.ex.pid, "-d", "1.5", "-q")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertNotIn("asynctraced: alert", r.stderr)
        self.assertIn("asynctraced: summary", r.stderr)
        self.assertIn("\nalert log: ", r.stderr)  # the report lists them

    def test_sigusr1_prints_the_report_so_far(self):
        tr = subprocess.Popen([harness.TRACER, "-p", str(self.ex.pid), "-q", "-d", "4"],
                              stderr=subprocess.PIPE, text=True)
        # attached (SIGUSR1 handled from then on), and its -d 4 not over
        self.assertTrue(harness.wait_line(tr, "Ctrl-C to stop"), "not attached")
        tr.send_signal(signal.SIGUSR1)
        _, err = tr.communicate(timeout=30)
        self.assertEqual(tr.returncode, 0, err)
        self.assertEqual(err.count("asynctraced: summary for pid"), 2, err)
        self.assertIn("still tracing", err)
        self.assertEqual(err.count("steal matrix"), 2)
        self.assertIn("duration elapsed", err)


if __name__ == "__main__":
    unittest.main()
