#!/usr/bin/env python3
"""The live path (`hmpmd run`, and `hmpmd controller` + `hmpmd worker`) on
inputs and faults nobody tuned for: workers killed by PID mid-job, gangs that
the workers left cannot run. Every process started here is stopped here, by
PID. Usage: cli_live_probe_test.py BIN_DIR"""
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import unittest

BIN = sys.argv[1]
HMPMD = os.path.join(BIN, "hmpmd")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from cluster import Cluster  # noqa: E402
from procs import children  # noqa: E402


def gang_spec(steps, spin_us):
    """A spin then an allreduce gang of two, `steps` times."""
    member = {"kernel": "allreduce", "core": "vector", "args": {"n": 4}, "inputs": ["q"],
              "collective": {"group": "g", "op": "allreduce", "bytes": 16}}
    return {"name": "gang", "repeat": steps,
            "tasks": [{"id": "q", "kernel": "spin", "args": {"us": spin_us}},
                      dict(member, id="m0"), dict(member, id="m1")]}


class RunWithAWorkerKilled(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.tmp.cleanup()

    def run_and_kill_one_worker(self, spec, workers, wait_s=120):
        """Starts `hmpmd run`, kills one of its workers by SIGKILL once the
        job runs, and returns (exit code, stdout, stderr, seconds after the kill)."""
        path = os.path.join(self.tmp.name, "spec.json")
        with open(path, "w") as f:
            json.dump(spec, f)
        with open(os.path.join(self.tmp.name, "out"), "w+") as out, \
                open(os.path.join(self.tmp.name, "err"), "w+") as err:
            return self.kill_one_worker(path, workers, wait_s, out, err)

    def kill_one_worker(self, path, workers, wait_s, out, err):
        p = subprocess.Popen([HMPMD, "run", path, "--workers", str(workers), "--json",
                              "--timeout", "600"], stdout=out, stderr=err)
        kids = []
        try:
            deadline = time.monotonic() + 60
            while len(kids) < workers and time.monotonic() < deadline:
                time.sleep(0.05)
                kids = children(p.pid)
            self.assertEqual(len(kids), workers)
            time.sleep(1.5)  # registered and running the first steps
            self.assertIsNone(p.poll(), "the job ended before a worker was killed")
            os.kill(kids[-1], signal.SIGKILL)
            killed_at = time.monotonic()
            code = p.wait(timeout=wait_s)
            took = time.monotonic() - killed_at
        finally:
            if p.poll() is None:  # its workers are still its children
                for k in children(p.pid):
                    os.kill(k, signal.SIGKILL)
                p.kill()
                p.wait()
        out.seek(0)
        err.seek(0)
        return code, out.read(), err.read(), took

    def test_a_gang_the_workers_left_cannot_run_fails_at_once_naming_why(self):
        # Two workers, a gang of two: with one killed the job can never go
        # on. It used to wait for a worker until --timeout (600 s here).
        code, out, err, took = self.run_and_kill_one_worker(gang_spec(1000, 100000), 2)
        self.assertEqual(code, 1, err)
        self.assertLess(took, 60, err)
        last = err.strip().splitlines()[-1]
        self.assertRegex(last, r"^hmpmd: worker pid \d+ was killed by signal 9; "
                               r"the workers left cannot run the job: ")
        self.assertIn("group 'g' has 2 members, which need distinct devices", last)
        self.assertEqual(out, "")

    def test_a_job_the_workers_left_can_run_still_succeeds(self):
        code, out, err, _ = self.run_and_kill_one_worker(gang_spec(30, 100000), 3)
        self.assertEqual(code, 0, err)
        summary = json.loads(out)
        self.assertEqual((summary["state"], summary["tasks"]), ("succeeded", 90))

    def test_a_killed_worker_is_declared_dead_when_its_process_exits(self):
        # One 5 s sleep per worker: nothing more is sent to the killed one,
        # so only its heartbeats (5 s late) told the controller before;
        # `hmpmd run` sees its child exit and says so at once.
        spec = {"tasks": [{"id": t, "kernel": "sleep", "args": {"us": 5_000_000}}
                          for t in ("a", "b")]}
        code, out, err, _ = self.run_and_kill_one_worker(spec, 2)
        self.assertEqual(code, 0, err)
        self.assertEqual(json.loads(out)["state"], "succeeded")
        self.assertRegex(err, r"worker \d+ 'local-\d' \(pid \d+\) declared dead: "
                              r"worker pid \d+ was killed by signal 9")
        self.assertNotIn("missed heartbeats", err)

    def test_a_pinned_set_that_lost_a_device_runs_short_to_the_end(self):
        # An actor set pinned to both devices loses one: it runs on the one
        # left (short), which is not waiting for workers.
        spec = {"elastic": False, "repeat": 40,
                "submodels": [{"name": "a", "kind": "actor", "devices": 2}],
                "tasks": [{"id": t, "submodel": "a", "kernel": "spin", "args": {"us": 50000}}
                          for t in ("x", "y")]}
        code, out, err, _ = self.run_and_kill_one_worker(spec, 2)
        self.assertEqual(code, 0, err)
        summary = json.loads(out)
        self.assertEqual((summary["state"], summary["tasks"]), ("succeeded", 80))
        self.assertNotIn("waiting", summary)


class SubmitWaitForWorkers(unittest.TestCase):
    def start_waiting(self, tmp, cluster, err):
        """Submits a one-task job to `cluster` (no workers) with `submit --wait`,
        stderr to `err`, and returns the client once it said why it waits."""
        spec = os.path.join(tmp, "job.json")
        with open(spec, "w") as f:
            json.dump({"tasks": [{"id": "a", "kernel": "spin", "args": {"us": 1000}}]}, f)
        client = subprocess.Popen([HMPMD, "submit", spec, "--wait", "--url", cluster.url,
                                   "--wait-timeout", "120"],
                                  stdout=subprocess.PIPE, stderr=err, text=True)
        cluster.procs.append(client)  # stopped by PID with the cluster
        deadline = time.monotonic() + 60
        text = ""
        while "waits for workers" not in text and time.monotonic() < deadline:
            time.sleep(0.1)
            err.seek(0)
            text = err.read()
        self.assertEqual(text, WAITING)
        return client

    def test_submit_wait_says_once_why_its_job_waits_and_when_it_goes_on(self):
        # A controller with no worker yet accepts the job; `submit --wait`
        # used to say nothing at all until a worker came.
        with tempfile.TemporaryDirectory() as tmp, Cluster(BIN, workers=0) as cluster:
            with open(os.path.join(tmp, "err"), "w+") as err:
                client = self.start_waiting(tmp, cluster, err)
                cluster.procs.append(subprocess.Popen(
                    [HMPMD, "worker", "--controller", cluster.endpoint, "--cores",
                     "cube=1,vector=1", "--log-level", "warn"],
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
                stdout, _ = client.communicate(timeout=120)
                self.assertEqual(client.returncode, 0, stdout)
                self.assertIn("succeeded", stdout)
                err.seek(0)
                self.assertEqual(err.read(), WAITING + "hmpmd: job 1 no longer waits for workers\n")

    def test_a_waiting_job_cancelled_is_not_said_to_go_on(self):
        with tempfile.TemporaryDirectory() as tmp, Cluster(BIN, workers=0) as cluster:
            with open(os.path.join(tmp, "err"), "w+") as err:
                client = self.start_waiting(tmp, cluster, err)
                cancel = subprocess.run([HMPMD, "cancel", "1", "--url", cluster.url],
                                        capture_output=True, text=True, timeout=30)
                self.assertEqual(cancel.returncode, 0, cancel.stderr)
                stdout, _ = client.communicate(timeout=60)
                self.assertIn("cancelled", stdout)
                err.seek(0)
                self.assertEqual(err.read(), WAITING)


WAITING = ("hmpmd: submitted job 1; waiting for it to end\n"
           "hmpmd: job 1 waits for workers: no live worker\n")

if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
