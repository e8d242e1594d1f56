# SPDX-License-Identifier: MIT
"""Least privilege (docs/security.md): once attached the tracer holds no
capability, has no_new_privs and runs under its seccomp filter, and traces
exactly as before; without root, file capabilities of the documented set
trace both runtimes, and without them the refusal names that set; an attach
that fails on a live process of another user is not called an exit."""
import json
import os
import shutil
import subprocess
import tempfile
import unittest

from tests.integration import harness, trace_check
from tests.integration.test_tokio import APP_LINE, app

NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
# The set docs/security.md gives for running without root.
CAPS = "cap_bpf,cap_perfmon+ep"
# A program whose asynctrace probes (poll_begin, poll_end) are on a
# CS-prefixed 9-byte nop, which the kernel's uprobe decoder refuses; it waits.
NOTE = r"""
"	.pushsection .note.stapsdt, \"\", \"note\"\n"
"	.balign 4\n"
"	.4byte 2f-1f, 4f-3f, 3\n"
"1:	.asciz \"stapsdt\"\n"
"2:	.balign 4\n"
"3:	.8byte refused_probe\n"
"	.8byte _.stapsdt.base\n"
"	.8byte 0\n"
"	.asciz \"asynctrace\"\n"
"	.asciz \"PROBE\"\n"
"	.asciz \"8@%rdi\"\n"
"4:	.balign 4\n"
"	.popsection\n"
"""
REFUSED_PROBES_C = r"""#include <unistd.h>
__asm__(
"	.pushsection .text\n"
"refused_probe:\n"
"	.byte 0x2e, 0x0f, 0x1f, 0x84, 0, 0, 0, 0, 0\n"
"	ret\n"
"	.popsection\n"
""" + NOTE.replace("PROBE", "poll_begin") + NOTE.replace("PROBE", "poll_end") + r"""
"	.pushsection .stapsdt.base, \"aG\", \"progbits\", .stapsdt.base, comdat\n"
"	.weak _.stapsdt.base\n"
"	.hidden _.stapsdt.base\n"
"_.stapsdt.base: .space 1\n"
"	.size _.stapsdt.base, 1\n"
"	.popsection\n");
int main(void) { pause(); return 0; }
"""
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
        harness.reap(*self.procs)
        shutil.rmtree(self.tmp, ignore_errors=True)

    def spawn(self, args, **kw):
        p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             **kw)
        self.procs.append(p)
        return p

    def traced_while_looking(self, tracer, ex, look):
        """Runs tracer (a command line) on executor ex, calls look(tracer pid)
        once it is attached, and returns (rc, stdout, stderr, executor stdout)."""
        err_path = os.path.join(self.tmp, "tracer.err")
        with open(err_path, "w") as err:
            tr = subprocess.Popen(tracer, stdout=subprocess.PIPE, stderr=err, text=True)
        self.procs.append(tr)
        self.assertTrue(harness.wait_for(lambda: "Ctrl-C to stop" in harness.read(err_path)
                                         or tr.poll() is not None, 30))
        look(tr.pid)
        ex_out, _ = ex.communicate(timeout=60)
        out, _ = tr.communicate(timeout=60)
        return tr.returncode, out, harness.read(err_path), ex_out

    def assertSandboxed(self, pid, seccomp="2"):
        st = status(pid)
        for field in ("CapEff", "CapPrm", "CapInh", "CapAmb", "CapBnd"):
            self.assertEqual(st[field], ZERO, field)
        self.assertEqual(st["NoNewPrivs"], "1")
        self.assertEqual(st["Seccomp"], seccomp)

    def test_attached_tracer_holds_nothing_and_traces_the_same(self):
        """In every mode: no capability, no_new_privs and the filter while
        tracing; counts equal the executor's, the trace is valid, nothing
        was refused."""
        for mode, args in (("full trace", ["-o", os.path.join(self.tmp, "t.json")]),
                           ("maps only", ["--no-trace"]),
                           ("no sandbox", ["--no-sandbox", "-o",
                                           os.path.join(self.tmp, "n.pftrace")])):
            with self.subTest(mode=mode):
                ex = harness.start_executor("noisy", 2)
                self.procs.append(ex)
                rc, out, err, ex_out = self.traced_while_looking(
                    [harness.TRACER, "-p", str(ex.pid), "--summary", "json",
                     *harness.DETECTOR_ARGS, *args], ex,
                    lambda pid: self.assertSandboxed(pid, "0" if mode == "no sandbox" else "2"))
                self.assertEqual(rc, 0, err)
                self.assertNotIn("refused", err)
                counts = harness.parse_executor(ex_out)
                report = json.loads(out)
                for key in ("polls", "wakes"):
                    self.assertEqual(report["counts"][key], counts[key], f"{key}: {err}")
                self.assertIn("long poll: task 'noisy'", err)  # names from its memory
                if mode == "full trace":
                    events = trace_check.load(os.path.join(self.tmp, "t.json"))
                    self.assertEqual(trace_check.check(events), [])
                    self.assertEqual(len([e for e in events if e.get("ph") == "X" and
                                          e.get("cat") == "poll"]), counts["polls"])

    def test_recorder_holds_nothing(self):
        ex = harness.start_executor("noisy", 2)
        self.procs.append(ex)
        cap = os.path.join(self.tmp, "r.atcap")
        rc, _, err, ex_out = self.traced_while_looking(
            [harness.TRACER, "record", "-p", str(ex.pid), "-o", cap], ex, self.assertSandboxed)
        self.assertEqual(rc, 0, err)
        self.assertNotIn("refused", err)
        r = subprocess.run([harness.TRACER, "convert", cap, "-q", "--summary", "json"],
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(json.loads(r.stdout)["counts"]["polls"],
                         harness.parse_executor(ex_out)["polls"])

    def test_tokio_tracer_holds_nothing(self):
        """tokio's uprobe_multi links: detached by closing them, sandboxed."""
        ex = self.spawn([app(""), "--wait-stdin", "--duration", "2"], stdin=subprocess.PIPE)

        def go(pid):
            self.assertSandboxed(pid)
            ex.stdin.write("go\n")
            ex.stdin.flush()

        rc, out, err, ex_out = self.traced_while_looking(
            [harness.TRACER, "-p", str(ex.pid), "--summary", "json"], ex, go)
        self.assertEqual(rc, 0, err)
        self.assertNotIn("refused", err)
        m = APP_LINE.search(ex_out)
        self.assertEqual(json.loads(out)["counts"]["polls"], int(m[4]), err)

    def copy_tracer(self, caps):
        """A copy of the tracer nobody may run, with file capabilities caps."""
        exe = os.path.join(self.tmp, "asynctraced")
        shutil.copy(harness.TRACER, exe)
        os.chmod(exe, 0o755)
        if caps:
            subprocess.run(["setcap", caps, exe], check=True)
        return exe

    def test_file_capabilities_trace_both_runtimes_without_root(self):
        exe = self.copy_tracer(CAPS)
        trace = os.path.join(self.tmp, "nobody.json")
        ex = self.spawn([*NOBODY, harness.EXECUTOR, "--scenario", "noisy", "--duration", "3",
                         "--workers", "2", "--wait-traced", "30"])
        r = subprocess.run([*NOBODY, exe, "-p", str(ex.pid), "-o", trace, "--long-poll", "15ms"],
                           capture_output=True, text=True, timeout=60)
        ex_out, _ = ex.communicate(timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertNotIn("refused", r.stderr)
        counts = harness.parse_executor(ex_out)
        self.assertEqual(harness.parse_summary(r.stderr)["polls"], counts["polls"], r.stderr)
        self.assertIn("long poll: task 'noisy'", r.stderr)  # names read from its memory
        self.assertEqual(os.stat(trace).st_uid, 65534)
        self.assertEqual(trace_check.check(trace_check.load(trace)), [])

        tk = self.spawn([*NOBODY, app(""), "--wait-stdin", "--duration", "1"],
                        stdin=subprocess.PIPE)
        err_path = os.path.join(self.tmp, "tokio.err")
        with open(err_path, "w") as err:
            tr = subprocess.Popen([*NOBODY, exe, "-p", str(tk.pid)], stderr=err)
        self.procs.append(tr)
        self.assertTrue(harness.wait_for(lambda: "Ctrl-C to stop" in harness.read(err_path)
                                         or tr.poll() is not None, 30))
        tk.stdin.write("go\n")
        tk.stdin.flush()
        out, _ = tk.communicate(timeout=60)
        self.assertEqual(tr.wait(timeout=60), 0, harness.read(err_path))
        self.assertEqual(harness.parse_summary(harness.read(err_path))["polls"],
                         int(APP_LINE.search(out)[4]))

    def test_without_capabilities_the_refusal_names_them(self):
        exe = self.copy_tracer(None)
        ex = self.spawn([*NOBODY, harness.EXECUTOR, "--scenario", "healthy", "--duration", "20"])
        # setpriv has become the executor, and its runtime started
        self.assertTrue(harness.wait_line(ex, rf"^sample-executor: pid {ex.pid} "),
                        "the executor did not start")
        r = subprocess.run([*NOBODY, exe, "-p", str(ex.pid)], capture_output=True, text=True,
                           timeout=30)
        self.assertEqual(r.returncode, 1)
        self.assertEqual(r.stderr, "asynctraced: must run as root, or with the capabilities "
                                   "CAP_BPF and CAP_PERFMON, or CAP_SYS_ADMIN "
                                   "(docs/security.md)\n")
        # CAP_BPF and CAP_PERFMON are enough, USDT probes too: every probe is a
        # uprobe_multi link, which needs nothing more (a perf uprobe would
        # need CAP_SYS_ADMIN)
        exe = self.copy_tracer("cap_bpf,cap_perfmon+ep")
        r = subprocess.run([*NOBODY, exe, "-p", str(ex.pid), "-d", "1", "-q"],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertGreater(harness.parse_summary(r.stderr)["polls"], 1000, r.stderr)

    def test_another_users_process_needs_cap_sys_ptrace(self):
        """Root's executor, traced by nobody: its files are reached through
        /proc/PID/root and its strings read only with CAP_SYS_PTRACE, which
        is then the one capability kept (process_vm_readv: the 0600 mem
        file is not nobody's to open)."""
        ex = harness.start_executor("noisy", 3)
        self.procs.append(ex)
        exe = self.copy_tracer(CAPS)
        r = subprocess.run([*NOBODY, exe, "-p", str(ex.pid)], capture_output=True, text=True,
                           timeout=60)
        self.assertEqual(r.returncode, 1)
        self.assertEqual(r.stderr, f"asynctraced: cannot read the mappings of pid {ex.pid}: "
                                   "Permission denied: a process of another user needs "
                                   "CAP_SYS_PTRACE\n")
        exe = self.copy_tracer("cap_bpf,cap_perfmon,cap_sys_ptrace+ep")
        rc, _, err, ex_out = self.traced_while_looking(
            [*NOBODY, exe, "-p", str(ex.pid), "--long-poll", "15ms"], ex,
            lambda pid: self.assertEqual(
                (status(pid)["CapEff"], status(pid)["CapPrm"], status(pid)["Seccomp"]),
                ("0000000000080000", "0000000000080000", "2")))
        self.assertEqual(rc, 0, err)
        self.assertNotIn("refused", err)
        self.assertEqual(harness.parse_summary(err)["polls"],
                         harness.parse_executor(ex_out)["polls"])
        self.assertIn("long poll: task 'noisy'", err)

    def test_attach_failure_on_a_live_process_of_another_user(self):
        """Without CAP_KILL, signalling another user's process fails with
        EPERM: the target is alive, and the tracer must say what failed
        rather than that it exited. The attach fails because its asynctrace
        probes sit on an instruction the kernel puts no uprobe on (a
        CS-prefixed nop, probe-rules: refused)."""
        src, exe = os.path.join(self.tmp, "refused.c"), os.path.join(self.tmp, "refused")
        with open(src, "w") as f:
            f.write(REFUSED_PROBES_C)
        subprocess.run(["cc", "-o", exe, src], check=True)
        ex = self.spawn([*NOBODY, exe])
        self.assertTrue(harness.wait_for(lambda: os.path.realpath(f"/proc/{ex.pid}/exe") == exe,
                                         10), "it did not start")
        r = subprocess.run(["setpriv", "--bounding-set", "-kill", "--inh-caps", "-kill",
                            harness.TRACER, "-p", str(ex.pid), "-d", "1"],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("failed to attach usdt 'asynctrace:poll_", r.stderr)
        self.assertIn("the kernel refuses a uprobe on the instruction there", r.stderr)
        self.assertNotIn("exited", r.stderr)
        self.assertIsNone(ex.poll())


if __name__ == "__main__":
    unittest.main()
