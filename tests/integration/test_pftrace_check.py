# SPDX-License-Identifier: MIT
"""Tests of pftrace_check itself (no root, no tracer): a checker that cannot fail is a defect.

Traces are built here from dicts by a small encoder with its own table of
field numbers (so a wrong number in the checker's schema shows up as a
disagreement, and protoc checks both against tests/proto). One good trace,
laid out like asynctraced's, passes `check` and `protoc_check`; each bad trace
breaks one rule and must produce its problem.
"""
import os
import struct
import subprocess
import sys
import tempfile
import unittest

from tests.integration import pftrace_check as pc

PROTO = os.path.join(os.path.dirname(__file__), "..", "proto", "perfetto_trace.proto")
PROTOC = "/usr/bin/protoc"

# message -> field -> (number, kind[, message]); kinds: v varint, s string,
# m message, f fixed64, d double.
FIELDS = {
    "Trace": {"packet": (1, "m", "TracePacket")},
    "TracePacket": {"timestamp": (8, "v"), "trusted_packet_sequence_id": (10, "v"),
                    "track_event": (11, "m", "TrackEvent"),
                    "interned_data": (12, "m", "InternedData"), "sequence_flags": (13, "v"),
                    "clock_snapshot": (6, "m", "ClockSnapshot"),
                    "timestamp_clock_id": (58, "v"),
                    "trace_packet_defaults": (59, "m", "TracePacketDefaults"),
                    "track_descriptor": (60, "m", "TrackDescriptor"),
                    "perf_sample": (66, "m", "PerfSample")},
    "PerfSample": {"cpu": (1, "v"), "pid": (2, "v"), "tid": (3, "v"), "callstack_iid": (4, "v"),
                   "cpu_mode": (5, "v")},
    "Frame": {"iid": (1, "v"), "function_name_id": (2, "v"), "mapping_id": (3, "v"),
              "rel_pc": (4, "v")},
    "Callstack": {"iid": (1, "v"), "frame_ids": (2, "v")},
    "Mapping": {"iid": (1, "v"), "path_string_ids": (7, "v")},
    "ClockSnapshot": {"clocks": (1, "m", "Clock")},
    "Clock": {"clock_id": (1, "v"), "timestamp": (2, "v"), "is_incremental": (3, "v")},
    "TracePacketDefaults": {"timestamp_clock_id": (58, "v")},
    "TrackDescriptor": {"uuid": (1, "v"), "name": (2, "s"),
                        "process": (3, "m", "ProcessDescriptor"),
                        "thread": (4, "m", "ThreadDescriptor"), "parent_uuid": (5, "v"),
                        "counter": (8, "m", "CounterDescriptor"), "child_ordering": (11, "v"),
                        "sibling_order_rank": (12, "v"), "sibling_merge_behavior": (15, "v")},
    "ProcessDescriptor": {"pid": (1, "v"), "cmdline": (2, "s"), "process_name": (6, "s")},
    "ThreadDescriptor": {"pid": (1, "v"), "tid": (2, "v"), "thread_name": (5, "s")},
    "CounterDescriptor": {"unit": (3, "v"), "unit_name": (6, "s")},
    "TrackEvent": {"debug_annotations": (4, "m", "DebugAnnotation"), "type": (9, "v"),
                   "name_iid": (10, "v"), "track_uuid": (11, "v"), "categories": (22, "s"),
                   "name": (23, "s"), "counter_value": (30, "v"),
                   "double_counter_value": (44, "d"), "flow_ids": (47, "f"),
                   "terminating_flow_ids": (48, "f"), "extra_counter_track_uuids": (31, "v"),
                   "extra_counter_values": (12, "v")},
    "DebugAnnotation": {"name_iid": (1, "v"), "name": (10, "s"), "bool_value": (2, "v"),
                        "uint_value": (3, "v"), "int_value": (4, "v"), "double_value": (5, "d"),
                        "string_value": (6, "s"), "string_value_iid": (17, "v")},
    "InternedData": {"event_names": (2, "m", "Name"), "debug_annotation_names": (3, "m", "Name"),
                     "debug_annotation_string_values": (29, "m", "InternedString"),
                     "function_names": (5, "m", "InternedString"), "frames": (6, "m", "Frame"),
                     "callstacks": (7, "m", "Callstack"),
                     "mapping_paths": (17, "m", "InternedString"),
                     "mappings": (19, "m", "Mapping")},
    "Name": {"iid": (1, "v"), "name": (2, "s")},
    "InternedString": {"iid": (1, "v"), "str": (2, "s")},
}


def varint(n):
    n &= (1 << 64) - 1  # negative ints: ten bytes, as protobuf writes them
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def tag(number, wire):
    return varint(number << 3 | wire)


def encode(msg, typ="Trace"):
    """Encodes a dict; int keys are raw fields (int value: varint, bytes: length-delimited)."""
    out = bytearray()
    for key, value in msg.items():
        if isinstance(key, int):
            if isinstance(value, bytes):
                out += tag(key, 2) + varint(len(value)) + value
            else:
                out += tag(key, 0) + varint(value)
            continue
        number, kind, *sub = FIELDS[typ][key]
        for v in value if isinstance(value, list) else [value]:
            if kind == "v":
                out += tag(number, 0) + varint(int(v))
            elif kind == "f":
                out += tag(number, 1) + struct.pack("<Q", v)
            elif kind == "d":
                out += tag(number, 1) + struct.pack("<d", v)
            else:
                body = v.encode() if kind == "s" else encode(v, sub[0])
                out += tag(number, 2) + varint(len(body)) + body
    return bytes(out)


def trace_bytes(packets):
    return encode({"packet": packets})


# A trace laid out like asynctraced's: process, worker threads, a runtime track
# under the process, task tracks under it (a child task under its parent), a
# queue-depth counter, interned names, a wake -> poll flow, two sequences.
PROC, W0, W1, RT, T1, T2, T3, QD = 1, 2, 3, 10, 11, 12, 13, 20
EV_POLL, EV_WAKE = 1, 2
AN_TASK, AN_RESULT = 1, 2


def td(**kw):
    return {"trusted_packet_sequence_id": 1, "track_descriptor": kw}


def ev(ts, typ, track, seq=1, flags=2, **kw):
    return {"timestamp": ts, "trusted_packet_sequence_id": seq, "sequence_flags": flags,
            "track_event": dict(type=typ, track_uuid=track, **kw)}


def good_packets():
    task = lambda n: {"name_iid": AN_TASK, "uint_value": n}  # noqa: E731
    return [
        {"trusted_packet_sequence_id": 1, "sequence_flags": 1,
         "interned_data": {"event_names": [{"iid": EV_POLL, "name": "poll"},
                                           {"iid": EV_WAKE, "name": "wake"}],
                           "debug_annotation_names": [{"iid": AN_TASK, "name": "task"},
                                                      {"iid": AN_RESULT, "name": "result"}]},
         "track_descriptor": {"uuid": PROC, "name": "sample-executor",
                              "process": {"pid": 100, "process_name": "sample-executor",
                                          "cmdline": ["sample-executor", "healthy"]},
                              "child_ordering": 3}},
        td(uuid=W0, thread={"pid": 100, "tid": 101, "thread_name": "worker 0"},
           parent_uuid=PROC, sibling_order_rank=0),
        td(uuid=W1, thread={"pid": 100, "tid": 102, "thread_name": "worker 1"},
           parent_uuid=PROC, sibling_order_rank=1),
        td(uuid=RT, name="runtime", parent_uuid=PROC, child_ordering=2),
        td(uuid=T1, name="handler #1", parent_uuid=RT, sibling_merge_behavior=2),
        td(uuid=T2, name="handler #2", parent_uuid=RT, sibling_merge_behavior=2),
        td(uuid=T3, name="child #3", parent_uuid=T1, sibling_merge_behavior=2),
        td(uuid=QD, name="queue depth worker 0", parent_uuid=PROC,
           counter={"unit": 2, "unit_name": "tasks"}),
        # Worker 0 polls task 1; inside it task 1 wakes task 2 (flow 7).
        ev(1000, 1, W0, name_iid=EV_POLL, debug_annotations=[task(1)], categories=["poll"]),
        ev(1000, 1, T1, name_iid=EV_POLL),
        ev(1500, 3, W0, name_iid=EV_WAKE, flow_ids=[7], debug_annotations=[task(2)]),
        ev(1600, 4, QD, flags=0, counter_value=1),
        ev(2000, 2, T1, flags=0),
        ev(2000, 2, W0,
           debug_annotations=[{"name_iid": AN_RESULT, "string_value": "pending"}]),
        # Worker 1 polls task 2; flow 7 ends there. A spawn of task 3 with
        # flow 8 (2^64-1: the whole fixed64 range) that ends in its poll.
        ev(2500, 1, W1, name_iid=EV_POLL, terminating_flow_ids=[7],
           debug_annotations=[task(2), {"name": "on_cpu_us", "double_value": 1.5},
                              {"name": "first", "bool_value": True},
                              {"name": "delta", "int_value": -3}]),
        ev(2500, 1, T2, name_iid=EV_POLL, terminating_flow_ids=[]),
        ev(2600, 3, W1, flags=0, name="spawn child #3", flow_ids=[2**64 - 1]),
        ev(2900, 2, T2, flags=0),
        ev(3000, 2, W1, flags=0),
        # A second sequence with its own interning, written later in the file
        # but earlier in time: task 3's poll, ending the spawn flow, and a
        # nested slice ending at the same timestamp as it begins.
        {"timestamp": 2700, "trusted_packet_sequence_id": 2, "sequence_flags": 3,
         "interned_data": {"event_names": [{"iid": 1, "name": "poll child"}]},
         "track_event": {"type": 1, "track_uuid": T3, "name_iid": 1,
                         "terminating_flow_ids": [2**64 - 1]}},
        ev(2750, 1, T3, seq=2, flags=0, name="inner"),
        ev(2750, 2, T3, seq=2, flags=0),
        ev(2800, 2, T3, seq=2, flags=0),
        ev(2800, 4, QD, seq=2, flags=0, double_counter_value=0.5),
        # A flow started and never ended: allowed, only counted.
        ev(3100, 3, W0, flags=0, name="wake lost #4", flow_ids=[9]),
    ]


class Base(unittest.TestCase):
    def decode(self, packets):
        return pc.decode(trace_bytes(packets))

    def problems(self, packets, **kw):
        return pc.check(self.decode(packets), **kw)

    def assertProblem(self, packets, text, **kw):
        problems = self.problems(packets, **kw)
        self.assertTrue(any(text in p for p in problems),
                        f"expected a problem containing {text!r}, got {problems}")
        return problems

    def protoc(self, data):
        with tempfile.NamedTemporaryFile(suffix=".pftrace") as f:
            f.write(data)
            f.flush()
            return pc.protoc_check(f.name, PROTO, protoc=PROTOC)


class GoodTrace(Base):
    def test_passes_check(self):
        stats = {}
        self.assertEqual(pc.check(self.decode(good_packets()), stats=stats), [])
        self.assertEqual(stats, {"flows_unterminated": 1, "slices_open": 0})

    def test_passes_protoc(self):
        self.assertEqual(self.protoc(trace_bytes(good_packets())), [])

    def test_decoded_fields(self):
        packets = self.decode(good_packets())
        self.assertEqual(len(packets), len(good_packets()))
        self.assertEqual(packets.problems, [])
        first = packets[0]
        self.assertEqual(first["track_descriptor"]["process"],
                         {"pid": 100, "process_name": "sample-executor",
                          "cmdline": ["sample-executor", "healthy"]})
        self.assertEqual(first["interned_data"]["event_names"][1], {"iid": 2, "name": "wake"})
        self.assertEqual(packets[7]["track_descriptor"]["counter"],
                         {"unit": 2, "unit_name": "tasks"})
        e = packets[14]["track_event"]
        self.assertEqual(e["terminating_flow_ids"], [7])
        self.assertEqual(e["debug_annotations"][1:],
                         [{"name": "on_cpu_us", "double_value": 1.5},
                          {"name": "first", "bool_value": True},
                          {"name": "delta", "int_value": -3}])
        self.assertEqual(packets[16]["track_event"]["flow_ids"], [2**64 - 1])
        self.assertEqual(packets[23]["track_event"]["double_counter_value"], 0.5)
        self.assertEqual(packets.nbytes, len(trace_bytes(good_packets())))
        self.assertEqual(packets[8]["_size"], len(encode(good_packets()[8], "TracePacket")))

    def test_tracks(self):
        tracks = pc.tracks(self.decode(good_packets()))
        self.assertEqual(sorted(tracks), [PROC, W0, W1, RT, T1, T2, T3, QD])
        self.assertEqual(tracks[T3]["parent_uuid"], T1)
        self.assertEqual(pc.track_kind(tracks[W1]), "thread")
        self.assertEqual(pc.track_kind(tracks[QD]), "counter")
        self.assertEqual(pc.track_kind(tracks[RT]), "custom")

    def test_slices(self):
        slices = pc.slices(self.decode(good_packets()))
        self.assertEqual(slices[0], (W0, 1000, 2000, "poll", {"task": 1, "result": "pending"}))
        self.assertIn((T1, 1000, 2000, "poll", {}), slices)
        self.assertIn((W1, 2500, 3000, "poll",
                       {"task": 2, "on_cpu_us": 1.5, "first": True, "delta": -3}), slices)
        # Interned on sequence 2 with iid 1, which means "poll" on sequence 1.
        self.assertIn((T3, 2700, 2800, "poll child", {}), slices)
        self.assertIn((T3, 2750, 2750, "inner", {}), slices)
        self.assertEqual(len(slices), 6)

    def test_open_slices_have_no_end(self):
        packets = good_packets()
        del packets[17:19]  # the ENDs of T2 and W1
        slices = pc.slices(self.decode(packets))
        self.assertIn((T2, 2500, None, "poll", {}), slices)

    def test_events(self):
        evs = pc.events(self.decode(good_packets()))
        wake = [e for e in evs if e["name"] == "wake"][0]
        self.assertEqual((wake["ts"], wake["track_uuid"], wake["type"], wake["flow_ids"],
                          wake["annotations"]), (1500, W0, 3, [7], {"task": 2}))
        self.assertEqual([e["value"] for e in evs if e["type"] == 4], [1, 0.5])

    def test_summary(self):
        s = pc.summary(self.decode(good_packets()))
        self.assertEqual(s["packets"], 25)
        self.assertEqual(s["sequences"], 2)
        self.assertEqual(s["tracks"], {"process": 1, "thread": 2, "custom": 4, "counter": 1})
        self.assertEqual(s["slices"], {W0: 1, T1: 1, W1: 1, T2: 1, T3: 2})
        self.assertEqual((s["instants"], s["counters"]), (3, 2))
        self.assertEqual((s["flows_started"], s["flows_terminated"], s["flows_unterminated"]),
                         (3, 2, 1))
        self.assertEqual(s["interned_names"], {"event_names": 3, "debug_annotation_names": 2,
                                               "debug_annotation_string_values": 0})
        self.assertEqual(s["bytes"], len(trace_bytes(good_packets())))
        self.assertEqual(s["track_events"], 17)

    def test_cli(self):
        script = os.path.join(os.path.dirname(__file__), "pftrace_check.py")
        with tempfile.NamedTemporaryFile(suffix=".pftrace") as f:
            f.write(trace_bytes(good_packets()))
            f.flush()
            r = subprocess.run([sys.executable, script, f.name, "--proto", PROTO],
                               capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("valid", r.stdout)
            bad = good_packets()
            del bad[12]  # T1's END
            bad[5]["track_descriptor"]["name"] = "handler #1"
            f.seek(0)
            f.truncate()
            f.write(trace_bytes(bad))
            f.flush()
            r = subprocess.run([sys.executable, script, f.name], capture_output=True, text=True)
            self.assertEqual(r.returncode, 1)
            lines = r.stderr.splitlines()
            self.assertEqual(len(lines), 2, lines)
            self.assertTrue(all(line.startswith("pftrace_check: ") for line in lines))


def clocked_packets():
    """One sequence laid out as asynctraced writes it now: an incremental clock of
    its own by default, tied to BOOTTIME (at 500) by a snapshot; a packet earlier
    than the one before it on BOOTTIME itself; a counter value riding on a slice;
    an interned string value."""
    def desc(**kw):
        return {"trusted_packet_sequence_id": 1, "sequence_flags": 2, "track_descriptor": kw}
    return [
        {"trusted_packet_sequence_id": 1, "sequence_flags": 1,
         "interned_data": {"debug_annotation_names": [{"iid": 1, "name": "result"}],
                           "debug_annotation_string_values": [{"iid": 1, "str": "pending"}]},
         "trace_packet_defaults": {"timestamp_clock_id": 64},
         "clock_snapshot": {"clocks": [{"clock_id": 6, "timestamp": 500},
                                       {"clock_id": 64, "timestamp": 0, "is_incremental": 1}]}},
        desc(uuid=PROC, process={"pid": 100}),
        desc(uuid=W0, thread={"pid": 100, "tid": 101}, parent_uuid=PROC),
        desc(uuid=QD, name="queue depth", parent_uuid=PROC, counter={"unit": 2}),
        ev(1000, 1, W0, name="poll", extra_counter_track_uuids=[QD], extra_counter_values=[3],
           debug_annotations=[{"name_iid": 1, "string_value_iid": 1}]),
        dict(ev(700, 3, W0, name="earlier"), timestamp_clock_id=6),
        ev(500, 2, W0, extra_counter_track_uuids=[QD], extra_counter_values=[0]),
    ]


class Clocks(Base):
    """Timestamps on the sequence's incremental clock, resolved to BOOTTIME as the
    importer does; the rules of clocks, defaults, string values and extra counters."""

    def test_resolved(self):
        packets = self.decode(clocked_packets())
        self.assertEqual(pc.check(packets), [])
        self.assertEqual([p.get("timestamp") for p in packets], [None] * 4 + [1500, 700, 2000])
        self.assertEqual(packets[6]["_raw_timestamp"], 500)
        self.assertEqual(pc.slices(packets), [(W0, 1500, 2000, "poll", {"result": "pending"})])
        counters = [(e["ts"], e["track_uuid"], e["value"]) for e in pc.events(packets)
                    if e["type"] == 4]
        self.assertEqual(counters, [(1500, QD, 3), (2000, QD, 0)])
        self.assertEqual(pc.summary(packets)["counters"], 2)

    def test_protoc(self):
        self.assertEqual(self.protoc(trace_bytes(clocked_packets())), [])

    def test_clock_without_snapshot(self):
        packets = clocked_packets()
        del packets[0]["clock_snapshot"]
        self.assertProblem(packets, "timestamp on clock 64, which no snapshot of sequence 1")

    def test_snapshot_without_boottime(self):
        packets = clocked_packets()
        del packets[0]["clock_snapshot"]["clocks"][0]
        self.assertProblem(packets, "clock snapshot without BOOTTIME")

    def test_defaults_need_flag_2(self):
        packets = clocked_packets()
        packets[6]["sequence_flags"] = 0
        self.assertProblem(packets, "has packet defaults, but this packet does not say")

    def test_string_value_not_interned(self):
        packets = clocked_packets()
        packets[4]["track_event"]["debug_annotations"][0]["string_value_iid"] = 9
        self.assertProblem(packets, "annotation string_value_iid 9 not defined")

    def test_extra_counters(self):
        packets = clocked_packets()
        packets[4]["track_event"]["extra_counter_values"] = [3, 4]
        self.assertProblem(packets, "1 extra counter tracks for 2 extra counter values")
        packets = clocked_packets()
        packets[4]["track_event"]["extra_counter_track_uuids"] = [W0]
        self.assertProblem(packets, "extra counter value on non-counter track")
        packets = clocked_packets()
        packets[4]["track_event"]["extra_counter_track_uuids"] = [99]
        self.assertProblem(packets, "extra counter track 99 not declared")



def compressed(data, cut=None):
    """A trace's packets as batches of compressed_packets (a batch every `cut` bytes
    of packets, at packet boundaries), as asynctraced writes them by default."""
    import zlib
    packets, pos = [], 0
    while pos < len(data):
        n, q = pc._varint(data, pos + 1, len(data))
        packets.append(data[pos:q + n])
        pos = q + n
    batches, cur = [], b""
    for p in packets:
        if cut and cur and len(cur) + len(p) > cut:
            batches.append(cur)
            cur = b""
        cur += p
    batches.append(cur)
    out = b""
    for b in batches:
        z = zlib.compress(b, 1)
        body = varint(50 << 3 | 2) + varint(len(z)) + z
        out += b"\x0a" + varint(len(body)) + body
    return out


class Compressed(Base):
    """Batches of compressed_packets read as the packets they hold, in their place."""

    def test_same_as_plain(self):
        plain = trace_bytes(good_packets())
        for cut in (None, 64):
            data = compressed(plain, cut)
            packets = pc.decode(data)
            self.assertGreater(packets.batches, 0)
            self.assertEqual(pc.check(packets), [])
            self.assertEqual(pc.slices(packets), pc.slices(pc.decode(plain)))
            self.assertEqual(packets.nbytes, len(data))
            with tempfile.NamedTemporaryFile(suffix=".pftrace") as f:
                f.write(data)
                f.flush()
                self.assertEqual(pc.protoc_check(f.name, PROTO, protoc=PROTOC), [])

    def test_batch_that_does_not_inflate(self):
        body = varint(50 << 3 | 2) + varint(4) + b"\x78\x9c\xff\xff"
        with self.assertRaisesRegex(pc.WireError, "do not inflate"):
            pc.decode(b"\x0a" + varint(len(body)) + body)

    def test_batch_of_something_else(self):
        import zlib
        z = zlib.compress(b"\x08\x01")
        body = varint(50 << 3 | 2) + varint(len(z)) + z
        with self.assertRaisesRegex(pc.WireError, "is not a packet"):
            pc.decode(b"\x0a" + varint(len(body)) + body)


class DecoderAgainstProtoc(Base):
    """protoc's encoder, from text format, read back by our decoder."""

    TEXT = """
packet { timestamp: 18446744073709551615 trusted_packet_sequence_id: 4294967295
  sequence_flags: 3
  track_descriptor { uuid: 1 name: "t\\303\\251st" sibling_order_rank: -2
    thread { pid: -1 tid: 2147483647 thread_name: "w" } } }
packet { trusted_packet_sequence_id: 1 track_event {
  type: TYPE_COUNTER track_uuid: 300 counter_value: -9000000000
  flow_ids: 1 flow_ids: 18446744073709551615
  debug_annotations { name_iid: 5 double_value: -0.25 }
  debug_annotations { name: "b" bool_value: false } } }
"""

    def test_roundtrip(self):
        r = subprocess.run([PROTOC, "--encode=perfetto.protos.Trace",
                            f"--proto_path={os.path.dirname(PROTO)}", "perfetto_trace.proto"],
                           input=self.TEXT.encode(), capture_output=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        packets = pc.decode(r.stdout)
        self.assertEqual(packets.problems, [])
        for p in packets:
            del p["_size"]
        self.assertEqual(list(packets), [
            {"timestamp": 2**64 - 1, "trusted_packet_sequence_id": 2**32 - 1,
             "sequence_flags": 3,
             "track_descriptor": {"uuid": 1, "name": "tést", "sibling_order_rank": -2,
                                  "thread": {"pid": -1, "tid": 2**31 - 1,
                                             "thread_name": "w"}}},
            {"trusted_packet_sequence_id": 1,
             "track_event": {"type": 4, "track_uuid": 300, "counter_value": -9000000000,
                             "flow_ids": [1, 2**64 - 1],
                             "debug_annotations": [{"name_iid": 5, "double_value": -0.25},
                                                   {"name": "b", "bool_value": False}]}}])

    def test_our_encoder_agrees_with_protoc(self):
        r = subprocess.run([PROTOC, "--decode=perfetto.protos.Trace",
                            f"--proto_path={os.path.dirname(PROTO)}", "perfetto_trace.proto"],
                           input=trace_bytes(good_packets()), capture_output=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        text = r.stdout.decode()
        for needle in ("type: TYPE_SLICE_BEGIN",
                       "sibling_merge_behavior: SIBLING_MERGE_BEHAVIOR_NONE",
                       "unit: UNIT_COUNT", "child_ordering: EXPLICIT",
                       "terminating_flow_ids: 18446744073709551615", 'name: "poll child"'):
            self.assertIn(needle, text)


class MalformedWire(Base):
    """Bytes that are not protobuf at all raise WireError (and fail protoc)."""

    CASES = {
        "truncated varint": b"\x0a\x03\x40\x80\x80",        # timestamp cut short
        "truncated varint ": b"\x0a\x01\x40",               # no value at all
        "length": b"\x0a\x09\x40\x01",                      # packet longer than the file
        "runs past the end": b"\x0a\x04\x5a\x05\x48\x01",   # track_event past its packet
        "group wire type 3": b"\x0a\x02\x43\x00",
        "group wire type 4": b"\x0a\x01\x44",
        "invalid wire type 6": b"\x0a\x02\x46\x00",
        "invalid wire type 7": b"\x0f",
        "longer than 10 bytes": b"\x0a\x0c\x40" + b"\xff" * 10 + b"\x01",
        "overflows 64 bits": b"\x0a\x0b\x40" + b"\xff" * 9 + b"\x7f",
        "truncated fixed64": b"\x0a\x05\x5a\x03\xf9\x02\x01",
        "truncated fixed32": b"\x0a\x03\x45\x01\x02",
        "field number 0": b"\x0a\x02\x00\x01",
        "field number 0 ": b"\x00\x01",
        "truncated length": b"\x0a",                         # a packet tag, no length
        "truncated length ": b"\x0a\x01\x5a\x0a\x00",          # track_event tag, no length
        # Unknown fields are skipped, but must still fit:
        "truncated fixed64 ": b"\x0a\x03\x19\x00\x00",
        "runs past the end ": b"\x0a\x03\x1a\x05\x00",
    }

    def test_cases(self):
        for text, data in self.CASES.items():
            with self.subTest(text):
                with self.assertRaisesRegex(pc.WireError, text.strip()):
                    pc.decode(data)

    def test_protoc_fails_on_them(self):
        problems = self.protoc(b"\x0a\x09\x40\x01")
        self.assertTrue(any("protoc exited with" in p for p in problems), problems)

    def test_protoc_missing_is_a_problem(self):
        with tempfile.NamedTemporaryFile(suffix=".pftrace") as f:
            problems = pc.protoc_check(f.name, PROTO, protoc="/nonexistent/protoc")
        self.assertEqual(len(problems), 1)
        self.assertIn("not found", problems[0])

    def test_empty_file_is_an_empty_trace(self):
        self.assertEqual(list(pc.decode(b"")), [])


class UnknownFields(Base):
    """Fields outside our subset: both our decoder and protoc must flag them."""

    def both(self, packets, text):
        self.assertProblem(packets, text)
        problems = self.protoc(trace_bytes(packets))
        self.assertTrue(problems and all(p.startswith("protoc: ") for p in problems), problems)
        return problems

    def test_unknown_field_in_track_event(self):
        packets = good_packets()
        packets[8]["track_event"][99] = 5
        problems = self.both(packets, "packet 8 track_event: unknown field 99 (varint)")
        self.assertTrue(any(p.endswith("unknown field packet.track_event: 99: 5")
                            for p in problems), problems)

    def test_unknown_field_in_packet_and_annotation(self):
        packets = good_packets()
        packets[1][7] = b"x"
        packets[14]["track_event"]["debug_annotations"][0][9] = 1
        self.both(packets, "packet 1: unknown field 7 (length-delimited)")
        self.assertProblem(packets, "packet 14 track_event.debug_annotations: unknown field 9")

    def test_unknown_top_level_field(self):
        data = trace_bytes(good_packets()) + tag(2, 0) + varint(1)
        self.assertIn("trace: unknown field 2 (varint)", pc.check(pc.decode(data)))
        self.assertTrue(self.protoc(data))

    def test_protoc_problems_are_capped(self):
        packets = good_packets()
        for p in packets[8:11]:
            p["track_event"][99] = 1
        with tempfile.NamedTemporaryFile(suffix=".pftrace") as f:
            f.write(trace_bytes(packets))
            f.flush()
            problems = pc.protoc_check(f.name, PROTO, protoc=PROTOC, limit=2)
        self.assertEqual(len(problems), 3, problems)
        self.assertEqual(problems[2], "protoc: 1 more unknown fields not shown")

    def test_fixed32_is_skipped_and_reported(self):
        data = trace_bytes(good_packets())
        body = encode(good_packets()[1], "TracePacket") + tag(3, 5) + b"\0\0\0\0"
        data += tag(1, 2) + varint(len(body)) + body
        packets = pc.decode(data)
        self.assertIn("unknown field 3 (fixed32)", " ".join(packets.problems))
        self.assertEqual(packets[-1]["track_descriptor"]["uuid"], W0)

    def test_wrong_wire_type(self):
        # flow_ids packed (length-delimited): the importer reads them one by one.
        packets = good_packets()
        packets[10]["track_event"].pop("flow_ids")
        packets[10]["track_event"][47] = struct.pack("<Q", 7)
        self.assertProblem(packets, "packet 10 track_event: field 47 (flow_ids) has wire type "
                                    "length-delimited, not fixed64")
        # protoc accepts packed encoding for any repeated scalar, so only we catch this.
        self.assertEqual(self.protoc(trace_bytes(packets)), [])

    def test_singular_field_twice(self):
        data = trace_bytes(good_packets())
        body = encode(good_packets()[1], "TracePacket") + tag(10, 0) + varint(1)
        data += tag(1, 2) + varint(len(body)) + body
        self.assertIn("given twice", " ".join(pc.check(pc.decode(data))))

    def test_invalid_utf8(self):
        data = trace_bytes(good_packets())
        body = encode({"trusted_packet_sequence_id": 1}, "TracePacket") + \
            tag(60, 2) + varint(6) + tag(1, 0) + varint(99) + tag(2, 2) + varint(2) + b"\xff\xfe"
        data += tag(1, 2) + varint(len(body)) + body
        self.assertIn("name is not valid UTF-8", " ".join(pc.check(pc.decode(data))))

    def test_enum_value_outside_the_subset(self):
        # Perfetto knows 1 (merge by name), but we never write it: protoc flags it.
        packets = good_packets()
        packets[3]["track_descriptor"]["sibling_merge_behavior"] = 1
        problems = self.protoc(trace_bytes(packets))
        self.assertTrue(any("15: 1" in p for p in problems), problems)


class BadTraces(Base):
    """One broken rule each."""

    def mutate(self, fn):
        packets = good_packets()
        fn(packets)
        return packets

    def test_sequence_id_missing_or_zero(self):
        self.assertProblem(self.mutate(lambda p: p[2].pop("trusted_packet_sequence_id")),
                           "packet 2: no trusted_packet_sequence_id")
        self.assertProblem(self.mutate(lambda p: p[2].update(trusted_packet_sequence_id=0)),
                           "packet 2: no trusted_packet_sequence_id")

    def test_first_packet_of_sequence_keeps_state(self):
        self.assertProblem(self.mutate(lambda p: p[0].pop("sequence_flags")),
                           "packet 0: first packet of sequence 1 does not clear")
        self.assertProblem(self.mutate(lambda p: p[19].update(sequence_flags=2)),
                           "packet 19: first packet of sequence 2 does not clear")

    def test_interned_name_without_flag(self):
        self.assertProblem(self.mutate(lambda p: p[8].update(sequence_flags=0)),
                           "packet 8 (SLICE_BEGIN at 1000): uses interned names without "
                           "sequence_flags bit 2")
        # An annotation name alone needs the flag too.
        self.assertProblem(self.mutate(lambda p: p[13].update(sequence_flags=0)),
                           "packet 13 (SLICE_END at 2000): uses interned names")

    def test_iid_not_defined(self):
        self.assertProblem(self.mutate(lambda p: p[8]["track_event"].update(name_iid=42)),
                           "name_iid 42 not defined earlier on sequence 1")
        self.assertProblem(
            self.mutate(lambda p: p[8]["track_event"]["debug_annotations"][0].update(name_iid=42)),
            "annotation name_iid 42 not defined earlier on sequence 1")

    def test_iid_defined_only_later(self):
        def fn(p):
            p[0].pop("interned_data")
            p[10]["interned_data"] = good_packets()[0]["interned_data"]
        self.assertProblem(self.mutate(fn), "packet 8 (SLICE_BEGIN at 1000): name_iid 1 not "
                                            "defined earlier")

    def test_iid_defined_in_the_same_packet(self):
        def fn(p):
            p[8]["interned_data"] = p[0].pop("interned_data")
        self.assertEqual(self.problems(self.mutate(fn)), [])

    def test_iid_of_another_sequence(self):
        def fn(p):  # iid 2 exists on sequence 1 only
            p[20]["sequence_flags"] = 2
            del p[20]["track_event"]["name"]
            p[20]["track_event"]["name_iid"] = 2
        self.assertProblem(self.mutate(fn), "packet 20 (SLICE_BEGIN at 2750): name_iid 2 not "
                                            "defined earlier on sequence 2")

    def test_iid_gone_after_state_cleared(self):
        self.assertProblem(self.mutate(lambda p: p[14].update(sequence_flags=3)),
                           "packet 14 (SLICE_BEGIN at 2500): name_iid 1 not defined")

    def test_iid_redefined(self):
        def fn(p):
            p[10]["interned_data"] = {"event_names": [{"iid": EV_POLL, "name": "pol"}]}
        self.assertProblem(self.mutate(fn), "event_names iid 1 redefined as 'pol' (was 'poll')")

    def test_interned_entry_incomplete(self):
        def fn(p):
            p[10]["interned_data"] = {"debug_annotation_names": [{"iid": 9}]}
        self.assertProblem(self.mutate(fn), "debug_annotation_names entry without iid or name")

    def test_uuid_zero_or_missing(self):
        self.assertProblem(self.mutate(lambda p: p[7]["track_descriptor"].update(uuid=0)),
                           "packet 7 (track 0 'queue depth worker 0'): track descriptor without "
                           "a uuid")
        self.assertProblem(self.mutate(lambda p: p[7]["track_descriptor"].pop("uuid")),
                           "track descriptor without a uuid")

    def test_uuid_declared_twice(self):
        self.assertProblem(self.mutate(lambda p: p[6]["track_descriptor"].update(uuid=T2)),
                           f"uuid {T2} declared again (first in packet 5)")

    def test_parent_not_declared_before(self):
        def fn(p):
            p[3], p[4] = p[4], p[3]  # the task track before the runtime track
        self.assertProblem(self.mutate(fn), f"parent {RT} not declared before it")

    def test_event_on_undeclared_track(self):
        self.assertProblem(self.mutate(lambda p: p[10]["track_event"].update(track_uuid=77)),
                           "packet 10 (INSTANT at 1500): track 77 not declared")
        # Declared, but only after its first event.
        self.assertProblem(self.mutate(lambda p: p.append(p.pop(7))),
                           f"packet 10 (COUNTER at 1600): track {QD} not declared before its "
                           "first event")

    def test_event_without_track(self):
        self.assertProblem(self.mutate(lambda p: p[10]["track_event"].pop("track_uuid")),
                           "packet 10 (INSTANT at 1500): track_event without track_uuid")

    def test_end_without_begin(self):
        self.assertProblem(self.mutate(lambda p: p.pop(9)),
                           f"SLICE_END at 2000 on track {T1} with no open slice")

    def test_end_before_begin_in_time(self):
        # In file order BEGIN comes first; in time the END does.
        self.assertProblem(self.mutate(lambda p: p[12].update(timestamp=900)),
                           f"packet 12: SLICE_END at 900 on track {T1} with no open slice")

    def test_slice_left_open(self):
        packets = self.mutate(lambda p: p.pop(12))
        self.assertProblem(packets, f"track {T1}: 1 slice(s) never ended")
        stats = {}
        self.assertEqual(self.problems(packets, allow_open=True, stats=stats), [])
        self.assertEqual(stats["slices_open"], 1)

    def test_counter_on_other_track(self):
        self.assertProblem(self.mutate(lambda p: p[11]["track_event"].update(track_uuid=RT)),
                           f"packet 11 (COUNTER at 1600): counter event on non-counter track {RT}")

    def test_slice_on_counter_track(self):
        self.assertProblem(self.mutate(lambda p: p[10]["track_event"].update(track_uuid=QD)),
                           f"packet 10 (INSTANT at 1500): slice or instant on counter track {QD}")

    def test_counter_value(self):
        self.assertProblem(self.mutate(lambda p: p[11]["track_event"].pop("counter_value")),
                           "counter event without a value")
        self.assertProblem(
            self.mutate(lambda p: p[11]["track_event"].update(double_counter_value=1.0)),
            "both counter_value and double_counter_value")

    def test_flow_started_while_active(self):
        def fn(p):
            p[11]["track_event"] = {"type": 3, "track_uuid": W0, "name": "wake again",
                                    "flow_ids": [7]}
        self.assertProblem(self.mutate(fn), "packet 11: flow 7 started at 1600 while still "
                                            "active")

    def test_flow_id_reused(self):
        self.assertProblem(self.mutate(lambda p: p[24]["track_event"].update(flow_ids=[7])),
                           "packet 24: flow id 7 reused at 3100")

    def test_flow_terminated_before_started(self):
        # The start is earlier in the file but later in time.
        self.assertProblem(self.mutate(lambda p: p[14].update(timestamp=1400)),
                           "packet 14: flow 7 terminated at 1400, before it starts")

    def test_flow_never_started(self):
        self.assertProblem(
            self.mutate(lambda p: p[15]["track_event"].update(terminating_flow_ids=[55])),
            "packet 15: flow 55 terminated but never started")

    def test_flow_terminated_twice(self):
        self.assertProblem(
            self.mutate(lambda p: p[15]["track_event"].update(terminating_flow_ids=[7])),
            "packet 15: flow 7 terminated again at 2500")

    def test_unterminated_flow_is_only_counted(self):
        stats = {}
        packets = self.mutate(lambda p: p[14]["track_event"].pop("terminating_flow_ids"))
        self.assertEqual(self.problems(packets, stats=stats), [])
        self.assertEqual(stats["flows_unterminated"], 2)

    def test_same_named_siblings(self):
        self.assertProblem(
            self.mutate(lambda p: p[5]["track_descriptor"].update(name="handler #1")),
            f"packet 5 (track {T2} 'handler #1'): same name as sibling track {T1} "
            f"under parent {RT}")
        # Root-level custom tracks are siblings too.
        def fn(p):
            p[4:4] = [td(uuid=90, name="x"), td(uuid=91, name="x")]
        self.assertProblem(self.mutate(fn), "same name as sibling track 90 under parent None")

    def test_child_of_custom_track_may_merge(self):
        self.assertProblem(
            self.mutate(lambda p: p[6]["track_descriptor"].pop("sibling_merge_behavior")),
            f"packet 6 (track {T3} 'child #3'): child of custom track {T1} without "
            "sibling_merge_behavior NONE")

    def test_event_without_timestamp(self):
        self.assertProblem(self.mutate(lambda p: p[10].pop("timestamp")),
                           "packet 10: track_event without a timestamp")

    def test_event_without_type(self):
        self.assertProblem(self.mutate(lambda p: p[10]["track_event"].pop("type")),
                           "packet 10 (None at 1500): track_event type None is not")
        self.assertProblem(self.mutate(lambda p: p[10]["track_event"].update(type=5)),
                           "track_event type 5 is not")

    def test_slice_without_name(self):
        self.assertProblem(self.mutate(lambda p: p[16]["track_event"].pop("name")),
                           "packet 16 (INSTANT at 2600): slice without a name")

    def test_name_and_name_iid(self):
        self.assertProblem(self.mutate(lambda p: p[8]["track_event"].update(name="poll")),
                           "packet 8 (SLICE_BEGIN at 1000): both name and name_iid")

    def test_annotation_names(self):
        self.assertProblem(
            self.mutate(lambda p: p[14]["track_event"]["debug_annotations"][1].pop("name")),
            "annotation without a name")
        self.assertProblem(
            self.mutate(lambda p: p[14]["track_event"]["debug_annotations"][0].update(name="t")),
            "annotation with both name and name_iid")

    def test_descriptor_kinds(self):
        self.assertProblem(
            self.mutate(lambda p: p[1]["track_descriptor"].update(process={"pid": 100})),
            f"packet 1 (track {W0} None): descriptor is process and thread at once")
        self.assertProblem(self.mutate(lambda p: p[1]["track_descriptor"]["thread"].pop("tid")),
                           "thread descriptor without pid and tid")
        self.assertProblem(self.mutate(lambda p: p[0]["track_descriptor"]["process"].pop("pid")),
                           "process descriptor without pid")

    def test_problems_are_capped_per_rule(self):
        packets = good_packets()
        packets += [ev(5000 + i, 2, W0, flags=0) for i in range(50)]
        problems = self.problems(packets, limit=5)
        self.assertEqual(len(problems), 6, problems)
        self.assertEqual(problems[-1], "slice: 45 more problems not shown")



def sample_packets():
    """Stack samples as asynctraced writes them: the first interns its callstack with its
    frames, their names and images; the second refers to it."""
    interned = {"function_names": [{"iid": 1, "str": "burn"}, {"iid": 2, "str": "main"}],
                "mapping_paths": [{"iid": 1, "str": "app"}],
                "mappings": [{"iid": 1, "path_string_ids": [1]}],
                "frames": [{"iid": 1, "function_name_id": 1, "mapping_id": 1, "rel_pc": 16},
                           {"iid": 2, "function_name_id": 2, "mapping_id": 1, "rel_pc": 32}],
                "callstacks": [{"iid": 1, "frame_ids": [2, 1]}]}
    return [{"trusted_packet_sequence_id": 1, "sequence_flags": 1},
            {"timestamp": 100, "trusted_packet_sequence_id": 1, "sequence_flags": 2,
             "interned_data": interned,
             "perf_sample": {"pid": 100, "tid": 101, "callstack_iid": 1, "cpu_mode": 2}},
            {"timestamp": 200, "trusted_packet_sequence_id": 1, "sequence_flags": 2,
             "perf_sample": {"pid": 100, "tid": 101, "callstack_iid": 1, "cpu_mode": 2}}]


class StackSamples(Base):
    def test_good(self):
        self.assertEqual(self.problems(sample_packets()), [])
        self.assertEqual(self.protoc(trace_bytes(sample_packets())), [])
        self.assertEqual(pc.perf_samples(self.decode(sample_packets())),
                         [(100, 100, 101, ["burn", "main"]), (200, 100, 101, ["burn", "main"])])

    def test_callstack_not_interned(self):
        p = sample_packets()
        p[2]["perf_sample"]["callstack_iid"] = 2
        self.assertProblem(p, "callstack_iid 2 not defined earlier")

    def test_callstack_on_another_sequence(self):
        p = sample_packets()
        p[2]["trusted_packet_sequence_id"] = 2
        p[2]["sequence_flags"] = 3
        self.assertProblem(p, "callstack_iid 1 not defined earlier on sequence 2")

    def test_without_flag_2(self):
        p = sample_packets()
        p[2]["sequence_flags"] = 0
        self.assertProblem(p, "interned callstack without sequence_flags bit 2")

    def test_without_thread(self):
        p = sample_packets()
        del p[2]["perf_sample"]["tid"]
        self.assertProblem(p, "without its pid and tid")

    def test_frame_not_interned(self):
        p = sample_packets()
        p[1]["interned_data"]["callstacks"][0]["frame_ids"] = [2, 3]
        self.assertProblem(p, "callstacks iid 1: frame_ids 3 is not in frames")

    def test_name_and_mapping_not_interned(self):
        p = sample_packets()
        p[1]["interned_data"]["frames"][0]["function_name_id"] = 5
        p[1]["interned_data"]["frames"][1]["mapping_id"] = 4
        self.assertProblem(p, "frames iid 1: function_name_id 5 is not in function_names")
        self.assertProblem(p, "frames iid 2: mapping_id 4 is not in mappings")

    def test_a_frame_without_a_name(self):
        """An address in no function asynctraced could name: a frame with its
        mapping and pc alone, which refers to no function name."""
        p = sample_packets()
        del p[1]["interned_data"]["frames"][0]["function_name_id"]
        self.assertEqual(self.problems(p), [])
        self.assertEqual(self.protoc(trace_bytes(p)), [])

    def test_mapping_without_rel_pc(self):
        p = sample_packets()
        del p[1]["interned_data"]["frames"][0]["rel_pc"]
        self.assertProblem(p, "frame 1 has a mapping but no rel_pc")

    def test_callstack_redefined(self):
        p = sample_packets()
        p[2]["interned_data"] = {"callstacks": [{"iid": 1, "frame_ids": [1]}]}
        self.assertProblem(p, "callstacks iid 1 redefined")


if __name__ == "__main__":
    unittest.main()
