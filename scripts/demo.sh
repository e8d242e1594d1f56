#!/bin/sh
# SPDX-License-Identifier: MIT
# The built-in demo: run the sample executor's "noisy" scenario (one task
# burns ~20 ms of CPU inside a single poll every 250 ms), trace it from the
# outside, and leave a Perfetto trace (native protobuf) plus the alerts behind.
set -eu
BUILD=${1:-build}
TRACE=$BUILD/demo.pftrace
ALERTS=$BUILD/demo-alerts.jsonl

[ "$(id -u)" -eq 0 ] || {
	echo "demo: needs root to load BPF: run it as root (make demo), or sudo make demo" >&2
	exit 1
}

"$BUILD/sample-executor" --scenario noisy --duration 5 --workers 2 --wait-traced 10 \
	> "$BUILD/demo-executor.txt" &
pid=$!
echo "demo: sample executor running as pid $pid (scenario noisy); tracing it for 5 s"
"$BUILD/asynctraced" -p "$pid" -o "$TRACE" --alerts "$ALERTS"
wait "$pid"
echo
echo "demo: the executor's own count: $(cat "$BUILD/demo-executor.txt")"
python3 tests/integration/pftrace_check.py "$TRACE"
echo "demo: alerts in $ALERTS; open $TRACE at https://ui.perfetto.dev"
