#!/bin/sh
# SPDX-License-Identifier: MIT
# Re-records the captures the offline tests convert (needs root and BPF):
#   sudo tests/data/record.sh [BUILD]
# Each capture is small on purpose (a low request rate, about a second) and
# comes with the sample executor's own counts in a .counts file, which the
# tests compare the conversions with. A capture that raises an alert its
# scenario is not built for (a loaded machine delays polls) is recorded again.
# tests/data/v1 and tests/data/v2 hold captures of format versions 1 and 2,
# written by older asynctraceds: the compatibility fixtures, never re-recorded.
set -eu
BUILD=${1:-build}
DIR=$(dirname "$0")

record() { # NAME SCENARIO RATE DURATION [record options]
	name=$1 scenario=$2 rate=$3 duration=$4
	shift 4
	"$BUILD/sample-executor" --scenario "$scenario" --rate "$rate" --duration "$duration" \
		--workers 2 --wait-traced > "$DIR/$name.counts" &
	exe=$!
	sleep 0.2
	"$BUILD/asynctraced" record -p "$exe" -o "$DIR/$name.atcap" --long-poll 15ms \
		--lost-waker 300ms "$@"
	wait "$exe"
}

record noisy noisy 200 1.2
record fanout fanout 100 1
record lost lost 100 1.5
record starve-maps starve 150 1.5 --no-trace
record thrash-maps thrash 500 1 --no-trace
record delay-maps delay 300 1.5 --no-trace
record blocking-maps blocking 200 1.2 --no-trace
