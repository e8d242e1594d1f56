#!/bin/bash
# SPDX-License-Identifier: MIT
# Many processes of one binary (docs/performance.md, "Many processes of one
# binary"): N `spin` executors at --rate max, their polls/s summed, with no
# tracer, with each process's own probes (a filter given: --comm), and with
# probes shared by file (the whole host followed); then what an untraced
# process of a traced binary pays. Rounds alternate the modes. As root:
#
#   N=16 ROUNDS=3 tests/bench/many_processes.sh
set -euo pipefail
BUILD=${BUILD:-build}
E=$BUILD/sample-executor
T=$BUILD/asynctraced
N=${N:-16}
ROUNDS=${ROUNDS:-3}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

sum_polls() {
	cat "$@" | grep -o "polls_per_s=[0-9]*" | cut -d= -f2 | awk '{s += $1} END {print s}'
}

many() { # none | per-process | per-file
	local tr=""
	case $1 in
	per-process) "$T" --comm '^sample-exec' -q --no-trace -d 6 >/dev/null 2>&1 & tr=$! ;;
	per-file) "$T" -q --no-trace -d 6 >/dev/null 2>&1 & tr=$! ;;
	esac
	sleep 0.8
	for i in $(seq "$N"); do
		"$E" --scenario spin --rate max --duration 3 --workers 1 >"$TMP/s$i" 2>&1 &
	done
	wait $(jobs -p | grep -vx "${tr:-x}")
	[ -n "$tr" ] && wait "$tr"
	sum_polls "$TMP"/s*
	rm -f "$TMP"/s*
}

untraced() { # none | traced: polls/s of a process beside a traced one of its binary
	local a tr=""
	"$E" --scenario spin --rate max --duration 3 --workers 1 >/dev/null 2>&1 & a=$!
	sleep 0.2
	if [ "$1" = traced ]; then
		"$T" --max-targets 1 -q --no-trace -d 5 >/dev/null 2>&1 & tr=$!
		sleep 0.6
	fi
	"$E" --scenario spin --rate max --duration 2 --workers 1 >"$TMP/b" 2>&1
	wait "$a"
	[ -n "$tr" ] && { kill -INT "$tr"; wait "$tr" || true; }
	sum_polls "$TMP/b"
}

for r in $(seq "$ROUNDS"); do
	echo "N=$N polls/s: none $(many none), probes per process $(many per-process)," \
	     "per file $(many per-file)"
done
for r in $(seq "$ROUNDS"); do
	echo "beside a traced process of its binary: none $(untraced none), traced $(untraced traced)"
done
