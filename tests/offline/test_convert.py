# SPDX-License-Identifier: MIT
"""Captures converted without root: every writer and detector, offline.

The captures in tests/data were recorded from the sample executor
(tests/data/record.sh); each comes with the executor's own counts. Converting
them exercises the replay, the model, all five detectors, the Chrome JSON and
Perfetto protobuf writers, the alert log and the report, with no BPF.
"""
import collections
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
import unittest
import zlib

from tests.integration import capfile, pftrace_check, trace_check

BUILD = os.environ.get("BUILD", "build")
TRACER = os.path.join(BUILD, "asynctraced")
DATA = os.path.join(os.path.dirname(__file__), "..", "data")
PROTO = os.path.join(os.path.dirname(__file__), "..", "proto", "perfetto_trace.proto")

# Each capture raises exactly the alert its scenario is built for.
EXPECTED_ALERTS = {
    "noisy": {"long-poll"},
    "fanout": set(),
    "lost": {"lost-waker"},
    "starve-maps": {"starvation"},
    "thrash-maps": {"waker-thrash"},
    "delay-maps": {"scheduling-delay"},
    "blocking-maps": {"long-poll"},
    "v2/noisy": {"long-poll"},
}
FULL = ["noisy", "fanout", "lost", "v2/noisy"]  # recorded with every event (not --no-trace)
CAPTURE_VERSION = 3  # what tests/data/record.sh recorded (version 3: stored chunks)
NEWEST = 5  # what asynctraced writes now (docs/capture.md)
V1 = "v1/blocking-maps"  # recorded by a version 1 asynctraced, kept as it was
V2 = "v2/noisy"  # by a version 2 asynctraced (16-byte record headers), kept as it was
COUNTS = re.compile(r"(\w+)=([\d.]+)")


def capture(name):
    return os.path.join(DATA, name + ".atcap")


def executor_counts(name):
    with open(os.path.join(DATA, name + ".counts")) as f:
        return {k: v for k, v in COUNTS.findall(f.read())}


def convert(*args):
    return subprocess.run([TRACER, "convert", *args], capture_output=True, text=True,
                          timeout=120)


class Converted(unittest.TestCase):
    """Every capture, converted once to JSON and once to protobuf."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="at-convert-")
        cls.out = {}
        for name in EXPECTED_ALERTS:
            paths = {k: os.path.join(cls.tmp, name.replace("/", "-") + ext)
                     for k, ext in (("json", ".json"), ("proto", ".pftrace"),
                                    ("alerts", ".alerts"))}
            runs = {}
            for kind in ("json", "proto"):
                args = [capture(name), "-q", "--summary", "json"]
                if name in FULL:
                    args += ["-o", paths[kind]]
                if kind == "json":
                    args += ["--alerts", paths["alerts"]]
                runs[kind] = convert(*args)
            cls.out[name] = (paths, runs)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def run_of(self, name, kind="json"):
        paths, runs = self.out[name]
        r = runs[kind]
        self.assertEqual(r.returncode, 0, r.stderr)
        return paths, r

    def test_counts_equal_the_executors(self):
        for name in EXPECTED_ALERTS:
            with self.subTest(name):
                _, r = self.run_of(name)
                summary = json.loads(r.stdout)
                got, want = summary["counts"], executor_counts(name)
                self.assertEqual(summary["counts_from"], "maps")
                self.assertEqual(got["tasks_spawned"], int(want["tasks"]), r.stderr)
                for key in ("polls", "wakes", "steals", "stolen", "parks"):
                    self.assertEqual(got[key], int(want[key]), key)
                self.assertEqual(summary["events"]["dropped"], 0)

    def test_each_capture_raises_its_alert(self):
        for name, want in EXPECTED_ALERTS.items():
            with self.subTest(name):
                paths, _ = self.run_of(name)
                with open(paths["alerts"]) as f:
                    alerts = [json.loads(line) for line in f]
                self.assertEqual({a["kind"] for a in alerts}, want)
                # every episode begun is ended (thrash: one per thrashing task)
                begun = {a["episode"] for a in alerts if a["state"] == "begin"}
                self.assertEqual(begun, {a["episode"] for a in alerts if a["state"] == "end"})
                if name != "thrash-maps":
                    self.assertEqual(len(begun), len(want))

    def test_long_poll_causes(self):
        """The culprit named, and what its time went to, from maps-only captures too."""
        for name, cause in (("noisy", "cpu-bound"), ("blocking-maps", "blocked"),
                            (V2, "cpu-bound")):
            with self.subTest(name):
                paths, _ = self.run_of(name)
                with open(paths["alerts"]) as f:
                    begin = [json.loads(line) for line in f][0]
                self.assertEqual(begin["cause"], cause)
                self.assertEqual(begin["task"]["name"], os.path.basename(name).split("-")[0])

    def test_json_trace_follows_importer_rules(self):
        for name in FULL:
            with self.subTest(name):
                paths, _ = self.run_of(name)
                self.assertEqual(trace_check.check(trace_check.load(paths["json"])), [])

    def test_protobuf_decodes_with_the_subset_proto(self):
        for name in FULL:
            with self.subTest(name):
                paths, _ = self.run_of(name, "proto")
                self.assertEqual(pftrace_check.protoc_check(paths["proto"], PROTO), [])

    def test_protobuf_follows_importer_rules(self):
        for name in FULL:
            with self.subTest(name):
                paths, _ = self.run_of(name, "proto")
                self.assertEqual(pftrace_check.check(pftrace_check.decode(paths["proto"])), [])

    def test_json_and_protobuf_describe_the_same_polls(self):
        for name in FULL:
            with self.subTest(name):
                paths, _ = self.run_of(name)
                self.run_of(name, "proto")
                from_json = collections.Counter(
                    (e["args"]["task"], round(e["ts"] * 1000), round(e["dur"] * 1000))
                    for e in trace_check.load(paths["json"])
                    if e.get("ph") == "X" and e.get("cat") == "poll")
                packets = pftrace_check.decode(paths["proto"])
                threads = {u for u, t in pftrace_check.tracks(packets).items() if "thread" in t}
                from_proto = collections.Counter(
                    (s[4]["task"], s[1], s[2] - s[1])
                    for s in pftrace_check.slices(packets)
                    if s[0] in threads and s[3] != "parked")
                self.assertEqual(sum(from_json.values()), int(executor_counts(name)["polls"]))
                self.assertEqual(from_json, from_proto)

    def test_protobuf_layout(self):
        """Tasks nest under the runtime (or their parent), one track each, in spawn order."""
        paths, _ = self.run_of("fanout", "proto")
        packets = pftrace_check.decode(paths["proto"])
        tracks = pftrace_check.tracks(packets)
        process = [u for u, t in tracks.items() if "process" in t]
        self.assertEqual(len(process), 1)
        by_name = {t.get("name"): u for u, t in tracks.items() if "name" in t}
        runtime = by_name["tasks"]
        self.assertEqual(tracks[runtime]["parent_uuid"], process[0])
        self.assertEqual(tracks[by_name["alerts"]]["parent_uuid"], process[0])
        tasks = {u: t for u, t in tracks.items()
                 if t.get("name", "").rpartition(" #")[2].isdigit()}
        self.assertGreater(len(tasks), 100)
        nested = [t for t in tasks.values() if t["parent_uuid"] != runtime]
        # fanout's parent spawns its steps: they nest under its track
        self.assertTrue(nested)
        for t in nested:
            self.assertIn(t["parent_uuid"], tasks)
            self.assertEqual(t.get("sibling_merge_behavior"), 2)
        ranks = [t["sibling_order_rank"] for t in tasks.values()]
        self.assertEqual(len(set(ranks)), len(ranks))
        workers = sorted(t["thread"]["thread_name"] for t in tracks.values()
                         if "thread" in t and t["thread"].get("thread_name", "").startswith("worker"))
        self.assertEqual([w.split(" (")[0] for w in workers], ["worker 0", "worker 1"])
        counters = {t.get("name") for t in tracks.values() if "counter" in t}
        self.assertTrue({"runnable tasks", "queue depth: worker 0",
                         "queue depth: worker 1"} <= counters, counters)
        # every poll that answers a wake or spawn closes its arrow
        stats = pftrace_check.summary(packets)
        self.assertGreater(stats["flows_terminated"], 1000)

    def test_alerts_are_instants_on_the_alerts_track(self):
        paths, _ = self.run_of("noisy", "proto")
        packets = pftrace_check.decode(paths["proto"])
        alerts_track = [u for u, t in pftrace_check.tracks(packets).items()
                        if t.get("name") == "alerts"][0]
        instants = [e for e in pftrace_check.events(packets) if e["track_uuid"] == alerts_track]
        self.assertEqual([e["annotations"]["state"] for e in instants], ["begin", "end"])
        self.assertTrue(instants[0]["name"].startswith("long-poll: noisy #"))
        self.assertEqual(instants[0]["annotations"]["cause"], "cpu-bound")

    def test_reports_agree_whatever_the_format(self):
        for name in FULL:
            with self.subTest(name):
                _, rj = self.run_of(name)
                _, rp = self.run_of(name, "proto")
                self.assertEqual(json.loads(rj.stdout), json.loads(rp.stdout))


class Sandboxed(unittest.TestCase):
    def test_convert_runs_sandboxed(self):
        """Parsing a capture it was handed, convert holds no capability and runs under
        tracing's seccomp filter (docs/security.md); --no-sandbox lifts the filter only."""
        for extra, seccomp in (([], "2"), (["--no-sandbox"], "0")):
            with self.subTest(extra=extra):
                # the trace fills the pipe: convert waits in write(), sandboxed by then
                p = subprocess.Popen([TRACER, "convert", capture("noisy"), "-q", "-o", "-",
                                      "--format", "json", *extra],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                status = {}
                try:
                    for _ in range(200):
                        with open("/proc/%d/status" % p.pid) as f:
                            status = dict(line.split(":", 1) for line in f if ":" in line)
                        if status.get("NoNewPrivs", "").strip() == "1" and \
                                status.get("Seccomp", "").strip() in (seccomp, "2"):
                            break
                        time.sleep(0.05)
                finally:
                    out, err = p.communicate(timeout=60)
                self.assertEqual(p.returncode, 0, err)
                self.assertGreater(len(out), 1 << 16)
                self.assertEqual(status["NoNewPrivs"].strip(), "1")
                self.assertEqual(status["Seccomp"].strip(), seccomp)
                self.assertEqual(int(status["CapEff"], 16), 0)


class Options(unittest.TestCase):
    def test_recorded_thresholds_are_the_defaults(self):
        r = convert(capture("noisy"), "-q", "--summary", "json")
        self.assertEqual(json.loads(r.stdout)["alerts"]["episodes"]["long-poll"], 1, r.stderr)
        r = convert(capture("noisy"), "-q", "--summary", "json", "--long-poll", "0")
        self.assertEqual(json.loads(r.stdout)["alerts"]["episodes"]["long-poll"], 0, r.stderr)

    def test_conversion_is_deterministic(self):
        with tempfile.TemporaryDirectory() as d:
            outs = []
            for i in range(2):
                path = os.path.join(d, "%d.pftrace" % i)
                self.assertEqual(convert(capture("lost"), "-q", "-o", path).returncode, 0)
                with open(path, "rb") as f:
                    outs.append(f.read())
            self.assertEqual(outs[0], outs[1])

    def test_format_option_overrides_the_name(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "trace.bin")
            self.assertEqual(convert(capture("lost"), "-q", "-o", path,
                                     "--format", "perfetto").returncode, 0)
            self.assertEqual(pftrace_check.check(pftrace_check.decode(path)), [])

    def test_trace_compression(self):
        """Packets deflated in batches by default, as they are with `none`: the same
        trace either way, the deflated one a fraction of the size."""
        with tempfile.TemporaryDirectory() as d:
            paths = {}
            for how in ("default", "none", "deflate"):
                paths[how] = os.path.join(d, how + ".pftrace")
                extra = [] if how == "default" else ["--trace-compression", how]
                r = convert(capture("noisy"), "-q", "-o", paths[how], *extra)
                self.assertEqual(r.returncode, 0, r.stderr)
            decoded = {how: pftrace_check.decode(path) for how, path in paths.items()}
            self.assertEqual(decoded["none"].batches, 0)
            self.assertGreater(decoded["default"].batches, 0)
            for how, packets in decoded.items():
                self.assertEqual(pftrace_check.check(packets), [], how)
                self.assertEqual(pftrace_check.protoc_check(paths[how]), [], how)
            plain = pftrace_check.events(decoded["none"])
            self.assertGreater(len(plain), 1000)
            self.assertEqual(pftrace_check.events(decoded["default"]), plain)
            self.assertEqual(pftrace_check.events(decoded["deflate"]), plain)
            self.assertLess(os.path.getsize(paths["default"]) * 3,
                            os.path.getsize(paths["none"]))

    def test_usage_errors(self):
        cases = [
            (["convert", capture("noisy"), "-o", "x.pftrace", "--trace-compression", "zstd"],
             "invalid --trace-compression"),
            (["convert", capture("noisy"), "-o", "x.json", "--trace-compression", "none"],
             "--trace-compression is for a protobuf trace"),
            (["convert"], "convert needs a capture"),
            (["convert", capture("noisy"), "-p", "1"], "-p does not apply to convert"),
            (["convert", capture("noisy"), "--no-trace"], "--no-trace does not apply"),
            (["record", "-p", "1"], "record needs a file to write"),
            (["record", "-p", "1", "-o", "x", "--alerts", "a"], "--alerts is for tracing"),
            (["convert", "a", "b"], "unexpected argument 'b'"),
            (["-p", "1", "--format", "xml"], "invalid --format"),
        ]
        for args, msg in cases:
            with self.subTest(args=args):
                r = subprocess.run([TRACER, *args], capture_output=True, text=True, timeout=30)
                self.assertEqual(r.returncode, 2, r.stderr)
                self.assertIn(msg, r.stderr)


class Damaged(unittest.TestCase):
    """Bad captures: a clear error, exit 1, and everything before the damage kept."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="at-damage-")
        with open(capture("noisy"), "rb") as f:
            self.good = f.read()

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def write(self, data, name="bad.atcap"):
        path = os.path.join(self.dir, name)
        with open(path, "wb") as f:
            f.write(data)
        return path

    def assertRefused(self, data, message):
        r = convert(self.write(data), "-q")
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn(message, r.stderr)
        self.assertNotIn("Traceback", r.stderr)
        return r

    def test_not_a_capture(self):
        self.assertRefused(b"", "too short for the header")
        self.assertRefused(b'[{"ph":"X"}]\n' * 4, "not an asynctraced capture (bad magic)")
        r = convert(os.path.join(self.dir, "missing.atcap"))
        self.assertEqual(r.returncode, 1)
        self.assertIn("cannot open: No such file or directory", r.stderr)
        r = convert(self.dir)
        self.assertEqual(r.returncode, 1)
        self.assertIn("not a regular file", r.stderr)

    def test_other_version(self):
        """Versions this one cannot read are refused, naming theirs and what to do."""
        data = bytearray(self.good)
        data[8] = NEWEST + 1
        self.assertRefused(bytes(data), "capture version %d is newer than this asynctraced, "
                                        "which reads versions 1 to %d: convert it with a newer "
                                        "asynctraced" % (NEWEST + 1, NEWEST))
        data[8] = 0
        self.assertRefused(bytes(data), "capture version 0 is not supported by this "
                                        "asynctraced (reads versions 1 to %d); re-record it"
                                        % NEWEST)

    def test_cut_short_keeps_what_came_before(self):
        for cut in (len(self.good) // 3, len(self.good) // 2 + 7, len(self.good) - 1):
            with self.subTest(cut=cut):
                out = os.path.join(self.dir, "cut.json")
                outp = os.path.join(self.dir, "cut.pftrace")
                src = self.write(self.good[:cut])
                r = convert(src, "-q", "-o", out)
                self.assertEqual(r.returncode, 1, r.stderr)
                self.assertRegex(r.stderr, r"is damaged at byte \d+: (cut in the middle of a "
                                           r"(\d+-byte chunk|chunk header)|the capture stops "
                                           r"without its end record)")
                m = re.search(r"converted the (\d+) records before it", r.stderr)
                self.assertTrue(m, r.stderr)
                events = trace_check.load(out)
                self.assertEqual(trace_check.check(events), [])
                self.assertGreater(len(events), int(m.group(1)) // 4)
                r = convert(src, "-q", "-o", outp)
                self.assertEqual(r.returncode, 1)
                self.assertEqual(pftrace_check.check(pftrace_check.decode(outp)), [])

    def test_cut_short_reports_what_was_read(self):
        """No final snapshot: the counts are those of the records read, and the
        report says so, instead of 0 tasks, 0 polls and 0 workers."""
        chunks = capfile.chunks(self.good)
        start = chunks[len(chunks) // 2][0]
        cut = start + 100  # in a chunk: the whole chunk is lost
        kept = [k for _, k, _ in capfile.records(self.good[:start])]
        r = convert(self.write(self.good[:cut]), "-q", "--summary", "json")
        self.assertEqual(r.returncode, 1, r.stderr)
        summary = json.loads(r.stdout)
        self.assertEqual(summary["counts_from"], "records")
        counts = summary["counts"]
        self.assertGreater(kept.count(2), 100)
        self.assertEqual(counts["polls"], kept.count(2))
        self.assertEqual(counts["tasks_spawned"], kept.count(1))
        self.assertEqual(counts["steals"], kept.count(4))
        self.assertEqual(counts["parks"], kept.count(5))
        self.assertEqual(counts["workers"], 2)
        self.assertEqual(sum(w["polls"] for w in summary["workers"]), kept.count(2))
        self.assertEqual(sum(w["poll"]["count"] for w in summary["workers"]), kept.count(2))
        # the report wraps its lines to 100 columns
        self.assertRegex(" ".join(r.stderr.split()),
                         r"note the capture lacks its final snapshot of the maps: "
                         r"the counts are those of the \d+ records read")
        self.assertRegex(r.stderr, r"  polls    %d " % kept.count(2))

    def test_cut_maps_only_counts_from_samples(self):
        with open(capture("starve-maps"), "rb") as f:
            good = f.read()
        cut = capfile.chunks(good)[2][0]
        r = convert(self.write(good[:cut]), "-q", "--summary", "json")
        self.assertEqual(r.returncode, 1, r.stderr)
        summary = json.loads(r.stdout)
        self.assertEqual(summary["counts_from"], "records")
        polls = summary["counts"]["polls"]
        self.assertGreater(polls, 0)
        self.assertLessEqual(polls, int(executor_counts("starve-maps")["polls"]))
        self.assertEqual(summary["counts"]["workers"], 2)
        self.assertIn("as of their last samples", r.stderr)

    def test_garbage_record(self):
        data = bytearray(self.good)
        mid = len(data) // 2
        data[mid:mid + 64] = b"\xff" * 64
        r = convert(self.write(bytes(data)), "-q")
        # A record's size may land anywhere; whatever it hits, it is refused or skipped,
        # never a crash (the fuzzer covers the rest).
        self.assertIn(r.returncode, (0, 1), r.stderr)
        self.assertGreaterEqual(r.returncode, 0)

    def test_trailing_bytes_after_the_end(self):
        self.assertRefused(self.good + b"\0" * 24, "24 bytes after the end record")

    def test_flipped_bit_is_damage(self):
        """One bit flipped anywhere in a record: the chunk that holds it fails its
        checksum, convert names its offset, converts every chunk before it, exits 1."""
        chunks = capfile.chunks(self.good)
        self.assertGreater(len(chunks), 4)
        for i in (1, len(chunks) // 2, len(chunks) - 1):
            off, size, records = chunks[i][:3]
            before = sum(c[2] for c in chunks[:i]) - 1  # the process record: not counted
            for at, bit in ((off + 16 + 40, 0x01), (off + 16 + size // 2, 0x80),
                            (off + 16 + size - 1, 0x10)):
                with self.subTest(chunk=i, at=at):
                    data = bytearray(self.good)
                    data[at] ^= bit
                    out = os.path.join(self.dir, "flip.json")
                    r = self.assertRefused(bytes(data), "is damaged at byte %d: a chunk of %d "
                                           "records in %d bytes fails its checksum"
                                           % (off, records, size))
                    self.assertIn("converted the %d records before it" % before, r.stderr)
                    r = convert(self.write(bytes(data)), "-q", "-o", out)
                    self.assertEqual(r.returncode, 1, r.stderr)
                    self.assertEqual(trace_check.check(trace_check.load(out)), [])
        # in a chunk header: its own checksum
        off = chunks[2][0]
        data = bytearray(self.good)
        data[off + 1] ^= 0x04
        self.assertRefused(bytes(data), "is damaged at byte %d: a damaged chunk header" % off)

    def test_unknown_kinds_are_counted(self):
        """Records of kinds a newer version writes: skipped, but counted, named in the
        report and on stderr; everything else converts as before."""
        recs = [r for _, _, r in capfile.records(self.good)]
        newer_event = capfile.HDR.pack(29, capfile.HDR.size + 8, 0, 0, 0, 0) + bytes(8)
        newer_capture = capfile.HDR.pack(0x80ff, capfile.HDR.size, 0, 0, 0, 0)
        recs[100:100] = [newer_event, newer_capture, newer_event]
        r = convert(self.write(capfile.build(CAPTURE_VERSION, recs)), "-q", "--summary", "json")
        self.assertEqual(r.returncode, 0, r.stderr)
        events = json.loads(r.stdout)["events"]
        self.assertEqual(events["unknown"], 3)
        self.assertEqual(events["unknown_kinds"], [29, 0x80ff])
        self.assertIn("unknown  3 records of kinds this asynctraced does not know "
                      "(0x1d, 0x80ff) skipped", r.stderr)
        self.assertIn("holds 3 records of kinds this asynctraced does not know (0x1d, 0x80ff)",
                      r.stderr)
        self.assertEqual(json.loads(r.stdout)["counts"]["polls"],
                         int(executor_counts("noisy")["polls"]))


class Versions(unittest.TestCase):
    """Captures committed here stay readable: this version's, and versions 1 and 2
    (version 2's, converted with every other capture above, in every test)."""

    def test_committed_captures_are_this_version(self):
        for name in EXPECTED_ALERTS:
            with self.subTest(name):
                with open(capture(name), "rb") as f:
                    data = f.read()
                self.assertEqual(capfile.header(data), (2 if name == V2 else CAPTURE_VERSION, 16))
                chunks = capfile.chunks(data)
                self.assertEqual(chunks[-1].off + 16 + chunks[-1].size, len(data))
                for c in chunks:
                    self.assertEqual(zlib.crc32(data[c.off + 16:c.off + 16 + c.size]), c.crc)

    def test_version_1_is_still_read(self):
        with open(capture(V1), "rb") as f:
            self.assertEqual(capfile.header(f.read()), (1, 16))
        alerts = os.path.join(tempfile.mkdtemp(prefix="at-v1-"), "alerts")
        try:
            r = convert(capture(V1), "-q", "--summary", "json", "--alerts", alerts)
            with open(alerts) as f:
                log = [json.loads(line) for line in f]
        finally:
            shutil.rmtree(os.path.dirname(alerts), ignore_errors=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("is of format version 1, which has no checksums", r.stderr)
        summary = json.loads(r.stdout)
        want = executor_counts(V1)
        self.assertEqual(summary["counts"]["tasks_spawned"], int(want["tasks"]))
        for key in ("polls", "wakes", "steals", "stolen", "parks"):
            self.assertEqual(summary["counts"][key], int(want[key]), key)
        # version 1 numbered the counters from AT_EV_KIND_MAX: read by their numbers now
        self.assertEqual(summary["events"]["dropped"], 0)
        self.assertEqual(summary["events"]["untracked_polls"], 0)
        self.assertEqual([(a["kind"], a["state"], a.get("cause")) for a in log],
                         [("long-poll", "begin", "blocked"), ("long-poll", "end", "blocked")])


if __name__ == "__main__":
    unittest.main()
