# SPDX-License-Identifier: MIT
"""Record now, convert later; and protobuf traces written live.

A capture recorded from a real executor (and a real tokio program), converted
afterwards, must tell exactly what tracing live tells: the same counts, the
same alerts, traces that follow the importers' rules, and JSON and protobuf
that describe the same polls. A recorder killed mid-run leaves a capture that
converts up to the cut and says so.
"""
import collections
import json
import os
import re
import shutil
import signal
import struct
import subprocess
import tempfile
import time
import unittest
import zlib

from tests.integration import capfile, harness, pftrace_check, trace_check
from tests.integration.test_tokio import APP_LINE, app

PROTO = os.path.join(os.path.dirname(__file__), "..", "proto", "perfetto_trace.proto")


def convert(*args):
    return subprocess.run([harness.TRACER, "convert", *map(str, args)], capture_output=True,
                          text=True, timeout=300)


def record_executor(tmp, scenario, duration=2, record_args=(), kill_after=None):
    """Records one scenario from its first poll; returns (capture, executor counts, recorder)."""
    cap = os.path.join(tmp, scenario + ".atcap")
    ex = harness.start_executor(scenario, duration)
    rec = subprocess.Popen([harness.TRACER, "record", "-p", str(ex.pid), "-o", cap,
                            *harness.DETECTOR_ARGS, *record_args],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        if kill_after:
            # kill_after seconds into the traced workload, however long attaching took
            for line in ex.stderr:
                if "traced" in line:
                    break
            time.sleep(kill_after)  # let it record that long: the cut comes mid-run
            rec.kill()
        ex_out, _ = ex.communicate(timeout=duration + 60)
        _, rec_err = rec.communicate(timeout=60)
    finally:
        harness.reap(ex, rec)
    return cap, harness.parse_executor(ex_out), rec.returncode, rec_err


def same_polls(test, json_path, proto_path):
    """The poll slices of both traces, as (task, begin ns, duration ns): equal multisets."""
    from_json = collections.Counter(
        (e["args"]["task"], round(e["ts"] * 1000), round(e["dur"] * 1000))
        for e in trace_check.load(json_path) if e.get("ph") == "X" and e.get("cat") == "poll")
    packets = pftrace_check.decode(proto_path)
    threads = {u for u, t in pftrace_check.tracks(packets).items() if "thread" in t}
    from_proto = collections.Counter(
        (s[4]["task"], s[1], s[2] - s[1]) for s in pftrace_check.slices(packets)
        if s[0] in threads and s[3] != "parked")
    test.assertEqual(from_json, from_proto)
    return sum(from_json.values())


def valid_pftrace(test, path):
    test.assertEqual(pftrace_check.protoc_check(path, PROTO), [])
    packets = pftrace_check.decode(path)
    test.assertEqual(pftrace_check.check(packets), [])
    return packets


def record_times(path):
    """When each event record in a capture was made, in file order: its
    timestamp, or the end for a poll or a park (written when they end)."""
    with open(path, "rb") as f:
        data = f.read()
    out = []
    for _, kind, rec in capfile.records(data):
        ts = struct.unpack_from("<Q", rec, 8)[0]
        if kind == 2:    # at_poll: hdr, task, duration_ns
            ts += struct.unpack_from("<Q", rec, capfile.HDR.size + 8)[0]
        elif kind == 5:  # at_park: hdr, duration_ns
            ts += struct.unpack_from("<Q", rec, capfile.HDR.size)[0]
        if 1 <= kind <= 5:
            out.append(ts)
    return out


class Record(unittest.TestCase):
    def setUp(self):
        harness.require_root()
        self.tmp = tempfile.mkdtemp(prefix="at-record-")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def convert_all(self, cap):
        """JSON + alerts + report, then protobuf, from one capture."""
        js, pf = os.path.join(self.tmp, "t.json"), os.path.join(self.tmp, "t.pftrace")
        alerts = os.path.join(self.tmp, "alerts.jsonl")
        rj = convert(cap, "-o", js, "--alerts", alerts, "--summary", "json", "-q")
        self.assertEqual(rj.returncode, 0, rj.stderr)
        rp = convert(cap, "-o", pf, "-q")
        self.assertEqual(rp.returncode, 0, rp.stderr)
        with open(alerts) as f:
            log = [json.loads(line) for line in f]
        return js, pf, json.loads(rj.stdout), log

    def test_noisy_recorded_then_converted(self):
        cap, counts, rc, err = record_executor(self.tmp, "noisy")
        self.assertEqual(rc, 0, err)
        self.assertRegex(err, r"recorded pid \d+ \(sample-executor\) for [\d.]+ s, target "
                              r"exited: \d+ records, [\d.]+ MB in .*; 0 dropped")
        # this version's format: whole chunks end to end, each under its checksum
        with open(cap, "rb") as f:
            data = f.read()
        self.assertEqual(capfile.header(data), (5, 16))
        chunks = capfile.chunks(data)
        self.assertGreater(len(chunks), 1)
        for c in chunks:
            self.assertLessEqual(c.raw_size, capfile.CHUNK_BYTES)
            self.assertEqual(zlib.crc32(data[c.off + c.head:c.off + c.head + c.size]), c.crc)
            if c.raw_size > 4096:   # a few dozen records: deflating pays
                self.assertEqual(c.encoding, capfile.DEFLATE)
            self.assertEqual(len(capfile.payload(data, c)), c.raw_size)
        self.assertEqual(chunks[-1].off + chunks[-1].head + chunks[-1].size, len(data))
        # a third of the records' bytes, or less (make bench measures it at full rate)
        self.assertLess(len(data), sum(c.raw_size for c in chunks) / 3)
        # every record names its process (the BPF side's from the kernel);
        # ticks and the end are the session's own
        recs = capfile.records(data)
        pid = struct.unpack_from("<I", recs[0][2], capfile.HDR.size)[0]
        self.assertGreater(pid, 1)
        for _, kind, rec in recs:
            want = 0 if kind in (0x8004, 0x800a) else pid
            self.assertEqual(capfile.HDR.unpack_from(rec)[4], want, hex(kind))
            if kind == 2 and len(rec) >= 200:   # a poll with its self-wake appended
                self.assertEqual(capfile.HDR.unpack_from(rec, 136)[4], pid)
        js, pf, report, log = self.convert_all(cap)
        got = report["counts"]
        self.assertEqual(got["tasks_spawned"], counts["tasks"])
        for key in ("polls", "wakes", "steals", "stolen", "parks"):
            self.assertEqual(got[key], counts[key], key)
        self.assertEqual(report["end_reason"], "target exited")
        self.assertEqual({a["kind"] for a in log}, {"long-poll"})
        self.assertEqual({a.get("cause") for a in log if a["state"] == "begin"}, {"cpu-bound"})
        self.assertEqual(trace_check.check(trace_check.load(js)), [])
        valid_pftrace(self, pf)
        self.assertEqual(same_polls(self, js, pf), counts["polls"])

    def test_records_arrive_in_time_order(self):
        """Each CPU writes its own ring buffer; the reader merges them by the
        time each record was made, so the stream is in time order across
        workers (a record behind one already read would be one that a
        program took longer than the 10 ms margin to write)."""
        cap, counts, rc, err = record_executor(self.tmp, "thrash")
        self.assertEqual(rc, 0, err)
        times = record_times(cap)
        self.assertGreater(len(times), counts["polls"])  # polls (with their self-wakes), wakes
        behind, latest = [], 0
        for t in times:
            if t < latest:
                behind.append(latest - t)
            latest = max(latest, t)
        self.assertLessEqual(len(behind), len(times) // 10000, sorted(behind)[-10:])
        self.assertLess(max(behind, default=0), 10_000_000)

    def test_maps_only_capture(self):
        cap, counts, rc, err = record_executor(self.tmp, "starve", record_args=["--no-trace"])
        self.assertEqual(rc, 0, err)
        r = convert(cap, "--summary", "json", "-q")
        self.assertEqual(r.returncode, 0, r.stderr)
        report = json.loads(r.stdout)
        self.assertEqual(report["mode"], "maps")
        self.assertEqual(report["counts"]["polls"], counts["polls"])
        self.assertEqual(report["alerts"]["episodes"]["starvation"], 1)

    def test_recorder_killed_mid_run(self):
        cap, counts, rc, err = record_executor(self.tmp, "healthy", duration=3, kill_after=1.5)
        self.assertEqual(rc, -signal.SIGKILL)
        js = os.path.join(self.tmp, "cut.json")
        r = convert(cap, "-o", js, "-q")
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertRegex(r.stderr, r"is damaged at byte \d+: (the capture stops without its end "
                                   r"record: the recording was cut short|cut in the middle of a "
                                   r"(chunk header|\d+-byte chunk))")
        events = trace_check.load(js)
        self.assertEqual(trace_check.check(events), [])
        self.assertGreater(len(harness.polls(harness.TracedRun(
            "", 0, "", "", 0, "", "", js))), 1000)

    def test_interrupted_recording_ends_cleanly(self):
        cap = os.path.join(self.tmp, "i.atcap")
        ex = harness.start_executor("healthy", 30, wait_traced=False)
        try:
            self.assertTrue(harness.wait_line(ex, rf"^sample-executor: pid {ex.pid} "),
                            "the executor did not start")
            rec = subprocess.Popen([harness.TRACER, "record", "-p", str(ex.pid), "-o", cap],
                                   stderr=subprocess.PIPE, text=True)
            self.addCleanup(harness.reap, rec)
            self.assertTrue(harness.wait_line(rec, "Ctrl-C to stop"), "not recording")
            time.sleep(1)  # let it record a while: the interrupt cuts a capture with events
            rec.send_signal(signal.SIGINT)
            _, err = rec.communicate(timeout=30)
        finally:
            ex.kill()
            ex.communicate()
        self.assertEqual(rec.returncode, 0, err)
        self.assertIn(", interrupted: ", err)
        r = convert(cap, "--summary", "json", "-q")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(json.loads(r.stdout)["end_reason"], "interrupted")

    def test_record_says_where_it_records(self):
        """record announces a recording to its capture, not a trace."""
        cap = os.path.join(self.tmp, "said.atcap")
        for extra, mode in (((), "every event"), (("--no-trace",), "maps only")):
            ex = harness.start_executor("healthy", 30, wait_traced=False)
            try:
                self.assertTrue(harness.wait_line(ex, rf"^sample-executor: pid {ex.pid} "),
                                "the executor did not start")
                r = harness.run_tracer("record", "-p", ex.pid, "-o", cap, "-d", "0.3", *extra)
            finally:
                ex.kill()
                ex.communicate()
            self.assertEqual(r.returncode, 0, r.stderr)
            first = r.stderr.splitlines()[0]
            self.assertRegex(first, rf"^asynctraced: recording pid {ex.pid} \(sample-executor\) "
                                    rf"to {re.escape(cap)}: 7 asynctrace probes in .*, {mode}; "
                                    r"Ctrl-C to stop$")
            self.assertNotIn("full trace", r.stderr)

    def test_unwritable_capture_fails_before_attaching(self):
        ex = harness.start_executor("healthy", 30, wait_traced=False)
        try:
            r = harness.run_tracer("record", "-p", ex.pid, "-o", "/proc/nope/x.atcap")
        finally:
            ex.kill()
            ex.communicate()
        self.assertEqual(r.returncode, 1)
        self.assertIn("cannot write capture to '/proc/nope/x.atcap'", r.stderr)
        self.assertNotIn("Ctrl-C to stop", r.stderr)

    def test_tokio_recorded_then_converted(self):
        cap = os.path.join(self.tmp, "tokio.atcap")
        ex = subprocess.Popen([app(""), "--wait-stdin", "--duration", "2"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
        err_path = os.path.join(self.tmp, "rec.err")
        with open(err_path, "w") as err:
            rec = subprocess.Popen([harness.TRACER, "record", "-p", str(ex.pid), "-o", cap,
                                    "--long-poll", "15ms"], stderr=err)
        try:
            self.assertTrue(harness.wait_for(lambda: "recording pid" in harness.read(err_path),
                                             30), harness.read(err_path))
            ex.stdin.write("go\n")
            ex.stdin.flush()
            out, _ = ex.communicate(timeout=60)
            rec.wait(timeout=60)
        finally:
            harness.reap(ex, rec)
        self.assertEqual(rec.returncode, 0, harness.read(err_path))
        m = APP_LINE.search(out)
        js, pf, report, log = self.convert_all(cap)
        self.assertEqual(report["counts"]["polls"], int(m[4]))
        self.assertEqual(report["counts"]["wakes"], int(m[5]))
        begun = {a["kind"] for a in log if a["state"] == "begin"}
        self.assertEqual(begun, {"long-poll"})
        # future types named from symbols at record time, on the task tracks
        packets = valid_pftrace(self, pf)
        names = [t.get("name", "") for t in pftrace_check.tracks(packets).values()]
        self.assertTrue(any("burn_cpu" in n for n in names), names[:20])
        self.assertTrue(any("blocking_call" in n for n in names), names[:20])
        self.assertEqual(same_polls(self, js, pf), int(m[4]))


class LiveProtobuf(unittest.TestCase):
    def setUp(self):
        harness.require_root()
        self.tmp = tempfile.mkdtemp(prefix="at-pftrace-")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def test_fanout_traced_live_to_protobuf(self):
        run = harness.traced_run("fanout", duration=2, tmpdir=self.tmp,
                                 tracer_args=["--format", "perfetto"])
        self.assertEqual(run.tracer_rc, 0, run.describe())
        self.assertRegex(run.tracer_stderr, r"wrote .*fanout.json: [\d.]+ MB, \d+ bytes per "
                                            r"event")
        packets = valid_pftrace(self, run.trace_path)
        tracks = pftrace_check.tracks(packets)
        runtime = [u for u, t in tracks.items() if t.get("name") == "tasks"][0]
        tasks = {u: t for u, t in tracks.items() if " #" in t.get("name", "")}
        # a track per task polled (those still queued at exit have none)
        self.assertGreaterEqual(len(tasks), run.counts["tasks"] - run.counts["unpolled"])
        # fanout's children are spawned from inside their parent: nested under it
        self.assertTrue([t for t in tasks.values() if t["parent_uuid"] in tasks])
        self.assertTrue(all(t["parent_uuid"] in tasks or t["parent_uuid"] == runtime
                            for t in tasks.values()))
        threads = {u for u, t in tracks.items() if "thread" in t}
        polls = [s for s in pftrace_check.slices(packets)
                 if s[0] in threads and s[3] != "parked"]
        self.assertEqual(len(polls), run.counts["polls"])
        task_polls = [s for s in pftrace_check.slices(packets) if s[0] in tasks]
        self.assertEqual(len(task_polls), run.counts["polls"])


if __name__ == "__main__":
    unittest.main()
