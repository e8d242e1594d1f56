# SPDX-License-Identifier: MIT
"""asynctraced installed as a system service: `make install` into a DESTDIR
(PREFIX=/usr) puts the binary, asynctraced(8), the systemd unit, its options
file and bash completion where Debian keeps them; the man page covers every
option each command lists, every exit status and signal; systemd's own
analyzer accepts the unit, and rates its hardening; bash completes the
options the program lists; `make uninstall` takes it all back, but an
options file the administrator changed. Messages carry their syslog
priority when stderr is the journal."""
import os
import re
import shutil
import subprocess
import tempfile
import unittest

from tests.integration import harness

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
INSTALLED = {
    "usr/sbin/asynctraced": 0o755,
    "usr/share/man/man8/asynctraced.8": 0o644,
    "usr/lib/systemd/system/asynctraced.service": 0o644,
    "usr/share/bash-completion/completions/asynctraced": 0o644,
    "etc/default/asynctraced": 0o644,
}


def make(*args):
    return subprocess.run(["make", "-s", "-C", ROOT, f"BUILD={os.path.abspath(harness.BUILD)}",
                           "PREFIX=/usr", *args], capture_output=True, text=True, timeout=300)


def long_options(command):
    out = subprocess.run([harness.TRACER, "help", command], capture_output=True,
                         text=True).stdout
    return set(re.findall(r"^\s+(?:-\w, )?(--[a-z][a-z-]*)", out, re.M))


class Install(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dest = tempfile.mkdtemp(prefix="asynctraced-install-")
        r = make("install", f"DESTDIR={cls.dest}")
        if r.returncode:
            raise AssertionError(r.stdout + r.stderr)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dest, ignore_errors=True)

    def path(self, rel):
        return os.path.join(self.dest, rel)

    def test_files_where_debian_keeps_them(self):
        for rel, mode in INSTALLED.items():
            st = os.stat(self.path(rel))
            self.assertEqual(st.st_mode & 0o777, mode, rel)
        r = subprocess.run([self.path("usr/sbin/asynctraced"), "--version"],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        unit = harness.read(self.path("usr/lib/systemd/system/asynctraced.service"))
        self.assertIn("ExecStart=/usr/sbin/asynctraced $ASYNCTRACED_OPTS", unit)
        self.assertIn("EnvironmentFile=-/etc/default/asynctraced", unit)

    def test_man_page_covers_every_option_exit_status_and_signal(self):
        env = dict(os.environ, MANWIDTH="200")
        page = subprocess.run(["man", "-l", self.path("usr/share/man/man8/asynctraced.8")],
                              capture_output=True, text=True, env=env)
        self.assertEqual(page.returncode, 0, page.stderr)
        text = page.stdout
        for command in ("trace", "record", "convert"):
            options = long_options(command)
            self.assertGreater(len(options), 10, command)
            missing = sorted(o for o in options if o not in text)
            self.assertEqual(missing, [], f"asynctraced help {command} lists them")
        for section in ("EXIT STATUS", "SIGNALS", "SIGINT", "SIGTERM", "SIGHUP", "SIGUSR1",
                        "JOURNAL_STREAM"):
            self.assertIn(section, text)
        status = text[text.index("EXIT STATUS"):]
        for code in ("0", "1", "2"):
            self.assertRegex(status, rf"\n\s+{code}\n")

    def test_systemd_accepts_the_unit(self):
        """systemd-analyze verify: the unit as installed, its binary where
        this build is (verify checks that it is executable), its man page
        from the DESTDIR (verify runs man on Documentation=)."""
        vdir = tempfile.mkdtemp(prefix="asynctraced-unit-")
        unit = harness.read(self.path("usr/lib/systemd/system/asynctraced.service"))
        with open(os.path.join(vdir, "asynctraced.service"), "w") as f:
            f.write(unit.replace("/usr/sbin/asynctraced", os.path.abspath(harness.TRACER)))
        env = dict(os.environ, MANPATH=self.path("usr/share/man"))
        r = subprocess.run(["systemd-analyze", "verify",
                            os.path.join(vdir, "asynctraced.service")],
                           capture_output=True, text=True, env=env)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual(r.stderr.strip(), "", r.stderr)
        sec = subprocess.run(["systemd-analyze", "security", "--offline=true",
                              os.path.join(vdir, "asynctraced.service")],
                             capture_output=True, text=True)
        m = re.search(r"Overall exposure level for asynctraced.service: ([\d.]+)", sec.stdout)
        self.assertIsNotNone(m, sec.stdout + sec.stderr)
        # a root service that loads BPF programs: "OK" (under 5), not "MEDIUM" or worse
        self.assertLess(float(m[1]), 5.0, sec.stdout)

    def complete(self, line):
        """What bash's completion for asynctraced offers for line."""
        words = line.split(" ")
        script = (f"source {self.path('usr/share/bash-completion/completions/asynctraced')}\n"
                  f"COMP_WORDS=({' '.join(repr(w) for w in words)}); "
                  f"COMP_CWORD={len(words) - 1}; _asynctraced; "
                  "printf '%s\\n' \"${COMPREPLY[@]}\"")
        env = dict(os.environ, PATH=self.path("usr/sbin") + ":" + os.environ["PATH"])
        r = subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        return set(r.stdout.split())

    def test_bash_completion(self):
        self.assertEqual(self.complete("asynctraced --metr"), {"--metrics", "--metrics-tasks"})
        self.assertEqual(self.complete("asynctraced "),
                         {"trace", "record", "convert", "run", "probe-rules", "help"})
        self.assertIn("--fail-on", self.complete("asynctraced run --fail"))
        self.assertTrue({"--no-trace", "--no-sandbox"} <= self.complete("asynctraced record --no-"))
        # --metrics is not record's: record's own options only
        self.assertNotIn("--metrics", self.complete("asynctraced record --m"))
        self.assertEqual(self.complete("asynctraced --format "), {"json", "perfetto"})
        self.assertEqual(self.complete("asynctraced --sched-hook r"), {"raw_tp"})

    def test_uninstall_keeps_a_changed_options_file(self):
        dest = tempfile.mkdtemp(prefix="asynctraced-uninstall-")
        self.assertEqual(make("install", f"DESTDIR={dest}").returncode, 0)
        with open(os.path.join(dest, "etc/default/asynctraced"), "a") as f:
            f.write('ASYNCTRACED_OPTS="--no-trace"\n')
        # installing again never overwrites it
        self.assertEqual(make("install", f"DESTDIR={dest}").returncode, 0)
        self.assertIn('"--no-trace"\n', harness.read(os.path.join(dest, "etc/default/asynctraced")))
        r = make("uninstall", f"DESTDIR={dest}")
        self.assertEqual(r.returncode, 0, r.stderr)
        left = [os.path.relpath(os.path.join(d, f), dest)
                for d, _, fs in os.walk(dest) for f in fs]
        self.assertEqual(left, ["etc/default/asynctraced"])
        os.unlink(os.path.join(dest, "etc/default/asynctraced"))
        self.assertEqual(make("install", f"DESTDIR={dest}").returncode, 0)
        self.assertEqual(make("uninstall", f"DESTDIR={dest}").returncode, 0)
        self.assertEqual([f for _, _, fs in os.walk(dest) for f in fs], [])


class Journal(unittest.TestCase):
    """Under systemd, stderr is the journal and JOURNAL_STREAM says so (its
    device and inode): each message starts with its syslog priority. Here
    stderr is a file whose device and inode JOURNAL_STREAM names."""

    def run_logged(self, *args, **kw):
        fd, path = tempfile.mkstemp(prefix="asynctraced-journal-")
        st = os.fstat(fd)
        env = dict(os.environ, JOURNAL_STREAM=f"{st.st_dev}:{st.st_ino}")
        r = subprocess.run([harness.TRACER, *map(str, args)], stderr=fd,
                           stdout=subprocess.PIPE, env=env, text=True, timeout=60, **kw)
        os.close(fd)
        return r, harness.read(path)

    def test_error_is_priority_3(self):
        r, err = self.run_logged("-p", "999999999")
        self.assertEqual(r.returncode, 1)
        self.assertRegex(err, r"^<3>asynctraced: ")

    def test_alerts_are_warnings_and_information_is_6(self):
        harness.require_root()
        ex = harness.start_executor("noisy", 2)
        try:
            r, err = self.run_logged("-p", ex.pid, "--no-trace", *harness.DETECTOR_ARGS)
        finally:
            ex.communicate(timeout=60)
        self.assertEqual(r.returncode, 0, err)
        self.assertRegex(err, r"(?m)^<6>asynctraced: tracing pid ")
        self.assertRegex(err, r"(?m)^<4>asynctraced: alert: long poll")
        self.assertRegex(err, r"(?m)^<5>asynctraced: alert end: long poll")
        # no prefix when stderr is not the journal
        self.assertNotIn("<3>", subprocess.run([harness.TRACER, "-p", "999999999"],
                                               capture_output=True, text=True).stderr)
