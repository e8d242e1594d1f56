# SPDX-License-Identifier: MIT
"""Several processes in one session: -p with a list, and the host followed
without -p (processes that start later, each let go when it exits)."""
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import unittest

from tests.integration import harness, pftrace_check
from tests.integration.test_lifecycle import link_ids

SHARED_EXECUTOR = os.path.join(harness.BUILD, "sample-executor-shared")


def json_lines(text):
    return [json.loads(line) for line in text.splitlines() if line.strip()]


# Maps each file it is given, executable (as a loader would), then waits.
MAPPER_C = r"""#include <fcntl.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
int main(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		int fd = open(argv[i], O_RDONLY);
		struct stat st;

		if (fd < 0 || fstat(fd, &st) ||
		    mmap(NULL, st.st_size ? (size_t)st.st_size : 4096, PROT_READ | PROT_EXEC,
			 MAP_PRIVATE, fd, 0) == MAP_FAILED)
			return 1;
	}
	printf("mapped\n");
	fflush(stdout);
	pause();
	return 0;
}
"""


def section_offset(path, name):
    """The file offset of ELF section name (readelf)."""
    out = subprocess.run(["readelf", "-S", "--wide", path], capture_output=True, text=True,
                         check=True).stdout
    for line in out.splitlines():
        fields = line.replace("[ ", "[").split()
        if name in fields:
            return int(fields[fields.index(name) + 3], 16)
    raise AssertionError(f"no {name} in {path}")


def hostile_files(tmp):
    """Files made to trip the readers, in tmp; the last to be truncated once mapped."""
    go = os.path.join(harness.BUILD, "go-app-stripped")
    with open(go, "rb") as f:
        data = bytearray(f.read())
    # a stripped Go binary's functions come from .gopclntab: its count, 2^32 - 1
    at = section_offset(go, ".gopclntab")
    data[at + 8:at + 16] = (2**32 - 1).to_bytes(8, "little")
    with open(harness.EXECUTOR, "rb") as f:
        elf = bytearray(f.read())
    shoff = bytearray(elf)
    shoff[0x28:0x30] = (2**64 - 2**16).to_bytes(8, "little")  # e_shoff
    with open(os.path.join(harness.BUILD, "tokio-app"), "rb") as f:
        tokio = f.read()
    made = {"go-nfunc": data, "half": elf[:len(elf) // 2], "shoff": shoff, "cut": tokio}
    for name, content in made.items():
        with open(os.path.join(tmp, name), "wb") as f:
            f.write(content)
    return [os.path.join(tmp, name) for name in made]


def status(pid):
    """/proc/PID/status as a dict of its fields."""
    with open(f"/proc/{pid}/status") as f:
        return dict(line.rstrip("\n").split(":\t", 1) for line in f if ":\t" in line)


def map_entries(name):
    """The entries of our BPF map called name (one tracer runs at a time)."""
    maps = json.loads(subprocess.run(["bpftool", "-j", "map", "show"], capture_output=True,
                                     text=True, check=True).stdout or "[]")
    ids = [m["id"] for m in maps if m.get("name") == name]
    if len(ids) != 1:
        raise AssertionError(f"want one map named {name}, found {len(ids)}")
    out = subprocess.run(["bpftool", "-j", "map", "dump", "id", str(ids[0])],
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out or "[]")


class System(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        harness.require_root()

    def setUp(self):
        self.procs = []
        self.dir = tempfile.mkdtemp(prefix="asynctraced-system-")

    def tearDown(self):
        harness.reap(*self.procs)

    def start(self, *args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=None):
        p = subprocess.Popen([str(a) for a in args], stdout=stdout, stderr=stderr, stdin=stdin,
                             text=True)
        self.procs.append(p)
        return p

    def executor(self, scenario, duration, exe=None, wait=True, workers=2, extra=()):
        args = [exe or harness.EXECUTOR, "--scenario", scenario, "--duration", duration,
                "--workers", workers, *extra]
        return self.start(*args, *(["--wait-traced", "30"] if wait else []))

    def finish(self, p, timeout=90):
        out, err = p.communicate(timeout=timeout)
        return p.returncode, out, err

    def test_several_pids(self):
        """-p A,B: one session, each process its own report, alerts naming it, its
        own process in the trace; the first to exit does not end the session."""
        noisy = self.executor("noisy", 4)
        healthy = self.executor("healthy", 2)
        trace = os.path.join(self.dir, "t.pftrace")
        alerts = os.path.join(self.dir, "alerts.jsonl")
        tr = self.start(harness.TRACER, "-p", f"{noisy.pid},{healthy.pid}", "-o", trace,
                        "--alerts", alerts, "--summary", "json", *harness.DETECTOR_ARGS)
        counts = {}
        for ex in (noisy, healthy):
            rc, out, err = self.finish(ex)
            self.assertEqual(rc, 0, err)
            counts[ex.pid] = harness.parse_executor(out)
        rc, out, err = self.finish(tr)
        self.assertEqual(rc, 0, err)
        reports = {r["pid"]: r for r in json_lines(out)}
        self.assertEqual(set(reports), {noisy.pid, healthy.pid}, err)
        for pid, r in reports.items():
            # every poll of each process, and only its own
            self.assertEqual(r["counts"]["polls"], counts[pid]["polls"], err)
            self.assertEqual(r["end_reason"], "target exited")
        self.assertGreater(reports[noisy.pid]["seconds"], reports[healthy.pid]["seconds"] + 1)
        self.assertIn(f"alert: pid {noisy.pid} (sample-executor): long poll: task 'noisy'",
                      err)
        self.assertNotIn(f"pid {healthy.pid} (sample-executor): long poll", err)
        with open(alerts) as f:
            logged = json_lines(f.read())
        self.assertTrue(logged)
        self.assertEqual({a["pid"] for a in logged}, {noisy.pid})
        self.assertIn("2 processes traced", err)
        # a Perfetto process each, on packet sequences of their own
        packets = pftrace_check.decode(trace)
        self.assertEqual(pftrace_check.check(packets), [])
        self.assertEqual(pftrace_check.protoc_check(trace), [])
        pids = {d["process"]["pid"] for d in pftrace_check.tracks(packets).values()
                if "process" in d}
        self.assertEqual(pids, {noisy.pid, healthy.pid})

    def test_live_view_a_line_per_process(self):
        """Several processes, live: one line each, the one with an open alert first."""
        noisy = self.executor("noisy", 20, wait=False)
        healthy = self.executor("healthy", 20, wait=False)
        for ex in (noisy, healthy):
            self.assertTrue(harness.wait_line(ex, rf"^sample-executor: pid {ex.pid} "),
                            "an executor did not start")
        r = harness.run_tracer("-p", f"{healthy.pid},{noisy.pid}", "--live", "-d", "3.5",
                               *harness.DETECTOR_ARGS)
        self.assertEqual(r.returncode, 0, r.stderr)
        frames = r.stderr.split("asynctraced: 2 processes, the worst first")[1:]
        self.assertGreaterEqual(len(frames), 2, r.stderr)
        for frame in frames:
            rows = [l for l in frame.splitlines()[2:4]]
            self.assertRegex(rows[0], rf"^\s*{noisy.pid}\s+sample-executor\s.*long-poll noisy")
            self.assertRegex(rows[1], rf"^\s*{healthy.pid}\s+sample-executor\s.*-\x1b\[K$")

    def test_follows_the_host(self):
        """No -p: processes that start after the tracer are traced (the probes in
        the executable, and in a library the loader maps), and let go at exit."""
        trace = os.path.join(self.dir, "t.json")
        tr = self.tracer("-d", "8", "-o", trace, "--summary", "json", *harness.DETECTOR_ARGS)
        links = len(link_ids())
        first = self.executor("healthy", 1.5)
        second = self.executor("noisy", 1.5, exe=SHARED_EXECUTOR)
        counts = {}
        for ex in (first, second):
            rc, out, err = self.finish(ex)
            self.assertEqual(rc, 0, err)  # --wait-traced: it was traced
            counts[ex.pid] = harness.parse_executor(out)
        # once they are gone, their probes are too (the hooks of the session stay)
        self.assertTrue(harness.wait_for(lambda: len(link_ids()) <= links, 10))
        rc, _, _ = self.finish(tr)
        out, err = self.said("out"), self.said()
        self.assertEqual(rc, 0, err)
        reports = {r["pid"]: r for r in json_lines(out)}
        self.assertEqual(set(reports), set(counts), err)
        for pid, r in reports.items():
            self.assertEqual(r["end_reason"], "target exited")
            # traced from before its first poll (--wait-traced)
            self.assertEqual(r["counts"]["polls"], counts[pid]["polls"], err)
        self.assertIn("2 processes traced in", err)
        self.assertIn("duration elapsed", err)
        with open(trace) as f:
            events = json.load(f)
        self.assertEqual({e["pid"] for e in events}, set(counts))

    def analyser_of(self, pid, not_pid=None):
        """Process pid's analyser (its child called at-analyser), once there: its pid."""
        found = []

        def look():
            for d in os.listdir("/proc"):
                if d.isdigit() and int(d) != not_pid:
                    try:
                        st = status(int(d))
                    except OSError:
                        continue
                    if st.get("Name") == "at-analyser" and st.get("PPid") == str(pid):
                        found.append(int(d))
                        return True
            return False

        self.assertTrue(harness.wait_for(look, 20), "no analyser")
        return found[0]

    def assertConfined(self, ana):
        st = status(ana)
        self.assertNotEqual(st["Uid"].split()[0], "0")
        self.assertEqual(st["Uid"].split(), [st["Uid"].split()[0]] * 4)
        self.assertEqual((st["CapEff"], st["CapPrm"], st["CapInh"], st["CapAmb"], st["CapBnd"]),
                         ("0" * 16,) * 5)
        self.assertEqual((st["NoNewPrivs"], st["Seccomp"]), ("1", "2"))
        fds = {int(fd): os.readlink(f"/proc/{ana}/fd/{fd}") for fd in os.listdir(f"/proc/{ana}/fd")}
        self.assertEqual(set(fds), {0, 1, 2, 3}, fds)
        self.assertEqual((fds[0], fds[1]), ("/dev/null", "/dev/null"))
        self.assertTrue(fds[3].startswith("socket:"), fds)

    def test_the_analyser_reads_as_nobody_and_is_started_again(self):
        """Following the host, a process's files are read by the analyser: a
        process of nobody's, without capability, no_new_privs, under seccomp,
        holding no descriptor but its socket (and stderr). Killed (as a crash
        would), it is started again for the next process; stopped (as a hang
        would), the watchdog kills it and starts another. Each time the
        process is traced all the same, and those traced before go on."""
        tr = self.tracer("-d", "30", "--no-trace", "--summary", "json", "--examine-timeout", "2")
        ana = self.analyser_of(tr.pid)
        self.assertConfined(ana)
        first = self.executor("healthy", 8)
        self.assertTrue(harness.wait_line(first, rf"^sample-executor: pid {first.pid} "))
        # a crash
        os.kill(ana, signal.SIGSEGV)
        second = self.executor("healthy", 2)
        rc, out, err = self.finish(second)
        self.assertEqual(rc, 0, err + self.said())
        self.assertRegex(self.said(), r"the analyser died of Segmentation fault examining pid "
                         r"\d+ \(sample-executor\): started again")
        again = self.analyser_of(tr.pid, not_pid=ana)
        self.assertConfined(again)
        # a hang
        os.kill(again, signal.SIGSTOP)
        third = self.executor("healthy", 2)
        rc, out3, err = self.finish(third)
        self.assertEqual(rc, 0, err + self.said())
        self.assertRegex(self.said(), r"the analyser took over 2 s examining pid \d+ "
                         r"\(sample-executor\): started again")
        self.assertConfined(self.analyser_of(tr.pid, not_pid=again))
        counts = {}
        for ex, o in ((first, None), (second, out), (third, out3)):
            if o is None:
                rc, o, err = self.finish(ex)
                self.assertEqual(rc, 0, err)
            counts[ex.pid] = harness.parse_executor(o)
        tr.send_signal(signal.SIGINT)
        rc, _, _ = self.finish(tr)
        self.assertEqual(rc, 0, self.said())
        reports = {r["pid"]: r for r in json_lines(self.said("out"))}
        self.assertEqual(set(reports), set(counts), self.said())
        for pid, r in reports.items():
            self.assertEqual(r["counts"]["polls"], counts[pid]["polls"])

    def test_no_file_of_a_target_opened_by_name(self):
        """The privileged side opens a process's files through
        /proc/PID/map_files (the mapped file itself), never by a name the
        target controls (its executable's path, /proc/PID/root/..., its
        exe link), and the analysers (one examines, one unwinds --stacks)
        open none at all; the stacks are unwound all the same."""
        trace = os.path.join(self.dir, "strace.log")
        self.log = os.path.join(self.dir, "tracer.log")
        self.out = os.path.join(self.dir, "tracer.out")
        with open(self.log, "w") as log, open(self.out, "w") as out:
            tr = self.start("strace", "-f", "-qq", "-o", trace, "-e",
                            "trace=open,openat,openat2,execve,seccomp", harness.TRACER, "--comm",
                            "^sample-exec", "-d", "30", "--no-trace", "--stacks", stdout=out,
                            stderr=log)
        self.assertTrue(harness.wait_for(lambda: "watching for one" in self.said(), 30),
                        self.said())
        ex = self.executor("noisy", 2)
        rc, _, err = self.finish(ex)
        self.assertEqual(rc, 0, err + self.said())
        tr.send_signal(signal.SIGINT)
        self.finish(tr)
        # the stacks were unwound, symbolised from the images the analyser was handed
        self.assertIn("      burn_cpu_ns (sample-executor executor/util.c:", self.said())
        with open(trace) as f:
            lines = f.read().splitlines()
        analysers = {line.split()[0] for line in lines if "--be-the-analyser" in line}
        self.assertEqual(len(analysers), 2, "an analyser examines, another unwinds")
        opened = [(line.split()[0], m.group(1), line) for line in lines
                  for m in [re.search(r'open(?:at2?)?\((?:AT_FDCWD, )?"([^"]*)"', line)] if m]
        exe = os.path.realpath(harness.EXECUTOR)
        by_us = [(path, line) for pid, path, line in opened if pid not in analysers]
        self.assertIn(True, [path.startswith(f"/proc/{ex.pid}/map_files/") for path, _ in by_us])
        for path, line in by_us:
            self.assertNotEqual(os.path.realpath(path) if not path.startswith("/proc/") else path,
                                exe)
            # its root is opened as a place (O_PATH) that debug files are found in, no further
            if re.match(r"^/proc/\d+/root$", path):
                self.assertIn("O_PATH", line)
                continue
            self.assertNotRegex(path, r"^/proc/\d+/(root|exe|cwd)(/|$)")
        # the debug files the unwinding analyser named: looked for inside the target's root
        self.assertIn(True, ["openat2(" in line and "RESOLVE_IN_ROOT" in line
                             for line in lines if line.split()[0] not in analysers])
        # the analyser's own, once its filter is in: none succeeds
        filtered = set()
        for line in lines:
            pid = line.split()[0]
            if pid in analysers and "seccomp(SECCOMP_SET_MODE_FILTER" in line \
                    and line.rstrip().endswith("= 0"):
                filtered.add(pid)
            elif pid in filtered and "open" in line:
                self.assertIn("= -1 EACCES", line)
        self.assertEqual(filtered, analysers)

    def test_a_path_swapped_in_the_targets_mount_namespace(self):
        """A process whose executable's path names another file in its own
        mount namespace (bind-mounted over it once it started): the tracer
        reads the file the process maps (/proc/PID/map_files), not what the
        path names now, and traces every poll."""
        exe = os.path.join(self.dir, "sample-executor")
        shutil.copy(harness.EXECUTOR, exe)
        other = shutil.which("true")
        script = (f"{exe} --scenario healthy --duration 2 --workers 2 --wait-traced 30 & "
                  f"pid=$!; mount --bind {other} {exe} && echo swapped $pid; wait $pid")
        ns = self.start("unshare", "-m", "--propagation", "private", "sh", "-c", script)
        m = harness.wait_line(ns, r"^swapped (\d+)$", stream="stdout")
        self.assertIsNotNone(m, "unshare -m and mount --bind failed")
        pid = int(m[1])
        # the path, seen from inside the process's namespace, names the other file
        self.assertEqual(os.stat(f"/proc/{pid}/root{exe}").st_size, os.stat(other).st_size)
        self.assertNotEqual(os.stat(exe).st_size, os.stat(other).st_size)
        tr = self.start(harness.TRACER, "-p", pid, "--summary", "json", "--no-trace")
        rc, out, err = self.finish(ns)
        self.assertEqual(rc, 0, err)
        trc, tout, terr = self.finish(tr)
        self.assertEqual(trc, 0, terr)
        self.assertIn("7 asynctrace probes", terr)
        self.assertEqual(json_lines(tout)[0]["counts"]["polls"],
                         harness.parse_executor(out)["polls"], terr)

    def test_hostile_files_are_read_and_the_host_still_traced(self):
        """A process that maps, executable, files made to trip the readers (a
        Go binary whose function table claims 2^32 functions, an ELF file cut
        in half, one whose section headers lie past its end, one truncated
        after it was mapped): it is examined, found to run nothing known, and
        the tracer goes on with the same analyser; a process started next is
        traced whole."""
        src, mapper = os.path.join(self.dir, "hostile.c"), os.path.join(self.dir, "hostile")
        with open(src, "w") as f:
            f.write(MAPPER_C)
        subprocess.run(["cc", "-o", mapper, src], check=True)
        files = hostile_files(self.dir)
        hostile = self.start(mapper, *files)
        self.assertTrue(harness.wait_line(hostile, "^mapped$", stream="stdout"))
        # truncated under its mapping
        os.truncate(files[-1], 4096)
        self.log = os.path.join(self.dir, "tracer.log")
        self.out = os.path.join(self.dir, "tracer.out")
        with open(self.log, "w") as log, open(self.out, "w") as out:
            tr = self.start(harness.TRACER, "--comm", "^(hostile|sample-exec)", "-v", "-d", "30",
                            "--no-trace", "--summary", "json", stdout=out, stderr=log)
        self.assertTrue(harness.wait_for(
            lambda: f"pid {hostile.pid}: no known runtime, or gone" in self.said(), 30),
            self.said()[-3000:])
        ana = self.analyser_of(tr.pid)
        ex = self.executor("healthy", 1)
        rc, out, err = self.finish(ex)
        self.assertEqual(rc, 0, err + self.said()[-3000:])
        self.assertEqual(self.analyser_of(tr.pid), ana)
        tr.send_signal(signal.SIGINT)
        rc, _, _ = self.finish(tr)
        self.assertEqual(rc, 0, self.said()[-3000:])
        self.assertNotIn("the analyser", self.said())
        reports = {r["pid"]: r for r in json_lines(self.said("out"))}
        self.assertEqual(set(reports), {ex.pid})
        self.assertEqual(reports[ex.pid]["counts"]["polls"], harness.parse_executor(out)["polls"])

    def tracer(self, *args):
        """The tracer following the host, its output in files (reports of many
        processes would fill a pipe nobody reads yet), once it has looked."""
        self.log = os.path.join(self.dir, "tracer.log")
        self.out = os.path.join(self.dir, "tracer.out")
        with open(self.log, "w") as log, open(self.out, "w") as out:
            tr = self.start(harness.TRACER, "--comm", "^sample-exec", *args, stdout=out,
                            stderr=log)
        self.assertTrue(harness.wait_for(lambda: "watching for one" in self.said(), 20),
                        self.said())
        return tr

    def said(self, what="log"):
        """What the tracer has written to stderr (or stdout: "out") so far."""
        with open(getattr(self, what)) as f:
            return f.read()

    def test_processes_come_and_go(self):
        """Thirty processes of nine worker slots each, one after another: each
        one's state in the maps is freed when it exits, so that at the end no
        worker slot, task or steal pair is left, and each one was traced with
        all its workers. (One binary: the probes of its file, attached for
        every process that maps it, may still be there for the previous one
        when the next starts, which then does not wait to be followed; it runs
        long enough to be.)"""
        tr = self.tracer("-q", "--no-trace", "--summary", "json")
        runs = 30
        pids = []
        for _ in range(runs):
            ex = self.executor("healthy", 0.6, workers=8)
            rc, _, err = self.finish(ex)
            self.assertEqual(rc, 0, err + self.said()[-3000:])
            pids.append(ex.pid)
        # the last one's end
        self.assertTrue(harness.wait_for(lambda: f"summary for pid {ex.pid}" in self.said(), 10))
        # (its probes are detached first: a while, one RCU grace period each)
        harness.wait_for(lambda: not map_entries("worker_slots"), 10, step=0.2)
        self.assertEqual(map_entries("worker_slots"), [], f"last: {ex.pid}")
        self.assertEqual(map_entries("tasks"), [])
        self.assertEqual(map_entries("steals"), [])
        tr.send_signal(signal.SIGINT)
        rc, _, _ = self.finish(tr)
        out, err = self.said("out"), self.said()
        self.assertEqual(rc, 0, err)
        reports = json_lines(out)
        self.assertEqual(sorted(r["pid"] for r in reports), sorted(pids), err)
        self.assertNotRegex(err, "untracked .* of workers beyond")
        for r in reports:
            self.assertEqual(r["counts"]["workers"], 8)
        self.assertIn(f"{runs} processes traced", err)

    def test_tokio_processes_of_one_binary_share_its_probes(self):
        """The whole host followed: two tokio processes of one binary share one set
        of uprobes (the second attaches none), each task still named by its
        future type (file offsets, the same in both), every poll counted. The
        binary is root's and no one else may write it (a copy: the build's may
        be the user's who ran `sudo make test`)."""
        app = os.path.join(self.dir, "tokio-app")
        shutil.copy(os.path.join(harness.BUILD, "tokio-app"), app)
        os.chmod(app, 0o755)
        self.log = os.path.join(self.dir, "tracer.log")
        self.out = os.path.join(self.dir, "tracer.out")
        trace = os.path.join(self.dir, "t.json")
        apps = [self.start(app, "--wait-stdin", "--duration", "2", stdin=subprocess.PIPE)
                for _ in range(2)]
        with open(self.log, "w") as log, open(self.out, "w") as out:
            tr = self.start(harness.TRACER, "-v", "-d", "12", "-o", trace, "--summary", "json",
                            stdout=out, stderr=log)
        self.assertTrue(harness.wait_for(
            lambda: all(f"tracing pid {a.pid} (tokio-app)" in self.said() for a in apps), 30),
            self.said()[-3000:])
        self.assertEqual(self.said().count("attached already, for every process that maps it"),
                         1, self.said()[-3000:])
        counts = {}
        for a in apps:
            a.stdin.write("go\n")
            a.stdin.flush()
        for a in apps:
            out, _ = a.communicate(timeout=60)
            counts[a.pid] = int(re.search(r"polls=(\d+)", out)[1])
        tr.send_signal(signal.SIGINT)
        self.finish(tr)
        reports = {r["pid"]: r for r in json_lines(self.said("out"))}
        for pid, polls in counts.items():
            self.assertEqual(reports[pid]["counts"]["polls"], polls, self.said()[-3000:])
        with open(trace) as f:
            named = {(e["pid"], e["name"].split("::")[0]) for e in json.load(f)
                     if e.get("cat") == "poll" and e.get("ph") == "X"}
        for pid in counts:
            self.assertIn((pid, "tokio_app"), named)

    def test_a_file_others_may_write_gets_probes_per_process(self):
        """A binary its (non-root) owner may rewrite: each process of it gets
        probes of its own, never probes shared with every process that maps
        it (placed from bytes that can change under them)."""
        app = os.path.join(self.dir, "users-tokio-app")
        shutil.copy(os.path.join(harness.BUILD, "tokio-app"), app)
        os.chmod(self.dir, 0o755)
        os.chown(app, 65534, 65534)
        self.log = os.path.join(self.dir, "tracer.log")
        apps = [self.start(app, "--wait-stdin", "--duration", "1", stdin=subprocess.PIPE)
                for _ in range(2)]
        with open(self.log, "w") as log:
            # no --comm: files are shared only when every process is followed
            tr = self.start(harness.TRACER, "-v", "-d", "12", "--no-trace", "-q", stderr=log)
        self.assertTrue(harness.wait_for(
            lambda: all(f"tracing pid {a.pid}" in self.said() for a in apps), 30),
            self.said()[-3000:])
        self.assertEqual(self.said().count("may be written by someone but root: its probes are "
                                           "for this process alone"), 2, self.said()[-3000:])
        self.assertNotIn("attached already", self.said())
        for a in apps:
            a.stdin.write("go\n")
            a.stdin.flush()
        for a in apps:
            a.communicate(timeout=60)
        tr.send_signal(signal.SIGINT)
        rc, _, _ = self.finish(tr)
        self.assertEqual(rc, 0, self.said()[-3000:])

    def test_forked_children(self):
        """A pre-forking server: the children a traced process forks (no exec) are
        traced soon after, told by the fork hook, not found by the next scan
        of the host (every five seconds: after they are gone)."""
        tr = self.tracer("-d", "6", "-q", "--no-trace", "--summary", "json")
        parent = self.executor("healthy", 2, extra=["--fork", "2"])
        rc, out, err = self.finish(parent)
        self.assertEqual(rc, 0, err)
        children = [int(p) for p in re.findall(r"sample-executor: pid (\d+)", err)
                    if int(p) != parent.pid]
        counts = re.findall(r"polls=(\d+)", out)
        self.assertEqual(len(children), 2, err)
        rc, _, _ = self.finish(tr)
        reports = {r["pid"]: r for r in json_lines(self.said("out"))}
        self.assertEqual(rc, 0, self.said())
        self.assertEqual(set(reports), {parent.pid, *children}, self.said())
        for pid, polls in zip(children, counts):
            # the first tenths of a second of each go by before it is attached
            self.assertGreater(reports[pid]["counts"]["polls"], 0.7 * int(polls), self.said())

    def test_a_thousand_threads(self):
        """A thousand workers at once, each its own thread: every poll counted."""
        ex = self.executor("healthy", 3, workers=1000)
        r = harness.run_tracer("-p", ex.pid, "-q", "--no-trace", "--summary", "json")
        rc, out, err = self.finish(ex)
        self.assertEqual((rc, r.returncode), (0, 0), err + r.stderr)
        counts, report = harness.parse_executor(out), json.loads(r.stdout)
        self.assertEqual(report["counts"]["workers"], 1000)
        for key in ("polls", "wakes", "steals", "parks"):
            self.assertEqual(report["counts"][key], counts[key], f"{key}: {r.stderr}")
        self.assertNotIn("untracked", r.stderr)

    def test_record_several_then_convert(self):
        """record -p A,B: one capture of both (format version 4 on), which convert
        turns into a report each, the first ended when it exited, and one trace."""
        noisy = self.executor("noisy", 3)
        healthy = self.executor("healthy", 1.5)
        cap = os.path.join(self.dir, "both.atcap")
        r = harness.run_tracer("record", "-p", f"{noisy.pid},{healthy.pid}", "-o", cap,
                               *harness.DETECTOR_ARGS, timeout=90)
        counts = {}
        for ex in (noisy, healthy):
            rc, out, err = self.finish(ex)
            self.assertEqual(rc, 0, err)
            counts[ex.pid] = harness.parse_executor(out)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stderr, r"recorded 2 processes for [\d.]+ s, target exited: \d+ "
                                   r"records, [\d.]+ MB in .*both.atcap; 0 dropped")
        with open(cap, "rb") as f:
            self.assertEqual(f.read(12)[8], 5)
        trace = os.path.join(self.dir, "both.json")
        c = harness.run_tracer("convert", cap, "-o", trace, "--summary", "json")
        self.assertEqual(c.returncode, 0, c.stderr)
        reports = json_lines(c.stdout)
        # in the order they ended: the healthy one first
        self.assertEqual([x["pid"] for x in reports], [healthy.pid, noisy.pid], c.stderr)
        for x in reports:
            self.assertEqual(x["counts"]["polls"], counts[x["pid"]]["polls"], c.stderr)
            self.assertEqual(x["end_reason"], "target exited")
        self.assertIn(f"alert: pid {noisy.pid} (sample-executor): long poll", c.stderr)
        with open(trace) as f:
            self.assertEqual({e["pid"] for e in json.load(f)}, set(counts))

    def test_max_targets(self):
        """--max-targets: the processes beyond are named and counted, not traced."""
        a = self.executor("healthy", 20, wait=False)
        b = self.executor("healthy", 20, wait=False)
        for ex in (a, b):
            self.assertTrue(harness.wait_line(ex, rf"^sample-executor: pid {ex.pid} "),
                            "an executor did not start")
        r = harness.run_tracer("--comm", "^sample-exec", "--max-targets", "1", "-d", "1", "-q")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(f"tracing pid {min(a.pid, b.pid)} (sample-executor)", r.stderr)
        self.assertIn(f"pid {max(a.pid, b.pid)} (sample-executor) runs asynctrace probes, "
                      "not traced: --max-targets 1 processes are traced already", r.stderr)
        self.assertIn("1 left out by --max-targets", r.stderr)

    def test_sighup_reopens_the_alert_log(self):
        """Following the host, SIGHUP opens --alerts again (logrotate moved it away)
        and tracing goes on; alerts before are in the old file, after in the new."""
        alerts = os.path.join(self.dir, "alerts.jsonl")
        tr = self.tracer("-q", "--no-trace", "--alerts", alerts, *harness.DETECTOR_ARGS)
        for name in ("alerts.jsonl.1", None):
            ex = self.executor("noisy", 1.5)
            rc, _, err = self.finish(ex)
            self.assertEqual(rc, 0, err)
            # its alerts all written: the end of its episode comes with its report
            self.assertTrue(harness.wait_for(
                lambda: f"summary for pid {ex.pid}" in self.said(), 10))
            if name:
                os.rename(alerts, os.path.join(self.dir, name))
                tr.send_signal(signal.SIGHUP)
                self.assertTrue(harness.wait_for(lambda: os.path.exists(alerts), 10))
        self.assertIsNone(tr.poll())
        tr.send_signal(signal.SIGTERM)
        rc, _, _ = self.finish(tr)
        self.assertEqual(rc, 0, self.said())
        for path in (alerts + ".1", alerts):
            with open(path) as f:
                logged = json_lines(f.read())
            self.assertIn("long-poll", {a["kind"] for a in logged})
            self.assertEqual(len({a["pid"] for a in logged}), 1)


if __name__ == "__main__":
    unittest.main()
