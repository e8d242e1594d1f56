# SPDX-License-Identifier: MIT
"""Privileges: an attach that fails on a live process of another user is not
called an exit."""
import json
import os
import shutil
import subprocess
import tempfile
import time
import unittest

from tests.integration import harness, trace_check
from tests.integration.test_tokio import APP_LINE, app

NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
# The set docs/security.md gives for running without root.
CAPS = "cap_sys_admin+ep"
ZERO = "0000000000000000"


def status(pid):
    """/proc/PID/status as a dict of its fields."""
    with open(f"/proc/{pid}/status") as f:
        return dict(line.rstrip("\n").split(":\t", 1) for line in f if ":\t" in line)


class Privileges(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        harness.require_root()

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="asynctraced-")
        os.chmod(self.tmp, 0o777)  # the unprivileged tracer writes here
        self.procs = []

    def tearDown(self):
        for p in self.procs:
            harness.kill(p)
            p.communicate()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def spawn(self, args, **kw):
        p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             **kw)
        self.procs.append(p)
        return p

    def test_attach_failure_on_a_live_process_of_another_user(self):
        """Without CAP_KILL, signalling another user's process fails with
        EPERM: the target is alive, and the tracer must say what failed
        rather than that it exited. Root without CAP_SYS_ADMIN cannot attach
        USDT probes (docs/security.md), which makes the attach fail."""
        ex = self.spawn([*NOBODY, harness.EXECUTOR, "--scenario", "healthy", "--duration", "20"])
        time.sleep(0.2)
        r = subprocess.run(["setpriv", "--bounding-set", "-kill,-sys_admin", "--inh-caps",
                            "-kill,-sys_admin", harness.TRACER, "-p", str(ex.pid), "-d", "1"],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("failed to attach usdt", r.stderr)
        self.assertNotIn("exited", r.stderr)
        self.assertIsNone(ex.poll())


if __name__ == "__main__":
    unittest.main()
