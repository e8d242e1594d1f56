# SPDX-License-Identifier: MIT
"""Bad input gets one clear line and a non-zero exit, and attaches nothing."""
import json
import os
import shutil
import signal
import stat
import subprocess
import tempfile
import unittest

from tests.integration import harness
from tests.integration.test_lifecycle import our_progs

# Probes of its own that it fires until SIGUSR1, then it execs argv[1:]
EXECS_LATER_C = r"""#include <signal.h>
#include <sys/sdt.h>
#include <unistd.h>
static volatile sig_atomic_t go;
static void on_usr1(int sig) { (void)sig; go = 1; }
int main(int argc, char **argv)
{
	(void)argc;
	signal(SIGUSR1, on_usr1);
	while (!go) {
		STAP_PROBE4(asynctrace, poll_begin, 1ULL, 0U, 0U, "before");
		STAP_PROBE5(asynctrace, poll_end, 1ULL, 0U, 1, 0, 0U);
		usleep(1000);
	}
	execv(argv[1], argv + 1);
	return 127;
}
"""

CAPTURE = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "data", "noisy.atcap"))


def run_in(d, *args, **kw):
    """The tracer run from directory d, where relative names are given."""
    return subprocess.run([os.path.abspath(harness.TRACER), *map(str, args)],
                          capture_output=True, text=True, timeout=60, cwd=d, **kw)


class Errors(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        harness.require_root()

    def setUp(self):
        self.procs = []

    def tearDown(self):
        harness.reap(*self.procs)

    def spawn(self, *args):
        p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.procs.append(p)
        return p

    def executor(self):
        p = self.spawn(harness.EXECUTOR, "--scenario", "healthy", "--duration", "20",
                       "--workers", "2")
        # running: its runtime started (what it says once it has)
        self.assertTrue(harness.wait_line(p, rf"^sample-executor: pid {p.pid} "),
                        "the executor did not start")
        return p

    def assertFails(self, r, code, message):
        self.assertEqual(r.returncode, code, r.stderr)
        self.assertIn(message, r.stderr)
        # one line says what failed (usage errors may add the usage text)
        self.assertTrue(r.stderr.startswith("asynctraced: "), r.stderr)
        self.assertNotIn("summary for pid", r.stderr)

    def test_exec_between_examination_and_attach(self):
        """A process that execs another program after it was examined and
        before its probes go in: the probes were read from the first
        program's files, so none may land in the second. The tracer is
        held (strace delays its open of the kernel's BTF) while the target
        execs (after it was examined, as its programs load); it then says so
        and attaches nothing, and the second
        program's code is byte for byte its file's."""
        if not shutil.which("strace"):
            self.fail("strace is not installed (scripts/setup.sh installs it)")
        tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, tmp)
        src, first = os.path.join(tmp, "first.c"), os.path.join(tmp, "first")
        with open(src, "w") as f:
            f.write(EXECS_LATER_C)
        subprocess.run(["cc", "-O1", "-o", first, src], check=True)
        second = os.path.realpath(harness.EXECUTOR)
        ex = self.spawn(first, second, "--scenario", "healthy", "--duration", "20",
                        "--workers", "2")
        self.assertTrue(harness.wait_for(
            lambda: os.path.realpath(f"/proc/{ex.pid}/exe") == first, 10), "it did not start")
        # examined, the tracer loads its programs, reading the kernel's BTF first
        btf = "/sys/kernel/btf/vmlinux"
        tracer = self.spawn("strace", "-f", "-qq", "-o", "/dev/null", "-e", "trace=openat",
                            "-P", btf, "-e", "inject=openat:delay_exit=8000000:when=1",
                            harness.TRACER, "-p", str(ex.pid), "-d", "1")

        def holding_btf():
            for pid in os.listdir("/proc"):
                try:
                    if os.path.realpath(f"/proc/{pid}/exe") == os.path.realpath(
                            harness.TRACER):
                        for fd in os.listdir(f"/proc/{pid}/fd"):
                            if os.readlink(f"/proc/{pid}/fd/{fd}") == btf:
                                return True
                except OSError:
                    continue
            return False

        # the tracer has opened the BTF, and waits there for strace
        self.assertTrue(harness.wait_for(holding_btf, 30), "the tracer never read the BTF")
        ex.send_signal(signal.SIGUSR1)
        self.assertTrue(harness.wait_for(
            lambda: os.path.realpath(f"/proc/{ex.pid}/exe") == second, 5), "it did not exec")
        self.assertTrue(holding_btf(), "the exec came after the tracer went on")
        out, err = tracer.communicate(timeout=60)
        self.assertEqual(tracer.returncode, 1, err)
        self.assertIn(f"pid {ex.pid} (first) ran another program (exec) while it was "
                      "examined: not traced", err)
        self.assertNotIn("tracing pid", err)
        # every executable byte of the second program is its file's: no breakpoint
        with open(f"/proc/{ex.pid}/maps") as f:
            code = [line.split() for line in f if line.split()[1].startswith("r-x")
                    and line.rstrip().endswith(second)]
        self.assertTrue(code)
        with open(second, "rb") as f, open(f"/proc/{ex.pid}/mem", "rb") as mem:
            for fields in code:
                start, end = (int(x, 16) for x in fields[0].split("-"))
                f.seek(int(fields[2], 16))
                mem.seek(start)
                want = f.read(end - start)
                self.assertEqual(mem.read(len(want)), want)
        self.assertIsNone(ex.poll())

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
        """A C program says plainly that no runtime was found, and what was looked
        for; never that it should be rebuilt without `strip = true`, however
        stripped it and its libraries are."""
        sleeper = os.path.join(self.scratch(), "sleeper")
        subprocess.run(["strip", "-o", sleeper, shutil.which("sleep")], check=True)
        for exe in (shutil.which("sleep"), sleeper):
            with self.subTest(exe=exe):
                p = self.spawn(exe, "30")
                # it says nothing: examined once its binary is mapped
                real = os.path.realpath(exe)
                self.assertTrue(harness.wait_for(
                    lambda: real in harness.read(f"/proc/{p.pid}/maps"), 10))
                r = harness.run_tracer("-p", p.pid)
                name = os.path.basename(exe)
                self.assertFails(r, 1, f"no known runtime in pid {p.pid} ({name}): no "
                                       "asynctrace USDT probes (see docs/usdt-abi.md), no "
                                       "tokio symbols and no Go runtime in its ")
                self.assertNotIn("strip", r.stderr)

    def test_go_program_of_unknown_layout(self):
        """A Go program without DWARF whose Go version's layout is not in the
        table (go-app-stripped, its version rewritten as go1.99): said to be Go,
        and why it cannot be traced, not that it has no runtime."""
        exe = os.path.join(self.scratch(), "go-future")
        with open(os.path.join(harness.BUILD, "go-app-stripped"), "rb") as f:
            data = f.read()
        at = data.index(b"\xff Go buildinf:")
        version = data.index(b"go1.", at)
        data = data[:version] + b"go1.99" + data[version + 6:]
        with open(exe, "wb") as f:
            f.write(data)
        os.chmod(exe, 0o755)
        p = self.spawn(exe, "-scenario", "timers", "-duration", "30s")
        self.assertTrue(harness.wait_line(p, rf"^go-app: pid {p.pid} "), "go-future did not start")
        r = harness.run_tracer("-p", p.pid)
        self.assertFails(r, 1, f"pid {p.pid} (go-future) is a Go program (go1.99")
        self.assertIn("no DWARF and its Go version's layout is not in the table", r.stderr)
        self.assertNotIn("no known runtime", r.stderr)

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

    def scratch(self):
        """A directory like /tmp, where another user can plant files."""
        d = tempfile.mkdtemp(prefix="at-out-")
        self.addCleanup(shutil.rmtree, d, True)
        return d

    def victim(self, d):
        """A root-only file that a planted link points at."""
        path = os.path.join(d, "shadow")
        with open(path, "w") as f:
            f.write("root:secret\n")
        os.chmod(path, 0o600)
        return path

    def assertUntouched(self, victim):
        st = os.stat(victim)
        self.assertEqual(stat.S_IMODE(st.st_mode), 0o600)
        self.assertEqual(harness.read(victim), "root:secret\n")

    def writers(self, ex, path):
        """Every way the command line names a file to write, with what the error calls it
        (--format: a trace may have any name)."""
        return [
            ("trace", ["-p", ex.pid, "-d", "1", "-o", path, "--format", "json"]),
            ("alerts", ["-p", ex.pid, "-d", "1", "--alerts", path]),
            ("capture", ["record", "-p", ex.pid, "-d", "1", "-o", path]),
            ("trace", ["convert", CAPTURE, "-q", "-o", path, "--format", "json"]),
            ("alerts", ["convert", CAPTURE, "-q", "--alerts", path]),
        ]

    def test_output_symlink_is_not_followed(self):
        ex = self.executor()
        d = self.scratch()
        victim = self.victim(d)
        link = os.path.join(d, "planted.json")
        os.symlink(victim, link)
        dangling = os.path.join(d, "dangling.json")
        os.symlink(os.path.join(d, "created"), dangling)
        for path in (link, dangling):
            for what, args in self.writers(ex, path):
                with self.subTest(what=what, args=args):
                    r = harness.run_tracer(*args)
                    self.assertFails(r, 1, f"cannot write {what} to '{path}': it is a "
                                           "symbolic link")
                    # refused before attaching (not by program ids: other tracers on
                    # this machine may load theirs meanwhile)
                    self.assertNotIn("Ctrl-C to stop", r.stderr)
                    self.assertUntouched(victim)
                    self.assertFalse(os.path.exists(os.path.join(d, "created")))
        self.assertIsNone(ex.poll())

    def test_a_refused_output_leaves_the_other_alone(self):
        """Every output is judged before any is created: a refused trace leaves the alert
        log as it was (not created, not truncated), and the other way round."""
        ex = self.executor()
        d = self.scratch()
        link = os.path.join(d, "planted")
        os.symlink(self.victim(d), link)
        for live in (True, False):
            for refused, other in (("trace", "alerts"), ("alerts", "trace")):
                for existing in (False, True):
                    fresh = os.path.join(d, f"other-{live}-{refused}-{existing}")
                    if existing:
                        with open(fresh, "w") as f:
                            f.write("before\n")
                    paths = {refused: link, other: fresh}
                    args = (["-p", ex.pid, "-d", "1"] if live else ["convert", CAPTURE, "-q"])
                    args += ["-o", paths["trace"], "--format", "json", "--alerts", paths["alerts"]]
                    with self.subTest(live=live, refused=refused, existing=existing):
                        r = harness.run_tracer(*args)
                        self.assertFails(r, 1, f"cannot write {refused} to '{link}': it is a "
                                               "symbolic link")
                        if existing:
                            self.assertEqual(harness.read(fresh), "before\n")
                        else:
                            self.assertFalse(os.path.exists(fresh))
        self.assertIsNone(ex.poll())

    def test_output_must_be_a_regular_file(self):
        ex = self.executor()
        d = self.scratch()
        fifo = os.path.join(d, "fifo.json")
        os.mkfifo(fifo)
        for path in (fifo, "/dev/null"):
            for what, args in self.writers(ex, path):
                with self.subTest(what=what, args=args):
                    r = harness.run_tracer(*args, timeout=20)
                    self.assertFails(r, 1, f"cannot write {what} to '{path}': not a regular "
                                           "file")
                    self.assertNotIn("Ctrl-C to stop", r.stderr)
        # a FIFO somebody reads gets nothing either
        rd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
        try:
            r = harness.run_tracer("convert", CAPTURE, "-q", "-o", fifo, timeout=20)
            self.assertFails(r, 1, f"cannot write trace to '{fifo}': not a regular file")
            self.assertEqual(os.read(rd, 1 << 16), b"")
        finally:
            os.close(rd)
        r = harness.run_tracer("convert", CAPTURE, "-q", "-o", d + "/", "--format", "json")
        self.assertFails(r, 1, f"cannot write trace to '{d}/': Is a directory")

    def test_new_outputs_are_the_owners_alone_unless_umask_says(self):
        """Created 0600 whatever umask the shell had (root's 022 would let
        everyone read a trace of another user's program); --umask opens them."""
        d = self.scratch()
        for flag, mode in (([], 0o600), (["--umask", "022"], 0o644), (["--umask", "0"], 0o666),
                           (["--umask", "027"], 0o640)):
            with self.subTest(flag=flag):
                name = "".join(flag)
                trace, alerts = os.path.join(d, f"t{name}.json"), os.path.join(d, f"a{name}")
                r = subprocess.run([harness.TRACER, "convert", CAPTURE, "-q", "-o", trace,
                                    "--alerts", alerts, *flag], capture_output=True, text=True,
                                   timeout=60, preexec_fn=lambda: os.umask(0))
                self.assertEqual(r.returncode, 0, r.stderr)
                for path in (trace, alerts):
                    self.assertEqual(stat.S_IMODE(os.stat(path).st_mode), mode, path)
        for bad in ("888", "1000", "", "u=rw", "-1"):
            r = harness.run_tracer("convert", CAPTURE, "-q", "--umask", bad)
            self.assertFails(r, 2, f"invalid --umask '{bad}': want an octal mask from 0 to 777")

    def test_two_outputs_may_not_be_one_file(self):
        ex = self.executor()
        d = self.scratch()
        f = os.path.join(d, "out.json")
        with open(f, "w") as fh:
            fh.write("[]")
        hard = os.path.join(d, "hard.jsonl")
        os.link(f, hard)
        cap = os.path.join(d, "run.atcap")
        shutil.copy(CAPTURE, cap)
        new = os.path.join(d, "new.json")
        cases = [
            # the same name, an existing file and one still to create
            ["-p", ex.pid, "-d", "1", "-o", f, "--alerts", f],
            ["-p", ex.pid, "-d", "1", "-o", new, "--alerts", new],
            # a hard link, other spellings of the same place
            ["-p", ex.pid, "-d", "1", "-o", f, "--alerts", hard],
            ["-p", ex.pid, "-d", "1", "-o", "out.json", "--alerts", "./out.json"],
            ["-p", ex.pid, "-d", "1", "-o", "new.json", "--alerts", f"../{os.path.basename(d)}"
                                                               "/./new.json"],
            ["convert", cap, "-q", "-o", f, "--alerts", hard],
            ["convert", cap, "-q", "-o", "new.json", "--alerts", new],
            # the capture being converted is not an output
            ["convert", cap, "-q", "-o", cap, "--format", "perfetto"],
            ["convert", "run.atcap", "-q", "--alerts", "./run.atcap"],
            # --btf is read after the outputs are opened
            ["-p", ex.pid, "-d", "1", "-o", f, "--btf", f],
        ]
        for args in cases:
            with self.subTest(args=args):
                r = run_in(d, *args)
                self.assertFails(r, 2, "are the same file")
                self.assertEqual(harness.read(f), "[]")
                self.assertFalse(os.path.exists(new))
                with open(cap, "rb") as a, open(CAPTURE, "rb") as b:
                    self.assertEqual(a.read(), b.read())
        # standard output: named "-", or the file it was redirected to
        for args in (["-o", "-", "--alerts", "-"], ["-o", "-", "--summary", "json"],
                     ["--alerts", "-", "--summary", "json"]):
            with self.subTest(args=args):
                r = run_in(d, "convert", cap, "-q", *args)
                self.assertFails(r, 2, "both write to standard output")
        with open(f, "w") as out:
            r = subprocess.run([os.path.abspath(harness.TRACER), "convert", cap, "-q",
                                "--summary", "json", "--alerts", "out.json"], stdout=out,
                               stderr=subprocess.PIPE, text=True, cwd=d, timeout=60)
        self.assertFails(r, 2, "are the same file")
        self.assertIsNone(ex.poll())

    def test_unknown_trace_extension(self):
        ex = self.executor()
        d = self.scratch()
        for name in ("x.pb", "x.json.gz", "x.txt", "trace", "x.PFTRACE"):
            for args in (["-p", ex.pid, "-d", "1", "-o", name], ["convert", CAPTURE, "-o", name]):
                with self.subTest(args=args):
                    r = run_in(d, *args)
                    self.assertFails(r, 2, f"cannot tell the format of trace '{name}' from its "
                                           "name: it ends in neither .json, .pftrace nor "
                                           ".perfetto-trace: give --format json or --format "
                                           "perfetto")
                    self.assertFalse(os.path.exists(os.path.join(d, name)))
        # --format takes any name; so do the other outputs
        r = run_in(d, "convert", CAPTURE, "-q", "-o", "x.txt", "--format", "json",
                   "--alerts", "alerts.log")
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(os.path.join(d, "x.txt")) as f:
            self.assertIsInstance(json.load(f), list)
        for name in ("x.json", "x.pftrace", "x.perfetto-trace"):
            r = run_in(d, "convert", CAPTURE, "-q", "-o", name)
            self.assertEqual(r.returncode, 0, r.stderr)

    def test_missing_btf(self):
        ex = self.executor()
        self.assertFails(harness.run_tracer("-p", ex.pid, "--btf", "/nonexistent/vmlinux"), 1,
                         "cannot read BTF file '/nonexistent/vmlinux'")

    def test_target_found_without_pid(self):
        """No -p: every process of the host that runs a known runtime is traced, as the
        filters narrow them; none yet is said, and the tracer waits for one. record
        captures them all; a capture of none is a failure."""
        ex = self.executor()
        r = harness.run_tracer("-d", "1", "-q", "--comm", "^sample-exec")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(f"tracing pid {ex.pid} (sample-executor)", r.stderr)
        r = harness.run_tracer("-d", "1", "-q", "--cgroup", "/no/such.slice")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("no process that --comm, --exclude-comm and --cgroup let through runs "
                      "a known runtime (asynctrace USDT probes, tokio or Go) yet", r.stderr)
        self.assertIn("watching for one", r.stderr)
        self.assertIn("0 processes traced in", r.stderr)
        other = self.executor()
        r = harness.run_tracer("-d", "1", "-q", "--comm", "^sample-exec")
        self.assertEqual(r.returncode, 0, r.stderr)
        for p in (ex, other):
            self.assertIn(f"tracing pid {p.pid} (sample-executor)", r.stderr)
        self.assertIn("2 processes traced in", r.stderr)
        with tempfile.TemporaryDirectory() as d:
            r = run_in(d, "record", "-o", "x.atcap", "-d", "1", "-q", "--comm", "^sample-exec")
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertRegex(r.stderr, r"recorded 2 processes for [\d.]+ s, duration elapsed")
            r = run_in(d, "record", "-o", "y.atcap", "-d", "1", "-q", "--exclude-comm", ".")
            self.assertFails(r, 1, "recorded nothing in 'y.atcap': no process ran a known "
                                   "runtime (duration elapsed)")
        self.assertIsNone(ex.poll())

    def test_usage(self):
        self.assertFails(harness.run_tracer("-p", "abc"), 2, "invalid pid 'abc'")
        self.assertFails(harness.run_tracer("-p", "1", "-d", "soon"), 2, "invalid duration")
        self.assertFails(harness.run_tracer("-p", "1", "--long-poll", "fast"), 2,
                         "invalid --long-poll")
        self.assertFails(harness.run_tracer("-p", "1", "--ringbuf-size", "3000"), 2,
                         "invalid --ringbuf-size")
        self.assertFails(harness.run_tracer("-p", "1", "extra"), 2, "unexpected argument")
        r = harness.run_tracer("--help")
        self.assertEqual(r.returncode, 0)
        self.assertIn("usage: asynctraced [trace] [-p PID]", r.stdout)
        # typos and each command's help: test_cli.py

    def test_executor_waits_for_a_tracer_and_gives_up(self):
        r = subprocess.run([harness.EXECUTOR, "--scenario", "healthy", "--duration", "1",
                            "--wait-traced", "0.5"], capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("no tracer attached", r.stderr)


if __name__ == "__main__":
    unittest.main()
