#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The kernel's verifier walks every path of a BPF program, and gives up at
a million instructions a program. The options are constants in the programs
(thresholds, the sample period, --stacks), so each set of them is a program
the verifier has not seen: sample mode at 97 Hz once failed to load ("BPF
program is too large") while 997 Hz loaded, and Go's casgstatus program went
through 989,000 instructions of the million. Here every program, under a
spread of options in both modes, must load and stay within a quarter of the
limit (what -v says the verifier went through). Needs root."""
import os
import re
import signal
import subprocess
import tempfile
import unittest

from tests.integration import harness

LIMIT = 1_000_000
# A quarter of the limit: room for another compiler's code, or a kernel that
# prunes less.
MOST = LIMIT // 4

OPTIONS = [
    [],
    ["--long-poll", "1ms"],
    ["--long-poll", "9ms", "--stacks"],
    ["--long-poll", "250ms", "--sched-delay", "1ms", "--task-slots", "64"],
    ["--trace-file"],
    ["--mode", "sample"],
    ["--mode", "sample", "--sample-hz", "10"],
    ["--mode", "sample", "--sample-hz", "10000"],
    ["--mode", "sample", "--sample-hz", "97"],
    ["--mode", "sample", "--sample-hz", "4999", "--long-poll", "3ms", "--stacks"],
    ["--mode", "sample", "--trace-file"],
    # the uprobe programs too, loaded beside the sampling ones for escalations
    ["--mode", "sample", "--escalate", "5", "--flight-recorder", "5", "--dump-dir", "TMP",
     "--trace-file"],
]


class Verified(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        harness.require_root()
        cls.tmp = tempfile.mkdtemp(prefix="at-verifier-")
        cls.target = subprocess.Popen(
            [os.path.join(harness.BUILD, "go-app"), "-scenario", "all", "-duration", "600s",
             "-wait-stdin"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL)

    @classmethod
    def tearDownClass(cls):
        cls.target.kill()
        cls.target.wait()

    def verified(self, options):
        """program -> instructions verified, with these options; and what the
        tracer said."""
        trace = ["-o", os.path.join(self.tmp, "trace.json")]
        options = ([self.tmp if o == "TMP" else o for o in options if o != "--trace-file"] +
                   (trace if "--trace-file" in options else ["--no-trace"]))
        tracer = subprocess.Popen([harness.TRACER, "-v", "-p", str(self.target.pid), *options],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        said = ""
        while "tracing pid" not in said:
            line = tracer.stderr.readline()
            if not line:
                break
            said += line
        if tracer.poll() is None:
            tracer.send_signal(signal.SIGINT)
        said += tracer.communicate(timeout=60)[1]
        return {m[1]: int(m[2]) for m in re.finditer(
            r"BPF program (\w+): (\d+) instructions verified", said)}, said

    def test_every_program_far_from_the_limit(self):
        for options in OPTIONS:
            with self.subTest(options=options):
                progs, said = self.verified(options)
                self.assertIn("tracing pid", said, f"{options}: {said[-3000:]}")
                self.assertIn("handle_sched_switch", progs, said[-3000:])
                if "sample" in options:
                    self.assertIn("on_cpu_sample", progs, said[-3000:])
                if "sample" not in options or "--escalate" in options:
                    self.assertIn("go_casgstatus", progs, said[-3000:])
                else:
                    self.assertNotIn("go_casgstatus", progs, said[-3000:])
                worst = max(progs, key=progs.get)
                print(f"\n{' '.join(options) or '(defaults)'}: {len(progs)} programs, the "
                      f"most {worst} at {progs[worst]} instructions")
                self.assertLessEqual(progs[worst], MOST, f"{options}: {progs}")


if __name__ == "__main__":
    unittest.main()
