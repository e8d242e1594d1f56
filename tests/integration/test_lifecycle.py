# SPDX-License-Identifier: MIT
"""Attaching to a running executor and leaving it as it was: detach leaves
nothing behind, signals stop the tracer cleanly, a killed tracer's trace
still loads, a full ring buffer is counted, and the odd targets (stripped,
in another mount namespace) still work."""
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
import unittest

from tests.integration import harness, trace_check

OUR_PROGS = ("usdt_", "tokio_", "handle_sched_sw")


def our_progs():
    out = subprocess.run(["bpftool", "-j", "prog", "show"], capture_output=True, text=True,
                         check=True).stdout
    return [p for p in json.loads(out or "[]") if p.get("name", "").startswith(OUR_PROGS)]


def link_ids():
    out = subprocess.run(["bpftool", "-j", "link", "show"], capture_output=True, text=True,
                         check=True).stdout
    return {l["id"] for l in json.loads(out or "[]")}


def semaphores(pid, exe):
    """The value of every asynctrace semaphore in the live process."""
    notes = subprocess.run(["readelf", "-n", exe], capture_output=True, text=True,
                           check=True).stdout
    probes = re.findall(r"Provider: asynctrace\s+Name: (\w+)\s+Location: \S+ Base: \S+ "
                        r"Semaphore: (0x[0-9a-f]+)", notes)
    bias = 0
    real = os.path.realpath(exe)
    with open(f"/proc/{pid}/maps") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 6 and parts[5] == real and int(parts[2], 16) == 0:
                bias = int(parts[0].split("-")[0], 16)  # PIE: first PT_LOAD at 0
                break
    values = {}
    with open(f"/proc/{pid}/mem", "rb") as mem:
        for name, addr in probes:
            mem.seek(bias + int(addr, 16))
            values[name] = int.from_bytes(mem.read(2), "little")
    return values


class Lifecycle(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        harness.require_root()

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="asynctraced-")
        self.procs = []

    def tearDown(self):
        harness.reap(*self.procs)
        shutil.rmtree(self.tmp, ignore_errors=True)

    def executor(self, scenario="healthy", duration=30, exe=None, wrap=()):
        p = subprocess.Popen([*wrap, exe or harness.EXECUTOR, "--scenario", scenario,
                              "--duration", str(duration), "--workers", "2"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.procs.append(p)
        # running once its runtime has started, which it says
        self.assertTrue(harness.wait_line(p, rf"^sample-executor: pid {p.pid} "),
                        "executor died at start")
        return p

    def test_detach_leaves_nothing_attached(self):
        # programs of an earlier test's tracer are freed asynchronously
        self.assertTrue(harness.wait_for(lambda: not our_progs()), our_progs())
        links_before = link_ids()
        # long enough for two attaches and detaches on a busy machine
        ex = self.executor(duration=15)
        exe = harness.EXECUTOR
        self.assertEqual(set(semaphores(ex.pid, exe).values()), {0})
        for attempt in range(2):  # attach twice in a row: the second works as well
            tr = subprocess.Popen([harness.TRACER, "-p", str(ex.pid), "-d", "1"],
                                  stderr=subprocess.PIPE, text=True)
            # while attached, the kernel raised every semaphore
            self.assertTrue(harness.wait_for(
                lambda: set(semaphores(ex.pid, exe).values()) == {1}), "not attached")
            self.assertTrue(our_progs())
            _, err = tr.communicate(timeout=30)
            self.assertEqual(tr.returncode, 0, err)
            self.assertIn("duration elapsed", err)
            self.assertRegex(err, r"polls\s+[1-9]\d*")
            self.assertEqual(set(semaphores(ex.pid, exe).values()), {0}, f"attempt {attempt}")
            self.assertTrue(harness.wait_for(lambda: not our_progs()), our_progs())
            self.assertEqual(link_ids(), links_before)
        # the executor never noticed: it runs on and exits normally
        out, err = ex.communicate(timeout=30)
        self.assertEqual(ex.returncode, 0, err)
        self.assertIn("polls=", out)

    def test_sigint_stops_cleanly(self):
        ex = self.executor()
        trace = os.path.join(self.tmp, "t.json")
        tr = subprocess.Popen([harness.TRACER, "-p", str(ex.pid), "-o", trace],
                              stderr=subprocess.PIPE, text=True)
        self.assertTrue(harness.wait_line(tr, "Ctrl-C to stop"), "not attached")
        time.sleep(1)  # let it trace a while: the interrupt cuts a trace with polls in it
        tr.send_signal(signal.SIGINT)
        _, err = tr.communicate(timeout=30)
        self.assertEqual(tr.returncode, 0, err)
        self.assertIn("interrupted", err)
        with open(trace) as f:
            events = json.load(f)  # finished: strict JSON
        self.assertEqual(trace_check.check(events), [])
        self.assertTrue(harness.wait_for(lambda: not our_progs()))
        self.assertIsNone(ex.poll(), "the target must survive the tracer")

    def test_sighup_stops_cleanly(self):
        """An ssh session that drops sends SIGHUP: a clean stop like Ctrl-C,
        with the report and a finished trace, not a death by signal."""
        ex = self.executor()
        trace = os.path.join(self.tmp, "t.json")
        err_path = os.path.join(self.tmp, "err")
        with open(err_path, "w") as err:
            tr = subprocess.Popen([harness.TRACER, "-p", str(ex.pid), "-o", trace], stderr=err)
        self.assertTrue(harness.wait_for(lambda: "Ctrl-C to stop" in harness.read(err_path), 30))
        time.sleep(1)  # let it trace a while: the report then counts polls
        tr.send_signal(signal.SIGHUP)
        self.assertEqual(tr.wait(timeout=30), 0, harness.read(err_path))
        err = harness.read(err_path)
        self.assertIn("hung up", err)
        self.assertRegex(err, r"polls\s+[1-9]\d*")
        with open(trace) as f:
            events = json.load(f)  # finished: strict JSON
        self.assertEqual(trace_check.check(events), [])
        self.assertTrue(harness.wait_for(lambda: not our_progs()))
        self.assertIsNone(ex.poll(), "the target must survive the tracer")

    def test_reader_of_standard_output_going_away_stops_tracing(self):
        """-o - into a reader that stops early (| head): the tracer notices at
        once, detaches, says so in one line and exits 1, rather than trace
        on for nobody until stopped by hand, or die of SIGPIPE."""
        ex = self.executor()
        tr = subprocess.Popen([harness.TRACER, "-p", str(ex.pid), "-o", "-"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.assertEqual(len(tr.stdout.read(4096)), 4096)
        tr.stdout.close()
        closed = time.monotonic()
        _, err = tr.communicate(timeout=30)
        err = err.decode()
        self.assertEqual(tr.returncode, 1, err)
        self.assertLess(time.monotonic() - closed, 10, err)
        self.assertEqual([l for l in err.splitlines() if "failed" in l],
                         ["asynctraced: failed to write '-': Broken pipe"], err)
        self.assertRegex(err, r"summary for pid \d+ \(sample-executor\): [\d.]+ s, "
                              r"standard output closed")
        self.assertTrue(harness.wait_for(lambda: not our_progs()), our_progs())
        self.assertIsNone(ex.poll(), "the target must survive the tracer")

    def test_killed_tracer_leaves_a_loadable_trace(self):
        ex = self.executor()
        trace = os.path.join(self.tmp, "t.json")
        tr = subprocess.Popen([harness.TRACER, "-p", str(ex.pid), "-o", trace],
                              stderr=subprocess.PIPE, text=True)
        self.assertTrue(harness.wait_for(lambda: os.path.exists(trace) and os.path.getsize(trace) > 100000, 15))
        tr.kill()
        tr.communicate()
        with self.assertRaises(json.JSONDecodeError):
            with open(trace) as f:
                json.load(f)  # cut short...
        events = trace_check.load(trace)  # ...but loads the way Perfetto reads it
        self.assertGreater(len(events), 100)
        errors = trace_check.check(events)
        # A cut can only lose the far end of flows whose poll was not written yet.
        self.assertEqual([e for e in errors if "never ends" not in e], [])
        self.assertTrue(harness.wait_for(lambda: not our_progs()), "kernel kept our programs")
        self.assertIsNone(ex.poll())

    def test_full_ring_buffer_is_counted(self):
        """With a tiny ring, records are lost, and every one is counted:
        received + dropped equals what the executor did, kind by kind, while
        the maps, which need no ring, still count everything."""
        run = harness.traced_run("thrash", 2, tracer_args=["--ringbuf-size", "4K"],
                                 tmpdir=self.tmp)
        self.assertEqual(run.tracer_rc, 0, run.describe())
        self.assertGreater(run.summary["dropped"], 0, run.describe())
        self.assertRegex(run.tracer_stderr, r"dropped\s+\d+ \(.*poll \d+.*\): the ring buffer")
        ev = run.report["events"]
        for kind, key in (("poll", "polls"), ("wake", "wakes"), ("spawn", "tasks")):
            self.assertEqual(ev["by_kind"][kind] + ev["dropped_by_kind"][kind], run.counts[key],
                             f"{kind}: {run.describe()}")
            self.assertGreater(ev["dropped_by_kind"][kind] + (kind == "spawn"), 0, kind)
        self.assertEqual(run.report["counts"]["polls"], run.counts["polls"])
        self.assertEqual(run.report["counts"]["wakes"], run.counts["wakes"])
        self.assertEqual(trace_check.check(run.events), [])

    def test_stripped_executor(self):
        """strip keeps .note.stapsdt: USDT targets need no symbols."""
        exe = os.path.join(self.tmp, "sample-executor-stripped")
        subprocess.run(["strip", "-o", exe, harness.EXECUTOR], check=True)
        ex = self.executor(exe=exe, duration=4)
        r = harness.run_tracer("-p", ex.pid, "-d", "1")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stderr, r"polls\s+[1-9]\d*")

    def test_target_in_another_mount_namespace(self):
        """The executor runs from a tmpfs only its own mount namespace sees."""
        script = ("mount -t tmpfs none /mnt && cp \"$0\" /mnt/hidden-executor && "
                  "exec /mnt/hidden-executor --scenario blocking --duration 6 --workers 2")
        ex = self.executor(wrap=["unshare", "--mount", "--propagation", "private",
                                 "sh", "-c", script, os.path.abspath(harness.EXECUTOR)])
        self.assertTrue(harness.wait_for(
            lambda: os.path.exists(f"/proc/{ex.pid}/exe") and
            os.readlink(f"/proc/{ex.pid}/exe") == "/mnt/hidden-executor"))
        self.assertFalse(os.path.exists("/mnt/hidden-executor"))
        r = harness.run_tracer("-p", ex.pid, "-d", "1.5")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stderr, r"polls\s+[1-9]\d*")
        self.assertIn("long poll: task 'blocking'", r.stderr)

    def test_probes_in_a_mapped_library(self):
        """The runtime lives in libsample-executor.so: the probes are found in
        the target's mappings, not in its executable."""
        exe = os.path.join(harness.BUILD, "sample-executor-shared")
        lib = os.path.realpath(os.path.join(harness.BUILD, "libsample-executor.so"))
        ex = self.executor(exe=exe, scenario="noisy", duration=6)
        r = harness.run_tracer("-p", ex.pid, "-d", "1.5", "-v")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(f"7 asynctrace probes in {lib}", r.stderr)
        self.assertIn("long poll: task 'noisy'", r.stderr)
        self.assertRegex(r.stderr, r"polls\s+[1-9]\d*")

    def test_raw_tp_fallback_tells_blocked_from_cpu(self):
        ex = self.executor(scenario="blocking", duration=6)
        trace = os.path.join(self.tmp, "t.json")
        r = harness.run_tracer("-p", ex.pid, "-d", "1.5", "--sched-hook", "raw_tp", "-o", trace)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("sched_switch via raw_tp", r.stderr)
        alerts = harness.parse_alerts(r.stderr)
        self.assertEqual([a["cause"] for a in alerts], ["blocked"], r.stderr)
        # long by the task's own doing, as the detector judges: the CPU time the
        # kernel charged it (a VM's stall inflates on_cpu_us alone), or asleep
        long = [e for e in trace_check.load(trace) if e.get("cat") == "poll"
                and min(e["args"]["on_cpu_us"], e["args"].get("cpu_charged_us", 1e12))
                + e["args"]["blocked_us"] >= 10000]
        self.assertGreaterEqual(len(long), 3)
        for p in long:
            self.assertGreaterEqual(p["args"]["blocked_us"], 15000, p)

    def test_attach_mid_run_names_tasks_spawned_before(self):
        """The noisy task was spawned long before we attach: poll_begin's name
        argument still names it."""
        ex = self.executor(scenario="noisy", duration=6)
        # deliberately late: the run goes on a while (its tasks spawned) before we attach
        time.sleep(0.5)
        r = harness.run_tracer("-p", ex.pid, "-d", "1.5")
        self.assertEqual(r.returncode, 0, r.stderr)
        alerts = harness.parse_alerts(r.stderr)
        self.assertEqual([a["name"] for a in alerts], ["noisy"], r.stderr)


if __name__ == "__main__":
    unittest.main()
