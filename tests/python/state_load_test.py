"""A submitted job's stateful sub-model follows its tasks across Python
workers (docs/scheduling.md#live-state): a worker that runs a task of it
without its state loads the state from the worker that ran it last, through
the data plane, before the kernel runs; the job reports the load, and its
trace shows it. A state no pickle can copy fails the task saying so.
Two Python workers (w0 with label site=a, w1 with site=b) and a
controller, started here and stopped here by PID, on loopback.

    state_load_test.py BIN_DIR MODULE_DIR
"""
import json
import os
import subprocess
import sys
import tempfile
import time
import unittest

BIN, MODULE_DIR = sys.argv[1], sys.argv[2]
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [MODULE_DIR, HERE]

import numpy as np  # noqa: E402

from hmpmd.local import LocalCluster  # noqa: E402

TIMEOUT_S = 60


class StateLoadTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.log_file = tempfile.NamedTemporaryFile(prefix="hmpmd_state_", suffix=".log",
                                                   delete=False)
        cls.cluster = LocalCluster(BIN, workers=2, cores="cube=1", python_kernels=["py_kernels"],
                              python_path=[HERE], labels=[{"site": "a"}, {"site": "b"}],
                              log_level="info", worker_stderr=cls.log_file)
        cls.cluster.start()

    @classmethod
    def tearDownClass(cls):
        cls.cluster.stop()  # every process, by PID
        cls.log_file.close()
        os.unlink(cls.log_file.name)

    @classmethod
    def log(cls):
        with open(cls.log_file.name, errors="replace") as f:
            return f.read()

    def submit(self, spec, tmp):
        """Runs `spec` to its end with `hmpmd submit --wait --fetch`: the
        process's result, and the job's JSON."""
        path = os.path.join(tmp, "job.json")
        with open(path, "w") as f:
            json.dump(spec, f)
        r = subprocess.run([os.path.join(BIN, "hmpmd"), "submit", path, "--wait", "--fetch",
                            os.path.join(tmp, "out"), "--url", self.cluster.url],
                           capture_output=True, text=True, timeout=TIMEOUT_S)
        jobs = self.cluster.get("/api/v1/jobs")["jobs"]
        job = max((j for j in jobs if j["name"] == spec["name"]), key=lambda j: j["id"])
        return r, self.cluster.get(f"/api/v1/jobs/{job['id']}")

    @staticmethod
    def counter_job(name, kernel, sites):
        """A chain of `kernel` tasks of one stateful sub-model, task i on the
        worker labelled sites[i]."""
        tasks = []
        for i, site in enumerate(sites):
            t = {"id": f"c{i}", "kernel": kernel, "submodel": "counter", "requires": {"site": site}}
            if i > 0:
                t["inputs"] = [f"c{i - 1}"]
            tasks.append(t)
        return {"name": name, "submodels": [{"name": "counter", "kind": "generic",
                                             "state_bytes": 1 << 20}], "tasks": tasks}

    def test_a_task_on_a_worker_without_the_state_loads_it_from_its_holder(self):
        with tempfile.TemporaryDirectory() as tmp:
            r, job = self.submit(self.counter_job("follow", "py.count", ["a", "b", "b"]), tmp)
            self.assertEqual(r.returncode, 0, r.stderr + r.stdout + self.log())
            # py.count adds one to ctx.state["n"]: b's first task saw a's 1.
            got = [int(np.fromfile(os.path.join(tmp, "out", f"c{i}.0.bin"), dtype=np.int64)[0])
                   for i in (2,)]
            self.assertEqual(got, [3])
        # One load (c1's, onto b); c2 found it held.
        self.assertEqual(job["state"], "succeeded", job)
        self.assertEqual(job["state_loads"], 1, job)
        self.assertGreater(job["state_load_bytes"], 0, job)
        self.assertGreaterEqual(job["state_load_s"], 0, job)
        trace = self.cluster.get(f"/api/v1/jobs/{job['id']}/trace")
        events = trace["traceEvents"] if isinstance(trace, dict) else trace
        loads = [e for e in events if e.get("cat") == "state_load"]
        self.assertEqual(len(loads), 1, loads)
        self.assertEqual(loads[0]["name"], "load counter")
        self.assertEqual(loads[0]["args"]["task"], "c1")
        names = {d["id"]: d["name"] for d in self.cluster.get("/api/v1/pool")["devices"]}
        self.assertEqual(names[loads[0]["pid"]], "w1")  # site=b
        # `hmpmd status` says it as `hmpmd run` does.
        r = subprocess.run([os.path.join(BIN, "hmpmd"), "status", str(job["id"]), "--url",
                            self.cluster.url], capture_output=True, text=True, timeout=TIMEOUT_S)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("  state loads  1, ", r.stdout)

    def test_the_pool_shows_the_weights_a_worker_holds(self):
        # A built-in gemm keeping its 8 x 8 float32 weights in its state
        # (256 bytes) on w0; the pool says so from w0's next heartbeat.
        spec = {"name": "weights", "submodels": [{"name": "stage", "kind": "generic",
                                                  "state_bytes": 256}],
                "tasks": [{"id": "g", "kernel": "gemm", "submodel": "stage",
                           "requires": {"site": "a"},
                           "args": {"m": 2, "n": 8, "k": 8, "weights": "state"}}]}
        with tempfile.TemporaryDirectory() as tmp:
            r, job = self.submit(spec, tmp)
        self.assertEqual(r.returncode, 0, r.stderr + r.stdout)
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            pool = {d["name"]: d for d in self.cluster.get("/api/v1/pool")["devices"]}
            if pool["w0"]["state_bytes"] >= 256 or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        self.assertGreaterEqual(pool["w0"]["state_bytes"], 256, pool["w0"])

    def test_a_stateless_chain_loads_nothing(self):
        spec = self.counter_job("stateless", "py.count", ["a", "b"])
        spec["submodels"][0]["state_bytes"] = 0  # a generic sub-model: no state kept
        with tempfile.TemporaryDirectory() as tmp:
            r, job = self.submit(spec, tmp)
            self.assertEqual(r.returncode, 0, r.stderr + r.stdout)
            last = np.fromfile(os.path.join(tmp, "out", "c1.0.bin"), dtype=np.int64)
        self.assertEqual(int(last[0]), 1)  # b made its own
        self.assertNotIn("state_loads", job)

    def test_a_state_that_cannot_be_pickled_fails_the_task_saying_why(self):
        with tempfile.TemporaryDirectory() as tmp:
            r, job = self.submit(self.counter_job("locked", "py.lock", ["a", "b"]), tmp)
        self.assertNotEqual(r.returncode, 0)
        self.assertEqual(job["state"], "failed", job)
        self.assertIn("state of sub-model 'counter'", job["error"])
        self.assertIn("cannot be pickled", job["error"])


class StateAcrossRestartTest(unittest.TestCase):
    """The controller is killed and started again (on its job store) while
    a job's stateful sub-model is held by one worker: that worker reports
    the state when it registers again, and the next task on the other
    worker loads it from there rather than starting an empty one."""

    def test_a_holder_is_a_holder_again_after_a_controller_restart(self):
        with tempfile.TemporaryDirectory() as tmp, \
                LocalCluster(BIN, workers=2, cores="cube=1", python_kernels=["py_kernels"],
                             python_path=[HERE], labels=[{"site": "a"}, {"site": "b"}],
                             db=os.path.join(tmp, "jobs.db")) as cluster:
            spec = StateLoadTest.counter_job("restart", "py.count", ["a", "b"])
            # c0 on a, then 2 s of sleep on a, then c1 on b: the controller
            # restarts during the sleep.
            c0, c1 = spec["tasks"]
            wait = {"id": "wait", "kernel": "sleep", "args": {"us": 2000000},
                    "inputs": ["c0"], "requires": {"site": "a"}}
            c1["inputs"] = ["wait"]
            spec["tasks"] = [c0, wait, c1]
            path = os.path.join(tmp, "job.json")
            with open(path, "w") as f:
                json.dump(spec, f)
            hmpmd = os.path.join(BIN, "hmpmd")
            r = subprocess.run([hmpmd, "submit", path, "--url", cluster.url, "--json"],
                               capture_output=True, text=True, timeout=TIMEOUT_S)
            self.assertEqual(r.returncode, 0, r.stderr)
            job = json.loads(r.stdout)["id"]
            deadline = time.monotonic() + TIMEOUT_S
            while not self.task_done(cluster, job, "c0"):
                self.assertLess(time.monotonic(), deadline, "c0 did not end")
                time.sleep(0.02)
            cluster.restart_controller()
            while cluster.get(f"/api/v1/jobs/{job}")["state"] not in ("succeeded", "failed"):
                self.assertLess(time.monotonic(), deadline, "the job did not end")
                time.sleep(0.05)
            out = os.path.join(tmp, "out")
            r = subprocess.run([hmpmd, "fetch", str(job), out, "--url", cluster.url],
                               capture_output=True, text=True, timeout=TIMEOUT_S)
            self.assertEqual(r.returncode, 0, r.stderr)
            last = np.fromfile(os.path.join(out, "c1.0.bin"), dtype=np.int64)
            self.assertEqual(int(last[0]), 2)  # b loaded a's state, kept across the restart
            self.assertEqual(cluster.get(f"/api/v1/jobs/{job}")["state_loads"], 1)

    @staticmethod
    def task_done(cluster, job, task):
        tasks = cluster.get(f"/api/v1/jobs/{job}/tasks")["tasks"]
        return any(t["id"] == task and t["state"] == "done" for t in tasks)


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
