# SPDX-License-Identifier: MIT
"""Bad input gets one clear line and a non-zero exit, and attaches nothing."""
import os
import subprocess
import time
import unittest

from tests.integration import harness
from tests.integration.test_lifecycle import our_progs


class Errors(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        harness.require_root()

    def setUp(self):
        self.procs = []

    def tearDown(self):
        for p in self.procs:
            harness.kill(p)
            p.communicate()

    def spawn(self, *args):
        p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.procs.append(p)
        return p

    def executor(self):
        p = self.spawn(harness.EXECUTOR, "--scenario", "healthy", "--duration", "20",
                       "--workers", "2")
        time.sleep(0.2)
        return p

    def assertFails(self, r, code, message):
        self.assertEqual(r.returncode, code, r.stderr)
        self.assertIn(message, r.stderr)
        # one line says what failed (usage errors may add the usage text)
        self.assertTrue(r.stderr.startswith("asynctraced: "), r.stderr)
        self.assertNotIn("summary for pid", r.stderr)

    def test_no_such_pid(self):
        p = self.spawn("true")
        p.wait()  # a pid that existed and is gone
        self.assertFails(harness.run_tracer("-p", p.pid), 1, f"no process with pid {p.pid}")

    def test_not_root(self):
        ex = self.executor()
        r = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                            "--inh-caps=-all", harness.TRACER, "-p", str(ex.pid)],
                           capture_output=True, text=True, timeout=30)
        self.assertFails(r, 1, "must run as root")

    def test_target_without_probes(self):
        p = self.spawn("sleep", "30")
        self.assertFails(harness.run_tracer("-p", p.pid), 1,
                         f"no known runtime in pid {p.pid} (sleep)")

    def test_unwritable_output(self):
        ex = self.executor()
        before = {p["id"] for p in our_progs()}
        self.assertFails(harness.run_tracer("-p", ex.pid, "-o", "/nonexistent/dir/t.json"), 1,
                         "cannot write trace to '/nonexistent/dir/t.json': No such file")
        # root ignores permissions: /proc refuses new files all the same
        r = harness.run_tracer("-p", ex.pid, "-o", "/proc/asynctraced.json")
        self.assertFails(r, 1, "cannot write trace to '/proc/asynctraced.json'")
        self.assertFalse({p["id"] for p in our_progs()} - before,
                         "nothing may be loaded when the output fails")
        self.assertIsNone(ex.poll())

    def test_missing_btf(self):
        ex = self.executor()
        self.assertFails(harness.run_tracer("-p", ex.pid, "--btf", "/nonexistent/vmlinux"), 1,
                         "cannot read BTF file '/nonexistent/vmlinux'")

    def test_usage(self):
        self.assertFails(harness.run_tracer(), 2, "no target: give -p PID")
        self.assertFails(harness.run_tracer("-p", "abc"), 2, "invalid pid 'abc'")
        self.assertFails(harness.run_tracer("-p", "1", "-d", "soon"), 2, "invalid duration")
        self.assertFails(harness.run_tracer("-p", "1", "--long-poll", "fast"), 2,
                         "invalid --long-poll")
        self.assertFails(harness.run_tracer("-p", "1", "--ringbuf-size", "3000"), 2,
                         "invalid --ringbuf-size")
        self.assertFails(harness.run_tracer("-p", "1", "extra"), 2, "unexpected argument")
        r = harness.run_tracer("--help")
        self.assertEqual(r.returncode, 0)
        self.assertIn("usage: asynctraced -p PID", r.stdout)

    def test_help_and_manual_agree(self):
        """Every option in --help is documented in docs/cli.md, and back."""
        import re
        help_opts = set(re.findall(r"--[a-z][a-z-]+", harness.run_tracer("--help").stdout))
        with open(os.path.join(os.path.dirname(__file__), "..", "..", "docs", "cli.md")) as f:
            doc_opts = set(re.findall(r"`(?:-\w, )?(--[a-z][a-z-]+)", f.read()))
        self.assertEqual(help_opts, doc_opts)

    def test_executor_waits_for_a_tracer_and_gives_up(self):
        r = subprocess.run([harness.EXECUTOR, "--scenario", "healthy", "--duration", "1",
                            "--wait-traced", "0.5"], capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("no tracer attached", r.stderr)


if __name__ == "__main__":
    unittest.main()
