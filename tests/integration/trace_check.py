#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Checks a Chrome JSON trace against the rules Perfetto's importer applies.

There is no trace_processor on these machines, so the rules of Perfetto's
JSON importer, as read in its source, are enforced here (see
docs/trace-format.md):

  * the file is a JSON array of events (a file cut short is repaired the way
    Perfetto reads it: the half-written last event is dropped);
  * every event has a phase Perfetto reads, a pid, a timestamp, a name;
  * slices on one thread nest properly (X intervals are disjoint or nested);
  * async b/e slices balance per (cat, id2.local) track with matching names,
    and each task's track carries only that task;
  * every flow has exactly one start (flow_out) and one end (flow_in), the end
    no earlier than the start, and no flow id is reused;
  * every thread that carries slices is named, and so is the process.

Usage: trace_check.py TRACE.json   (exit 0: valid; 1: violations printed)
"""
import json
import re
import sys
from collections import defaultdict

PHASES = set("BEXiIbensftCM")
TASK_NAME = re.compile(r"^(.*) #(\d+)$")


def _whole_event(line):
    try:
        return isinstance(json.loads(line.strip().rstrip(",")), dict)
    except ValueError:
        return False


def load(path):
    """Returns the events, repairing a trace cut short like Perfetto does."""
    with open(path, "rb") as f:
        raw = f.read().decode("utf-8")
    try:
        events = json.loads(raw)
    except json.JSONDecodeError:
        lines = raw.splitlines()
        # Drop what follows the last complete event (a line that is one
        # whole object, with or without its comma), then close the array.
        while lines and not _whole_event(lines[-1]):
            lines.pop()
        if not lines:
            raise ValueError("no complete event in the file")
        body = "\n".join(lines).rstrip().rstrip(",")
        events = json.loads(body + "\n]")
    if not isinstance(events, list):
        raise ValueError("not a bare JSON array (the object form cannot be cut short)")
    return events


class Report:
    def __init__(self):
        self.errors = []

    def error(self, msg):
        if len(self.errors) < 50:
            self.errors.append(msg)


def check(events):
    """Returns a list of violations (empty: the trace is valid)."""
    rep = Report()
    thread_slices = defaultdict(list)   # tid -> [(ts, end, name)]
    async_events = defaultdict(list)    # (cat, id) -> [(ts, order, ph, name)]
    flows_out, flows_in = {}, {}
    named_threads, used_threads = set(), set()
    process_named = False
    pids = set()

    for i, ev in enumerate(events):
        where = f"event {i} ({ev.get('ph')} {ev.get('name')!r})"
        ph = ev.get("ph")
        if ph not in PHASES:
            rep.error(f"{where}: phase Perfetto does not read")
            continue
        pid = ev.get("pid")
        if not isinstance(pid, int) or not 0 <= pid < 2**32:
            rep.error(f"{where}: pid missing or not u32")
            continue
        pids.add(pid)
        if not ev.get("name"):
            rep.error(f"{where}: no name")
        if ph == "M":
            if ev.get("name") == "process_name" and ev.get("args", {}).get("name"):
                process_named = True
            if ev.get("name") == "thread_name" and ev.get("args", {}).get("name"):
                named_threads.add(ev.get("tid"))
            continue
        ts = ev.get("ts")
        if not isinstance(ts, (int, float)) or ts < 0:
            rep.error(f"{where}: ts missing or negative")
            continue
        if ph == "X":
            dur = ev.get("dur")
            if not isinstance(dur, (int, float)) or dur < 0:
                rep.error(f"{where}: X without a valid dur")
                continue
            tid = ev.get("tid")
            used_threads.add(tid)
            thread_slices[tid].append((ts, ts + dur, ev.get("name"), i))
        elif ph in "be":
            ident = ev.get("id2", {}).get("local") if isinstance(ev.get("id2"), dict) else None
            if ident is None:
                rep.error(f"{where}: async event without id2.local")
                continue
            async_events[(ev.get("cat"), ident)].append((ts, 0 if ph == "b" else 1, i, ph, ev.get("name")))
        elif ph == "C":
            args = ev.get("args")
            if not isinstance(args, dict) or not args or not all(
                    isinstance(v, (int, float)) for v in args.values()):
                rep.error(f"{where}: counter without numeric args")
        if "bind_id" in ev:
            fid = ev["bind_id"]
            if ph not in "XBbn":
                rep.error(f"{where}: bind_id on a phase flows cannot bind to")
            if ev.get("flow_out"):
                if fid in flows_out:
                    rep.error(f"{where}: flow {fid} started twice")
                flows_out[fid] = (ts, i)
            if ev.get("flow_in"):
                if fid in flows_in:
                    rep.error(f"{where}: flow {fid} ended twice")
                flows_in[fid] = (ts, i)
            if not ev.get("flow_out") and not ev.get("flow_in"):
                rep.error(f"{where}: bind_id without a direction")

    if not process_named:
        rep.error("the process is not named")
    for tid in sorted(t for t in used_threads if t not in named_threads):
        rep.error(f"thread {tid} carries slices but has no thread_name")

    # Thread slices must nest: sorted by start (longest first on ties), each
    # one either inside the innermost open slice or after it.
    for tid, slices in thread_slices.items():
        stack = []
        for ts, end, name, i in sorted(slices, key=lambda s: (s[0], -s[1])):
            while stack and stack[-1][1] <= ts:
                stack.pop()
            if stack and end > stack[-1][1] + 1e-9:
                rep.error(f"thread {tid}: slice {name!r} at {ts} (event {i}) overlaps "
                          f"{stack[-1][2]!r} ending at {stack[-1][1]} without nesting")
            stack.append((ts, end, name))

    # Async tracks: balanced, matching names, one task per track.
    for (cat, ident), evs in async_events.items():
        open_ = []
        names = set()
        for ts, _, i, ph, name in sorted(evs):
            names.add(name)
            if ph == "b":
                open_.append(name)
            elif not open_:
                rep.error(f"track {cat}/{ident}: e without b (event {i})")
            elif open_.pop() != name:
                rep.error(f"track {cat}/{ident}: e name {name!r} does not match its b")
        if open_:
            rep.error(f"track {cat}/{ident}: {len(open_)} b without e")
        if cat == "task":
            ids = set()
            for name in names:
                m = TASK_NAME.match(name or "")
                if not m:
                    rep.error(f"task track {ident}: slice name {name!r} lacks '#<task id>'")
                else:
                    ids.add(int(m.group(2)))
            if len(ids) > 1 or (ids and int(ident, 16) not in ids):
                rep.error(f"task track {ident} carries tasks {sorted(ids)}")

    for fid, (ts, i) in flows_out.items():
        if fid not in flows_in:
            rep.error(f"flow {fid} starts (event {i}) but never ends")
        elif flows_in[fid][0] < ts:
            rep.error(f"flow {fid} ends before it starts")
    for fid, (ts, i) in flows_in.items():
        if fid not in flows_out:
            rep.error(f"flow {fid} ends (event {i}) but never starts")
    if len(pids) > 1:
        rep.error(f"events of several processes: {sorted(pids)}")
    return rep.errors


def main(argv):
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    try:
        events = load(argv[1])
    except (OSError, ValueError) as e:
        print(f"trace_check: {argv[1]}: {e}", file=sys.stderr)
        return 1
    errors = check(events)
    for e in errors:
        print(f"trace_check: {argv[1]}: {e}", file=sys.stderr)
    if not errors:
        print(f"trace_check: {argv[1]}: {len(events)} events, valid")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
