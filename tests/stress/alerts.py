# SPDX-License-Identifier: MIT
"""make stress: every scenario of the sample executor traced N times in both
modes (full trace and maps-only), its alerts held to what the scenario was
built to show. An alert is false when its kind is not the scenario's, or
when it names a task other than the culprit; an alert is missed when the
scenario's own never began. Prints a table; exits 1 if anything was false or
missed. Not in CI: it takes about 8 s a run.

    sudo make stress                       # 50 rounds
    sudo make stress STRESS_N=5 STRESS_SCENARIOS="lost thrash"
"""
import argparse
import os
import shutil
import sys
import tempfile
import time
from collections import defaultdict

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
from tests.integration import harness  # noqa: E402

# The task each scenario's alert must name (None: any task, or none).
CULPRIT = {
    "noisy": "noisy",
    "blocking": "blocking",
    "lost": "lost",
}
SCENARIOS = ["healthy", "noisy", "blocking", "starve", "thrash", "fanout", "lost", "delay"]


def judge(scenario, alert_log):
    """(false alerts, missed kinds) of one run, each as a short description."""
    expected = harness.EXPECTED_ALERTS[scenario]
    culprit = CULPRIT.get(scenario)
    false, begun = [], set()
    for a in alert_log:
        if a["state"] != "begin":
            continue
        task = (a.get("task") or {}).get("name")
        if a["kind"] not in expected:
            false.append(f"{a['kind']} ({a['message']})")
        elif culprit and a["kind"] in expected and task != culprit:
            false.append(f"{a['kind']} on '{task}' ({a['message']})")
        else:
            begun.add(a["kind"])
    return false, sorted(expected - begun)


def keep(into, name, tmp, scenario):
    """Copies what a run left in tmp (its trace and alert log) to into/name.*."""
    os.makedirs(into, exist_ok=True)
    for ext in ("json", "alerts"):
        src = os.path.join(tmp, f"{scenario}.{ext}")
        if os.path.exists(src):
            shutil.copy(src, os.path.join(into, f"{name}.{ext}"))
    print(f"  kept in {into}/{name}.*", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", type=int, default=int(os.environ.get("STRESS_N", 50)),
                    help="rounds (default 50)")
    ap.add_argument("--duration", type=float, default=3)
    ap.add_argument("--keep", metavar="DIR", default=os.environ.get("STRESS_KEEP"),
                    help="copy the trace and alerts of each run with a false or missed alert "
                         "into DIR (round-scenario-mode.*)")
    ap.add_argument("scenarios", nargs="*",
                    default=os.environ.get("STRESS_SCENARIOS", "").split() or SCENARIOS)
    args = ap.parse_args()
    harness.require_root()

    runs = defaultdict(int)
    false = defaultdict(list)
    missed = defaultdict(list)
    failed = defaultdict(int)
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="asynctraced-stress-") as tmp:
        for i in range(args.n):
            for scenario in args.scenarios:
                for mode in ("full", "maps"):
                    run = harness.traced_run(scenario, args.duration, tmpdir=tmp,
                                             trace=mode == "full")
                    key = (scenario, mode)
                    runs[key] += 1
                    if run.executor_rc or run.tracer_rc:
                        failed[key] += 1
                        print(f"round {i + 1} {scenario} {mode}: exit status executor "
                              f"{run.executor_rc}, tracer {run.tracer_rc}\n"
                              f"{run.tracer_stderr[-2000:]}", flush=True)
                    f, m = judge(scenario, run.alert_log)
                    for what in f:
                        print(f"round {i + 1} {scenario} {mode}: FALSE {what}", flush=True)
                    for what in m:
                        print(f"round {i + 1} {scenario} {mode}: MISSED {what}", flush=True)
                    false[key] += f
                    missed[key] += m
                    if (f or m) and args.keep:
                        keep(args.keep, f"{i + 1}-{scenario}-{mode}", tmp, scenario)
            print(f"round {i + 1}/{args.n} done, {time.monotonic() - start:.0f} s", flush=True)

    print(f"\n{'scenario':<10} {'mode':<5} {'runs':>5} {'false':>6} {'missed':>7} {'failed':>7}")
    total_false = total_missed = total_failed = 0
    for (scenario, mode), n in sorted(runs.items()):
        key = (scenario, mode)
        print(f"{scenario:<10} {mode:<5} {n:>5} {len(false[key]):>6} {len(missed[key]):>7} "
              f"{failed[key]:>7}")
        total_false += len(false[key])
        total_missed += len(missed[key])
        total_failed += failed[key]
    print(f"{'total':<16} {sum(runs.values()):>5} {total_false:>6} {total_missed:>7} "
          f"{total_failed:>7}")
    return 1 if total_false or total_missed or total_failed else 0


if __name__ == "__main__":
    sys.exit(main())
