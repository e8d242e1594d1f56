# SPDX-License-Identifier: MIT
"""The command line: a typo gets one line and a pointer to the help; each
command's help lists exactly the options that command takes, and the manual
(docs/cli.md) says the same. Nothing here attaches to anything."""
import os
import re
import unittest

from tests.integration import harness

COMMANDS = ("trace", "record", "convert", "run", "tasks")
MANUAL = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "cli.md")
# An option no command takes: what follows an option the command accepts.
SENTINEL = "--no-such-option"
# A valid value for each option that takes one.
VALUES = {"--pid": "1", "--duration": "1", "--output": "x.json", "--format": "json",
          "--alerts": "a.jsonl", "--summary": "text", "--long-poll": "1ms",
          "--sched-delay": "1ms", "--starve-depth": "1", "--starve-time": "1ms",
          "--thrash-rate": "1", "--lost-waker": "1s", "--episode-gap": "1s",
          "--ringbuf-size": "4K", "--task-slots": "1", "--btf": "vmlinux",
          "--sched-hook": "auto", "--probe-at": "entry", "--comm": "x",
          "--exclude-comm": "x", "--cgroup": "/x", "--max-targets": "4",
          "--metrics": "9464", "--metrics-tasks": "3", "--flight-recorder": "5", "--flight-recorder-size": "16M",
          "--dump-dir": "/tmp", "--dump-dir-size": "1G", "--trace-compression": "none",
          "--fail-on": "all", "--max": "poll.p99=5ms", "--baseline": "b.json",
          "--tolerance": "10", "--junit": "j.xml", "--umask": "022", "--user": "root",
          "--examine-timeout": "5", "--mode": "sample", "--sample-hz": "997",
          "--escalate": "10", "--escalate-every": "60", "--wait-reads": "1"}
# An option's line in a help: "  -p, --pid PID ..." or "      --alerts FILE ..."
OPTION = re.compile(r"^  (?:-(\w), |    )--([a-z][a-z-]+)", re.M)


def help_of(command):
    """The options listed by a command's --help, as a set of long names."""
    args = ["--help"] if command == "trace" else [command, "--help"]
    r = harness.run_tracer(*args)
    if r.returncode != 0 or r.stderr:
        raise AssertionError(f"{args}: exit {r.returncode}: {r.stderr}")
    return r.stdout, {"--" + m[1] for m in OPTION.findall(r.stdout)}


def manual():
    """{long option: set of commands} from the options table of docs/cli.md."""
    with open(MANUAL) as f:
        text = f.read()
    table = text[text.index("## Options"):]
    table = table[:table.index("\n## ", 1)]
    out = {}
    for row in re.findall(r"^\| (`-.*?`) \| ([a-z, ]+) \|", table, re.M):
        commands = {c.strip() for c in row[1].split(",")}
        for opt in re.findall(r"--[a-z][a-z-]+", row[0]):
            out[opt] = commands
    return out


class Typos(unittest.TestCase):
    def assertUsage(self, args, first, command="asynctraced"):
        r = harness.run_tracer(*args)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertEqual(r.stdout, "")
        self.assertEqual(r.stderr, f"asynctraced: {first}\ntry '{command} --help'\n")

    def test_unknown_option(self):
        self.assertUsage(["--foo"], "unrecognized option '--foo'")
        self.assertUsage(["-p", "1", "--foo=bar"], "unrecognized option '--foo'")
        self.assertUsage(["-x"], "unrecognized option '-x'")
        self.assertUsage(["-qx"], "unrecognized option '-x'")
        self.assertUsage(["--live", "-xq"], "unrecognized option '-x'")
        self.assertUsage(["--s"], "option '--s' is ambiguous: it begins more than one option")
        self.assertUsage(["--live", "-qp"], "option '-p' needs an argument")
        self.assertUsage(["record", "-p", "1", "--foo"], "unrecognized option '--foo'",
                         "asynctraced record")
        self.assertUsage(["convert", "x.atcap", "--foo"], "unrecognized option '--foo'",
                         "asynctraced convert")

    def test_missing_argument(self):
        self.assertUsage(["-p"], "option '-p' needs an argument")
        self.assertUsage(["--pid"], "option '--pid' needs an argument")
        self.assertUsage(["convert", "x.atcap", "-o"], "option '-o' needs an argument",
                         "asynctraced convert")
        self.assertUsage(["record", "--long-poll"], "option '--long-poll' needs an argument",
                         "asynctraced record")

    def test_argument_not_taken(self):
        self.assertUsage(["--live=yes"], "option '--live' takes no argument")
        self.assertUsage(["-p", "1", "--quiet=1"], "option '--quiet' takes no argument")

    def test_unknown_command(self):
        self.assertUsage(["recrod", "-p", "1"], "unknown command 'recrod': the commands are "
                                                 "trace, record, convert, run, tasks, probe-rules and help")
        self.assertUsage(["help", "recrod"], "unknown command 'recrod': the commands are "
                                             "trace, record, convert, run, tasks, probe-rules and help")

    def test_target_choice(self):
        self.assertUsage(["-p", "1", "--comm", "x"], "--comm, --exclude-comm and --cgroup "
                         "choose the target without -p: give -p or those")
        self.assertUsage(["record", "-o", "x.atcap", "-p", "1", "--cgroup", "/x"],
                         "--comm, --exclude-comm and --cgroup choose the target without -p: "
                         "give -p or those", "asynctraced record")
        for opt, bad in (("--comm", "("), ("--exclude-comm", "[a")):
            r = harness.run_tracer(opt, bad)
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertTrue(r.stderr.startswith(f"asynctraced: {opt} '{bad}' is not a regular "
                                                "expression: "), r.stderr)
            self.assertTrue(r.stderr.endswith("try 'asynctraced --help'\n"), r.stderr)
        self.assertUsage(["convert"], "convert needs a capture: asynctraced convert FILE "
                                      "[-o TRACE]", "asynctraced convert")

    def test_misplaced_option(self):
        self.assertUsage(["convert", "x.atcap", "-p", "1"], "-p does not apply to convert",
                         "asynctraced convert")
        self.assertUsage(["record", "-p", "1", "--live"], "--live does not apply to record",
                         "asynctraced record")


class Help(unittest.TestCase):
    def test_every_way_to_ask(self):
        for command in COMMANDS:
            text, _ = help_of(command)
            self.assertTrue(text.startswith("usage: asynctraced"), text)
            asks = [["help", command], [command, "-h"]]
            if command == "trace":
                asks += [["help"], ["-h"], ["trace", "--help"]]
            for args in asks:
                with self.subTest(args=args):
                    r = harness.run_tracer(*args)
                    self.assertEqual((r.returncode, r.stdout, r.stderr), (0, text, ""))

    def test_each_command_lists_what_it_takes(self):
        """An option a command's help lists is accepted by it (parsing goes on to
        the next argument); any other is refused as not for that command."""
        helps = {c: help_of(c)[1] for c in COMMANDS}
        every = set().union(*helps.values())
        for command, opt in (("convert", "--pid"), ("convert", "--btf"), ("record", "--alerts"),
                             ("record", "--live"), ("record", "--format"),
                             ("convert", "--no-trace")):
            self.assertNotIn(opt, helps[command], f"{command} does not take {opt}")
        for command in COMMANDS:
            for opt in sorted(every - {"--help", "--version"}):
                args = [] if command == "trace" else [command]
                args += [opt] + ([VALUES[opt]] if opt in VALUES else []) + [SENTINEL]
                with self.subTest(args=args):
                    r = harness.run_tracer(*args)
                    self.assertEqual(r.returncode, 2, r.stderr)
                    taken = f"unrecognized option '{SENTINEL}'" in r.stderr
                    self.assertEqual(taken, opt in helps[command], r.stderr)
                    if not taken:
                        self.assertRegex(r.stderr, "does not apply to|is for tracing")
            with self.subTest(command=command):
                for opt in ("--help", "--version"):
                    self.assertIn(opt, helps[command])

    def test_help_and_manual_agree(self):
        """The options table of docs/cli.md names, for each option, the commands
        that take it: the same as each command's help."""
        doc = manual()
        for command in COMMANDS:
            with self.subTest(command=command):
                listed = {o for o, cmds in doc.items() if command in cmds}
                self.assertEqual(help_of(command)[1], listed)

    def test_version(self):
        r = harness.run_tracer("--version")
        self.assertEqual(r.returncode, 0)
        self.assertRegex(r.stdout, r"^asynctraced \d+\.\d+\.\d+\n$")


if __name__ == "__main__":
    unittest.main()
