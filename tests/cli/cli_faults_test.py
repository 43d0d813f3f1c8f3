#!/usr/bin/env python3
"""Faults around the command line's clients, as a user meets them: the
controller killed (SIGKILL) and restarted with the same --db while
`hmpmd submit --wait --fetch` waits, or killed for good while
`hmpmd submit --wait` waits. Every process started here is stopped
here, by PID. Usage: cli_faults_test.py BIN_DIR"""
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.request

BIN = sys.argv[1]
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from ports import free_port  # noqa: E402
HMPMD = os.path.join(BIN, "hmpmd")


class ControllerRestart(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.procs = []
        self.zmq = f"tcp://127.0.0.1:{free_port()}"
        self.http = f"127.0.0.1:{free_port()}"
        self.url = "http://" + self.http
        self.db = os.path.join(self.tmp.name, "jobs.db")
        self.controller = None

    def tearDown(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
            p.wait()
        self.tmp.cleanup()

    def spawn(self, args, log):
        with open(os.path.join(self.tmp.name, log), "ab") as out:
            p = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT)
        self.procs.append(p)
        return p

    def start_controller(self, *extra):
        self.controller = self.spawn(
            [HMPMD, "controller", "--listen", self.zmq, "--http", self.http, "--db", self.db,
             "--heartbeat-ms", "100", "--recovery-grace-ms", "2000", *extra], "controller.log")
        deadline = time.monotonic() + 60  # bounded but generous (ctest -j2 on 2 cores)
        while time.monotonic() < deadline:
            self.assertIsNone(self.controller.poll(), "the controller exited")
            try:
                urllib.request.urlopen(self.url + "/api/v1/pool", timeout=2).read()
                return
            except OSError:
                time.sleep(0.05)
        self.fail("the controller never answered")

    def job_state(self, job_id):
        with urllib.request.urlopen(f"{self.url}/api/v1/jobs/{job_id}", timeout=30) as r:
            return json.loads(r.read())

    def start_worker(self, cores="cube=1,vector=1", *extra):
        return self.spawn([os.path.join(BIN, "hmpmd-worker"), "--controller", self.zmq,
                           "--cores", cores, *extra], "worker.log")

    def submit_wait(self, spec, *args):
        """Starts `hmpmd submit --wait` and returns once it has said on stderr
        that the controller accepted the job: a controller killed before its
        answer reached the client would fail the submission itself."""
        client = subprocess.Popen([HMPMD, "submit", spec, "--wait", "--url", self.url, *args],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.procs.append(client)
        # Byte by byte from the descriptor: communicate() reads the rest from
        # there too, so nothing may sit in a Python buffer.
        line = b""
        deadline = time.monotonic() + 60
        while not line.endswith(b"\n") and time.monotonic() < deadline:
            ready, _, _ = select.select([client.stderr], [], [], 1)
            if ready:
                byte = os.read(client.stderr.fileno(), 1)
                if not byte:
                    break
                line += byte
        self.assertEqual(line.decode(), "hmpmd: submitted job 1; waiting for it to end\n")
        return client

    def kill_controller_once_running(self, job_id):
        # By progress, not by a timer.
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if self.job_state(job_id).get("state") == "running":
                    break
            except OSError:
                pass
            time.sleep(0.01)
        self.controller.send_signal(signal.SIGKILL)
        self.controller.wait()

    def assert_outage_then(self, stderr, last):
        # One line when the controller goes away, however many polls fail
        # (it used to say nothing), then one matching `last`.
        lines = stderr.splitlines()
        self.assertEqual(len(lines), 2, stderr)
        self.assertTrue(lines[0].startswith(f"hmpmd: controller unreachable at {self.url}: "),
                        lines[0])
        self.assertTrue(lines[0].endswith("; retrying"), lines[0])
        self.assertRegex(lines[1], last)

    def test_submit_wait_survives_a_controller_restart(self):
        self.start_controller()
        self.start_worker()
        spec = os.path.join(self.tmp.name, "chain.json")
        tasks = [{"id": "a", "kernel": "scale", "args": {"n": 1024, "factor": 2.0}}]
        for i in range(8):
            tasks.append({"id": f"s{i}", "kernel": "sleep", "args": {"us": 100000},
                          "inputs": [tasks[-1]["id"]]})
        tasks.append({"id": "out", "kernel": "scale", "inputs": ["a", tasks[-1]["id"]],
                      "args": {"factor": 3.0}})
        with open(spec, "w") as f:
            json.dump({"name": "chain", "tasks": tasks}, f)
        out = os.path.join(self.tmp.name, "out")
        client = self.submit_wait(spec, "--json", "--fetch", out, "--wait-timeout", "120")
        self.kill_controller_once_running(1)
        # Down for five of the client's 100 ms polls, so it meets the outage.
        time.sleep(0.5)
        self.start_controller()
        stdout, stderr = client.communicate(timeout=150)
        # Before: "hmpmd: cannot reach ...: Connection refused" and exit 1.
        self.assertEqual(client.returncode, 0, stderr)
        self.assert_outage_then(stderr, rf"^hmpmd: controller back at {self.url} after \d+ s; "
                                        r"still waiting for job 1$")
        self.assertEqual(json.loads(stdout)["state"], "succeeded")
        with open(os.path.join(out, "manifest.json")) as f:
            self.assertIn("out", json.dumps(json.load(f)))

    def test_submit_wait_gives_up_on_a_controller_gone_for_good_after_wait_timeout(self):
        self.start_controller()
        self.start_worker()
        spec = os.path.join(self.tmp.name, "long.json")
        with open(spec, "w") as f:
            json.dump({"name": "long", "tasks": [{"id": "s", "kernel": "sleep",
                                                  "args": {"us": 60000000}}]}, f)
        client = self.submit_wait(spec, "--wait-timeout", "15")
        self.kill_controller_once_running(1)
        started = time.monotonic()
        stdout, stderr = client.communicate(timeout=60)
        self.assertLess(time.monotonic() - started, 30, "bounded by --wait-timeout")
        self.assertEqual(client.returncode, 1, stderr)
        self.assert_outage_then(stderr, rf"^hmpmd: job 1: controller unreachable at {self.url}: "
                                        r".*, for \d+ s; gave up after --wait-timeout$")

    def wait_alive_devices(self, n):
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            pool = json.loads(urllib.request.urlopen(f"{self.url}/api/v1/pool", timeout=30).read())
            if pool.get("alive_devices") == n:
                return
            time.sleep(0.05)
        self.fail(f"the pool never had {n} live devices")

    def start_cubes_and_vectors(self):
        """A controller with a cube-only worker named 'cubes' (returned) and
        a vector-only one, both joined."""
        self.start_controller("--worker-timeout-ms", "500")
        cube = self.start_worker("cube=1", "--name", "cubes")
        self.start_worker("vector=1")
        self.wait_alive_devices(2)
        return cube

    def test_a_final_output_lost_before_its_job_ends_is_rebuilt(self):
        # x's final output lives on the cube-only worker, killed while the
        # vector worker's sleep keeps the job running: x runs again on the
        # next cube worker, and --fetch gets its output from there.
        cube = self.start_cubes_and_vectors()
        spec = os.path.join(self.tmp.name, "rebuilt.json")
        with open(spec, "w") as f:
            json.dump({"name": "rebuilt", "tasks": [
                {"id": "x", "kernel": "scale", "args": {"n": 1024}},
                {"id": "s", "kernel": "sleep", "core": "vector", "args": {"us": 3000000}}]}, f)
        out = os.path.join(self.tmp.name, "out")
        client = self.submit_wait(spec, "--fetch", out, "--wait-timeout", "120")
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            tasks = json.loads(urllib.request.urlopen(
                f"{self.url}/api/v1/jobs/1/tasks", timeout=30).read())["tasks"]
            if tasks[0]["state"] == "done":
                break
            time.sleep(0.02)
        cube.kill()
        cube.wait()
        self.start_worker("cube=1", "--name", "cubes2")
        stdout, stderr = client.communicate(timeout=120)
        self.assertEqual(client.returncode, 0, stderr)
        with open(os.path.join(out, "manifest.json")) as f:
            self.assertEqual({o["task"] for o in json.load(f)}, {"x"})
        outputs = json.loads(urllib.request.urlopen(f"{self.url}/api/v1/jobs/1/outputs",
                                                    timeout=30).read())
        self.assertEqual([o["task"] for o in outputs["outputs"]], ["x"])
        self.assertEqual(outputs["lost"], [])

    def test_fetch_of_outputs_lost_with_their_worker_fails_naming_them(self):
        # x's final output lives on the cube-only worker, killed after the
        # job ended: nothing can rebuild it now. /outputs once pointed at the
        # dead worker's socket, and the fetch waited out its time-out.
        cube = self.start_cubes_and_vectors()
        spec = os.path.join(self.tmp.name, "lost.json")
        with open(spec, "w") as f:
            json.dump({"name": "lost", "tasks": [
                {"id": "x", "kernel": "scale", "args": {"n": 1024}}]}, f)
        client = self.submit_wait(spec, "--wait-timeout", "120")
        stdout, stderr = client.communicate(timeout=120)
        self.assertEqual(client.returncode, 0, stderr)
        cube.kill()
        cube.wait()
        self.wait_alive_devices(1)
        out = os.path.join(self.tmp.name, "out")
        fetch = subprocess.run([HMPMD, "fetch", "1", out, "--url", self.url],
                               capture_output=True, text=True, timeout=120)
        self.assertEqual(fetch.returncode, 1, fetch.stderr)
        self.assertEqual(fetch.stderr.splitlines()[-1],
                         "hmpmd: --fetch: task 'x': its final outputs were lost with worker "
                         "'cubes'", fetch.stderr)
        self.assertFalse(os.path.exists(os.path.join(out, "manifest.json")))
        outputs = json.loads(urllib.request.urlopen(f"{self.url}/api/v1/jobs/1/outputs",
                                                    timeout=30).read())
        self.assertEqual(outputs["outputs"], [])
        self.assertEqual([o["task"] for o in outputs["lost"]], ["x"])
        self.assertEqual(outputs["lost"][0]["bytes"], 4096)
        # A job that did not succeed has no outputs to fetch: exit 2.
        bad = subprocess.run([HMPMD, "fetch", "7", out, "--url", self.url],
                             capture_output=True, text=True, timeout=60)
        self.assertEqual(bad.returncode, 2, bad.stderr)

if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
