#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Checks a Perfetto protobuf trace (.pftrace) against Perfetto's importer rules.

There is no trace_processor, Perfetto UI or python protobuf on these machines,
so the file is decoded here by hand (the wire format: varints, fixed64,
length-delimited, fixed32) and the rules of Perfetto's TrackEvent importer,
as read in its source (docs/trace-format.md), are enforced:

  * compression: a packet of compressed_packets (zlib-format deflate) is read
    as the packets it inflates to, in its place, as the importer does (a
    batch that does not inflate, or inflates to anything but whole packets,
    raises WireError);
  * wire level: well-formed (anything else raises WireError); only the fields
    of tests/proto/perfetto_trace.proto, each with its own wire type, and a
    singular field at most once: we never write anything else;
  * sequences: every packet has a nonzero trusted_packet_sequence_id, and the
    first packet of each sequence clears incremental state (flag 1);
  * interning: a packet using an interned name (event or annotation) or
    string value says so (flag 2) and the iid was defined earlier on its
    sequence (or in the same packet); an iid is never given a second name;
  * clocks: a timestamp on a clock other than BOOTTIME needs a snapshot of
    that clock (and BOOTTIME) on its sequence; an incremental clock's
    timestamps are deltas from the previous one on it; a sequence with
    packet defaults has flag 2 on every later packet. decode() resolves
    every timestamp to BOOTTIME (`timestamp`; as written: `_raw_timestamp`);
  * tracks: uuids nonzero and declared once; a parent and an event's track are
    declared before use; a descriptor is at most one of process / thread /
    counter; custom tracks under one parent have distinct names, and tracks
    under a custom track never merge (sibling_merge_behavior = NONE);
  * events: a timestamp, a type, a name for slices and instants, begin/end
    balanced per track (in timestamp order, as the importer sorts), counters
    only on counter tracks and nothing else there; extra counter values one
    for each extra counter track, each a counter track;
  * stack samples: a perf_sample names its pid and tid and a callstack
    interned earlier on its sequence (flag 2); a callstack's frames, a
    frame's function name and mapping, a mapping's path are each interned
    no later than what refers to them, and an iid keeps its first meaning;
  * flows: an id starts once in the whole trace (never reused, not even after
    it ended), and a terminating id ends a flow started no later (judged in
    timestamp order). Flows never ended are allowed and only counted.

`protoc_check` also decodes the file with protoc against our subset .proto:
an unknown field shows up there as a bare numbered line ("47: 5").

Usage: pftrace_check.py TRACE.pftrace [--proto FILE.proto] [--no-protoc] [--allow-open]
(exit 0: valid; 1: one line per problem)
"""
import argparse
import contextlib
import gc
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib
from collections import defaultdict

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_PROTO = os.path.normpath(os.path.join(HERE, "..", "proto", "perfetto_trace.proto"))

# TracePacket.sequence_flags
SEQ_INCREMENTAL_STATE_CLEARED = 1
SEQ_NEEDS_INCREMENTAL_STATE = 2
# TrackEvent.type
SLICE_BEGIN, SLICE_END, INSTANT, COUNTER = 1, 2, 3, 4
TYPE_NAMES = {SLICE_BEGIN: "SLICE_BEGIN", SLICE_END: "SLICE_END", INSTANT: "INSTANT",
              COUNTER: "COUNTER"}
# TrackDescriptor.sibling_merge_behavior
SIBLING_MERGE_BEHAVIOR_NONE = 2

# ---------------------------------------------------------------------------
# Wire decoding

VARINT, I64, LEN, SGROUP, EGROUP, I32 = 0, 1, 2, 3, 4, 5
WIRE_NAMES = {VARINT: "varint", I64: "fixed64", LEN: "length-delimited",
              SGROUP: "start group", EGROUP: "end group", I32: "fixed32"}

# How a value is read: the wire type it must arrive with, then its meaning.
U, S, BOOL, STR, MSG, F64, DBL = range(7)   # uint/enum, signed int, bool, string,
_WIRE_OF = {U: VARINT, S: VARINT, BOOL: VARINT,  # message, fixed64, double
            STR: LEN, MSG: LEN, F64: I64, DBL: I64}


class _Schema(dict):
    """A message's fields keyed by their whole tag (number << 3 | wire type), so one
    lookup finds the field and checks its wire type; `numbers` keeps {number:
    (name, wire)} for saying what went wrong when the lookup fails."""


def _schema(fields):
    """{number: (name, kind, repeated, sub-schema)} -> _Schema."""
    out = _Schema()
    out.numbers = {}
    for number, (name, kind, rep, sub) in fields.items():
        out[number << 3 | _WIRE_OF[kind]] = (name, kind, rep, sub)
        out.numbers[number] = (name, _WIRE_OF[kind])
    return out


_NAME_ENTRY = _schema({1: ("iid", U, False, None), 2: ("name", STR, False, None)})
_STRING_ENTRY = _schema({1: ("iid", U, False, None), 2: ("str", STR, False, None)})
FRAME = _schema({
    1: ("iid", U, False, None),
    2: ("function_name_id", U, False, None),
    3: ("mapping_id", U, False, None),
    4: ("rel_pc", U, False, None),
})
CALLSTACK = _schema({
    1: ("iid", U, False, None),
    2: ("frame_ids", U, True, None),
})
MAPPING = _schema({
    1: ("iid", U, False, None),
    7: ("path_string_ids", U, True, None),
})
INTERNED_DATA = _schema({
    2: ("event_names", MSG, True, _NAME_ENTRY),
    3: ("debug_annotation_names", MSG, True, _NAME_ENTRY),
    29: ("debug_annotation_string_values", MSG, True, _STRING_ENTRY),
    5: ("function_names", MSG, True, _STRING_ENTRY),
    6: ("frames", MSG, True, FRAME),
    7: ("callstacks", MSG, True, CALLSTACK),
    17: ("mapping_paths", MSG, True, _STRING_ENTRY),
    19: ("mappings", MSG, True, MAPPING),
})
PERF_SAMPLE = _schema({
    1: ("cpu", U, False, None),
    2: ("pid", U, False, None),
    3: ("tid", U, False, None),
    4: ("callstack_iid", U, False, None),
    5: ("cpu_mode", U, False, None),
})
DEBUG_ANNOTATION = _schema({
    1: ("name_iid", U, False, None),
    10: ("name", STR, False, None),
    2: ("bool_value", BOOL, False, None),
    3: ("uint_value", U, False, None),
    4: ("int_value", S, False, None),
    5: ("double_value", DBL, False, None),
    6: ("string_value", STR, False, None),
    17: ("string_value_iid", U, False, None),
})
TRACK_EVENT = _schema({
    4: ("debug_annotations", MSG, True, DEBUG_ANNOTATION),
    9: ("type", U, False, None),
    10: ("name_iid", U, False, None),
    11: ("track_uuid", U, False, None),
    12: ("extra_counter_values", S, True, None),
    22: ("categories", STR, True, None),
    23: ("name", STR, False, None),
    30: ("counter_value", S, False, None),
    31: ("extra_counter_track_uuids", U, True, None),
    44: ("double_counter_value", DBL, False, None),
    47: ("flow_ids", F64, True, None),
    48: ("terminating_flow_ids", F64, True, None),
})
PROCESS_DESCRIPTOR = _schema({
    1: ("pid", S, False, None),
    2: ("cmdline", STR, True, None),
    6: ("process_name", STR, False, None),
})
THREAD_DESCRIPTOR = _schema({
    1: ("pid", S, False, None),
    2: ("tid", S, False, None),
    5: ("thread_name", STR, False, None),
})
COUNTER_DESCRIPTOR = _schema({
    3: ("unit", U, False, None),
    6: ("unit_name", STR, False, None),
})
TRACK_DESCRIPTOR = _schema({
    1: ("uuid", U, False, None),
    2: ("name", STR, False, None),
    3: ("process", MSG, False, PROCESS_DESCRIPTOR),
    4: ("thread", MSG, False, THREAD_DESCRIPTOR),
    5: ("parent_uuid", U, False, None),
    8: ("counter", MSG, False, COUNTER_DESCRIPTOR),
    11: ("child_ordering", U, False, None),
    12: ("sibling_order_rank", S, False, None),
    15: ("sibling_merge_behavior", U, False, None),
})
CLOCK = _schema({
    1: ("clock_id", U, False, None),
    2: ("timestamp", U, False, None),
    3: ("is_incremental", BOOL, False, None),
    4: ("unit_multiplier_ns", U, False, None),
})
CLOCK_SNAPSHOT = _schema({
    1: ("clocks", MSG, True, CLOCK),
    2: ("primary_trace_clock", U, False, None),
})
TRACE_PACKET_DEFAULTS = _schema({
    58: ("timestamp_clock_id", U, False, None),
})
TRACE_PACKET = _schema({
    6: ("clock_snapshot", MSG, False, CLOCK_SNAPSHOT),
    8: ("timestamp", U, False, None),
    10: ("trusted_packet_sequence_id", U, False, None),
    11: ("track_event", MSG, False, TRACK_EVENT),
    12: ("interned_data", MSG, False, INTERNED_DATA),
    13: ("sequence_flags", U, False, None),
    58: ("timestamp_clock_id", U, False, None),
    59: ("trace_packet_defaults", MSG, False, TRACE_PACKET_DEFAULTS),
    60: ("track_descriptor", MSG, False, TRACK_DESCRIPTOR),
    66: ("perf_sample", MSG, False, PERF_SAMPLE),
})

TRACE = _schema({1: ("packet", MSG, True, TRACE_PACKET)})

_TWO64, _TWO63 = 1 << 64, 1 << 63
_unpack_q = struct.Struct("<Q").unpack_from
_unpack_d = struct.Struct("<d").unpack_from


class WireError(ValueError):
    """The bytes are not a well-formed protobuf message."""


class Packets(list):
    """The decoded packets, in file order, plus what the decoding found.

    problems: unknown fields, wrong wire types, singular fields given twice;
    nbytes: size of the file. Each packet dict also has `_size`, its encoded
    length (what `summary` adds up per kind).
    """
    problems = ()
    nbytes = 0


@contextlib.contextmanager
def _gc_paused():
    """Building millions of small dicts sets off the cycle collector over and over
    (half the time on a 50 MB trace); what we build has no cycles."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _varint(buf, pos, end):
    """Reads a varint at pos (the multi-byte case); returns (value, new pos)."""
    val = 0
    shift = 0
    start = pos
    while True:
        if pos >= end:
            raise WireError(f"truncated varint at byte {start}")
        b = buf[pos]
        pos += 1
        val |= (b & 0x7F) << shift
        if b < 0x80:
            if val >= _TWO64:
                raise WireError(f"varint at byte {start} overflows 64 bits")
            return val, pos
        shift += 7
        if shift >= 70:
            raise WireError(f"varint at byte {start} longer than 10 bytes")


def _parse(buf, pos, end, schema, path, problems):
    """Decodes the message in buf[pos:end] into a dict (field name -> value).

    Repeated fields become lists, sub-messages dicts, enums stay ints.
    Problems are appended to `problems` as (path, text). This is the hot
    loop: the common case (a known field, one-byte tag) costs one lookup.
    """
    msg = {}
    while pos < end:
        tag = buf[pos]
        pos += 1
        if tag >= 0x80:
            tag, pos = _varint(buf, pos - 1, end)
        entry = schema.get(tag)
        if entry is None:
            pos = _odd_field(buf, pos, end, tag, schema, path, problems)
            continue
        name, kind, rep, sub = entry
        if kind <= BOOL:  # varint
            if pos >= end:
                raise WireError(f"truncated varint at byte {pos}")
            val = buf[pos]
            pos += 1
            if val >= 0x80:
                val, pos = _varint(buf, pos - 1, end)
            if kind == S:
                if val >= _TWO63:
                    val -= _TWO64
            elif kind == BOOL:
                val = val != 0
        elif kind <= MSG:  # length-delimited
            if pos >= end:
                raise WireError(f"truncated length at byte {pos}")
            n = buf[pos]
            pos += 1
            if n >= 0x80:
                n, pos = _varint(buf, pos - 1, end)
            start = pos
            pos += n
            if pos > end:
                raise WireError(f"length {n} at byte {start} runs past the end of its "
                                f"message (byte {end})")
            if kind == MSG:
                val = _parse(buf, start, pos, sub, path + "." + name, problems)
            else:
                try:
                    val = buf[start:pos].decode("utf-8")
                except UnicodeDecodeError:
                    problems.append((path, f"{name} is not valid UTF-8"))
                    val = buf[start:pos].decode("utf-8", "replace")
        else:  # fixed64
            if pos + 8 > end:
                raise WireError(f"truncated fixed64 at byte {pos}")
            val = _unpack_q(buf, pos)[0] if kind == F64 else _unpack_d(buf, pos)[0]
            pos += 8
        if rep:
            lst = msg.get(name)
            if lst is None:
                msg[name] = [val]
            else:
                lst.append(val)
        else:
            if name in msg:
                problems.append((path, f"singular field {tag >> 3} ({name}) given twice"))
            msg[name] = val
    return msg


def _odd_field(buf, pos, end, tag, schema, path, problems):
    """A field the schema does not expect: records the problem and returns where
    it ends, or raises WireError if it is not even well-formed."""
    after = _skip(buf, pos, end, tag)
    known = schema.numbers.get(tag >> 3)
    wire = WIRE_NAMES[tag & 7]
    if known is None:
        problems.append((path, f"unknown field {tag >> 3} ({wire})"))
    else:
        problems.append((path, f"field {tag >> 3} ({known[0]}) has wire type {wire}, "
                               f"not {WIRE_NAMES[known[1]]}"))
    return after


def decode(path_or_bytes):
    """Decodes a whole trace (a path, or the bytes) into a Packets list of dicts.

    A packet dict holds the TracePacket fields present, by their .proto names:
    {'timestamp': 12, 'trusted_packet_sequence_id': 1, 'sequence_flags': 2,
     'track_event': {'type': 1, 'track_uuid': 7, 'name_iid': 3,
                     'debug_annotations': [{'name_iid': 1, 'int_value': -4}],
                     'flow_ids': [5]},
     '_size': 31}
    Raises WireError on malformed data; unknown fields are only recorded in
    .problems (check() reports them).
    """
    if isinstance(path_or_bytes, (bytes, bytearray, memoryview)):
        buf = bytes(path_or_bytes)
    else:
        with open(path_or_bytes, "rb") as f:
            buf = f.read()
    packets = Packets()
    packets.problems = []
    packets.nbytes = len(buf)
    buf, packets.batches = expand(buf)
    with _gc_paused():
        _decode_packets(buf, packets)
        _resolve_timestamps(packets)
    return packets


BOOTTIME = 6
COMPRESSED_PACKETS_TAG = 50 << 3 | LEN


def expand(buf):
    """(the trace with every compressed_packets batch replaced by the packets it
    inflates to, how many batches there were). Raises WireError on a batch that
    does not inflate or holds anything but whole packets."""
    out = []
    batches = 0
    pos, end, last = 0, len(buf), 0
    while pos < end:
        start = pos
        try:
            tag, pos = _varint(buf, pos, end)
            if tag != 0x0A:
                pos = _skip(buf, pos, end, tag)
                continue
            n, pos = _varint(buf, pos, end)
            if pos + n > end:
                break
            body = pos
            pos += n
            if n == 0 or buf[body] != 0x92 or \
                    _varint(buf, body, pos)[0] != COMPRESSED_PACKETS_TAG:
                continue
            _, q = _varint(buf, body, pos)
            m, q = _varint(buf, q, pos)
        except WireError:
            break  # malformed: decode() says where and how
        if q + m != pos:
            raise WireError(f"compressed packets at byte {start}: the batch is not the "
                            "packet's only field")
        try:
            plain = zlib.decompress(buf[q:q + m])
        except zlib.error as e:
            raise WireError(f"compressed packets at byte {start} do not inflate: {e}")
        _whole_packets(plain, start)
        out.append(buf[last:start])
        out.append(plain)
        last = pos
        batches += 1
    if not batches:
        return buf, 0
    out.append(buf[last:])
    return b"".join(out), batches


def _whole_packets(plain, at):
    pos, end = 0, len(plain)
    while pos < end:
        tag, pos = _varint(plain, pos, end)
        if tag != 0x0A:
            raise WireError(f"compressed packets at byte {at} hold a field {tag >> 3} that "
                            "is not a packet")
        n, pos = _varint(plain, pos, end)
        pos += n
        if pos > end:
            raise WireError(f"compressed packets at byte {at} end in the middle of a packet")


def _resolve_timestamps(packets):
    """Every packet's timestamp on BOOTTIME, as the importer converts it: a
    packet's clock is its timestamp_clock_id, else its sequence's default
    (trace_packet_defaults), else BOOTTIME; another clock goes through the
    sequence's last snapshot of it, and an incremental one adds up deltas."""
    seqs = {}   # sequence -> {"default": id, "clocks": {id: [snapshot ts, incremental, last]},
    #                         "boot": BOOTTIME in the snapshot}
    for i, p in enumerate(packets):
        seq = p.get("trusted_packet_sequence_id")
        st = seqs.get(seq)
        if st is None or p.get("sequence_flags", 0) & SEQ_INCREMENTAL_STATE_CLEARED:
            st = seqs[seq] = {"default": None, "clocks": {}, "boot": None}
        defaults = p.get("trace_packet_defaults")
        if defaults is not None:
            st["default"] = defaults.get("timestamp_clock_id")
        snap = p.get("clock_snapshot")
        if snap is not None:
            clocks = {c.get("clock_id"): c for c in snap.get("clocks", ())}
            boot = clocks.get(BOOTTIME)
            if boot is None or len(clocks) < 2:
                packets.problems.append(f"packet {i}: clock snapshot without BOOTTIME and "
                                        "another clock")
            else:
                st["boot"] = boot.get("timestamp", 0)
                for cid, c in clocks.items():
                    if cid != BOOTTIME:
                        t = c.get("timestamp", 0)
                        st["clocks"][cid] = [t, bool(c.get("is_incremental")), t]
        ts = p.get("timestamp")
        if ts is None:
            continue
        cid = p.get("timestamp_clock_id", st["default"] or BOOTTIME)
        if cid == BOOTTIME:
            continue
        clock = st["clocks"].get(cid)
        p["_raw_timestamp"] = ts
        if clock is None:
            packets.problems.append(f"packet {i}: timestamp on clock {cid}, which no "
                                    f"snapshot of sequence {seq} defines")
            continue
        if clock[1]:
            clock[2] += ts
            ts = clock[2]
        p["timestamp"] = ts - clock[0] + st["boot"]


def _decode_packets(buf, packets):
    problems = packets.problems
    raw = []  # (path, text) from _parse
    end = len(buf)
    pos = 0
    parse = _parse
    schema = TRACE_PACKET
    while pos < end:
        tag = buf[pos]
        pos += 1
        if tag >= 0x80:
            tag, pos = _varint(buf, pos - 1, end)
        if tag != 0x0A:  # not field 1, length-delimited: not a packet
            before = len(raw)
            pos = _odd_field(buf, pos, end, tag, TRACE, "", raw)
            problems.extend(f"trace: {text}" for _, text in raw[before:])
            continue
        if pos >= end:
            raise WireError(f"truncated length at byte {pos}")
        n = buf[pos]
        pos += 1
        if n >= 0x80:
            n, pos = _varint(buf, pos - 1, end)
        if pos + n > end:
            raise WireError(f"packet {len(packets)}: length {n} at byte {pos} runs "
                            f"past the end of the file ({end} bytes)")
        before = len(raw)
        pkt = parse(buf, pos, pos + n, schema, "", raw)
        pkt["_size"] = n
        if len(raw) != before:
            i = len(packets)
            for where, text in raw[before:]:
                problems.append(f"packet {i}{' ' + where[1:] if where else ''}: {text}")
        packets.append(pkt)
        pos += n


def _skip(buf, pos, end, tag):
    """Where the value of a field with this tag, starting at pos, ends."""
    wire = tag & 7
    if tag >> 3 == 0:
        raise WireError(f"field number 0 at byte {pos - 1}")
    if wire == VARINT:
        return _varint(buf, pos, end)[1]
    if wire == I64:
        if pos + 8 > end:
            raise WireError(f"truncated fixed64 at byte {pos}")
        return pos + 8
    if wire == I32:
        if pos + 4 > end:
            raise WireError(f"truncated fixed32 at byte {pos}")
        return pos + 4
    if wire == LEN:
        n, pos = _varint(buf, pos, end)
        if pos + n > end:
            raise WireError(f"length {n} at byte {pos} runs past the end of the file")
        return pos + n
    if wire in (SGROUP, EGROUP):
        raise WireError(f"group wire type {wire} (field {tag >> 3}) at byte {pos}: "
                        "groups are not used by this format")
    raise WireError(f"invalid wire type {wire} (field {tag >> 3}) at byte {pos}")


# ---------------------------------------------------------------------------
# protoc

BARE_FIELD = re.compile(r"^\s*\d+\s*[:{]")
_BARE_LINES = re.compile(rb"^[ \t]*\d+[ \t]*[:{].*$", re.M)
_OPENER = re.compile(rb"^( *)(\w+) \{$", re.M)


def protoc_check(path, proto=DEFAULT_PROTO, protoc=None, limit=20):
    """Decodes `path` with protoc against our subset .proto; returns problems.

    A problem is a non-zero exit (with protoc's message) or an output line that
    is a bare numbered field (BARE_FIELD), which is how protoc prints a field
    the .proto does not know (or a known one with the wrong wire type, or an
    enum value the .proto does not list). The output (about 7 times the trace)
    is scanned in chunks, never held whole.
    """
    protoc = protoc or shutil.which("protoc") or "/usr/bin/protoc"
    if not os.path.exists(protoc):
        return [f"protoc: not found ({protoc}); install protobuf-compiler"]
    with open(path, "rb") as f:
        data = f.read()
    try:
        plain, batches = expand(data)
    except WireError as e:
        return [f"protoc: not decoded: {e}"]
    if batches:
        # the batches as protoc sees them (bytes), then what they hold
        problems = _protoc_run(path, proto, protoc, limit)
        with tempfile.NamedTemporaryFile(suffix=".pftrace") as f:
            f.write(plain)
            f.flush()
            return problems + _protoc_run(f.name, proto, protoc, limit)
    return _protoc_run(path, proto, protoc, limit)


def _protoc_run(path, proto, protoc, limit):
    proto = os.path.abspath(proto)
    cmd = [protoc, "--decode=perfetto.protos.Trace",
           f"--proto_path={os.path.dirname(proto)}", os.path.basename(proto)]
    problems = []
    bare = 0
    lineno = 1      # of the first line of `block`
    tail = b""      # the end of what came before, to name enclosing messages
    with open(path, "rb") as stdin, tempfile.TemporaryFile() as stderr, \
            subprocess.Popen(cmd, stdin=stdin, stdout=subprocess.PIPE, stderr=stderr) as proc:
        pending = b""
        while True:
            chunk = proc.stdout.read(1 << 20)
            data = pending + chunk
            cut = len(data) if not chunk else data.rfind(b"\n") + 1
            block, pending = data[:cut], data[cut:]
            for m in _BARE_LINES.finditer(block):
                bare += 1
                if bare <= limit:
                    where = _enclosing(tail + block[:m.start()], m.group())
                    line = m.group().strip().decode("utf-8", "replace")
                    at = lineno + block.count(b"\n", 0, m.start())
                    problems.append(f"protoc: line {at}: unknown field {where}: {line}")
            lineno += block.count(b"\n")
            tail = (tail + block)[-(1 << 16):]
            if not chunk:
                break
        rc = proc.wait()
        stderr.seek(0)
        err = stderr.read().decode("utf-8", "replace").strip()
    if bare > limit:
        problems.append(f"protoc: {bare - limit} more unknown fields not shown")
    if rc != 0:
        problems.append(f"protoc exited with {rc}: {err or 'no message'}")
    return problems


def _enclosing(before, line):
    """'packet.track_event' for a line of protoc's text output (indented two
    spaces a level): at each shallower indent, the last message opened before it."""
    depth = len(line) - len(line.lstrip(b" "))
    names = {}
    for m in _OPENER.finditer(before):
        indent = len(m.group(1))
        if indent < depth:
            names[indent] = m.group(2).decode()
            for deeper in [k for k in names if k > indent]:
                del names[deeper]
    return ".".join(names[k] for k in sorted(names)) or "Trace"


# ---------------------------------------------------------------------------
# Importer rules

def track_kind(desc):
    """'thread', 'process', 'counter' or 'custom' (no descriptor of its own)."""
    if "thread" in desc:
        return "thread"
    if "process" in desc:
        return "process"
    if "counter" in desc:
        return "counter"
    return "custom"


class _Report:
    """Problems, at most `limit` per rule so one systematic fault cannot drown the rest."""

    def __init__(self, limit=20):
        self.limit = limit
        self.problems = []
        self.counts = defaultdict(int)

    def add(self, rule, text):
        self.counts[rule] += 1
        if self.counts[rule] <= self.limit:
            self.problems.append(text)

    def done(self):
        for rule, n in self.counts.items():
            if n > self.limit:
                self.problems.append(f"{rule}: {n - self.limit} more problems not shown")
        return self.problems


def check(packets, allow_open=False, stats=None, limit=20):
    """Returns the list of problems (empty: Perfetto imports the trace as meant).

    allow_open: slices still open at the end are fine (a trace cut short).
    stats: a dict to fill with what is allowed but worth knowing:
    flows_unterminated, slices_open.
    limit: problems shown per rule (then one line counting the rest).
    """
    rep = _Report(limit)
    for p in getattr(packets, "problems", ()):
        rep.add("wire", p)
    seqs = {}              # sequence id -> (event names, annotation names)
    tracks = {}            # uuid -> (packet index, descriptor)
    names = {}             # (parent uuid or None, name) -> uuid, for custom tracks
    slice_events = defaultdict(list)   # track uuid -> [(ts, index, type)]
    flow_events = []       # (ts, index, flow_ids, terminating_flow_ids)
    with _gc_paused():
        # In file order: what the importer reads sequence by sequence.
        for i, p in enumerate(packets):
            state = _check_sequence(rep, i, p, seqs)
            td = p.get("track_descriptor")
            if td is not None:
                _check_descriptor(rep, i, td, tracks, names)
            te = p.get("track_event")
            if te is not None:
                _check_event(rep, i, p, te, state, tracks, slice_events, flow_events)
            ps = p.get("perf_sample")
            if ps is not None:
                _check_perf_sample(rep, i, p, ps, state)
        # In timestamp order: what the importer sees once it has sorted.
        still_open = _check_slices(rep, slice_events, allow_open)
        unterminated = _check_flows(rep, flow_events)
    if stats is not None:
        stats["flows_unterminated"] = unterminated
        stats["slices_open"] = still_open
    return rep.done()


def _check_sequence(rep, i, p, seqs):
    """Sequence id and flags, and interned data; returns the sequence's interning state."""
    seq = p.get("trusted_packet_sequence_id")
    flags = p.get("sequence_flags", 0)
    state = seqs.get(seq)
    if not seq:
        rep.add("sequence", f"packet {i}: no trusted_packet_sequence_id (or 0)")
    elif state is None and not flags & SEQ_INCREMENTAL_STATE_CLEARED:
        rep.add("sequence", f"packet {i}: first packet of sequence {seq} does not "
                            "clear incremental state (sequence_flags bit 1)")
    if state is None or flags & SEQ_INCREMENTAL_STATE_CLEARED:
        state = seqs[seq] = ({}, {}, {}, [False], defaultdict(dict))
    elif state[3][0] and not flags & SEQ_NEEDS_INCREMENTAL_STATE:
        rep.add("sequence", f"packet {i}: sequence {seq} has packet defaults, but this "
                            "packet does not say it needs incremental state (flag 2)")
    if "trace_packet_defaults" in p:
        state[3][0] = True
    interned = p.get("interned_data")
    if interned is not None:
        for key, table, field in (("event_names", state[0], "name"),
                                  ("debug_annotation_names", state[1], "name"),
                                  ("debug_annotation_string_values", state[2], "str")):
            for entry in interned.get(key, ()):
                iid, name = entry.get("iid"), entry.get(field)
                if iid is None or name is None:
                    rep.add("interning", f"packet {i}: {key} entry without iid or name")
                    continue
                old = table.get(iid)
                if old is not None and old != name:
                    rep.add("interning", f"packet {i}: {key} iid {iid} redefined as "
                                         f"{name!r} (was {old!r})")
                table[iid] = name
        _check_profile_interning(rep, i, interned, state[4])
    return state


# InternedData of stack samples: {table: what its entries refer to, (field, table)}
_PROFILE_REFS = {
    "function_names": (), "mapping_paths": (),
    "mappings": (("path_string_ids", "mapping_paths"),),
    "frames": (("function_name_id", "function_names"), ("mapping_id", "mappings")),
    "callstacks": (("frame_ids", "frames"),),
}


def _check_profile_interning(rep, i, interned, tables):
    """Callstacks, frames, mappings and their strings: each iid defined once, and
    what an entry refers to defined earlier on the sequence or in this packet
    (entries of one packet are read in the order above: names, then what uses them)."""
    for key, refs in _PROFILE_REFS.items():
        for entry in interned.get(key, ()):
            iid = entry.get("iid")
            if not iid:
                rep.add("interning", f"packet {i}: {key} entry without iid")
                continue
            value = {k: v for k, v in entry.items() if not k.startswith("_")}
            old = tables[key].get(iid)
            if old is not None and old != value:
                rep.add("interning", f"packet {i}: {key} iid {iid} redefined")
            for field, table in refs:
                ids = entry.get(field)
                if ids is None:  # a frame without a name (an address alone) refers to none
                    continue
                for ref in ids if isinstance(ids, list) else (ids,):
                    if ref not in tables[table]:
                        rep.add("interning", f"packet {i}: {key} iid {iid}: {field} {ref} "
                                             f"is not in {table} defined earlier")
            if key == "frames" and entry.get("mapping_id") and "rel_pc" not in entry:
                rep.add("interning", f"packet {i}: frame {iid} has a mapping but no rel_pc")
            tables[key][iid] = value


def _check_perf_sample(rep, i, p, ps, state):
    """A stack sample: its thread, and a callstack interned earlier on its sequence."""
    at = f"packet {i} (perf_sample at {p.get('timestamp')})"
    if p.get("timestamp") is None:
        rep.add("perf_sample", f"{at}: no timestamp")
    if not ps.get("pid") or not ps.get("tid"):
        rep.add("perf_sample", f"{at}: without its pid and tid")
    if "callstack_iid" not in ps:
        rep.add("perf_sample", f"{at}: no callstack_iid")
    elif ps["callstack_iid"] not in state[4]["callstacks"]:
        rep.add("interning", f"{at}: callstack_iid {ps['callstack_iid']} not defined earlier "
                             f"on sequence {p.get('trusted_packet_sequence_id')}")
    if not p.get("sequence_flags", 0) & SEQ_NEEDS_INCREMENTAL_STATE:
        rep.add("interning", f"{at}: uses an interned callstack without sequence_flags bit 2")


def perf_samples(packets):
    """[(ts, pid, tid, [function names, innermost first])] of every stack sample."""
    out, tables = [], {}
    for p in packets:
        seq = p.get("trusted_packet_sequence_id")
        if p.get("sequence_flags", 0) & SEQ_INCREMENTAL_STATE_CLEARED or seq not in tables:
            tables[seq] = defaultdict(dict)
        t = tables[seq]
        for key in _PROFILE_REFS:
            for entry in (p.get("interned_data") or {}).get(key, ()):
                t[key][entry.get("iid")] = entry
        ps = p.get("perf_sample")
        if ps is None:
            continue
        cs = t["callstacks"].get(ps.get("callstack_iid"), {})
        names = []
        for fid in reversed(cs.get("frame_ids", [])):
            fn = t["function_names"].get(t["frames"].get(fid, {}).get("function_name_id"), {})
            names.append(fn.get("str", "?"))
        out.append((p.get("timestamp"), ps.get("pid"), ps.get("tid"), names))
    return out


def _at(i, typ, ts):
    return f"packet {i} ({TYPE_NAMES.get(typ, typ)} at {ts})"


def _check_event(rep, i, p, te, state, tracks, slice_events, flow_events):
    ts = p.get("timestamp")
    typ = te.get("type")
    if ts is None:
        rep.add("event", f"packet {i}: track_event without a timestamp")
    if typ not in TYPE_NAMES:
        rep.add("event", f"{_at(i, typ, ts)}: track_event type {typ} is not "
                         "begin/end/instant/counter")

    # Names, interned or not.
    interned = False
    if "name_iid" in te:
        interned = True
        if "name" in te:
            rep.add("event", f"{_at(i, typ, ts)}: both name and name_iid")
        if te["name_iid"] not in state[0]:
            rep.add("interning", f"{_at(i, typ, ts)}: name_iid {te['name_iid']} not defined "
                                 f"earlier on sequence {p.get('trusted_packet_sequence_id')}")
    elif "name" not in te and (typ == SLICE_BEGIN or typ == INSTANT):
        rep.add("event", f"{_at(i, typ, ts)}: slice without a name")
    for a in te.get("debug_annotations", ()):
        if "name_iid" in a:
            interned = True
            if "name" in a:
                rep.add("event", f"{_at(i, typ, ts)}: annotation with both name and name_iid")
            if a["name_iid"] not in state[1]:
                rep.add("interning", f"{_at(i, typ, ts)}: annotation name_iid {a['name_iid']} "
                                     "not defined earlier on sequence "
                                     f"{p.get('trusted_packet_sequence_id')}")
        elif "name" not in a:
            rep.add("event", f"{_at(i, typ, ts)}: annotation without a name")
        if "string_value_iid" in a:
            interned = True
            if a["string_value_iid"] not in state[2]:
                rep.add("interning", f"{_at(i, typ, ts)}: annotation string_value_iid "
                                     f"{a['string_value_iid']} not defined earlier on "
                                     f"sequence {p.get('trusted_packet_sequence_id')}")
    if interned and not p.get("sequence_flags", 0) & SEQ_NEEDS_INCREMENTAL_STATE:
        rep.add("interning", f"{_at(i, typ, ts)}: uses interned names without "
                             "sequence_flags bit 2")

    # The track, and what may go on it.
    uuid = te.get("track_uuid")
    track = tracks.get(uuid)
    if uuid is None:
        rep.add("track", f"{_at(i, typ, ts)}: track_event without track_uuid")
    elif track is None:
        rep.add("track", f"{_at(i, typ, ts)}: track {uuid} not declared before its first event")
    elif typ == COUNTER and "counter" not in track[1]:
        rep.add("counter", f"{_at(i, typ, ts)}: counter event on non-counter track {uuid}")
    elif typ != COUNTER and "counter" in track[1]:
        rep.add("counter", f"{_at(i, typ, ts)}: slice or instant on counter track {uuid}")
    extra = te.get("extra_counter_track_uuids", ())
    if len(extra) != len(te.get("extra_counter_values", ())):
        rep.add("counter", f"{_at(i, typ, ts)}: {len(extra)} extra counter tracks for "
                           f"{len(te.get('extra_counter_values', ()))} extra counter values")
    for u in extra:
        if u not in tracks:
            rep.add("counter", f"{_at(i, typ, ts)}: extra counter track {u} not declared "
                               "before its first value")
        elif "counter" not in tracks[u][1]:
            rep.add("counter", f"{_at(i, typ, ts)}: extra counter value on non-counter "
                               f"track {u}")
    if typ == COUNTER:
        if "counter_value" in te and "double_counter_value" in te:
            rep.add("counter", f"{_at(i, typ, ts)}: both counter_value and double_counter_value")
        elif "counter_value" not in te and "double_counter_value" not in te:
            rep.add("counter", f"{_at(i, typ, ts)}: counter event without a value")

    if ts is not None:
        if typ == SLICE_BEGIN or typ == SLICE_END:
            slice_events[uuid].append((ts, i, typ))
        if "flow_ids" in te or "terminating_flow_ids" in te:
            flow_events.append((ts, i, te.get("flow_ids", ()),
                                te.get("terminating_flow_ids", ())))


def _check_slices(rep, slice_events, allow_open):
    """Begin/end balance per track; returns how many slices were left open."""
    still_open = 0
    for uuid, evs in slice_events.items():
        evs.sort()
        depth = 0
        for ts, i, typ in evs:
            if typ == SLICE_BEGIN:
                depth += 1
            elif depth:
                depth -= 1
            else:
                rep.add("slice", f"packet {i}: SLICE_END at {ts} on track {uuid} "
                                 "with no open slice")
        if depth:
            still_open += depth
            if not allow_open:
                rep.add("slice", f"track {uuid}: {depth} slice(s) never ended")
    return still_open


def _check_flows(rep, flow_events):
    """Each id starts once, ends no earlier; returns how many never ended."""
    flow_events.sort(key=lambda e: (e[0], e[1]))
    started_ever = {f for _, _, fids, _ in flow_events for f in fids}
    active, used = set(), set()
    for ts, i, fids, tids in flow_events:
        for f in fids:
            if f in active:
                rep.add("flow", f"packet {i}: flow {f} started at {ts} while still active")
            elif f in used:
                rep.add("flow", f"packet {i}: flow id {f} reused at {ts}")
            else:
                active.add(f)
                used.add(f)
        for f in tids:
            if f in active:
                active.remove(f)
            elif f in used:
                rep.add("flow", f"packet {i}: flow {f} terminated again at {ts}")
            elif f in started_ever:
                rep.add("flow", f"packet {i}: flow {f} terminated at {ts}, before it starts")
            else:
                rep.add("flow", f"packet {i}: flow {f} terminated but never started")
    return len(active)


def _check_descriptor(rep, i, td, tracks, names):
    uuid = td.get("uuid")
    where = f"packet {i} (track {uuid} {td.get('name')!r})"
    if not uuid:
        rep.add("track", f"{where}: track descriptor without a uuid (or 0)")
        return
    if uuid in tracks:
        rep.add("track", f"{where}: uuid {uuid} declared again (first in packet "
                         f"{tracks[uuid][0]})")
        return
    tracks[uuid] = (i, td)
    kinds = [k for k in ("process", "thread", "counter") if k in td]
    if len(kinds) > 1:
        rep.add("track", f"{where}: descriptor is {' and '.join(kinds)} at once")
    if "process" in td and "pid" not in td["process"]:
        rep.add("track", f"{where}: process descriptor without pid")
    if "thread" in td and ("pid" not in td["thread"] or "tid" not in td["thread"]):
        rep.add("track", f"{where}: thread descriptor without pid and tid")
    parent = td.get("parent_uuid")
    parent_desc = None
    if parent is not None:
        if parent not in tracks:
            rep.add("track", f"{where}: parent {parent} not declared before it")
        else:
            parent_desc = tracks[parent][1]
    kind = track_kind(td)
    if (parent_desc is not None and track_kind(parent_desc) == "custom"
            and kind not in ("process", "thread")
            and td.get("sibling_merge_behavior") != SIBLING_MERGE_BEHAVIOR_NONE):
        rep.add("merge", f"{where}: child of custom track {parent} without "
                         "sibling_merge_behavior NONE (2)")
    if kind == "custom":
        key = (parent, td.get("name"))
        if key in names:
            rep.add("merge", f"{where}: same name as sibling track {names[key]} "
                             f"under parent {parent}")
        else:
            names[key] = uuid


# ---------------------------------------------------------------------------
# What tests look at

def tracks(packets):
    """{uuid: descriptor dict}, the first declaration of each uuid."""
    out = {}
    for p in packets:
        td = p.get("track_descriptor")
        if td is not None and "uuid" in td and td["uuid"] not in out:
            out[td["uuid"]] = td
    return out


def _annotation_value(a, state):
    if "string_value_iid" in a:
        return state[2].get(a["string_value_iid"], f"iid:{a['string_value_iid']}")
    for key in ("string_value", "int_value", "uint_value", "double_value", "bool_value"):
        if key in a:
            return a[key]
    return None


def _track_events(packets):
    """Yields (packet index, packet, track_event, interning state) in file order.

    The state is (event names, annotation names) of the packet's sequence as
    of that packet; a clear starts new tables, so a state held on to stays
    what it was.
    """
    seqs = {}
    for i, p in enumerate(packets):
        seq = p.get("trusted_packet_sequence_id")
        state = seqs.get(seq)
        if state is None or p.get("sequence_flags", 0) & SEQ_INCREMENTAL_STATE_CLEARED:
            state = seqs[seq] = ({}, {}, {})
        interned = p.get("interned_data")
        if interned is not None:
            for e in interned.get("event_names", ()):
                state[0][e.get("iid")] = e.get("name")
            for e in interned.get("debug_annotation_names", ()):
                state[1][e.get("iid")] = e.get("name")
            for e in interned.get("debug_annotation_string_values", ()):
                state[2][e.get("iid")] = e.get("str")
        te = p.get("track_event")
        if te is not None:
            yield i, p, te, state


def _name(te, state):
    name = te.get("name")
    if name is None and "name_iid" in te:
        name = state[0].get(te["name_iid"])
    return name


def _annotations(te, state):
    out = {}
    for a in te.get("debug_annotations", ()):
        key = a.get("name")
        if key is None and "name_iid" in a:
            key = state[1].get(a["name_iid"], f"iid:{a['name_iid']}")
        out[key] = _annotation_value(a, state)
    return out


def events(packets):
    """Every track event with its names resolved through interning, in file order.

    Each is a dict: index (packet), ts, track_uuid, type, name (None if not
    resolvable), categories, annotations ({name: value}; an unresolvable
    name becomes 'iid:N'), flow_ids, terminating_flow_ids, and value (counters).
    An extra counter value becomes a COUNTER event of its own, after the
    event that carries it (same index and ts), as the importer reads it.
    """
    out = []
    with _gc_paused():
        for i, p, te, state in _track_events(packets):
            ts = p.get("timestamp")
            out.append({"index": i, "ts": ts, "track_uuid": te.get("track_uuid"),
                        "type": te.get("type"), "name": _name(te, state),
                        "categories": te.get("categories", []),
                        "annotations": _annotations(te, state),
                        "flow_ids": te.get("flow_ids", []),
                        "terminating_flow_ids": te.get("terminating_flow_ids", []),
                        "value": te.get("counter_value", te.get("double_counter_value"))})
            for u, v in zip(te.get("extra_counter_track_uuids", ()),
                            te.get("extra_counter_values", ())):
                out.append({"index": i, "ts": ts, "track_uuid": u, "type": COUNTER,
                            "name": None, "categories": [], "annotations": {},
                            "flow_ids": [], "terminating_flow_ids": [], "value": v})
    return out


def slices(packets):
    """Slices as the importer pairs them: [(track_uuid, begin_ts, end_ts, name, annotations)].

    Per track, events in (timestamp, file order); an END closes the newest
    open BEGIN (an END with none open is dropped, like the importer does).
    Name and annotations come from the BEGIN; annotations on the END are
    added to them. A slice never ended has end_ts None. Sorted by begin.
    """
    per_track = defaultdict(list)
    out = []
    with _gc_paused():
        for i, p, te, state in _track_events(packets):
            typ = te.get("type")
            ts = p.get("timestamp")
            if (typ == SLICE_BEGIN or typ == SLICE_END) and ts is not None:
                per_track[te.get("track_uuid")].append((ts, i, typ, te, state))
        for uuid, evs in per_track.items():
            evs.sort(key=lambda e: (e[0], e[1]))
            stack = []
            for e in evs:
                if e[2] == SLICE_BEGIN:
                    stack.append(e)
                elif stack:
                    ts, i, _, te, state = stack.pop()
                    args = _annotations(te, state)
                    if "debug_annotations" in e[3]:
                        args.update(_annotations(e[3], e[4]))
                    out.append((ts, i, (uuid, ts, e[0], _name(te, state), args)))
            for ts, i, _, te, state in stack:
                out.append((ts, i, (uuid, ts, None, _name(te, state), _annotations(te, state))))
        out.sort(key=lambda s: (s[0], s[1]))
        return [s[2] for s in out]


def summary(packets):
    """Counts for tests and for a glance:

    {'packets', 'bytes' (the file, or the packets' sum when not decoded from
     one), 'bytes_by_kind': {'track_descriptor', 'track_event',
     'interned_data', 'other'}, 'sequences', 'track_events',
     'tracks': {'process', 'thread', 'custom', 'counter'},
     'slices': {track uuid: number of SLICE_BEGIN}, 'instants', 'counters',
     'flows_started', 'flows_terminated', 'flows_unterminated' (ids started
     and never terminated anywhere), 'interned_names': {'event_names',
     'debug_annotation_names'}}
    """
    kinds = {"process": 0, "thread": 0, "custom": 0, "counter": 0}
    by_kind = {"track_descriptor": 0, "track_event": 0, "interned_data": 0, "other": 0}
    slice_counts = defaultdict(int)
    interned = {"event_names": 0, "debug_annotation_names": 0,
                "debug_annotation_string_values": 0}
    instants = counters = n_events = 0
    started, terminated = set(), set()
    n_started = n_terminated = 0
    seqs = set()
    total = 0
    for p in packets:
        size = p.get("_size", 0)
        total += size
        seqs.add(p.get("trusted_packet_sequence_id"))
        td = p.get("track_descriptor")
        te = p.get("track_event")
        idata = p.get("interned_data")
        if idata is not None:
            for key in interned:
                interned[key] += len(idata.get(key, ()))
        if td is not None:
            kinds[track_kind(td)] += 1
            by_kind["track_descriptor"] += size
        elif te is not None:
            by_kind["track_event"] += size
        elif idata is not None:
            by_kind["interned_data"] += size
        else:
            by_kind["other"] += size
        if te is None:
            continue
        n_events += 1
        typ = te.get("type")
        if typ == SLICE_BEGIN:
            slice_counts[te.get("track_uuid")] += 1
        elif typ == INSTANT:
            instants += 1
        elif typ == COUNTER:
            counters += 1
        counters += len(te.get("extra_counter_values", ()))
        fids = te.get("flow_ids")
        if fids:
            n_started += len(fids)
            started.update(fids)
        tids = te.get("terminating_flow_ids")
        if tids:
            n_terminated += len(tids)
            terminated.update(tids)
    return {"packets": len(packets), "bytes": getattr(packets, "nbytes", 0) or total,
            "bytes_by_kind": by_kind, "sequences": len(seqs), "track_events": n_events,
            "tracks": kinds, "slices": dict(slice_counts), "instants": instants,
            "counters": counters, "flows_started": n_started,
            "flows_terminated": n_terminated,
            "flows_unterminated": len(started - terminated),
            "interned_names": interned}


def main(argv):
    ap = argparse.ArgumentParser(prog="pftrace_check.py",
                                 description="Check a .pftrace against Perfetto's importer rules.")
    ap.add_argument("trace")
    ap.add_argument("--proto", default=DEFAULT_PROTO,
                    help="subset .proto for protoc --decode (default: %(default)s)")
    ap.add_argument("--no-protoc", action="store_true", help="skip the protoc decode")
    ap.add_argument("--allow-open", action="store_true",
                    help="slices still open at the end are fine (a trace cut short)")
    args = ap.parse_args(argv[1:])
    name = args.trace
    try:
        packets = decode(name)
    except (OSError, WireError) as e:
        print(f"pftrace_check: {name}: {e}", file=sys.stderr)
        return 1
    stats = {}
    problems = check(packets, allow_open=args.allow_open, stats=stats)
    if not args.no_protoc:
        problems += protoc_check(name, args.proto)
    for p in problems:
        print(f"pftrace_check: {name}: {p}", file=sys.stderr)
    if problems:
        return 1
    s = summary(packets)
    t = s["tracks"]
    print(f"pftrace_check: {name}: {s['packets']} packets, {s['bytes']} bytes, "
          f"{sum(t.values())} tracks ({t['process']} process, {t['thread']} thread, "
          f"{t['custom']} custom, {t['counter']} counter), {sum(s['slices'].values())} slices, "
          f"{s['instants']} instants, {s['counters']} counter values, "
          f"{s['flows_started']} flows ({stats['flows_unterminated']} never terminated), "
          f"{stats['slices_open']} slices open: valid")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
