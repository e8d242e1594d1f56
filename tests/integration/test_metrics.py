# SPDX-License-Identifier: MIT
"""--metrics: the Prometheus endpoint, checked by the real tools. promtool
checks what it serves (text format); a real Prometheus (Debian's package)
scrapes it on the loopback interface, in OpenMetrics as Prometheus asks,
and its query API gives back the sample executor's poll count, which must
be the executor's own; an exited process's final values reach Prometheus
before its series go. The server's limits: descriptors past 1024 (epoll,
not select), a cap on one client's connections; and a unix socket, which
Debian's Prometheus cannot scrape: curl does."""
import json
import os
import resource
import signal
import socket
import stat
import subprocess
import tempfile
import unittest
import urllib.parse
import urllib.request

from tests.integration import harness

PROMETHEUS = "/usr/bin/prometheus"
PROMTOOL = "/usr/bin/promtool"
CURL = "/usr/bin/curl"
# One client's connections at once (docs/metrics.md); more are closed unanswered.
PER_CLIENT = 4


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url, accept=None, timeout=5):
    req = urllib.request.Request(url, headers={"Accept": accept} if accept else {})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return r.status, r.headers.get("Content-Type"), r.read().decode()


def samples(text, name):
    """{labels string: value} of one metric's samples in the text format."""
    out = {}
    for line in text.splitlines():
        if line.startswith(name + "{"):
            labels, _, value = line.rpartition(" ")
            out[labels[len(name):]] = float(value)
    return out


class Metrics(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        harness.require_root()
        for tool in (PROMETHEUS, PROMTOOL):
            if not os.access(tool, os.X_OK):
                raise AssertionError(f"{tool} missing: scripts/setup.sh installs prometheus")

    def setUp(self):
        self.procs = []
        self.dir = tempfile.mkdtemp(prefix="asynctraced-metrics-")

    def tearDown(self):
        harness.reap(*self.procs)

    def start(self, *args, **kw):
        p = subprocess.Popen([str(a) for a in args], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, **kw)
        self.procs.append(p)
        return p

    def tracer(self, listen, *args, pass_fds=()):
        """--metrics listen: a port (on 127.0.0.1), or unix:PATH."""
        err = os.path.join(self.dir, "tracer.err")
        if not str(listen).startswith("unix:"):
            listen = f"127.0.0.1:{listen}"
        with open(err, "w") as f:
            p = subprocess.Popen([harness.TRACER, "--metrics", listen, "-q",
                                  "--no-trace", *map(str, args)],
                                 stdout=subprocess.PIPE, stderr=f, text=True,
                                 pass_fds=pass_fds)
        self.procs.append(p)
        return p, err

    def attached(self, err):
        self.assertTrue(harness.wait_for(lambda: "Ctrl-C to stop" in harness.read(err), 30),
                        harness.read(err))

    def test_promtool_checks_what_it_serves(self):
        """-p (the seccomp filter on): text format and OpenMetrics, a
        scenario with an alert, every family checked by promtool."""
        port = free_port()
        ex = harness.start_executor("noisy", 4)
        self.procs.append(ex)
        tr, err = self.tracer(port, "-p", ex.pid, "--metrics-tasks", 3, *harness.DETECTOR_ARGS)
        self.attached(err)
        url = f"http://127.0.0.1:{port}/metrics"
        # the first rendering comes with the first second's sample
        self.assertTrue(harness.wait_for(lambda: "asynctraced_polls_total" in get(url)[2], 10))
        # the CPU hog's first long poll counted: its alert served, with the hog's poll time
        self.assertTrue(harness.wait_for(lambda: any(
            v for k, v in samples(get(url)[2], "asynctraced_alerts_total").items()
            if 'kind="long-poll"' in k), 30), get(url)[2])
        status, ctype, text = get(url)
        self.assertEqual(status, 200)
        self.assertTrue(ctype.startswith("text/plain; version=0.0.4"), ctype)
        check = subprocess.run([PROMTOOL, "check", "metrics"], input=text,
                               capture_output=True, text=True)
        self.assertEqual(check.returncode, 0, check.stdout + check.stderr + text)
        self.assertEqual(check.stdout + check.stderr, "", text)
        for family in ("asynctraced_polls_total", "asynctraced_poll_duration_seconds_bucket",
                       "asynctraced_wake_to_poll_delay_seconds_sum",
                       "asynctraced_queue_depth_max", "asynctraced_steals_total",
                       "asynctraced_alerts_total", "asynctraced_dropped_records_total",
                       "process_cpu_seconds_total", "process_resident_memory_bytes",
                       "asynctraced_targets "):
            self.assertIn(family, text)
        alerts = samples(text, "asynctraced_alerts_total")
        long_poll = [v for k, v in alerts.items() if 'kind="long-poll"' in k]
        self.assertEqual(long_poll, [1.0], alerts)
        info, = samples(text, "asynctraced_target_info")
        self.assertIn('measured_by="probes"', info)
        # --metrics-tasks 3: the three busiest tasks, the CPU hog first among them
        busiest = samples(text, "asynctraced_task_poll_seconds_total")
        self.assertEqual(len(busiest), 3, busiest)
        self.assertTrue(any('name="noisy"' in k for k in busiest), busiest)
        pid = f'pid="{ex.pid}"'
        self.assertTrue(all(pid in k for k in samples(text, "asynctraced_polls_total")))
        status, ctype, om = get(url, "application/openmetrics-text; version=1.0.0")
        self.assertTrue(ctype.startswith("application/openmetrics-text"), ctype)
        self.assertTrue(om.endswith("# EOF\n"))
        self.assertIn("# TYPE asynctraced_polls counter", om)
        with self.assertRaises(urllib.error.HTTPError) as e:
            get(f"http://127.0.0.1:{port}/other")
        self.assertEqual(e.exception.code, 404)
        ex.communicate(timeout=60)
        tr.communicate(timeout=60)
        self.assertEqual(tr.returncode, 0, harness.read(err))
        self.assertNotIn("refused", harness.read(err))

    def test_sample_mode_leaves_out_what_it_cannot_see(self):
        """--mode sample: the polls and their histograms served; wakes, parks,
        steals, spawns and completions have no series at all (a 0 would say
        none happened), and target_info says the process is sampled."""
        port = free_port()
        ex = harness.start_executor("noisy", 4, wait_traced=False)
        self.procs.append(ex)
        tr, err = self.tracer(port, "-p", ex.pid, "--mode", "sample", "--metrics-tasks", 3,
                              *harness.DETECTOR_ARGS)
        self.attached(err)
        url = f"http://127.0.0.1:{port}/metrics"
        self.assertTrue(harness.wait_for(lambda: any(
            v for k, v in samples(get(url)[2], "asynctraced_alerts_total").items()
            if 'kind="long-poll"' in k), 30), get(url)[2] + harness.read(err))
        text = get(url)[2]
        check = subprocess.run([PROMTOOL, "check", "metrics"], input=text,
                               capture_output=True, text=True)
        self.assertEqual(check.returncode, 0, check.stdout + check.stderr + text)
        info, = samples(text, "asynctraced_target_info")
        self.assertIn('measured_by="samples",sample_hz="997"', info)
        pid = f'pid="{ex.pid}"'
        self.assertTrue(any(pid in k and v > 0
                            for k, v in samples(text, "asynctraced_polls_total").items()), text)
        self.assertTrue(samples(text, "asynctraced_poll_duration_seconds_bucket"), text)
        self.assertTrue(samples(text, "asynctraced_task_poll_seconds_total"), text)
        for unseen in ("asynctraced_wakes_total", "asynctraced_self_wakes_total",
                       "asynctraced_parks_total", "asynctraced_parked_seconds_total",
                       "asynctraced_wake_to_poll_delay_seconds_bucket",
                       "asynctraced_tasks_spawned_total", "asynctraced_tasks_completed_total",
                       "asynctraced_outside_wakes_total", "asynctraced_steals_total",
                       "asynctraced_stolen_tasks_total", "asynctraced_task_wakes_total",
                       "asynctraced_inject_queue_depth"):
            self.assertEqual(samples(text, unseen), {}, unseen)
            # the family is still described, for a process measured by probes
            self.assertIn(f"# TYPE {unseen.removesuffix('_bucket').removesuffix('_total')}",
                          text)
        ex.communicate(timeout=60)
        tr.communicate(timeout=60)
        self.assertEqual(tr.returncode, 0, harness.read(err))

    def test_prometheus_scrapes_the_executors_own_count(self):
        """Following the host (the session outlives the executor), scraped
        every second by Prometheus: the executor's total polls, as Prometheus
        stored them, are the count the executor printed."""
        port, prom_port = free_port(), free_port()
        config = os.path.join(self.dir, "prometheus.yml")
        with open(config, "w") as f:
            f.write("global:\n  scrape_interval: 1s\n  scrape_timeout: 900ms\n"
                    "scrape_configs:\n  - job_name: asynctraced\n"
                    f"    static_configs:\n      - targets: ['127.0.0.1:{port}']\n")
        prom = self.start(PROMETHEUS, f"--config.file={config}",
                          f"--storage.tsdb.path={self.dir}/tsdb",
                          f"--web.listen-address=127.0.0.1:{prom_port}")
        tr, err = self.tracer(port, "--comm", "^sample-executor$")
        self.assertTrue(harness.wait_for(lambda: "watching" in harness.read(err), 30),
                        harness.read(err))
        ex = harness.start_executor("healthy", 3)
        self.procs.append(ex)
        out, _ = ex.communicate(timeout=60)
        polls = harness.parse_executor(out)["polls"]
        query = (f"http://127.0.0.1:{prom_port}/api/v1/query?query=" +
                 urllib.parse.quote(f'sum(max_over_time(asynctraced_polls_total'
                                    f'{{pid="{ex.pid}"}}[5m]))'))

        def stored():
            try:
                res = json.loads(get(query)[2])["data"]["result"]
            except (OSError, ValueError, KeyError):
                return None
            return int(float(res[0]["value"][1])) if res else None

        self.assertTrue(harness.wait_for(lambda: stored() == polls, 30),
                        f"prometheus has {stored()}, the executor counted {polls}; tracer: "
                        f"{harness.read(err)}; prometheus: {prom.poll()}")
        # the exited process's series go once a scrape has seen them
        self.assertTrue(harness.wait_for(
            lambda: f'pid="{ex.pid}"' not in get(f"http://127.0.0.1:{port}/metrics")[2], 10))
        # Prometheus scraped in OpenMetrics, and every scrape went well
        up = json.loads(get(f"http://127.0.0.1:{prom_port}/api/v1/query?query=up")[2])
        self.assertEqual(up["data"]["result"][0]["value"][1], "1", up)
        tr.send_signal(signal.SIGINT)
        tr.communicate(timeout=60)
        self.assertEqual(tr.returncode, 0, harness.read(err))

    def test_bad_listen_address(self):
        for bad in ("", "x", "70000", "1.2.3.4:", "[::1]9000", "unix:",
                    "unix:/" + "x" * 107):
            r = harness.run_tracer("--metrics", bad, "-p", "1")
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertIn("--metrics", r.stderr)
        # sun_path holds 108 bytes, the last one a NUL
        r = harness.run_tracer("--metrics", "unix:/" + "x" * 107, "-p", "1")
        self.assertIn("at most 107 bytes", r.stderr)

    def test_port_in_use(self):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            s.listen()
            port = s.getsockname()[1]
            ex = harness.start_executor("healthy", 2)
            self.procs.append(ex)
            r = harness.run_tracer("--metrics", port, "-p", ex.pid, "-q")
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn(f"--metrics {port}: cannot listen there", r.stderr)

    def test_serves_past_descriptor_1024(self):
        """A daemon following many processes holds many descriptors, and
        select() cannot wait on one from 1024 up (FD_SETSIZE). Started with
        1100 descriptors inherited (it closes none it did not open), the
        tracer's listening socket and every connection it accepts are
        numbered past 1024: scrapes are still answered, under -p with the
        seccomp filter on."""
        want = 1100
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft < want + 100:
            resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4096), hard))
            self.addCleanup(resource.setrlimit, resource.RLIMIT_NOFILE, (soft, hard))
        held = [os.open("/dev/null", os.O_RDONLY) for _ in range(want)]
        for fd in held:
            self.addCleanup(os.close, fd)
        port = free_port()
        ex = harness.start_executor("healthy", 4)
        self.procs.append(ex)
        tr, err = self.tracer(port, "-p", ex.pid, pass_fds=held)
        self.attached(err)
        fds = os.listdir(f"/proc/{tr.pid}/fd")
        sockets = [int(fd) for fd in fds
                   if os.readlink(f"/proc/{tr.pid}/fd/{fd}").startswith("socket:")]
        self.assertGreater(len(fds), want)
        self.assertTrue(sockets and min(sockets) > 1024, sockets)
        url = f"http://127.0.0.1:{port}/metrics"
        self.assertTrue(harness.wait_for(lambda: "asynctraced_polls_total" in get(url)[2], 10),
                        harness.read(err))
        for _ in range(5):
            self.assertEqual(get(url)[0], 200)
        ex.communicate(timeout=60)
        tr.communicate(timeout=60)
        self.assertEqual(tr.returncode, 0, harness.read(err))
        self.assertNotIn("refused", harness.read(err))

    def test_one_client_cannot_take_every_connection(self):
        """A client that holds PER_CLIENT connections open (each with a
        request it has not finished) gets any more closed unanswered; another
        client's scrape is answered meanwhile, and the first one's requests
        are, once finished."""
        port = free_port()
        ex = harness.start_executor("healthy", 4)
        self.procs.append(ex)
        tr, err = self.tracer(port, "-p", ex.pid)
        self.attached(err)

        def begin(source):
            s = socket.create_connection(("127.0.0.1", port), timeout=5,
                                         source_address=(source, 0))
            self.addCleanup(s.close)
            s.sendall(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\n")
            return s

        def finish(s):
            """The answer's status line; "" when closed unanswered."""
            try:
                s.sendall(b"\r\n")
                answer = b""
                while chunk := s.recv(65536):
                    answer += chunk
            except ConnectionError:
                return ""
            return answer.decode().partition("\r\n")[0]

        # accepted in order: the first PER_CLIENT are held, the next one is over
        hog = [begin("127.0.0.2") for _ in range(PER_CLIENT)]
        self.assertEqual(finish(begin("127.0.0.2")), "")
        self.assertEqual(get(f"http://127.0.0.1:{port}/metrics")[0], 200)
        for s in hog:
            self.assertEqual(finish(s), "HTTP/1.1 200 OK")
        self.assertTrue(harness.wait_for(
            lambda: finish(begin("127.0.0.2")) == "HTTP/1.1 200 OK", 5))
        ex.communicate(timeout=60)
        tr.communicate(timeout=60)
        self.assertEqual(tr.returncode, 0, harness.read(err))
        self.assertNotIn("refused", harness.read(err))
        # said once, however many there were
        self.assertEqual(harness.read(err).count("closed unanswered"), 1, harness.read(err))

    def curl(self, path, *args):
        return subprocess.run([CURL, "-sS", "--fail", "--unix-socket", path, *args,
                               "http://localhost/metrics"], capture_output=True, text=True,
                              timeout=10)

    def test_unix_socket(self):
        """--metrics unix:PATH under -p (the seccomp filter on): the socket
        is made 0660, curl scrapes it in both formats and promtool passes
        what it gets. The filter forbids unlink, so the socket stays after
        the run; the next run finds it stale (nobody answers) and replaces
        it, and following the host (no filter) removes it at the end."""
        self.assertTrue(os.access(CURL, os.X_OK), f"{CURL} missing: scripts/setup.sh installs curl")
        path = os.path.join(self.dir, "metrics.sock")
        ex = harness.start_executor("healthy", 3)
        self.procs.append(ex)
        tr, err = self.tracer(f"unix:{path}", "-p", ex.pid)
        self.attached(err)
        st = os.lstat(path)
        self.assertTrue(stat.S_ISSOCK(st.st_mode))
        self.assertEqual(stat.S_IMODE(st.st_mode), 0o660)
        self.assertTrue(harness.wait_for(
            lambda: "asynctraced_polls_total" in self.curl(path).stdout, 10), harness.read(err))
        text = self.curl(path).stdout
        check = subprocess.run([PROMTOOL, "check", "metrics"], input=text,
                               capture_output=True, text=True)
        self.assertEqual(check.returncode, 0, check.stdout + check.stderr + text)
        om = self.curl(path, "-H", "Accept: application/openmetrics-text; version=1.0.0")
        self.assertTrue(om.stdout.endswith("# EOF\n"), om.stdout + om.stderr)
        ex.communicate(timeout=60)
        tr.communicate(timeout=60)
        self.assertEqual(tr.returncode, 0, harness.read(err))
        self.assertNotIn("refused", harness.read(err))
        self.assertTrue(stat.S_ISSOCK(os.lstat(path).st_mode))
        # stale: replaced; following the host, removed at the end
        tr, err = self.tracer(f"unix:{path}", "--comm", "^no-such-program$")
        self.assertTrue(harness.wait_for(lambda: "watching" in harness.read(err), 30),
                        harness.read(err))
        # answered: a new socket (the stale one has nobody behind it)
        self.assertTrue(harness.wait_for(
            lambda: "asynctraced_targets 0" in self.curl(path).stdout, 10), harness.read(err))
        tr.send_signal(signal.SIGINT)
        tr.communicate(timeout=60)
        self.assertEqual(tr.returncode, 0, harness.read(err))
        self.assertFalse(os.path.lexists(path))

    def test_unix_socket_refuses_what_is_not_stale(self):
        """A socket someone answers on, a file, a directory, a symlink to a
        socket: each refused before anything is attached (exit 1), and left
        as it was; so is a directory that does not exist."""
        ex = harness.start_executor("healthy", 3)
        self.procs.append(ex)
        live = os.path.join(self.dir, "live.sock")
        with socket.socket(socket.AF_UNIX) as s:
            s.bind(live)
            s.listen()
            r = harness.run_tracer("--metrics", f"unix:{live}", "-p", ex.pid, "-q")
            self.assertEqual(r.returncode, 1, r.stderr)
            self.assertIn(f"--metrics unix:{live}: in use", r.stderr)
            self.assertTrue(stat.S_ISSOCK(os.lstat(live).st_mode))
        file = os.path.join(self.dir, "file")
        with open(file, "w") as f:
            f.write("keep me\n")
        link = os.path.join(self.dir, "link.sock")
        os.symlink(live, link)
        for path in (file, self.dir, link):
            r = harness.run_tracer("--metrics", f"unix:{path}", "-p", ex.pid, "-q")
            self.assertEqual(r.returncode, 1, r.stderr)
            self.assertIn(f"--metrics unix:{path}: exists and is not a socket", r.stderr)
        self.assertEqual(harness.read(file), "keep me\n")
        self.assertTrue(os.path.islink(link))
        missing = os.path.join(self.dir, "no-such-dir", "m.sock")
        r = harness.run_tracer("--metrics", f"unix:{missing}", "-p", ex.pid, "-q")
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn(f"--metrics unix:{missing}: cannot bind", r.stderr)
        self.assertIn("No such file or directory", r.stderr)
        self.assertNotIn("tracing pid", r.stderr)
