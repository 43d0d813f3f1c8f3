#!/usr/bin/env python3
"""Bad input through the command line, as a careless or hostile user gives it:
job specs, pool specs and flags that must each be refused with exit code 2
and ONE line on stderr naming what was wrong, before any work starts (no job
submitted, no worker started, no simulation run). Every process started here
is stopped here, by PID. Usage: cli_bad_input_test.py BIN_DIR SOURCE_DIR"""
import http.server
import json
import os
import resource
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unicodedata
import unittest
import urllib.error
import urllib.request

BIN, SRC = sys.argv[1], sys.argv[2]
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from cluster import Cluster  # noqa: E402
from ports import free_port  # noqa: E402
HMPMD = os.path.join(BIN, "hmpmd")
EXAMPLE = os.path.join(SRC, "examples", "multimodal.json")


def run(*args, timeout=60, env=None):
    return subprocess.run([HMPMD, *args], capture_output=True, text=True, timeout=timeout,
                          env=env)


def member(tid, group, op="allreduce", inputs=(), **args):
    return {"id": tid, "kernel": op, "core": "vector", "inputs": list(inputs),
            "args": args, "collective": {"group": group, "op": op}}


# A gang {a, b} whose member b waits for a through x: it could never start.
GANG_WAITS_FOR_ITSELF = {"tasks": [member("a", "g"), {"id": "x", "kernel": "noop",
                                                       "inputs": ["a"]},
                                   member("b", "g", inputs=["x"])]}


class Refusals(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.tmp.cleanup()

    def file(self, name, text):
        path = os.path.join(self.tmp.name, name)
        with open(path, "w" if isinstance(text, str) else "wb") as f:
            f.write(text)
        return path

    def refused(self, args, what, timeout=30):
        r = run(*args, timeout=timeout)
        self.assertEqual(r.returncode, 2, f"{args}: {r.stderr}{r.stdout[:300]}")
        self.assertEqual(r.stderr.count("\n"), 1, f"{args}: one line: {r.stderr}")
        self.assertIn(what, r.stderr, args)
        return r

    def test_bad_job_specs(self):
        two_gangs = {"tasks": [member("a", "g1"), member("c", "g1", inputs=["d"]),
                               member("b", "g2", "allgather", inputs=["a"]),
                               member("d", "g2", "allgather")]}
        cases = [
            ('{"tasks": [{"id": "a", "id": "b", "kernel": "noop"}]}',
             "tasks[0]: field 'id' given twice"),
            ('{"tasks": [{"id": "a\\nb", "kernel": "nope", "core": "x"}]}',
             "tasks[0]: id: contains the control character U+000A"),
            ('{"tasks": [{"id": "\\u001b[2J", "kernel": "noop"}]}', "U+001B"),
            (json.dumps(GANG_WAITS_FOR_ITSELF),
             "tasks[2] 'b': inputs: collective gangs wait for each other: a -> x -> b"),
            (json.dumps(two_gangs), "a -> b (gang 'g2' with d) -> c (gang 'g1' with a)"),
            (json.dumps({"tasks": [{"id": "r", "kernel": "allreduce", "args": {"n": 4}}]}),
             "tasks[0] 'r': collective: required"),
            (json.dumps({"tasks": [member("a", "g", "broadcast", root=5),
                                   member("b", "g", "broadcast", root=5)]}),
             "args.root: 5 is not a rank of group 'g'"),
            # Each member kept its own data and the job succeeded.
            (json.dumps({"tasks": [member("a", "g", "broadcast", root=0),
                                   member("b", "g", "broadcast", root=1)]}),
             "tasks[1] 'b': args.root: 1 differs from 0 of 'a' in group 'g'"),
            (json.dumps({"tasks": [member("a", "g", n=16), member("b", "g", n=99)]}),
             "tasks[1] 'b': args: 99 elements, but 'a' of group 'g' has 16"),
            ("", "job spec: invalid JSON: the text is empty"),
            # Text after a NUL byte was ignored (nlohmann stops there).
            ('{"tasks": [{"id": "a", "kernel": "noop"}]}\0{garbage',
             "job spec: invalid JSON: a NUL byte at line 1, column 43"),
            (json.dumps({"submodels": [{"name": "e", "kind": "encoder", "state_shards": 0}],
                         "tasks": [{"id": "a", "kernel": "noop", "submodel": "e"}]}),
             "submodels[0]: state_shards: must be between 1 and 1000000"),
        ]
        # A member with inputs sends their data (16 floats of a 4x4 gemm),
        # not its n: accepted and simulated before, failed live mid-run.
        gemm_fed = {"tasks": [{"id": "mm", "kernel": "gemm", "args": {"m": 4, "n": 4, "k": 4}},
                              member("a", "g", inputs=["mm"], n=16), member("b", "g", n=8)]}
        cases.append((json.dumps(gemm_fed),
                      "tasks[2] 'b': args: 8 elements, but 'a' of group 'g' has 16 (the data"))
        # A state part no device's memory (64 GiB in the simulated pool) holds.
        cases.append((json.dumps({"submodels": [{"name": "e", "kind": "encoder",
                                                 "state_bytes": 1e12, "state_shards": 4}],
                                  "tasks": [{"id": "a", "kernel": "noop", "submodel": "e"}]}),
                      "submodels[0] 'e': state_bytes: 1000000000000 over 4 state_shards is "
                      "250000000000 bytes per device, more than any live device holds"))
        for i, (text, what) in enumerate(cases):
            spec = self.file(f"spec{i}.json", text)
            self.refused(["sim", spec, "--devices", "8", "--policy", "fifo"], what)
        # Live refuses it the same way, before starting any worker.
        self.refused(["run", self.file("gemm_fed.json", json.dumps(gemm_fed)), "--workers", "2"],
                     "'a' of group 'g' has 16 (the data of its inputs)")
        self.refused(["sim", self.tmp.name, "--devices", "8"], "is a directory, not a file")
        self.refused(["run", self.tmp.name], "is a directory, not a file")

    def test_a_trace_written_to_a_fifo_reaches_its_reader(self):
        # The check before the run opened the FIFO, waiting for a reader
        # (and ending the input of one that was there): it hung.
        spec = self.file("ok.json", '{"tasks": [{"id": "a", "kernel": "noop"}]}')
        fifo = os.path.join(self.tmp.name, "trace.fifo")
        os.mkfifo(fifo)
        got = []
        reader = threading.Thread(target=lambda: got.append(open(fifo, "rb").read()))
        reader.start()
        r = run("run", spec, "--workers", "1", "--trace", fifo, timeout=60)
        reader.join(timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(len(got), 1)
        self.assertIn("traceEvents", json.loads(got[0]))

    def test_bytes_that_are_not_utf8_are_escaped_in_the_error(self):
        # The parser's excerpt of what it read went to the terminal raw.
        path = self.file("latin1.json", b'{"tasks": [{"id": "a\xff", "kernel": "noop"}]}')
        r = subprocess.run([HMPMD, "sim", path, "--devices", "8"], capture_output=True,
                           timeout=30)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertNotIn(b"\xff", r.stderr)
        err = r.stderr.decode("utf-8")  # raises if the bytes are not UTF-8
        self.assertIn("\\xff", err)
        self.assertEqual(err.count("\n"), 1, err)
        # UTF-8 names are shown as they are.
        path = self.file("utf8.json", json.dumps({"tasks": [{"id": "视觉", "kernel": "noop",
                                                             "inputs": ["無"]}]},
                                                 ensure_ascii=False))
        self.refused(["sim", path, "--devices", "8"], "'视觉'")

    def test_bad_pool_specs(self):
        cases = [('{"nodes": 1.5}', "nodes: must be a whole number"),
                 ('{"nodes": 4294967296}', "nodes: must be between 1 and 1000000"),
                 # Cast to uint32 this asked for billions of cores and hung.
                 ('{"cores": {"cube": {"count": 1e10}}}',
                  "cores.cube.count: must be between 0 and 256"),
                 ('{"memory_mb": 1e300}', "memory_mb: must be between 0 and"),
                 ('{"nodes": 2, "nodes": 3}', "field 'nodes' given twice"),
                 ("[", "invalid JSON: parse error at line 1, column 2"),
                 # The name is printed in the table's header: a newline split it.
                 ('{"name": "a\\nb"}', "name: contains the control character U+000A"),
                 (json.dumps({"name": "p" * 5000}), "name: longer than the limit of 4096"),
                 ('{"nodes": 1}\0garbage', "invalid JSON: a NUL byte at line 1, column 13"),
                 ('{"device_labels": {"accel": "910c"}}', "device_labels: must be an array"),
                 ('{"device_labels": [{"devices": [0, 8], "labels": {"accel": "910c"}}]}',
                  "device_labels[0].devices: [0, 8] is not a range of the 8 devices"),
                 ('{"device_labels": [{"devices": [0], "labels": {"accel": "910c"}}]}',
                  "device_labels[0].devices: must be [FIRST, LAST]"),
                 ('{"device_labels": [{"devices": [0, 1], "labels": {"a=b": "c"}}]}',
                  "device_labels[0].labels: key: contains '='"),
                 ('{"device_labels": [{"devices": [0, 3], "labels": {"accel": "910b"}},'
                  ' {"devices": [3, 7], "labels": {"accel": "910c"}}]}',
                  "device_labels[1].labels: accel=910c conflicts with accel=910b")]
        for i, (text, what) in enumerate(cases):
            pool = self.file(f"pool{i}.json", text)
            self.refused(["sim", "pipeline", "--pool", pool, "--policy", "fifo"], what,
                         timeout=20)

    def test_sim_refuses_jobs_beyond_its_task_run_limit_before_building_them(self):
        # A built-in generator grows with --devices (moe: ~92 runs per device):
        # 1,000,000 devices used to build 80M runs and exhaust memory.
        self.refused(["sim", "moe", "--devices", "16384", "--max-runs", "100000"],
                     "moe: on 16384 devices makes about 1534")
        spec = self.file("two.json", '{"repeat": 3, "tasks": [{"id": "a", "kernel": "noop"}]}')
        self.refused(["sim", spec, "--max-runs", "2"],
                     "3 task runs, over the limit of 2 (--max-runs")

    @unittest.skipIf(os.environ.get("HMPMD_SANITIZED"),
                     "a sanitized binary cannot start under a 1 GiB address space")
    def test_sim_out_of_memory_is_one_line_not_an_abort(self):
        # Within --max-runs, but not within the host's memory (here a 1 GiB
        # address space, as `ulimit -v` sets): std::bad_alloc aborted, rc 134.
        def limit_memory():
            resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))

        r = subprocess.run([HMPMD, "sim", "moe", "--devices", "60000", "--max-runs", "100000000",
                            "--policy", "fifo"], capture_output=True, text=True, timeout=120,
                           preexec_fn=limit_memory)
        self.assertEqual(r.returncode, 1, r.stderr[-500:])
        self.assertEqual(r.stderr.count("\n"), 1, r.stderr[-500:])
        self.assertRegex(r.stderr, r"^hmpmd: out of memory simulating .+ on 60000 devices; "
                                   r"lower --max-runs or the pool\n$")

    def test_sim_of_several_workloads_names_the_file_that_is_wrong(self):
        # It named the spec's name ("job" when it has none), not the file.
        ok = self.file("ok.json", '{"tasks": [{"id": "a", "kernel": "noop"}]}')
        gang = self.file("gang.json", json.dumps({"tasks": [member("a", "g"), member("b", "g")]}))
        for args in ([gang], [ok, gang]):
            self.refused(["sim", *args, "--devices", "1", "--policy", "hmpmd"],
                         f"hmpmd: {gang}: tasks[0] 'a': collective.group: group 'g' has 2 members")

    def test_flags_are_checked_before_any_work(self):
        spec = self.file("ok.json", '{"tasks": [{"id": "a", "kernel": "noop"}]}')
        for value in ("nan", "inf", "1e308", "0"):
            self.refused(["run", spec, "--timeout", value], "--timeout: must be a number")
        # Checked once by hmpmd run, not once per worker it starts.
        self.refused(["run", spec, "--cores", "gpu=1"], "--cores: 'gpu' is not a core kind")
        self.refused(["run", spec, "--trace", self.tmp.name], f"--trace: '{self.tmp.name}' is a "
                     "directory")
        self.refused(["run", spec, "--trace", "/nonexistent/t.json"], "--trace: cannot write")
        self.refused(["sim", "moe", "--trace", "/nonexistent/t.json"], "--trace: cannot write")
        # Empty paths, as an unset variable gives: refused, not "not given".
        for args in (["run", spec, "--trace", ""], ["run", spec, "--worker-binary", ""],
                     ["sim", spec, "--trace", ""], ["sim", spec, "--pool", ""],
                     ["submit", spec, "--wait", "--fetch", ""]):
            give = "a directory" if args[-2] == "--fetch" else "a file name"
            self.refused(args, f"{args[-2]}: an empty path; give {give}")
        # CLI::Range alone lets NaN through.
        self.refused(["status", "--request-timeout", "nan"], "--request-timeout: Value nan is not")
        self.refused(["submit", spec, "--wait", "--wait-timeout", "nan"], "--wait-timeout")
        for flag in ("--keep-hours", "--http-cpu-percent"):
            self.refused(["controller", flag, "nan", "--db", ""], f"{flag}: Value nan is not a")
        self.refused(["status", "99999999999999999999999"], "JOB: expected a job id")
        self.refused(["status", ""], "JOB: expected a job id (a number), got ''")
        # An unset variable in a script: not silently the default controller.
        self.refused(["status", "--url", ""], "--url: empty; give the controller's http://HOST:PORT")
        self.refused(["stauts"], "unknown command 'stauts' (run, controller,")
        self.refused(["run"], "job is required")
        self.refused(["keygen", ""], "keygen: DIR is empty")
        # ZeroMQ would take port 99999 as 34463: another program's port.
        self.refused(["controller", "--listen", "tcp://127.0.0.1:99999", "--db", ""],
                     "--listen: 'tcp://127.0.0.1:99999' port '99999' is not a number from 0 to")
        self.refused(["controller", "--listen", "bogus", "--db", ""], "--listen: 'bogus' is not")
        # Checked before --db is opened: a typo leaves no new store behind.
        with tempfile.TemporaryDirectory() as tmp:
            db = os.path.join(tmp, "new.db")
            for http, why in (("127.0.0.1:abc", "port 'abc' is not a number"),
                              ("localhost", "expected HOST:PORT")):
                self.refused(["controller", "--listen", f"tcp://127.0.0.1:{free_port()}",
                              "--http", http, "--db", db], f"--http: http bind '{http}': {why}")
            # Named as the flag given, and before the store too.
            self.refused(["controller", "--heartbeat-ms", "0", "--db", db],
                         "--heartbeat-ms: must be at least 1")
            self.refused(["controller", "--heartbeat-ms", "500", "--worker-timeout-ms", "400",
                          "--db", db], "--worker-timeout-ms: must be larger than --heartbeat-ms "
                         "(500)")
            self.assertEqual(os.listdir(tmp), [])
        self.refused(["submit", "x.json", "--wait-timeout", "abc"],
                     "--wait-timeout: Value abc is not a number")
        # Each job was forgotten as it ended: `submit --wait` never saw it end.
        self.refused(["controller", "--keep-jobs", "0", "--db", ""],
                     "--keep-jobs: Value 0 not in range 1 to")
        r = subprocess.run([os.path.join(BIN, "hmpmd-worker"), "--controller",
                            "tcp://127.0.0.1:99999"], capture_output=True, text=True, timeout=20)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("port '99999' is not a number from 1 to 65535", r.stderr)

    def test_a_trace_never_replaces_an_input_and_never_hides_the_summary(self):
        text = '{"tasks": [{"id": "a", "kernel": "noop"}]}'
        spec = self.file("job.json", text)
        pool = self.file("pool.json", "{}")
        # The spec, under another spelling of its path: refused, kept.
        self.refused(["run", spec, "--trace", os.path.join(self.tmp.name, ".", "job.json")],
                     "is the input file")
        self.refused(["sim", spec, "--trace", spec], "is the input file")
        self.refused(["sim", "moe", "--pool", pool, "--trace", pool], "is the input file")
        with open(spec) as f:
            self.assertEqual(f.read(), text)
        # A trace that cannot be written fails the run after its summary.
        r = run("run", spec, "--workers", "1", "--trace", "/dev/full")
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("job 1 'job': succeeded", r.stdout)
        self.assertIn("/dev/full: write failed", r.stderr)

    def test_run_limits_task_runs_and_its_timeout_covers_the_workers_start(self):
        many = self.file("many.json", json.dumps(
            {"repeat": 100000, "tasks": [{"id": f"t{i}", "kernel": "noop"} for i in range(201)]}))
        self.refused(["run", many], "= 20100000 task runs, over the limit of 20000000")
        self.refused(["run", many, "--max-runs", "0"], "--max-runs: Value 0 not in range")
        self.refused(["controller", "--max-runs", "100000001", "--db", ""],
                     "--max-runs: Value 100000001 not in range 1 to 100000000")
        # A worker that never registers: --timeout 2 ends the run, not a
        # fixed 30 s wait (the exec'd sleep is stopped with its run).
        spec = self.file("job.json", '{"tasks": [{"id": "a", "kernel": "noop"}]}')
        never = self.file("never.sh", "#!/bin/sh\nexec sleep 1000\n")
        os.chmod(never, 0o755)
        r = run("run", spec, "--workers", "1", "--worker-binary", never, "--timeout", "2")
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("workers did not all register within 2000 ms", r.stderr)

    def test_whole_number_flags_say_so(self):
        # CLI::Range alone said "Value abc not in range" for a word.
        for args in (["controller", "--keep-jobs"], ["controller", "--heartbeat-ms"],
                     ["controller", "--recovery-grace-ms"], ["run", "x.json", "--workers"],
                     ["sim", "moe", "--devices"], ["sim", "moe", "--max-runs"]):
            for word in ("abc", "1.5", "2e3"):
                self.refused(args + [word], f"{args[-1]}: Value {word} is not a whole number")
        worker = os.path.join(BIN, "hmpmd-worker")
        for flag in ("--memory-mb", "--prefetch-mb", "--tensor-pool-mb", "--peer-timeout-ms"):
            r = subprocess.run([worker, "--controller", "tcp://127.0.0.1:1", flag, "abc"],
                               capture_output=True, text=True, timeout=20)
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertIn(f"{flag}: Value abc is not a whole number", r.stderr)
        r = subprocess.run([worker, "--controller", "tcp://127.0.0.1:1", "--memory-mb", "-1"],
                           capture_output=True, text=True, timeout=20)
        self.assertIn("--memory-mb: Value -1 not in range 0 to", r.stderr)


class FileLimit(unittest.TestCase):
    def test_a_low_open_file_limit_still_gets_503_not_a_hang(self):
        # Soft = hard = 300 open files: the controller cannot raise it, keeps
        # its HTTP connections under it, and answers 503 past them (new
        # clients hung, unanswered, once accept() ran out of files).
        def limit():
            resource.setrlimit(resource.RLIMIT_NOFILE, (300, 300))
        port = free_port()
        ctl = subprocess.Popen([HMPMD, "controller", "--listen", f"tcp://127.0.0.1:{free_port()}",
                                "--http", f"127.0.0.1:{port}", "--db", ""],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                               preexec_fn=limit)
        held = []
        try:
            url = f"http://127.0.0.1:{port}/api/v1/pool"
            for _ in range(200):
                try:
                    urllib.request.urlopen(url, timeout=5).read()
                    break
                except OSError:
                    time.sleep(0.05)
            # Idle connections, each with half a request head.
            for _ in range(200):
                s = socket.create_connection(("127.0.0.1", port), timeout=5)
                s.sendall(b"GET /api/v1/pool HTTP/1.1\r\n")
                held.append(s)
            with self.assertRaises(urllib.error.HTTPError) as e:
                urllib.request.urlopen(url, timeout=10)
            self.assertEqual(e.exception.code, 503)
            self.assertIn("too many connections", e.exception.read().decode())
        finally:
            for s in held:
                s.close()
            ctl.terminate()
            _, err = ctl.communicate(timeout=20)
        self.assertIn("http: at most 150 connections (the open-file limit", err)


class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def send_json(self, status, body, headers=()):
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def run_against(handler, *args, path=""):
    """Runs `hmpmd ARGS --url URL` against a local HTTP server answering
    with `handler`, stopped before returning."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        return run(*args, "--url", f"http://127.0.0.1:{server.server_port}{path}")
    finally:
        server.shutdown()
        thread.join()
        server.server_close()


def submit_against(handler, *args):
    """`hmpmd submit SPEC ARGS` of a one-`noop` spec, against `handler`."""
    with tempfile.TemporaryDirectory() as tmp:
        spec = os.path.join(tmp, "ok.json")
        with open(spec, "w") as f:
            f.write('{"tasks": [{"id": "a", "kernel": "noop"}]}')
        return run_against(handler, "submit", spec, *args)


class NotAController(unittest.TestCase):
    def test_http_port_0_logs_the_port_it_bound(self):
        # It logged "http://127.0.0.1:0", which nobody can reach.
        ctl = subprocess.Popen([HMPMD, "controller", "--listen", f"tcp://127.0.0.1:{free_port()}",
                                "--http", "127.0.0.1:0", "--db", "", "--log-level", "info"],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            url = None
            deadline = time.monotonic() + 30
            while url is None and time.monotonic() < deadline:
                line = ctl.stdout.readline()
                if not line:
                    break
                if "REST API and dashboard on " in line:
                    url = line.split("REST API and dashboard on ", 1)[1].strip()
            self.assertIsNotNone(url, "no REST API line in the controller's log")
            self.assertFalse(url.endswith(":0"), url)
            with urllib.request.urlopen(url + "/api/v1/pool", timeout=10) as r:
                self.assertEqual(r.status, 200)
        finally:
            ctl.kill()
            ctl.wait()

    def test_an_http_server_that_is_not_a_controller_is_named(self):
        r = run_against(Quiet, "status")
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertEqual(r.stderr.count("\n"), 1, r.stderr)
        self.assertIn("GET /api/v1/jobs: HTTP 404", r.stderr)
        self.assertIn("is it an hmpmd controller?", r.stderr)
        # A POST there gets 501 (no do_POST): the same mistake, the same exit.
        r = submit_against(Quiet)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("POST /api/v1/jobs: HTTP 501", r.stderr)

    def test_a_url_with_a_path_prefix_is_used_once(self):
        # Behind a reverse proxy at /hmpmd; the CLI sent /hmpmd/hmpmd/api/v1/jobs.
        seen = []

        class Prefixed(Quiet):
            def do_GET(self):
                seen.append(self.path)
                if self.path == "/hmpmd/api/v1/jobs":
                    self.send_json(200, {"jobs": []})
                else:
                    self.send_json(404, {"error": "x"})

        r = run_against(Prefixed, "status", "--json", path="/hmpmd")
        self.assertEqual(seen, ["/hmpmd/api/v1/jobs"])
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_submit_wait_on_a_job_the_controller_forgot_exits_1_saying_why(self):
        class Forgetful(Quiet):
            def do_POST(self):
                self.rfile.read(int(self.headers["Content-Length"]))
                self.send_json(201, {"id": 7})

            def do_GET(self):
                self.send_json(404, {"error": "job 7: no such job"})

        r = submit_against(Forgetful, "--wait")
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("hmpmd: job 7: no such job any more: it was forgotten after it ended "
                      "(the controller's --keep-jobs, --keep-hours)", r.stderr)

    def test_submit_wait_stops_when_the_controller_comes_back_on_another_store(self):
        # Restarted on a fresh store, a controller has another job 7: --wait
        # followed it (and --fetch wrote its outputs) as if it were ours.
        class Restarted(Quiet):
            def do_POST(self):
                self.rfile.read(int(self.headers["Content-Length"]))
                self.send_json(201, {"id": 7}, [("Hmpmd-Store", "111")])

            def do_GET(self):
                self.send_json(200, {"id": 7, "name": "theirs", "state": "succeeded",
                                     "tasks": 1, "done": 1}, [("Hmpmd-Store", "222")])

        r = submit_against(Restarted, "--wait")
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertNotIn("theirs", r.stdout)
        self.assertIn("restarted on another job store", r.stderr)

    def test_a_large_submit_waits_longer_for_its_answer(self):
        # The controller parses a spec under its HTTP CPU budget: a 10 MB one
        # outlasted --request-timeout and the CLI said "timed out" for a job
        # that was created and ran. A 1 MiB spec waits 5 s more.
        class SlowParse(Quiet):
            def do_POST(self):
                self.rfile.read(int(self.headers["Content-Length"]))
                time.sleep(2.5)
                self.send_json(201, {"id": 9})

        with tempfile.TemporaryDirectory() as tmp:
            spec = os.path.join(tmp, "big.json")
            with open(spec, "w") as f:
                f.write('{"tasks": [{"id": "a", "kernel": "noop"}]}' + " " * (1 << 20))
            r = run_against(SlowParse, "submit", spec, "--request-timeout", "1")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("submitted job 9", r.stdout)

    def test_answers_of_another_shape_are_one_line_not_an_abort(self):
        # A 201 without an id printed "submitted job 0" and exited 0; a job
        # listing whose "jobs" was a number aborted on nlohmann's type_error.
        class NoId(Quiet):
            def do_POST(self):
                self.rfile.read(int(self.headers["Content-Length"]))
                self.send_json(201, {"ok": True})

        r = submit_against(NoId)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertNotIn("submitted job", r.stdout)
        self.assertIn("the answer has no job id", r.stderr)

        for body in ({"jobs": 5}, {"jobs": [{"id": "x"}]}, [1, 2]):
            class Odd(Quiet):
                def do_GET(self, body=body):
                    self.send_json(200, body)

            r = run_against(Odd, "status")
            self.assertEqual(r.returncode, 1, (body, r.stderr))
            self.assertEqual(r.stderr.count("\n"), 1, r.stderr)
            self.assertIn("hmpmd: the controller's answer is not what hmpmd expects", r.stderr)

    def test_job_ids_past_2_to_the_31_print_as_they_are(self):
        class Big(Quiet):
            def do_GET(self):
                self.send_json(200, {"jobs": [{"id": 3000000000, "name": "big", "state": "running",
                                               "done": 2**33, "tasks": 2**34}]})

        r = run_against(Big, "status")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("3000000000", r.stdout)
        self.assertIn(f"{2**33}/{2**34}", r.stdout)

    def test_status_columns_line_up_with_wide_and_accented_names(self):
        jobs = [{"id": 1, "name": "视觉编码器", "state": "running", "done": 1, "tasks": 2},
                {"id": 2, "name": "café-ü", "state": "succeeded", "done": 2, "tasks": 2},
                {"id": 3, "name": "plain", "state": "failed", "done": 0, "tasks": 2}]

        class Listing(Quiet):
            def do_GET(self):
                self.send_json(200, {"jobs": jobs})

        r = run_against(Listing, "status")
        self.assertEqual(r.returncode, 0, r.stderr)

        def columns(text):  # terminal columns: East Asian wide characters take two
            return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)

        lines = r.stdout.splitlines()
        self.assertEqual(len(lines), 4, r.stdout)
        state_at = [columns(line[:line.index(word)]) for line, word in
                    zip(lines, ["STATE", "running", "succeeded", "failed"])]
        self.assertEqual(state_at, [state_at[0]] * 4, r.stdout)
        self.assertIn("视觉编码器", lines[1])


class AgainstAController(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.cluster = Cluster(BIN, workers=2, start_timeout_s=60)
        cls.cluster.__enter__()
        cls.env = dict(os.environ, HMPMD_URL=cls.cluster.url)

    @classmethod
    def tearDownClass(cls):
        cls.cluster.stop()
        cls.tmp.cleanup()

    def jobs(self):
        return len(self.cluster.get("/api/v1/jobs")["jobs"])

    def test_a_job_id_with_leading_zeros_names_the_same_job(self):
        # The REST API has one path per job (/api/v1/jobs/7, not /007); the
        # CLI spells the id as the API does.
        spec = os.path.join(self.tmp.name, "one.json")
        with open(spec, "w") as f:
            json.dump({"tasks": [{"id": "a", "kernel": "noop"}]}, f)
        r = run("submit", spec, "--wait", "--json", "--wait-timeout", "20", env=self.env)
        self.assertEqual(r.returncode, 0, r.stderr)
        job = json.loads(r.stdout)["id"]
        r = run("status", "000" + str(job), "--json", env=self.env)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(json.loads(r.stdout)["id"], job)
        # One rule (docs/cli.md): a request the job's state refuses and an
        # unknown job are both a wrong request, exit 2.
        r = run("cancel", "0" + str(job), env=self.env)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("job %d: already succeeded" % job, r.stderr)
        r = run("status", "0", env=self.env)
        self.assertIn("job 0: no such job", r.stderr)
        self.assertEqual(r.returncode, 2, r.stderr)
        r = run("forget", "0", env=self.env)
        self.assertEqual(r.returncode, 2, r.stderr)

    def test_gang_that_waits_for_itself_is_refused_at_submission(self):
        # It used to be accepted and then wait forever.
        spec = os.path.join(self.tmp.name, "gang.json")
        with open(spec, "w") as f:
            json.dump(GANG_WAITS_FOR_ITSELF, f)
        before = self.jobs()
        r = run("submit", spec, "--wait", "--wait-timeout", "20", env=self.env)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertEqual(r.stderr.count("\n"), 1, r.stderr)
        self.assertIn("collective gangs wait for each other", r.stderr)
        self.assertEqual(self.jobs(), before)

    def test_a_path_that_is_not_utf8_gets_an_answer_not_an_abort(self):
        # The 404 echoes the path into JSON; a 0xFF byte there aborted the controller.
        port = int(self.cluster.url.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            s.sendall(b"GET /api/v1/jobs/\xff\xfe HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            answer = b""
            while chunk := s.recv(4096):
                answer += chunk
        self.assertIn(b" 404 ", answer.split(b"\r\n")[0])
        self.assertIn("no route /api/v1/jobs/\ufffd", json.loads(answer.split(b"\r\n\r\n", 1)[1])["error"])
        self.assertIn("jobs", self.cluster.get("/api/v1/jobs"))  # still serving

    def test_gemm_without_its_sizes_is_refused_at_submission(self):
        # It used to be accepted and fail on the worker ("argument 'k' is required").
        spec = os.path.join(self.tmp.name, "gemm.json")
        with open(spec, "w") as f:
            json.dump({"tasks": [{"id": "mm", "kernel": "gemm", "args": {"m": 4, "n": 4},
                                  "cost": {"flops": 128}}]}, f)
        before = self.jobs()
        r = run("submit", spec, "--wait", "--wait-timeout", "20", env=self.env)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertEqual(r.stderr.count("\n"), 1, r.stderr)
        self.assertIn("tasks[0] 'mm': args.k: required", r.stderr)
        self.assertEqual(self.jobs(), before)
        # The simulator times it by cost.flops.
        r = run("sim", spec, "--devices", "2", "--policy", "fifo")
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_bad_fetch_directory_is_refused_before_submitting(self):
        a_file = os.path.join(self.tmp.name, "a_file")
        with open(a_file, "w") as f:
            f.write("x")
        full = os.path.join(self.tmp.name, "full")
        os.makedirs(full)
        with open(os.path.join(full, "manifest.json"), "w") as f:
            f.write("keep me")
        before = self.jobs()
        for target, what in ((a_file, "--fetch: cannot create"),
                             (full, f"--fetch: '{full}' is not empty")):
            r = run("submit", EXAMPLE, "--wait", "--fetch", target, env=self.env)
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertEqual(r.stderr.count("\n"), 1, r.stderr)
            self.assertIn(what, r.stderr)
        self.assertEqual(self.jobs(), before, "no job may be submitted")
        with open(os.path.join(full, "manifest.json")) as f:
            self.assertEqual(f.read(), "keep me")

    def test_fetch_names_files_of_any_task_id(self):
        # A '/' in a task id failed the whole fetch after the job had run.
        spec = os.path.join(self.tmp.name, "slash.json")
        with open(spec, "w") as f:
            json.dump({"tasks": [{"id": "layer/0", "kernel": "add", "args": {"n": 4}},
                                 {"id": "..", "kernel": "add", "args": {"n": 4}}]}, f)
        out = os.path.join(self.tmp.name, "slash-out")
        r = run("submit", spec, "--wait", "--fetch", out, env=self.env)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(os.path.join(out, "manifest.json")) as f:
            files = sorted((e["task"], e["file"]) for e in json.load(f))
        self.assertEqual(files, [("..", "%2E..0.bin"), ("layer/0", "layer%2F0.0.bin")])
        self.assertEqual(sorted(os.listdir(out)), ["%2E..0.bin", "layer%2F0.0.bin",
                                                   "manifest.json"])
        for _, name in files:
            self.assertEqual(os.path.getsize(os.path.join(out, name)), 16)

    def test_fetch_names_files_of_task_ids_longer_than_a_file_name(self):
        # Ids may be 4096 bytes; a file name at most 255. The fetch used to
        # fail after the job had run ("--fetch: cannot write '.../xxxx...").
        ids = ["x" * 4096, "x" * 4095 + "y", "字" * 1000, "%" * 1365, "a" * 245]
        spec = os.path.join(self.tmp.name, "long-ids.json")
        with open(spec, "w") as f:
            json.dump({"tasks": [{"id": i, "kernel": "add", "args": {"n": 4}} for i in ids]}, f)
        out = os.path.join(self.tmp.name, "long-out")
        r = run("submit", spec, "--wait", "--fetch", out, env=self.env)
        self.assertEqual(r.returncode, 0, r.stderr[:500])
        with open(os.path.join(out, "manifest.json")) as f:
            files = {e["task"]: e["file"] for e in json.load(f)}
        self.assertEqual(sorted(files), sorted(ids))
        self.assertEqual(len(set(files.values())), len(ids), "distinct names")
        self.assertEqual(files["a" * 245], "a" * 245 + ".0.bin", "short enough: kept whole")
        for task, name in files.items():
            self.assertLessEqual(len(name.encode("utf-8")), 255, name)  # whole UTF-8 characters
            self.assertTrue(name.endswith(".0.bin"), name)
            self.assertEqual(os.path.getsize(os.path.join(out, name)), 16)
        self.assertRegex(files["x" * 4096], r"^x+~[0-9a-f]{16}\.0\.bin$")
        self.assertRegex(files["%" * 1365], r"^(%25)+~[0-9a-f]{16}\.0\.bin$")


class SpecSizeLimit(unittest.TestCase):
    """`hmpmd controller --max-spec-mb N` bounds the request body too: the
    HTTP parser had its own 16 MiB limit, so a spec between 16 MiB and the
    flag's value was refused, and one over the flag was buffered whole."""

    @classmethod
    def setUpClass(cls):
        http = f"127.0.0.1:{free_port()}"
        cls.url = "http://" + http
        cls.controller = subprocess.Popen(
            [HMPMD, "controller", "--listen", f"tcp://127.0.0.1:{free_port()}", "--http", http,
             "--db", "", "--log-level", "warn", "--max-spec-mb", "20",
             # Tens of MiB through an HTTP thread capped at 10% of a core
             # took over a minute under ASan on a busy 2-core machine; the
             # cap is not what these tests are about.
             "--http-cpu-percent", "0"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        cls.tmp = tempfile.TemporaryDirectory()
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(cls.url + "/api/v1/pool", timeout=2).read()
                return
            except OSError:
                if time.monotonic() > deadline or cls.controller.poll() is not None:
                    cls.tearDownClass()
                    raise
                time.sleep(0.05)

    @classmethod
    def tearDownClass(cls):
        cls.controller.kill()
        cls.controller.wait()
        cls.tmp.cleanup()

    def post(self, body):
        req = urllib.request.Request(self.url + "/api/v1/jobs", data=body, method="POST",
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=60) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())

    def test_a_spec_under_the_flag_is_judged_by_its_content(self):
        # 17 MiB of JSON: over the old 16 MiB, under --max-spec-mb 20.
        status, answer = self.post(b'{"tasks": []' + b" " * (17 << 20) + b"}")
        self.assertEqual(status, 400, answer)
        self.assertNotIn("exceeds", answer["error"])

    def test_a_spec_over_the_flag_gets_413_naming_the_limit(self):
        spec = os.path.join(self.tmp.name, "big.json")
        with open(spec, "wb") as f:
            f.write(b'{"tasks": []' + b" " * (21 << 20) + b"}")
        r = run("submit", spec, "--url", self.url)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertEqual(r.stderr, f"hmpmd: {spec}: request body exceeds the limit of 20 MiB "
                                   "(20971520 bytes; set by --max-spec-mb)\n")
        # The controller is still serving, and took nothing.
        with urllib.request.urlopen(self.url + "/api/v1/jobs", timeout=30) as r:
            self.assertEqual(json.loads(r.read())["jobs"], [])


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v"])
