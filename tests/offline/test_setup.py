# SPDX-License-Identifier: MIT
"""The README's two commands, with and without sudo.

A fresh root shell (a minimal server, a container) has no sudo: `make demo`
and `make test` must work there as root, and `sudo make ...` where sudo is
the way to root. scripts/setup.sh and scripts/demo.sh run here against fake
`id`, `dpkg-query`, `apt-get` and `sudo`, which say who runs them and record
what they were asked: nothing is installed, no root is needed.
"""
import os
import re
import shutil
import subprocess
import tempfile
import unittest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SETUP = os.path.join(ROOT, "scripts", "setup.sh")
DEMO = os.path.join(ROOT, "scripts", "demo.sh")


class Scripts(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="at-setup-")
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.bin = os.path.join(self.dir, "bin")
        self.log = os.path.join(self.dir, "log")
        os.mkdir(self.bin)
        # only what the scripts use, so that no real sudo or apt-get is found
        for tool in ("grep", "cat"):
            os.symlink(shutil.which(tool), os.path.join(self.bin, tool))
        self.fake("dpkg-query", 'echo "$@" | grep -q " make$" && printf "install ok '
                                'installed"; exit 0')  # everything missing but make
        self.fake("apt-get", f'echo "apt-get $*" >> {self.log}')

    def fake(self, name, body):
        path = os.path.join(self.bin, name)
        with open(path, "w") as f:
            f.write(f"#!/bin/sh\n{body}\n")
        os.chmod(path, 0o755)

    def run_as(self, uid, script, *args, sudo=False):
        self.fake("id", f"echo {uid}")
        if sudo:
            self.fake("sudo", f'echo "sudo $*" >> {self.log}; exec "$@"')
        return subprocess.run(["/bin/sh", script, *args], capture_output=True, text=True,
                              env={"PATH": self.bin}, cwd=ROOT, timeout=30)

    def asked(self):
        try:
            with open(self.log) as f:
                return f.read().splitlines()
        except FileNotFoundError:
            return []

    def test_setup_as_root_installs_without_sudo(self):
        r = self.run_as(0, SETUP)
        self.assertEqual(r.returncode, 0, r.stderr)
        log = self.asked()
        self.assertEqual(log[0], "apt-get update -q")
        self.assertRegex(log[1], r"^apt-get install -y -q --no-install-recommends .*\bgcc\b")
        self.assertFalse([l for l in log if l.startswith("sudo")], log)
        self.assertNotIn("sudo", r.stdout + r.stderr)

    def test_setup_through_sudo_when_not_root(self):
        r = self.run_as(1000, SETUP, sudo=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        log = self.asked()
        self.assertEqual(log[:2], ["sudo apt-get update -q", "apt-get update -q"])
        self.assertIn("(with sudo)", r.stdout)

    def test_setup_without_root_nor_sudo_says_what_to_do(self):
        r = self.run_as(1000, SETUP)
        self.assertEqual(r.returncode, 1)
        self.assertEqual(self.asked(), [])
        self.assertNotIn("not found", r.stderr)
        self.assertRegex(r.stderr, r"^setup: installing .* needs root, and there is no sudo "
                                   r"here: run it as root \(make demo, make test\)\n$")

    def test_setup_with_everything_installed_needs_nobody(self):
        self.fake("dpkg-query", 'printf "install ok installed"')
        r = self.run_as(1000, SETUP)
        self.assertEqual((r.returncode, r.stdout, r.stderr, self.asked()), (0, "", "", []))

    def test_demo_when_not_root_names_both_ways(self):
        r = self.run_as(1000, DEMO, "build")
        self.assertEqual(r.returncode, 1)
        self.assertEqual(r.stderr, "demo: needs root to load BPF: run it as root (make demo), "
                                   "or sudo make demo\n")


class Readme(unittest.TestCase):
    def test_first_screen_gives_two_commands_both_ways(self):
        """The first screen (24 lines) has one block of exactly two commands, one
        for the demo, one for the tests; each shown as root and through sudo."""
        with open(os.path.join(ROOT, "README.md")) as f:
            screen = "".join(f.readlines()[:24])
        block = re.search(r"```sh\n(.*?)```", screen, re.S).group(1)
        commands = [l for l in block.splitlines() if l.strip()]
        self.assertEqual(len(commands), 2, block)
        for line, target in zip(commands, ("demo", "test")):
            command, _, comment = line.partition("#")
            self.assertEqual(command.split(), ["make", target], line)  # runs as root as it is
            self.assertIn("as root", comment)
            self.assertIn(f"sudo make {target}", comment)
            self.assertLessEqual(len(line), 100, line)

    def test_make_calls_no_sudo_itself(self):
        """The Makefile leaves root to whoever runs it: sudo only in setup.sh,
        and only when not root."""
        with open(os.path.join(ROOT, "Makefile")) as f:
            recipes = [l for l in f if l.startswith("\t")]
        self.assertFalse([l for l in recipes if re.search(r"\bsudo\b", l)], recipes)


if __name__ == "__main__":
    unittest.main()


class StandsAlone(unittest.TestCase):
    """A user's clone is all there is: nothing in it points outside it."""

    def test_no_file_points_outside_the_repo(self):
        outside = re.compile(rb"\.\./shared/")
        found, seen = [], 0
        for top, dirs, names in os.walk(ROOT):
            # what the build and git keep is not the repo's text
            dirs[:] = [d for d in dirs if d not in (".git", "build", "__pycache__")]
            for name in names:
                path = os.path.join(top, name)
                if os.path.getsize(path) > (1 << 20):
                    continue
                seen += 1
                with open(path, "rb") as f:
                    if outside.search(f.read()):
                        found.append(os.path.relpath(path, ROOT))
        self.assertGreater(seen, 100)
        self.assertEqual(found, [])
