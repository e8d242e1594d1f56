#!/bin/sh
# SPDX-License-Identifier: MIT
# The project's own regression gate on its sample executor, written as a
# user writes theirs (docs/cli.md, "A CI gate: run"): a baseline saved from
# a healthy run, then the gates, each run's exit status checked. make test
# runs it; the JUnit files stay in BUILD/gate for a CI system to show.
#
#   scripts/ci-gate.sh BUILD
set -u

build=${1:-build}
tracer=$build/asynctraced
out=$build/gate
mkdir -p "$out"
failed=0

# expect STATUS NAME ARGS...: asynctraced run ARGS must exit STATUS
expect() {
	want=$1 name=$2
	shift 2
	"$tracer" run --no-trace -q --junit "$out/$name.xml" "$@" >"$out/$name.out" 2>"$out/$name.err"
	got=$?
	if [ "$got" -eq "$want" ]; then
		echo "ci-gate: $name: exit $got, as it should"
	else
		echo "ci-gate: $name: exit $got, want $want:" >&2
		cat "$out/$name.err" >&2
		failed=1
	fi
}

executor() {
	echo -- "$build/$1" --scenario "$2" --duration 3 --workers 2
}

# the baseline, from a healthy run (the executor's own line lands beside it)
"$tracer" run --no-trace -q --summary json $(executor sample-executor healthy) \
	>"$out/baseline.json" 2>"$out/baseline.err" || {
	echo "ci-gate: the baseline run failed:" >&2
	cat "$out/baseline.err" >&2
	exit 1
}
# --tolerance 100: a shared CI machine doubles sub-millisecond percentiles
gates="--fail-on all --max dropped=0 --baseline $out/baseline.json --tolerance 100"
# shellcheck disable=SC2046,SC2086
expect 0 healthy $gates $(executor sample-executor healthy)
# shellcheck disable=SC2046,SC2086
expect 3 noisy --fail-on long-poll --long-poll 15ms $(executor sample-executor noisy)
# shellcheck disable=SC2046,SC2086
expect 3 slowed $gates $(executor sample-executor-slow healthy)
# tasks that only wait (timers, channels, Notify, JoinHandles); a yield loop would be thrash
expect 0 tokio-paths --fail-on all --max dropped=0 -- "$build/tokio-paths" waits --duration 3
grep -q "fail-on long-poll .* FAIL" "$out/noisy.err" && grep -q "task 'noisy'" "$out/noisy.err" ||
	{ echo "ci-gate: noisy's table does not name its long poll" >&2; failed=1; }
exit $failed
