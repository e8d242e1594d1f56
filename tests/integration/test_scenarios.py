# SPDX-License-Identifier: MIT
"""Each scenario of the sample executor, traced (full trace) from its first
poll to its exit: the tracer's counts and histograms must equal the
executor's own counts, the trace must follow Perfetto's import rules, each
scenario must show its shape, and raise exactly the alerts it was built
for."""
import os
import re
import subprocess
import unittest
from collections import Counter, defaultdict

from tests.integration import harness, trace_check

DURATION = 3


polls = harness.polls


def worker_threads(run):
    return {e["tid"]: e["args"]["name"] for e in run.events
            if e.get("ph") == "M" and e.get("name") == "thread_name"
            and e["args"]["name"].startswith("worker ")}


def tasks_named(run, name):
    return {e["args"]["task"] for e in polls(run) if e["name"] == name}


class ScenarioTest(unittest.TestCase):
    scenario = None
    exe = None          # another build of the sample executor, in BUILD
    tracer_args = ()
    run_ = None

    @classmethod
    def setUpClass(cls):
        harness.require_root()
        exe = cls.exe and os.path.join(harness.BUILD, cls.exe)
        cls.run_ = harness.traced_run(cls.scenario, DURATION, tracer_args=cls.tracer_args,
                                      exe=exe)

    def setUp(self):
        self.run = self.run_
        self.ctx = self.run.describe()

    # -- what every scenario must get right ---------------------------------

    def test_exit_status(self):
        self.assertEqual(self.run.executor_rc, 0, self.ctx)
        self.assertEqual(self.run.tracer_rc, 0, self.ctx)
        self.assertIn("target exited", self.run.tracer_stderr, self.ctx)

    def test_counts_match_executor(self):
        s, c = self.run.summary, self.run.counts
        self.assertEqual(s.get("dropped"), 0, self.ctx)
        for ours, theirs in [("tasks", "tasks"), ("polls", "polls"), ("wakes", "wakes"),
                             ("steals", "steals"), ("stolen", "stolen"), ("parks", "parks")]:
            self.assertEqual(s.get(ours), c.get(theirs), f"{ours}: {self.ctx}")
        self.assertGreater(c.get("polls", 0), 1000, self.ctx)

    def test_histograms_count_every_poll(self):
        workers = self.run.report["workers"]
        self.assertEqual(sum(w["poll"]["count"] for w in workers), self.run.counts["polls"])
        self.assertEqual(sum(w["on_cpu"]["count"] for w in workers), self.run.counts["polls"])
        self.assertEqual(self.run.report["counts"]["polls"], self.run.counts["polls"])
        self.assertEqual(self.run.report["counts"]["wakes"], self.run.counts["wakes"])
        self.assertEqual(self.run.report["counts"]["tasks_spawned"], self.run.counts["tasks"])
        self.assertEqual(self.run.report["events"]["by_kind"]["poll"], self.run.counts["polls"])
        # wakes too, those that rode in their poll's record included
        self.assertEqual(self.run.report["events"]["by_kind"]["wake"], self.run.counts["wakes"])
        # every poll but those whose wake came before the tracer has a delay
        delays = sum(w["delay"]["count"] for w in workers)
        self.assertLessEqual(delays, self.run.counts["polls"])
        self.assertGreater(delays, 0.9 * self.run.counts["polls"])

    def test_raises_exactly_its_alerts(self):
        expected = harness.EXPECTED_ALERTS[self.scenario]
        self.assertEqual(harness.begun(self.run), expected, self.ctx)
        episodes = {}
        for a in self.run.alert_log:
            self.assertEqual(a["schema"], "asynctraced.alert/1")
            self.assertEqual(a["pid"], self.run.report["pid"])
            self.assertTrue(a["message"])
            episodes.setdefault(a["episode"], []).append(a["state"])
        # each episode begins once and ends once
        for ep, states in episodes.items():
            self.assertEqual(states, ["begin", "end"], ep)
        report = self.run.report["alerts"]["episodes"]
        for kind, n in report.items():
            self.assertEqual(n > 0, kind in expected, kind)

    def test_alerts_are_in_the_trace(self):
        instants = [e for e in self.run.events if e.get("ph") == "i" and e.get("cat") == "alert"]
        self.assertEqual(len(instants), len(self.run.alert_log))
        self.assertEqual({e["args"]["episode"] for e in instants},
                         {a["episode"] for a in self.run.alert_log})

    def test_trace_follows_importer_rules(self):
        self.assertEqual(trace_check.check(self.run.events), [])

    def test_every_poll_is_in_the_trace(self):
        ps = polls(self.run)
        self.assertEqual(len(ps), self.run.counts["polls"])
        workers = worker_threads(self.run)
        self.assertEqual(len(workers), 2, workers)
        for p in ps:
            self.assertIn(p["tid"], workers)

    def test_each_task_has_its_own_track(self):
        per_task = Counter(p["args"]["task"] for p in polls(self.run))
        tracks = defaultdict(set)
        begins = Counter()
        for e in self.run.events:
            if e.get("ph") == "b" and e.get("cat") == "task":
                ident = int(e["id2"]["local"], 16)
                tracks[ident].add(e["name"])
                begins[ident] += 1
        self.assertEqual(begins, per_task)
        for task, names in tracks.items():
            self.assertEqual(len(names), 1, names)
            self.assertTrue(next(iter(names)).endswith(f" #{task}"), names)

    def test_wake_arrows_start_in_the_wakers_poll(self):
        """A wake made from inside a poll sits inside that poll's slice on the
        same thread, and its arrow ends on the woken task's poll."""
        self.assertGreater(harness.check_wake_arrows(self, self.run, at_least=100), 0)


class Healthy(ScenarioTest):
    scenario = "healthy"

    def test_no_alert(self):
        self.assertEqual(self.run.alert_log, [], self.ctx)
        self.assertRegex(self.run.tracer_stderr, r"alerts   0 episodes")

    def test_io_and_timer_wakes_come_from_outside_the_workers(self):
        wakes = [e for e in self.run.events if e.get("cat") == "wake"]
        workers = worker_threads(self.run)
        outside = [w for w in wakes if w["tid"] not in workers]
        self.assertGreater(len(outside), 1000)
        self.assertTrue(all(w["args"]["queue"] == "inject" for w in outside
                            if w["args"]["queue"] != "none"))


class HealthyInlinedProbes(Healthy):
    """The runtime as a shared library whose probes are inlined at every call
    site (libsample-executor.so): a probe whose sites have their arguments
    in different registers is read through each site's spec, looked up as
    it is hit; a probe whose sites agree, from constants fixed at load.
    Both ways count exactly."""
    exe = "sample-executor-shared"
    tracer_args = ("-v",)

    def test_arguments_fixed_at_load_or_looked_up(self):
        notes = subprocess.run(["readelf", "-n", os.path.join(harness.BUILD,
                                                              "libsample-executor.so")],
                               capture_output=True, text=True, check=True).stdout
        specs = defaultdict(set)
        for name, args in re.findall(r"Name: (\w+)\n.*\n\s+Arguments: ([^\n]*)", notes):
            specs[name].add(args.strip())
        how = {p: "fixed at load" if len(a) == 1 else "looked up per hit"
               for p, a in specs.items()}
        # the point of this build: both ways in one run
        self.assertEqual(set(how.values()), {"fixed at load", "looked up per hit"}, specs)
        for probe, way in how.items():
            self.assertRegex(self.run.tracer_stderr, rf"attached usdt 'asynctrace:{probe}' in "
                                                     rf"\S+ \(arguments {way}\)", self.ctx)


class ThreadChurn(unittest.TestCase):
    """Workers whose threads come and go (--thread-churn: every 0.1 ms a busy
    worker hands its work to a new thread and the old one exits), 20000
    threads and more in 5 s on a quiet machine; 7 s leave room for a busy
    one, since the table must overflow twice over. A new thread often gets an exited one's kernel
    stack, which is what the BPF side knows a thread by between asking the
    kernel (thread_self() in bpf/core.bpf.h); and more threads come and go
    than the thread table holds (8192 slots, 8192 more in a hash), so exited
    threads must give their places back. Every poll must land on the thread
    that ran it."""

    @classmethod
    def setUpClass(cls):
        harness.require_root()
        cls.run_ = harness.traced_run("healthy", 7, trace=True,
                                      executor_args=("--thread-churn", "0.0001"))

    def setUp(self):
        self.run = self.run_
        self.ctx = self.run.describe()[-3000:]

    def test_counts_match_executor(self):
        s, c = self.run.summary, self.run.counts
        self.assertEqual((self.run.executor_rc, self.run.tracer_rc), (0, 0), self.ctx)
        self.assertEqual(s.get("dropped"), 0, self.ctx)
        self.assertNotIn("untracked", self.run.tracer_stderr, self.ctx)
        for key in ("tasks", "polls", "wakes", "steals", "parks"):
            self.assertEqual(s.get(key), c.get(key), f"{key}: {self.ctx}")

    def test_each_poll_on_the_thread_that_ran_it(self):
        theirs = Counter()
        polled = 0
        for tid, n in re.findall(r"thread (\d+) worker \d+ polls (\d+)",
                                 self.run.executor_stdout):
            if int(n):
                polled += 1
                theirs[int(tid)] += int(n)  # a tid may come back: pid_max is 32768 here
        self.assertGreater(polled, 2 * harness.AT_MAX_THREADS, self.ctx)
        ours = Counter(p["tid"] for p in polls(self.run))
        self.assertEqual(ours, theirs)


class LongPollScenario(ScenarioTest):
    culprit = None

    def long_polls(self):
        """The polls the detector calls long (harness.DETECTOR_ARGS): 15 ms of
        the task's own time, on the CPU (as the kernel charged its thread: a
        vCPU the host paused is not the task computing) or asleep; time
        preempted on a busy machine is not the task's doing."""
        return [p for p in polls(self.run)
                if p["args"].get("cpu_charged_us", p["args"]["on_cpu_us"]) +
                p["args"]["blocked_us"] >= 15000]

    def test_one_episode_names_the_culprit(self):
        culprit_ids = tasks_named(self.run, self.culprit)
        self.assertEqual(len(culprit_ids), 1)
        # one alert for the whole run, however many long polls
        self.assertEqual(len(self.run.alerts), 1, self.ctx)
        a = self.run.alerts[0]
        self.assertEqual(a["name"], self.culprit, a)
        self.assertEqual(int(a["task"]), next(iter(culprit_ids)), a)
        self.assertIn(int(a["tid"]), worker_threads(self.run), a)
        self.assertGreaterEqual(float(a["ms"]), 15.0, a)
        # one every 250 ms for 3 s, all of them the culprit's
        long = self.long_polls()
        self.assertGreaterEqual(len(long), 8)
        self.assertTrue(all(p["name"] == self.culprit for p in long), long)
        end = [e for e in self.run.alert_log if e["state"] == "end"]
        self.assertEqual(len(end), 1)
        self.assertEqual(end[0]["count"], len(long))
        self.assertEqual(end[0]["worst_ns"] // 1000, int(max(p["dur"] for p in long)))


class Noisy(LongPollScenario):
    scenario = "noisy"
    culprit = "noisy"

    def test_cause_is_cpu(self):
        self.assertEqual(self.run.alerts[0]["cause"], "cpu-bound", self.run.alerts)
        self.assertGreaterEqual(float(self.run.alerts[0]["oncpu"]), 15.0)
        # each burn spends most of its 20 ms on the CPU, however long a busy
        # machine makes it wait in between, and none of it asleep
        for p in self.long_polls():
            self.assertGreaterEqual(p["args"]["on_cpu_us"], 10000, p)
            self.assertLess(p["args"]["blocked_us"], 5000, p)


class Blocking(LongPollScenario):
    scenario = "blocking"
    culprit = "blocking"

    def test_cause_is_blocking(self):
        a = self.run.alerts[0]
        self.assertEqual(a["cause"], "blocked", a)
        self.assertGreaterEqual(float(a["blocked"]), 15.0, a)
        for p in self.long_polls():
            self.assertGreaterEqual(p["args"]["blocked_us"], 15000, p)
            self.assertLess(p["args"]["on_cpu_us"], 5000, p)


class Starve(ScenarioTest):
    scenario = "starve"

    def test_no_steals(self):
        self.assertEqual(self.run.counts["steals"], 0)
        self.assertFalse([e for e in self.run.events if e.get("cat") == "steal"])

    def test_one_deep_queue_while_the_other_worker_parks(self):
        depth = defaultdict(int)
        for e in self.run.events:
            if e.get("ph") == "C" and e.get("name") == "queue depth":
                for k, v in e["args"].items():
                    depth[k] = max(depth[k], v)
        deep = [k for k, v in depth.items() if k.startswith("worker") and v >= 100]
        self.assertEqual(len(deep), 1, dict(depth))
        starved = int(deep[0].split()[1])
        parked = defaultdict(float)
        for e in self.run.events:
            if e.get("cat") == "park":
                parked[e["args"]["worker"]] += e["dur"]
        other = 1 - starved
        self.assertGreater(parked[other], 0.5 * DURATION * 1e6, dict(parked))


class Thrash(ScenarioTest):
    scenario = "thrash"

    def test_tasks_wake_themselves(self):
        thrash = tasks_named(self.run, "thrash")
        self.assertEqual(len(thrash), 8)
        self_wakes = Counter(e["args"]["task"] for e in self.run.events
                             if e.get("cat") == "wake" and e["args"]["task"] in thrash
                             and e["args"].get("waker_task") == e["args"]["task"])
        per_task = Counter(p["args"]["task"] for p in polls(self.run)
                           if p["args"]["task"] in thrash)
        for t in thrash:
            self.assertGreater(per_task[t], 1000)
            # almost every poll of a thrash task follows its own wake
            self.assertGreater(self_wakes[t], 0.9 * per_task[t])


class Fanout(ScenarioTest):
    scenario = "fanout"

    def test_children_of_the_parent(self):
        parents = tasks_named(self.run, "fanout")
        self.assertEqual(len(parents), 1)
        parent = next(iter(parents))
        spawns = [e for e in self.run.events if e.get("cat") == "spawn"
                  and e["name"].startswith("spawn child ")]
        self.assertGreaterEqual(len(spawns), 32)
        self.assertTrue(all(s["args"]["parent"] == parent for s in spawns))
        # in parallel: children ran on both workers
        children = {s["args"]["task"] for s in spawns}
        tids = {p["tid"] for p in polls(self.run) if p["args"]["task"] in children}
        self.assertEqual(len(tids), 2)
        # the last child to finish wakes the parent, from inside its last poll
        joins = [e for e in self.run.events if e.get("cat") == "wake"
                 and e["args"]["task"] == parent and e["args"].get("waker_task") in children]
        self.assertGreater(len(joins), 0)


class Lost(ScenarioTest):
    scenario = "lost"

    def test_the_lost_task_is_named(self):
        lost = [a for a in self.run.alert_log if a["kind"] == "lost-waker"]
        self.assertEqual([a["state"] for a in lost], ["begin", "end"])
        self.assertEqual(lost[0]["task"]["name"], "lost")
        self.assertTrue(lost[1]["ongoing"], lost[1])  # never woken
        # its last poll returned Pending and no wake of it follows
        ps = [p for p in polls(self.run) if p["args"]["task"] == lost[0]["task"]["id"]]
        self.assertEqual(ps[-1]["args"]["result"], "pending")
        last = ps[-1]["ts"] + ps[-1]["dur"]
        self.assertFalse([e for e in self.run.events if e.get("cat") == "wake"
                          and e["args"]["task"] == lost[0]["task"]["id"] and e["ts"] > last])


class Delay(ScenarioTest):
    scenario = "delay"

    def test_late_polls_without_long_polls_or_backlog(self):
        ep = [a for a in self.run.alert_log if a["kind"] == "scheduling-delay"]
        self.assertEqual(ep[0]["state"], "begin")
        self.assertGreaterEqual(ep[0]["value_ns"], 20e6)
        self.assertLess(ep[0]["queued_depth"], 16)
        self.assertFalse(self.long_polls_in_trace())
        self.assertGreater(max(p["args"].get("wake_delay_us", 0) for p in polls(self.run)),
                           20000)

    def long_polls_in_trace(self):
        # the task's own time, as the detector judges it: on the CPU as the kernel
        # charged its thread (a vCPU the host paused is not the task computing)
        return [p for p in polls(self.run)
                if p["args"].get("cpu_charged_us", p["args"]["on_cpu_us"]) +
                p["args"]["blocked_us"] >= 10000]


del ScenarioTest, LongPollScenario  # only their subclasses are tests

if __name__ == "__main__":
    unittest.main()
