# SPDX-License-Identifier: MIT
"""`asynctraced tasks`: every goroutine of a running Go program and where it
waits, read from outside (issue 31). go-app's park scenario parks goroutines
at lines marked `// park: KIND` in tests/go/cmd/go-app/park.go; the lines
are read from that file, not from a table, and each must come out exactly,
on every Go version the tests build, stripped too, and as a PIE."""
import json
import os
import re
import shutil
import socket
import subprocess
import tempfile
import unittest

from tests.integration import pftrace_check, trace_check
from tests.integration.harness import (BUILD, GO_APP_SRC, TRACER, read, require_root,
                                       source_lines, wait_for)

PARK_SRC = os.path.join(GO_APP_SRC, "park.go")
# a package of the program's own, its module path without a dot
WAITER_SRC = os.path.join(GO_APP_SRC, "..", "..", "internal", "waiter", "waiter.go")
WAITER = "asynctraced/gotests/internal/waiter.Recv"

# The wait reason each kind parks with (Go 1.19 has no names of its own for
# a Mutex's and a WaitGroup's waits: both are a semaphore's).
WAITS = {
    "chanrecv": {"chan receive"},
    "select": {"select"},
    "mutex": {"sync.Mutex.Lock", "semacquire"},
    "waitgroup": {"sync.WaitGroup.Wait", "semacquire"},
    "netread": {"IO wait"},
    "sleep": {"sleep"},
    "deep": {"chan receive"},
    "package": {"chan receive"},
}
# The function each kind's goroutine waits in, and what it was started as.
FUNCS = {
    "chanrecv": ("main.parkChanRecv", "main.parkChanRecv"),
    "select": ("main.parkSelect", "main.parkSelect"),
    "mutex": ("main.parkMutex", "main.parkMutex"),
    "waitgroup": ("main.parkWaitGroup", "main.parkWaitGroup"),
    "netread": ("main.parkNetRead", "main.parkNetRead"),
    "sleep": ("main.parkSleep", "main.parkSleep"),
    "syscall": ("main.parkSyscall", "main.parkSyscall"),
    "deep": ("main.parkDeep3", "main.parkDeep1"),
    "package": (WAITER, WAITER),
}


class Parked:
    """A test program running until stopped, once it said on stderr that its
    tasks wait (ready)."""

    def __init__(self, argv, ready):
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     text=True)
        for line in self.proc.stderr:
            if ready in line:
                return
        raise AssertionError(f"{argv[0]} ended before its tasks waited: exit {self.proc.wait()}")

    def stop(self):
        self.proc.kill()
        self.proc.wait()
        self.proc.stderr.close()


def ParkedGoApp(exe):
    """go-app's park scenario, running until stopped: its goroutines parked."""
    return Parked([os.path.join(BUILD, exe), "-scenario", "park", "-duration", "60s"],
                  "go-app: parked")


def tasks(pid, *args):
    return subprocess.run([TRACER, "tasks", "-p", str(pid), *args], capture_output=True,
                          text=True, timeout=120)


def snapshot(test, app):
    """tasks --json of a Parked program, which is then stopped: its pid and its one object."""
    try:
        r = tasks(app.proc.pid, "--json")
    finally:
        app.stop()
    test.assertEqual(r.returncode, 0, r.stderr)
    docs = [json.loads(line) for line in r.stdout.splitlines()]
    test.assertEqual(len(docs), 1)
    return app.proc.pid, docs[0]


class TestGoroutines(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        require_root()
        cls.lines = {**source_lines(PARK_SRC, "park"), **source_lines(WAITER_SRC, "park")}
        assert set(cls.lines) == set(FUNCS), f"park.go's markers: {sorted(cls.lines)}"

    def snapshot(self, exe):
        return snapshot(self, ParkedGoApp(exe))

    def check_parked(self, exe):
        pid, d = self.snapshot(exe)
        self.assertEqual(d["pid"], pid)
        self.assertEqual(d["runtime"], "go")
        self.assertEqual(d["torn"], 0, d)
        self.assertNotIn("note", d)
        by_name = {t["name"]: t for t in d["tasks"]}
        for kind, (func, name) in FUNCS.items():
            with self.subTest(exe=exe, kind=kind):
                t = by_name.get(name)
                self.assertIsNotNone(t, f"no goroutine {name}: {sorted(by_name)}")
                want = {"function": func, "line": self.lines[kind]}
                if kind == "syscall":
                    self.assertEqual(t["state"], "syscall", t)
                else:
                    self.assertEqual(t["state"], "waiting", t)
                    self.assertIn(t["wait"], WAITS[kind], t)
                    # two collections have seen it wait: the runtime's estimate is there
                    self.assertTrue(t.get("waited_estimate"), t)
                at = t["waits_at"]
                self.assertEqual({k: at[k] for k in want}, want, t)
                self.assertTrue(at["file"].endswith("/internal/waiter/waiter.go"
                                                    if kind == "package" else "/go-app/park.go"), at)
                # the stack holds the frame, innermost first, down to the go statement's wrapper
                frames = [(f["function"], f.get("line")) for f in t["stack"]]
                self.assertIn((func, self.lines[kind]), frames)
                self.assertEqual(t["created_at"]["function"], "main.park", t)
        # the runtime's own goroutines are left out unless asked for
        self.assertGreater(d["hidden"], 0)
        self.assertFalse([t for t in d["tasks"] if t["name"].startswith("runtime.gc")])
        # the deep one: three frames of the program's, each at its call
        deep = [f["function"] for f in by_name["main.parkDeep1"]["stack"]]
        self.assertEqual([f for f in deep if f.startswith("main.parkDeep")],
                         ["main.parkDeep3", "main.parkDeep2", "main.parkDeep1"])

    def test_parked(self):
        self.check_parked("go-app")

    def test_parked_stripped(self):
        """No .symtab, no DWARF: .gopclntab and the version's layout only."""
        self.check_parked("go-app-stripped")

    def test_parked_pie(self):
        self.check_parked("go-app-pie")

    def test_every_go_version(self):
        versions = os.environ.get("GO_VERSIONS", "").split()
        self.assertTrue(versions, "GO_VERSIONS is not set: run the tests through make")
        for v in versions:
            for suffix in ("", "-stripped"):
                self.check_parked(f"go-versions/go-app-{v}{suffix}")

    def test_text(self):
        """The text form says each waiter's place on its own line."""
        app = ParkedGoApp("go-app")
        try:
            r = tasks(app.proc.pid, "--all")
        finally:
            app.stop()
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stdout, r"^pid \d+ \(go-app\): go1\.\d+")
        line = self.lines["chanrecv"]
        self.assertRegex(r.stdout, rf"\n\d+ main\.parkChanRecv: waiting \(chan receive\) for ~\S+, "
                                   rf"parked at main\.parkChanRecv at \S+/park\.go:{line}\n")
        # --all: the collector's goroutines too
        self.assertIn("runtime.gcBgMarkWorker", r.stdout)

    def test_a_wait_all_in_the_standard_library(self):
        """net/http's goroutine of a connection that sends nothing waits in the standard
        library alone: it is placed at the innermost call outside the runtime and its
        internal packages (a network read), not at runtime.gopark."""
        srv = subprocess.Popen([os.path.join(BUILD, "go-http")], stdout=subprocess.PIPE,
                               text=True)
        try:
            port = int(re.match(r"listening on (\d+)", srv.stdout.readline())[1])
            with socket.create_connection(("127.0.0.1", port)):
                self.assertTrue(wait_for(lambda: "net/http.(*conn).serve" in
                                         tasks(srv.pid).stdout, 10))
                r = tasks(srv.pid, "--json")
        finally:
            srv.kill()
            srv.wait()
            srv.stdout.close()
        self.assertEqual(r.returncode, 0, r.stderr)
        conn = [t for t in json.loads(r.stdout)["tasks"]
                if t["name"] == "net/http.(*conn).serve" and t["state"] == "waiting"]
        self.assertEqual(len(conn), 1, r.stdout)
        at, stack = conn[0]["waits_at"], [f["function"] for f in conn[0]["stack"]]
        self.assertEqual(conn[0]["wait"], "IO wait", conn[0])
        outside = [f for f in stack if not f.startswith(("runtime.", "internal/"))]
        self.assertEqual(at["function"], outside[0], conn[0])
        self.assertTrue(at["function"].startswith("net."), conn[0])
        self.assertTrue(at["line"], conn[0])


TOKIO_SRC = os.path.join(os.path.dirname(__file__), "..", "tokio", "src", "bin", "tokio-parked.rs")


def ParkedTokio(exe):
    """tokio-parked, running until stopped: its tasks awaiting."""
    return Parked([os.path.join(BUILD, exe)], "tokio-parked: parked")


class TestTokioTasks(unittest.TestCase):
    """Each task's awaits, outermost first, from its state machines' DWARF: the
    line of each `.await` (park.go's way: marked in tokio-parked.rs), by
    Debian's rustc 1.63 (GenFuture) and rustc-web (none), and with fat LTO
    (CONTEXT's variable left out of the DWARF: its symbol)."""

    @classmethod
    def setUpClass(cls):
        require_root()
        cls.lines = source_lines(TOKIO_SRC, "park")

    def snapshot(self, exe):
        _, d = snapshot(self, ParkedTokio(exe))
        self.assertEqual(d["runtime"], "tokio")
        self.assertNotIn("note", d)
        return d

    def check(self, exe):
        d = self.snapshot(exe)
        lines = self.lines
        chains = {}
        for t in d["tasks"]:
            self.assertEqual(t["state"], "waiting", t)
            chain = [(f["function"], f.get("line"), f.get("depth", 0)) for f in t["stack"]]
            chains.setdefault(t["name"], []).append((t, chain))
        # every spawned task (the main future is not one): 10
        self.assertEqual(len(d["tasks"]), 10, sorted(chains))
        for kind, leaf in (("notify", "tokio::sync::notify::Notified"),
                           ("sleep", "tokio::time::sleep::Sleep"),
                           ("join", "tokio::runtime::task::join::JoinHandle<u32>"),
                           ("lost", "tokio_parked::Forgotten")):
            with self.subTest(exe=exe, kind=kind):
                t, chain = chains[f"tokio_parked::park_{kind}"][0]
                self.assertEqual(chain[0], (f"tokio_parked::park_{kind}", lines[kind], 0))
                self.assertEqual(chain[1], (leaf, None, 1))
                self.assertEqual((t["waits_at"]["function"], t["waits_at"]["line"]),
                                 (f"tokio_parked::park_{kind}", lines[kind]))
        # an async block awaiting an async fn awaiting mpsc's recv, and three levels deep
        blocks = [c for _, c in chains["tokio_parked::main::{async_block#0}"]]
        self.assertEqual(len(blocks), 2, chains)
        recv = [c for c in blocks if c[1][0] == "tokio_parked::park_recv"]
        deep = [c for c in blocks if c[1][0] == "tokio_parked::park_deep1"]
        self.assertEqual(len(recv), 1, blocks)
        self.assertEqual(recv[0][1], ("tokio_parked::park_recv", lines["recv"], 1))
        self.assertTrue(recv[0][2][0].startswith("tokio::sync::mpsc::bounded::"), recv)
        self.assertEqual(deep[0][1:4], [("tokio_parked::park_deep1", lines["deep1"], 1),
                                        ("tokio_parked::park_deep2", lines["deep2"], 2),
                                        ("tokio_parked::park_deep3", lines["deep3"], 3)])
        # select!: the function at the program's line (read from the closure the macro
        # makes), then each branch's future one level down
        t, sel = chains["tokio_parked::park_select"][0]
        self.assertEqual(sel[0], ("tokio_parked::park_select", lines["select"], 0))
        self.assertTrue(t["stack"][0]["file"].endswith("tokio-parked.rs"), t["stack"][0])
        branches = [f for f in sel if f[2] == 1]
        self.assertEqual(branches[0][0], "tokio::sync::notify::Notified", sel)
        self.assertTrue(branches[1][0].startswith("tokio::sync::mpsc::bounded::"), sel)
        # a biased select! and a join!: where the compiler left no row of the program's in
        # the macro's closure, tokio's macro's own line, never another of the program's
        for kind, macro, under in (("biased", "select", ["tokio_parked::Forgotten",
                                                         "tokio::sync::notify::Notified"]),
                                   ("both", "join", ["tokio::sync::notify::Notified",
                                                     "tokio::time::sleep::Sleep"])):
            with self.subTest(exe=exe, kind=kind):
                t, chain = chains[f"tokio_parked::park_{kind}"][0]
                top = t["stack"][0]
                self.assertEqual(top["function"], f"tokio_parked::park_{kind}")
                if top["file"].endswith("tokio-parked.rs"):
                    self.assertEqual(top["line"], lines[kind], top)
                else:
                    self.assertTrue(top["file"].endswith(f"/macros/{macro}.rs"), top)
                self.assertEqual([f[0] for f in chain if f[2] == 1], under, chain)

    def test_rustc_1_63(self):
        self.check("tokio-parked")

    def test_rustc_web(self):
        self.check("tokio-parked-web")

    def test_fat_lto(self):
        self.check("tokio-parked-lto")

    def test_separate_debug_file_by_link(self):
        """DWARF moved out (objcopy --only-keep-debug), named by a debug link beside it."""
        self.check("tokio-parked-split")

    def test_separate_debug_file_by_build_id(self):
        """The same executable elsewhere, its debug link's file not beside it: first said
        missing, with where it was looked for; then found by its build id's path under
        /usr/lib/debug, as Debian's -dbgsym packages install it."""
        notes = subprocess.run(["readelf", "-n", os.path.join(BUILD, "tokio-parked-split")],
                               capture_output=True, text=True, check=True).stdout
        build_id = re.search(r"Build ID: ([0-9a-f]+)", notes).group(1)
        where = f"/usr/lib/debug/.build-id/{build_id[:2]}/{build_id[2:]}.debug"
        self.assertFalse(os.path.exists(where), where)
        with tempfile.TemporaryDirectory() as tmp:
            exe = os.path.join(tmp, "tokio-parked-copy")
            shutil.copy2(os.path.join(BUILD, "tokio-parked-split"), exe)
            app = ParkedTokio(exe)
            try:
                r = tasks(app.proc.pid)
            finally:
                app.stop()
            self.assertEqual(r.returncode, 1, r.stdout)
            self.assertIn("debug = 2", r.stderr)
            self.assertIn(f"none found at {where}", r.stderr)
            os.makedirs(os.path.dirname(where), exist_ok=True)
            shutil.copy2(os.path.join(BUILD, "tokio-parked-split.debug"), where)
            try:
                self.check(exe)
            finally:
                os.unlink(where)

    def test_without_debug_info(self):
        """No DWARF: said, with the setting that gives it, and nothing guessed."""
        app = ParkedTokio("tokio-parked-nodebug")
        try:
            r = tasks(app.proc.pid)
        finally:
            app.stop()
        self.assertEqual(r.returncode, 1)
        self.assertIn("debug = 2", r.stderr)
        self.assertEqual(r.stdout, "")


def trace_from_go(test, argv, tmp, *args):
    """argv (a program that starts on a line on stdin) traced by pid for 4 s from before
    it starts, with args: the tracer's standard output."""
    require_root()
    app = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, text=True)
    try:
        err_path = os.path.join(tmp, "err")
        with open(err_path, "w") as err:
            tr = subprocess.Popen([TRACER, "-p", str(app.pid), "-q", "-d", "4", *args],
                                  stdout=subprocess.PIPE, stderr=err, text=True)
            test.assertTrue(wait_for(lambda: "Ctrl-C to stop" in read(err_path)
                                     or tr.poll() is not None, 60), read(err_path))
            app.stdin.write("go\n")
            app.stdin.close()
            out, _ = tr.communicate(timeout=60)
            test.assertEqual(tr.returncode, 0, read(err_path))
    finally:
        app.kill()
        app.wait()
    return out


class TestTokioAlerts(unittest.TestCase):
    """Traced with probes, tokio-parked's tasks are lost wakers (--lost-waker 1s:
    none is woken), the one whose future keeps no waker at once (unwakeable);
    each alert says where the task awaits, read from the live process as
    `tasks` reads it: the line of its own deepest `.await`."""

    def lost_wakers(self, exe):
        """The lost-waker alerts that began while exe's tasks waited, traced 4 s."""
        with tempfile.TemporaryDirectory() as tmp:
            alerts = os.path.join(tmp, "alerts.json")
            trace_from_go(self, [os.path.join(BUILD, exe), "--wait-stdin"], tmp,
                          "--lost-waker", "1s", "--alerts", alerts)
            with open(alerts) as f:
                begins = [json.loads(line) for line in f]
        return [a for a in begins if a["state"] == "begin" and a["kind"] == "lost-waker"]

    def test_without_debug_info_names_only(self):
        """No type debug info: each task named by its future's type, from the symbols,
        and no place: nothing guessed, in the line or in the JSON."""
        begins = self.lost_wakers("tokio-parked-nodebug")
        names = {a["message"].split("'")[1] for a in begins}
        for kind in ("lost", "notify", "sleep", "join", "select", "biased", "both"):
            self.assertIn(f"tokio_parked::park_{kind}::{{{{closure}}}}", names)
        for a in begins:
            self.assertNotIn("parked_at", a)
            self.assertNotIn("; parked ", a["message"])

    def test_lost_wakers_say_where(self):
        lines = source_lines(TOKIO_SRC, "park")
        begins = self.lost_wakers("tokio-parked")
        by_line = {}
        for a in begins:
            own = [f for f in a.get("parked_at", []) if f["function"].startswith("tokio_parked::")
                   and f.get("line")]
            self.assertTrue(own, a)
            by_line[(own[0]["function"], own[0]["line"])] = a
        lost = by_line[("tokio_parked::park_lost", lines["lost"])]
        self.assertTrue(lost["unwakeable"], lost)
        self.assertIn(f"; parked at tokio_parked::park_lost (src/bin/tokio-parked.rs:{lines['lost']})",
                      lost["message"])
        for kind in ("notify", "sleep", "join", "select"):
            self.assertIn((f"tokio_parked::park_{kind}", lines[kind]), by_line)
        self.assertIn(("tokio_parked::park_deep3", lines["deep3"]), by_line)


NEIGHBOUR_SRC = os.path.join(os.path.dirname(TOKIO_SRC), "tokio-neighbour.rs")
WAITING = re.compile(r"^waiting at (\S+) \((.+):(\d+)\)(?: #\d+)?$")


class TestWaitsTraced(unittest.TestCase):
    """Traced live, where each task waited between its polls (docs/tasks.md): a
    read of the live process made inside an idle span places the whole span,
    which the trace draws on the task's track, named by the line of the
    task's own deepest `.await` or parked call (read from the source); the
    report's top tasks say where they waited most; a long poll's victim says
    where it waited."""

    def places(self, names):
        """(function, file, line) of each "waiting at" slice name."""
        out = []
        for name in names:
            m = WAITING.match(name)
            self.assertIsNotNone(m, name)
            out.append((m.group(1), m.group(2), int(m.group(3))))
        return out

    def test_tokio_idle_spans_say_where(self):
        lines = source_lines(TOKIO_SRC, "park")
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "trace.json")
            out = trace_from_go(self, [os.path.join(BUILD, "tokio-parked"), "--wait-stdin"], tmp,
                                "-o", path, "--summary", "json")
            events = trace_check.load(path)
        self.assertEqual(trace_check.check(events), [])
        waits = [e for e in events if e.get("ph") == "b" and e.get("cat") == "task"
                 and e["name"].startswith("waiting at ")]
        places = set(self.places(e["name"] for e in waits))
        for kind in ("recv", "notify", "sleep", "join", "select", "deep3", "lost"):
            self.assertIn((f"tokio_parked::park_{kind}", "src/bin/tokio-parked.rs", lines[kind]),
                          places)
        # where in full, innermost first: the deep one's three async fns, then main's block
        deep = [e["args"]["waited_at"].split("\n") for e in waits
                if f"park_deep3 (src/bin/tokio-parked.rs:{lines['deep3']})" in e["name"]]
        self.assertTrue(deep, places)
        self.assertEqual([f for f in deep[0] if f.startswith("tokio_parked::park_deep")],
                         [f"tokio_parked::park_deep{i} (src/bin/tokio-parked.rs:{lines[f'deep{i}']})"
                          for i in (3, 2, 1)])
        summary = json.loads(out.splitlines()[-1])
        self.assertGreater(summary["waits"]["placed"], 0, summary["waits"])
        most = {(f["function"], f.get("line")) for t in summary["tasks"]
                for f in t.get("waits_most_at", {}).get("frames", [])}
        self.assertIn(("tokio_parked::park_notify", lines["notify"]), most)

    def test_tokio_idle_spans_in_protobuf(self):
        lines = source_lines(TOKIO_SRC, "park")
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "trace.pftrace")
            trace_from_go(self, [os.path.join(BUILD, "tokio-parked"), "--wait-stdin"], tmp,
                          "-o", path)
            packets = pftrace_check.decode(path)
        self.assertEqual(pftrace_check.check(packets), [])
        waits = [s for s in pftrace_check.slices(packets) if s[3].startswith("waiting at ")]
        self.assertIn(("tokio_parked::park_sleep", "src/bin/tokio-parked.rs", lines["sleep"]),
                      self.places(s[3] for s in waits))
        for uuid, begin, end, name, args in waits:
            self.assertIsNotNone(end, name)
            self.assertIn(WAITING.match(name).group(1), args["waited_at"])

    def test_go_idle_spans_say_where(self):
        lines = {**source_lines(PARK_SRC, "park"), **source_lines(WAITER_SRC, "park")}
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "trace.json")
            r = subprocess.run([TRACER, "run", "-q", "-o", path, "--", os.path.join(BUILD, "go-app"),
                                "-scenario", "park", "-duration", "4s"],
                               capture_output=True, text=True, timeout=120)
            self.assertEqual(r.returncode, 0, r.stderr)
            events = trace_check.load(path)
        self.assertEqual(trace_check.check(events), [])
        places = self.places(e["name"] for e in events if e.get("ph") == "b"
                             and e.get("cat") == "task" and e["name"].startswith("waiting at "))
        for kind in ("chanrecv", "select", "mutex", "waitgroup", "netread", "sleep", "deep",
                     "package"):
            func = FUNCS[kind][0]
            with self.subTest(kind=kind):
                self.assertIn((func, lines[kind]), [(f, n) for f, _, n in places])
                file = [f for fn, f, _ in places if fn == func][0]
                self.assertTrue(file.endswith("/internal/waiter/waiter.go" if kind == "package"
                                              else "/go-app/park.go"), file)

    def test_none_read_with_wait_reads_0(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "trace.json")
            r = subprocess.run([TRACER, "run", "-q", "--wait-reads", "0", "-o", path,
                                "--summary", "json", "--", os.path.join(BUILD, "go-app"),
                                "-scenario", "park", "-duration", "2s"],
                               capture_output=True, text=True, timeout=120)
            self.assertEqual(r.returncode, 0, r.stderr)
            events = trace_check.load(path)
        self.assertEqual(json.loads(r.stdout.splitlines()[-1])["waits"]["read"], 0)
        self.assertFalse([e for e in events if e.get("name", "").startswith("waiting at ")])
        # the tasks were there to be read: each polled and left waiting
        self.assertTrue([e for e in events if e.get("cat") == "task"
                         and e.get("name", "").startswith("main.parkChanRecv #")])

    def test_a_long_polls_victim_says_where_it_waited(self):
        """Under `run`: the program held at its entry while the probes attach, before its
        runtime runs, its threads are read again (confined) until its task list is found."""
        line = source_lines(NEIGHBOUR_SRC, "park")["victim"]
        with tempfile.TemporaryDirectory() as tmp:
            alerts = os.path.join(tmp, "alerts.json")
            r = subprocess.run([TRACER, "run", "-q", "--alerts", alerts, "--",
                                os.path.join(BUILD, "tokio-neighbour-debug2"), "--duration", "3"],
                               capture_output=True, text=True, timeout=120)
            self.assertEqual(r.returncode, 0, r.stderr)
            with open(alerts) as f:
                ends = [a for a in map(json.loads, f) if a["kind"] == "long-poll"
                        and a["state"] == "end"]
        self.assertTrue(ends)
        victims = [v for a in ends for v in a["victims"]]
        self.assertTrue(victims, ends)
        # a wait is placed when a read fell inside it (every 100 ms, each ~250 ms long)
        placed = [v for v in victims if "waited_at" in v]
        self.assertTrue(placed, victims)
        for v in placed:
            own = [(f["function"], f.get("line")) for f in v["waited_at"]
                   if f["function"].startswith("tokio_neighbour::")]
            self.assertEqual(own, [("tokio_neighbour::victim", line)], v)
        self.assertIn(f"waited at tokio_neighbour::victim (src/bin/tokio-neighbour.rs:{line})",
                      ends[0]["message"])


class TestTasksErrors(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        require_root()

    def test_no_such_process(self):
        r = tasks(4194303)
        self.assertEqual(r.returncode, 1)
        self.assertIn("no process 4194303", r.stderr)

    def test_not_go(self):
        """A process with no runtime whose tasks are read: said, exit 1."""
        proc = subprocess.Popen(["sleep", "30"])
        try:
            r = tasks(proc.pid)
        finally:
            proc.kill()
            proc.wait()
        self.assertEqual(r.returncode, 1)
        self.assertIn("no Go runtime", r.stderr)
        self.assertIn("debug = 2", r.stderr)
        self.assertEqual(r.stdout, "")

    def test_the_host(self):
        """Without -p: every process of the host whose tasks are read, a line each
        (others, the test's own included, left out); nothing else running a
        runtime is needed for the two to be found."""
        go, tk = ParkedGoApp("go-app"), ParkedTokio("tokio-parked")
        try:
            r = subprocess.run([TRACER, "tasks", "--json"], capture_output=True, text=True,
                               timeout=300)
        finally:
            go.stop()
            tk.stop()
        self.assertEqual(r.returncode, 0, r.stderr)
        by_pid = {d["pid"]: d for d in map(json.loads, r.stdout.splitlines())}
        self.assertEqual(by_pid[go.proc.pid]["runtime"], "go")
        self.assertEqual(by_pid[tk.proc.pid]["runtime"], "tokio")
        self.assertEqual(len(by_pid[tk.proc.pid]["tasks"]), 10)
        self.assertNotIn(os.getpid(), by_pid)

    def test_unwritable_output(self):
        r = subprocess.run([TRACER, "tasks", "-p", str(os.getpid()), "-o", "/proc/nonexistent/x"],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 1)
        self.assertIn("/proc/nonexistent/x", r.stderr)


if __name__ == "__main__":
    unittest.main()
