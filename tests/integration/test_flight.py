# SPDX-License-Identifier: MIT
"""--flight-recorder: when an alert episode begins, the window around it is
written into --dump-dir as a Perfetto protobuf trace that the upstream
schema and our checker accept, holding the long poll that raised it; the
alert names the file; one dump per episode (and per 30 s of a process);
SIGUSR2 dumps on request; the directory stays under its size, the oldest
dump going first and nothing asynctraced did not write; bad options are
refused. Under -p, with the seccomp filter on."""
import glob
import json
import os
import re
import signal
import subprocess
import tempfile
import time
import unittest

from tests.integration import harness, pftrace_check
from tests.integration.test_record import PROTO

DUMP = re.compile(r"asynctraced-\d{8}T\d{6}Z-(\d+)-([a-z-]+)(-\d+)?\.pftrace$")


class Flight(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        harness.require_root()

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="asynctraced-flight-")
        self.dumps = os.path.join(self.dir, "dumps")
        os.mkdir(self.dumps)
        self.procs = []

    def tearDown(self):
        harness.reap(*self.procs)

    def trace(self, scenario, duration, *args):
        ex = harness.start_executor(scenario, duration)
        self.procs.append(ex)
        alerts = os.path.join(self.dir, "alerts.jsonl")
        err = os.path.join(self.dir, "tracer.err")
        with open(err, "w") as f:
            tr = subprocess.Popen([harness.TRACER, "-p", str(ex.pid), "-q", "--alerts", alerts,
                                   "--flight-recorder", "3", "--dump-dir", self.dumps,
                                   *harness.DETECTOR_ARGS, *map(str, args)],
                                  stdout=subprocess.PIPE, stderr=f, text=True)
        self.procs.append(tr)
        return ex, tr, err, alerts

    def test_an_alert_dumps_its_window(self):
        ex, tr, err, alerts = self.trace("noisy", 4)
        out, _ = ex.communicate(timeout=60)
        tr.communicate(timeout=60)
        self.assertEqual(tr.returncode, 0, harness.read(err))
        self.assertNotIn("refused", harness.read(err))
        files = sorted(glob.glob(os.path.join(self.dumps, "*")))
        # eleven long polls, one episode: one dump
        self.assertEqual(len(files), 1, (files, harness.read(err)))
        m = DUMP.search(files[0])
        self.assertIsNotNone(m, files)
        self.assertEqual((int(m[1]), m[2]), (ex.pid, "long-poll"))
        log = [json.loads(line) for line in harness.read(alerts).splitlines()]
        begin = [a for a in log if a["state"] == "begin"]
        self.assertEqual([a["dump"] for a in begin], files)
        self.assertEqual([a["dump"] for a in log if a["state"] == "end"], files)
        self.assertIn(f"flight recorder: wrote {files[0]}", harness.read(err))
        # a valid trace, by the upstream schema and our checker
        self.assertEqual(pftrace_check.protoc_check(files[0], PROTO), [])
        packets = pftrace_check.decode(files[0])
        self.assertEqual(pftrace_check.check(packets), [])
        # holding the long poll that raised the alert, named, within 3 s before and 2 s after
        polls = [s for s in pftrace_check.slices(packets) if s[3] == "noisy"]
        self.assertTrue(polls, "the culprit's polls")
        longest = max(s[2] - s[1] for s in polls if s[2])
        self.assertGreaterEqual(longest, 15e6)
        span = max(s[2] or s[1] for s in pftrace_check.slices(packets)) - \
            min(s[1] for s in pftrace_check.slices(packets))
        self.assertLessEqual(span, 5.2e9)
        # and the alert itself, on the alerts track
        names = {e["name"] for e in pftrace_check.events(packets)}
        self.assertTrue(any(n and n.startswith("long-poll: noisy") for n in names), names)

    def dump_on_request(self, ex, tr, err):
        """SIGUSR2: a dump is written; then both run to their end, the tracer's clean."""
        tr.send_signal(signal.SIGUSR2)
        self.assertTrue(harness.wait_for(
            lambda: glob.glob(os.path.join(self.dumps, "*-request.pftrace")), 10),
            harness.read(err))
        ex.communicate(timeout=60)
        tr.communicate(timeout=60)
        self.assertEqual(tr.returncode, 0, harness.read(err))

    def test_sigusr2_dumps_on_request(self):
        ex, tr, err, _ = self.trace("healthy", 5)
        self.assertTrue(harness.wait_for(lambda: "Ctrl-C to stop" in harness.read(err), 30))
        time.sleep(2)  # let it record a while: the window dumped then holds many polls
        self.dump_on_request(ex, tr, err)
        files = glob.glob(os.path.join(self.dumps, "*"))
        self.assertEqual(len(files), 1, files)
        packets = pftrace_check.decode(files[0])
        self.assertEqual(pftrace_check.check(packets), [])
        self.assertGreater(len(pftrace_check.slices(packets)), 100)

    def test_a_planted_temporary_name_is_not_written_through(self):
        """A dump is written under a predictable name first (.NAME.tmp), in a
        directory others may write: one planted there (a symlink to a file of
        root's) is removed and made anew (O_EXCL), never followed."""
        victim = os.path.join(self.dir, "victim")
        with open(victim, "w") as f:
            f.write("secret")
        ex, tr, err, _ = self.trace("healthy", 6)
        self.assertTrue(harness.wait_for(lambda: "Ctrl-C to stop" in harness.read(err), 30))
        now = time.time()
        for t in range(int(now) - 1, int(now) + 8):
            when = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(t))
            os.symlink(victim, os.path.join(
                self.dumps, f".asynctraced-{when}-{ex.pid}-request.pftrace.tmp"))
        self.dump_on_request(ex, tr, err)
        with open(victim) as f:
            self.assertEqual(f.read(), "secret")
        dump, = glob.glob(os.path.join(self.dumps, "*-request.pftrace"))
        self.assertEqual(os.stat(dump).st_mode & 0o777, 0o600)  # --umask's default
        self.assertEqual(pftrace_check.check(pftrace_check.decode(dump)), [])

    def test_the_directory_keeps_its_size_and_what_is_not_ours(self):
        old = os.path.join(self.dumps, "asynctraced-20000101T000000Z-1-long-poll.pftrace")
        with open(old, "wb") as f:
            f.write(b"\0" * (3 << 20))
        mine = os.path.join(self.dumps, "keep.pftrace")
        with open(mine, "wb") as f:
            f.write(b"\0" * (3 << 20))
        ex, tr, err, _ = self.trace("noisy", 3, "--dump-dir-size", "4M")
        ex.communicate(timeout=60)
        tr.communicate(timeout=60)
        self.assertEqual(tr.returncode, 0, harness.read(err))
        self.assertFalse(os.path.exists(old), "the oldest dump goes")
        self.assertTrue(os.path.exists(mine), "a file asynctraced did not write stays")
        self.assertEqual(len(glob.glob(os.path.join(self.dumps, "asynctraced-*"))), 1)

    def test_bad_options(self):
        for args, code, said in (
                (["--flight-recorder", "3"], 2, "needs --dump-dir"),
                (["--dump-dir", self.dumps], 2, "give --flight-recorder"),
                (["--flight-recorder", "3", "--dump-dir", self.dumps, "--no-trace"], 2,
                 "--no-trace"),
                (["--flight-recorder", "0", "--dump-dir", self.dumps], 2, "--flight-recorder"),
                (["--flight-recorder", "3", "--dump-dir", "/nonexistent/dir"], 1,
                 "--dump-dir /nonexistent/dir")):
            r = harness.run_tracer("-p", os.getpid(), *args)
            self.assertEqual(r.returncode, code, (args, r.stderr))
            self.assertIn(said, r.stderr, args)
