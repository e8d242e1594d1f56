#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""asynctraced run -- CMD, the CI gate (issue 18), used as a CI pipeline would:
the sample executor's healthy run passes --fail-on all and its baseline;
noisy fails, naming its long poll; a deliberately slowed build fails against
the baseline; the tokio and Go test programs pass their gates. The command
is traced from its first instruction: the tracer counts every task and poll
the program counts. Exit codes, JUnit, GitHub annotations, --follow-children
and bad input. Needs root."""
import json
import os
import re
import subprocess
import tempfile
import unittest
import xml.etree.ElementTree as ET

from tests.integration import harness

TMP = tempfile.mkdtemp(prefix="at-run-")
GATED = ["--fail-on", "all", "--max", "dropped=0"]
# a shared CI machine doubles a sub-millisecond percentile from one run to the next
TOLERANCE = ["--tolerance", "100"]
EXECUTOR_SLOW = os.path.join(harness.BUILD, "sample-executor-slow")


# Run as root: the command runs as asynctraced does (SUDO_UID would make it
# the user who typed `sudo make test`, who cannot reach root's TMP).
AS_ROOT = {k: v for k, v in os.environ.items() if k not in ("SUDO_UID", "SUDO_GID")}


def run(*args, env=None, timeout=120):
    """asynctraced run ARGS: its exit status, stdout, stderr."""
    return subprocess.run([harness.TRACER, "run", *map(str, args)], capture_output=True,
                          text=True, timeout=timeout, env=env or AS_ROOT)


def executor(scenario, duration=2, exe=harness.EXECUTOR):
    """The command: the sample executor timing its own polls (those of 9 ms
    or more named at its end: what the long-poll gate may rightly see)."""
    return ["--", exe, "--scenario", scenario, "--duration", str(duration), "--workers", "2",
            "--time-polls", "0.009"]


def gate_rows(stderr):
    """{gate name: verdict} from the table."""
    rows = {}
    for line in stderr.splitlines():
        m = re.match(r"^  (\S.*?)\s{2,}(\S.*?)\s{2,}(\S.*?)\s{2,}(pass|FAIL|UNKNOWN)$", line)
        if m:
            rows[m.group(1)] = m.group(4)
    return rows


def summaries(stdout):
    return [json.loads(line) for line in stdout.splitlines()
            if line.startswith('{"schema":"asynctraced.summary/')]


class SampleExecutor(unittest.TestCase):
    """The project's own regression test, as its users would write theirs."""

    @classmethod
    def setUpClass(cls):
        harness.require_root()
        cls.baseline = os.path.join(TMP, "healthy.summary.json")
        r = run("--no-trace", "-q", "--summary", "json", *executor("healthy"))
        with open(cls.baseline, "w") as f:
            f.write(r.stdout)  # the executor's own line too, as a shell redirect leaves it
        cls.saved = r

    def test_traced_from_its_first_instruction(self):
        """Held at its entry point until attached: every task and poll counted."""
        r = self.saved
        self.assertEqual(r.returncode, 0, r.stderr)
        s, = summaries(r.stdout)
        own = harness.parse_executor(r.stdout)
        self.assertEqual(s["counts"]["tasks_spawned"], own["tasks"], r.stderr)
        self.assertEqual(s["counts"]["polls"], own["polls"], r.stderr)

    def test_healthy_passes_against_its_baseline(self):
        junit = os.path.join(TMP, "healthy.xml")
        r = run("--no-trace", "-q", *GATED, "--baseline", self.baseline, *TOLERANCE,
                "--junit", junit, *executor("healthy"))
        rows = gate_rows(r.stderr)
        # a shared machine may stall an innocent poll; the gate is right to
        # fail on it then, and only on what a long poll explains
        if harness.executor_long_polls(r.stdout):
            explained = {"fail-on long-poll", "baseline poll.max", "baseline alert episodes"}
            failed = {name for name, verdict in rows.items() if verdict != "pass"}
            self.assertLessEqual(failed, explained, f"{r.stdout}\n{r.stderr}")
            self.assertIn(r.returncode, (0, 3), r.stderr)
        else:
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(set(rows.values()), {"pass"}, r.stderr)
        for kind in ("long-poll", "scheduling-delay", "starvation", "waker-thrash",
                     "lost-waker"):
            self.assertIn(f"fail-on {kind}", rows)
        self.assertIn("baseline poll.p99", rows)
        self.assertIn("baseline poll.max", rows)
        self.assertIn("baseline alert episodes", rows)
        self.assertIn("baseline delay.p99 worker 1", rows)
        suite = ET.parse(junit).getroot()
        failures = sum(1 for verdict in rows.values() if verdict == "FAIL")
        self.assertEqual((suite.get("tests"), suite.get("failures"), suite.get("errors")),
                         (str(len(rows)), str(failures), "0"))

    def test_noisy_fails_naming_its_long_poll(self):
        junit = os.path.join(TMP, "noisy.xml")
        r = run("--no-trace", "-q", "--fail-on", "all", "--junit", junit,
                "--long-poll", "15ms", *executor("noisy"))
        self.assertEqual(r.returncode, 3, r.stderr)
        rows = gate_rows(r.stderr)
        self.assertEqual(rows["fail-on long-poll"], "FAIL", r.stderr)
        self.assertEqual(rows["fail-on starvation"], "pass", r.stderr)
        self.assertEqual(rows["fail-on waker-thrash"], "pass", r.stderr)
        self.assertEqual(rows["fail-on lost-waker"], "pass", r.stderr)
        self.assertRegex(r.stderr, r"\n      long poll: task 'noisy' #\d+ ")
        failed = {c.get("name"): c.find("failure").text
                  for c in ET.parse(junit).getroot().iter("testcase")
                  if c.find("failure") is not None}
        self.assertIn("task 'noisy'", failed["fail-on long-poll"])

    def test_a_slowed_build_fails_against_the_baseline(self):
        """Every poll 1 ms longer (make sample-executor-slow): no alert, but the
        percentiles and the rates say it."""
        r = run("--no-trace", "-q", "--baseline", self.baseline, *TOLERANCE,
                *executor("healthy", exe=EXECUTOR_SLOW))
        self.assertEqual(r.returncode, 3, r.stderr)
        rows = gate_rows(r.stderr)
        self.assertEqual(rows["baseline poll.p50"], "FAIL", r.stderr)
        self.assertEqual(rows["baseline poll.p50 worker 0"], "FAIL", r.stderr)

    def test_a_new_blocking_call_fails_against_the_baseline(self):
        """The blocking scenario blocks its worker for 20 ms now and then: rare
        long polls move no percentile, but the baseline saw no long-poll
        episode and a far shorter longest poll."""
        r = run("--no-trace", "-q", "--baseline", self.baseline, "--tolerance", "20",
                *executor("blocking"))
        self.assertEqual(r.returncode, 3, r.stderr)
        rows = gate_rows(r.stderr)
        self.assertEqual(rows["baseline long-poll episodes"], "FAIL", r.stderr)
        self.assertEqual(rows["baseline poll.max"], "FAIL", r.stderr)
        self.assertRegex(r.stderr, r"\n      long poll: task 'blocking' #\d+ ")

    def test_limits(self):
        r = run("--no-trace", "-q", "--max", "poll.p50=1us,poll.max=1s,dropped=0",
                *executor("healthy", 1))
        self.assertEqual(r.returncode, 3, r.stderr)
        rows = gate_rows(r.stderr)
        self.assertEqual(rows, {"poll.p50": "FAIL", "poll.max": "pass", "dropped": "pass"})

    def test_sample_mode_gates_only_what_it_sees(self):
        """--mode sample: a gate on what samples cannot see (lost wakers, wake
        delays, wakes) is unknown, never a pass on a count of 0, and says
        why; a probe-mode baseline is not compared with a sampled run; a
        sampled baseline is, on what both saw."""
        r = run("--no-trace", "-q", "--mode", "sample", "--fail-on", "long-poll,lost-waker",
                "--max", "poll.max=1s,delay.p99=1s,wakes_per_s=1000000", *executor("healthy"))
        self.assertEqual(r.returncode, 4, r.stderr)
        # (a long poll the executor timed itself, a stalled VM's, may fail its gate)
        stalled = "FAIL" if harness.executor_long_polls(r.stdout) else "pass"
        rows = gate_rows(r.stderr)
        self.assertIn(rows.pop("fail-on long-poll"), {"pass", stalled}, r.stderr)
        self.assertEqual(rows, {
            "fail-on lost-waker": "UNKNOWN",
            "poll.max": "pass", "delay.p99": "UNKNOWN", "wakes_per_s": "UNKNOWN"}, r.stderr)
        self.assertIn("measured by samples, which do not see lost wakers", r.stderr)
        self.assertIn("which do not see wake-to-poll delays", r.stderr)
        r = run("--no-trace", "-q", "--mode", "sample", "--baseline", self.baseline,
                *executor("healthy"))
        self.assertEqual(r.returncode, 4, r.stderr)
        self.assertEqual(gate_rows(r.stderr), {"baseline": "UNKNOWN"}, r.stderr)
        self.assertIn("the baseline was measured by probes and this run by samples", r.stderr)
        sampled = os.path.join(TMP, "healthy.sampled.json")
        r = run("--no-trace", "-q", "--mode", "sample", "--summary", "json",
                *executor("healthy"))
        with open(sampled, "w") as f:
            f.write(r.stdout)
        r = run("--no-trace", "-q", "--mode", "sample", "--baseline", sampled, "--tolerance",
                "1000", *executor("healthy"))
        rows = gate_rows(r.stderr)
        # (a healthy run's sampled percentiles stand on a few hundred runs: a
        # verdict on them is the gate's, not this test's)
        self.assertIn(r.returncode, (0, 3), r.stderr)
        self.assertNotIn("UNKNOWN", rows.values(), r.stderr)
        self.assertIn("baseline poll.p99", rows)
        self.assertFalse([g for g in rows if "delay" in g or "wakes" in g], rows)

    def test_github_annotations(self):
        env = dict(AS_ROOT, GITHUB_ACTIONS="true")
        r = run("--no-trace", "-q", "--fail-on", "long-poll", "--long-poll", "15ms",
                *executor("noisy"), env=env)
        self.assertEqual(r.returncode, 3, r.stderr)
        notes = [line for line in r.stdout.splitlines() if line.startswith("::")]
        self.assertEqual(len(notes), 1, r.stdout)
        self.assertTrue(notes[0].startswith("::error title=asynctraced gate::fail-on long-poll "
                                            "failed: 1 episode, limit none%0Along poll: task "
                                            "'noisy'"), notes[0])
        r = run("--no-trace", "-q", "--fail-on", "long-poll", *executor("noisy", 1))
        self.assertNotIn("::error", r.stdout)


class OtherPrograms(unittest.TestCase):
    """The tokio and Go test programs under their gates."""

    def test_tokio_passes_its_gates(self):
        """Timers, channels, Notify, JoinHandles: tasks that only wait, nothing to
        alert on."""
        harness.require_root()
        r = run("--no-trace", "-q", "--summary", "json", *GATED, "--",
                os.path.join(harness.BUILD, "tokio-paths"), "waits", "--duration", "2")
        self.assertEqual(r.returncode, 0, r.stderr)
        s, = summaries(r.stdout)
        own = re.search(r"tasks=(\d+) polls=(\d+)", r.stdout)
        self.assertEqual((s["counts"]["tasks_spawned"], s["counts"]["polls"]),
                         (int(own.group(1)), int(own.group(2))), r.stderr)

    def test_tokio_yield_loop_fails(self):
        """A task that loops on yield_now() wakes itself at every poll: waker
        thrash, which --fail-on all fails on."""
        harness.require_root()
        r = run("--no-trace", "-q", *GATED, "--", os.path.join(harness.BUILD, "tokio-paths"),
                "yield", "--duration", "2")
        self.assertEqual(r.returncode, 3, r.stderr)
        self.assertRegex(r.stderr, r"fail-on waker-thrash .* FAIL")
        self.assertIn("yielder", r.stderr)

    def test_tokio_hog_fails(self):
        harness.require_root()
        r = run("--no-trace", "-q", "--fail-on", "long-poll", "--long-poll", "15ms", "--",
                os.path.join(harness.BUILD, "tokio-app"), "--duration", "2")
        self.assertEqual(r.returncode, 3, r.stderr)
        self.assertIn("burn_cpu", r.stderr)

    def test_go_timers_pass_and_a_hog_fails(self):
        """A static Go binary is held at its first instruction: the spawns of
        its goroutines are all seen."""
        harness.require_root()
        go = os.path.join(harness.BUILD, "go-app")
        r = run("--no-trace", "-q", "--summary", "json", *GATED, "--long-poll", "8ms", "--",
                go, "-scenario", "timers", "-duration", "2s")
        self.assertEqual(r.returncode, 0, r.stderr)
        r = run("--no-trace", "-q", "--fail-on", "long-poll", "--long-poll", "8ms", "--",
                go, "-scenario", "fanout", "-duration", "2s")
        self.assertEqual(r.returncode, 0, r.stderr)
        r = run("--no-trace", "-q", "--fail-on", "long-poll", "--long-poll", "8ms", "--",
                go, "-scenario", "cpu", "-duration", "2s")
        self.assertEqual(r.returncode, 3, r.stderr)
        self.assertIn("main.burnCPU", r.stderr)


class Children(unittest.TestCase):
    def test_follow_children(self):
        """A shell harness starting two servers: both traced, each judged by name."""
        harness.require_root()
        script = (f"{harness.EXECUTOR} --scenario noisy --duration 2 --workers 2 & "
                  f"{harness.EXECUTOR} --scenario healthy --duration 2 --workers 2; wait")
        r = run("--no-trace", "-q", "--follow-children", "--fail-on", "long-poll",
                "--long-poll", "15ms", "--", "sh", "-c", script)
        self.assertEqual(r.returncode, 3, r.stderr)
        rows = gate_rows(r.stderr)
        verdicts = sorted(rows.values())
        self.assertEqual(verdicts, ["FAIL", "pass"], r.stderr)
        self.assertTrue(all(re.match(r"pid \d+ \(sample-executor\): fail-on long-poll$", k)
                            for k in rows), rows)
        self.assertIn("task 'noisy'", r.stderr)

    def test_without_it_a_harness_is_not_traced(self):
        harness.require_root()
        r = run("--no-trace", "-q", "--fail-on", "all", "--", "sh", "-c",
                f"{harness.EXECUTOR} --scenario healthy --duration 1 --workers 2")
        self.assertEqual(r.returncode, 4, r.stderr)
        self.assertIn("no known runtime in pid", r.stderr)


    def test_orphans_of_the_command(self):
        """A server started in a subshell that exits at once (`(server &)`): its
        parent gone, it is adopted by asynctraced (the child subreaper), still
        known as the command's, traced and judged."""
        harness.require_root()
        script = (f"({harness.EXECUTOR} --scenario noisy --duration 2 --workers 2 &); "
                  "sleep 3")
        r = run("--no-trace", "-q", "--follow-children", "--fail-on", "long-poll",
                "--long-poll", "15ms", "--", "sh", "-c", script)
        self.assertEqual(r.returncode, 3, r.stderr)
        self.assertIn("task 'noisy'", r.stderr)


class ExitStatus(unittest.TestCase):
    def test_the_commands_own_failure_wins(self):
        harness.require_root()
        script = f"{harness.EXECUTOR} --scenario healthy --duration 1 --workers 2; exit 7"
        r = run("--no-trace", "-q", "--follow-children", "--fail-on", "all", "--",
                "sh", "-c", script)
        self.assertEqual(r.returncode, 7, r.stderr)
        self.assertIn("'sh' exited with status 7", r.stderr)
        r = run("--no-trace", "-q", "--", "sh", "-c", "kill -TERM $$")
        self.assertEqual(r.returncode, 128 + 15, r.stderr)

    def test_a_dynamic_loader_failure_is_the_commands_status(self):
        """A library gone: ld.so exits 127 before the program's entry point."""
        harness.require_root()
        lib, prog = os.path.join(TMP, "libgone.so"), os.path.join(TMP, "needs-gone")
        with open(os.path.join(TMP, "gone.c"), "w") as f:
            f.write("int gone(void) { return 0; }\n")
        with open(os.path.join(TMP, "needs.c"), "w") as f:
            f.write("int gone(void);\nint main(void) { return gone(); }\n")
        subprocess.run(["cc", "-shared", "-fPIC", "-o", lib, os.path.join(TMP, "gone.c")],
                       check=True)
        subprocess.run(["cc", "-o", prog, os.path.join(TMP, "needs.c"), "-L", TMP, "-lgone",
                        f"-Wl,-rpath,{TMP}"], check=True)
        os.unlink(lib)
        r = run("--fail-on", "all", "--", prog)
        self.assertEqual(r.returncode, 127, r.stderr)
        self.assertIn("exited before its entry point, with status 127", r.stderr)

    def test_stopped_by_a_signal_the_command_goes_too(self):
        """A CI job's timeout sends SIGTERM to asynctraced: the command, no
        longer traced, is stopped too, and its status (killed) is the run's."""
        harness.require_root()
        err = os.path.join(TMP, "sigterm.err")
        with open(err, "w") as f:
            # Go's default on SIGTERM: killed by it (the sample executor would exit 0)
            p = subprocess.Popen([harness.TRACER, "run", "--no-trace", "-q", "--fail-on", "all",
                                  "--", os.path.join(harness.BUILD, "go-app"), "-scenario",
                                  "timers", "-duration", "30s"],
                                 stdout=subprocess.DEVNULL, stderr=f, env=AS_ROOT)
        try:
            self.assertTrue(harness.wait_for(lambda: "tracing pid" in harness.read(err), 30),
                            harness.read(err))
            p.send_signal(15)
            p.wait(timeout=20)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
        self.assertEqual(p.returncode, 128 + 15, harness.read(err))

    def status_of(self, pid):
        """{field: value} of /proc/PID/status."""
        with open(f"/proc/{pid}/status") as f:
            return dict(line.rstrip("\n").split(":\t", 1) for line in f if ":\t" in line)

    def test_the_command_runs_as_its_user_and_the_tracer_confined(self):
        """Under sudo, the command runs as the user who typed it (SUDO_UID),
        --user names another; no_new_privs either way, and the umask the
        user had. The tracer's side, once attached: no capability and its
        seccomp filter, and it still lets the command go, waits for it,
        counts every poll and writes its --junit."""
        harness.require_root()
        for env, user, uid in ((dict(os.environ, SUDO_UID="65534", SUDO_GID="65534"), [], "65534"),
                               (dict(os.environ, SUDO_UID="65534"), ["--user", "root"], "0"),
                               (AS_ROOT, ["--user", "nobody"], "65534")):
            with self.subTest(user=user, sudo_uid=env.get("SUDO_UID")):
                junit = os.path.join(TMP, f"user{uid}.xml")
                p = subprocess.Popen([harness.TRACER, "run", "-q", "--summary", "json",
                                      "--fail-on", "all", "--junit", junit, *user,
                                      *executor("healthy", 3)],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     env=env, preexec_fn=lambda: os.umask(0o027))
                try:
                    m = harness.wait_line(p, r"^sample-executor: pid (\d+) ")
                    self.assertIsNotNone(m, "the command did not start")
                    cmd, tracer = self.status_of(int(m[1])), self.status_of(p.pid)
                finally:
                    out, err = p.communicate(timeout=60)
                self.assertEqual(p.returncode, 0, err)
                self.assertEqual(cmd["Uid"].split(), [uid] * 4)
                self.assertEqual(cmd["NoNewPrivs"], "1")
                self.assertEqual(cmd["Umask"], "0027")
                self.assertEqual((tracer["CapEff"], tracer["Seccomp"]), ("0" * 16, "2"))
                self.assertNotIn("refused", err)
                s, = summaries(out)
                self.assertEqual(s["counts"]["polls"], harness.parse_executor(out)["polls"], err)
                self.assertEqual(os.stat(junit).st_mode & 0o777, 0o600)
                self.assertEqual(ET.parse(junit).getroot().get("failures"), "0")
        r = run("--user", "no-such-user-here", "--", "true")
        self.assertEqual(r.returncode, 2)
        self.assertIn("invalid --user 'no-such-user-here': no such user", r.stderr)

    def test_no_runtime_and_an_empty_trace_are_never_a_pass(self):
        harness.require_root()
        r = run("--fail-on", "all", "--", "true")
        self.assertEqual(r.returncode, 4, r.stderr)
        self.assertIn("nothing was traced", r.stderr)
        self.assertEqual(gate_rows(r.stderr), {"every gate": "UNKNOWN"})
        # tokio's --help exits before its runtime polls anything
        r = run("--no-trace", "--max", "poll.p99=1s", "--",
                os.path.join(harness.BUILD, "tokio-app"), "--help")
        self.assertEqual(r.returncode, 4, r.stderr)
        self.assertIn("the trace is empty: no poll was seen", r.stderr)

    def test_bad_input(self):
        r = run()
        self.assertEqual(r.returncode, 2)
        self.assertIn("run needs a command", r.stderr)
        r = run("--")
        self.assertEqual(r.returncode, 2)
        harness.require_root()
        r = run("--", "no-such-command-here")
        self.assertEqual(r.returncode, 127, r.stderr)
        self.assertIn("cannot run 'no-such-command-here': command not found", r.stderr)
        notexec = os.path.join(TMP, "notexec")
        with open(notexec, "w") as f:
            f.write("x")
        os.chmod(notexec, 0o644)
        r = run("--", notexec)
        self.assertEqual(r.returncode, 126, r.stderr)
        r = run("--max", "poll.p98=1ms", "--", "true")
        self.assertEqual(r.returncode, 2)
        self.assertIn("unknown metric 'poll.p98'; known: poll.p50, poll.p90, poll.p99", r.stderr)
        bad = os.path.join(TMP, "bad.json")
        with open(bad, "w") as f:
            f.write('{"schema":"asynctraced.summary/0","counts":{}}\n')
        r = run("--baseline", bad, "--", "true")
        self.assertEqual(r.returncode, 2)
        self.assertIn("has schema 'asynctraced.summary/0'; this asynctraced reads "
                      "'asynctraced.summary/1'", r.stderr)
        with open(bad, "w") as f:
            f.write("[1, 2, 3]\n")
        r = run("--baseline", bad, "--", "true")
        self.assertEqual(r.returncode, 2)
        self.assertIn("is not a summary of asynctraced", r.stderr)


if __name__ == "__main__":
    unittest.main()
