"""Python kernels on an embedded worker (`python3 -m hmpmd.worker`) and the
driver's put()/get(), against a real controller, a C++ hmpmd-worker and a
Python worker, all started here and stopped here by PID, on loopback.

    worker_test.py BIN_DIR MODULE_DIR
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
sys.path.insert(0, MODULE_DIR)
sys.path.insert(0, HERE)

import numpy as np  # noqa: E402

import hmpmd  # noqa: E402
from cluster import Cluster  # noqa: E402

TIMEOUT_MS = 30000
PY_WORKER = "pyw"


class PythonWorkerTest(unittest.TestCase):
    """One controller, one C++ worker (cube=1,vector=1) and one Python
    worker (cube=1,vector=1) for the whole class: a mixed pool."""

    @classmethod
    def setUpClass(cls):
        cls.log_file = tempfile.NamedTemporaryFile(prefix="hmpmd_pyworker_", suffix=".log",
                                                   delete=False)
        cls.cluster = Cluster(BIN, workers=1)
        cls.cluster.start()
        try:
            env = dict(os.environ, PYTHONPATH=os.pathsep.join([MODULE_DIR, HERE]))
            cls.cluster.procs.append(subprocess.Popen(
                [sys.executable, "-m", "hmpmd.worker", "--controller", cls.cluster.endpoint,
                 "--kernels", "py_kernels", "--name", PY_WORKER, "--cores", "cube=1,vector=1",
                 "--label", "site=py", "--log-level", "info"],
                env=env, stdout=subprocess.DEVNULL, stderr=cls.log_file))
            cls.wait_for_devices(2)
        except BaseException:
            cls.cluster.stop()
            raise

    @classmethod
    def tearDownClass(cls):
        cls.cluster.stop()  # every process, by PID
        cls.log_file.close()
        os.unlink(cls.log_file.name)

    @classmethod
    def wait_for_devices(cls, n):
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            for p in cls.cluster.procs:
                if p.poll() is not None:
                    raise RuntimeError(f"{p.args} exited with {p.returncode}: {cls.worker_log()}")
            if cls.cluster.get("/api/v1/pool").get("alive_devices") == n:
                return
            time.sleep(0.05)
        raise RuntimeError(f"{n} workers not alive within 60 s: {cls.worker_log()}")

    @classmethod
    def worker_log(cls):
        with open(cls.log_file.name, errors="replace") as f:
            return f.read()

    def wait_for_log(self, text, timeout_s=30):
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for line in self.worker_log().splitlines():
                if text in line:
                    return line
            time.sleep(0.02)
        self.fail(f"no line with {text!r} in the Python worker's log:\n{self.worker_log()}")

    def connect(self, name):
        return hmpmd.Client.connect(self.cluster.endpoint, session=name,
                                    connect_timeout_ms=TIMEOUT_MS)

    def tasks_when_done(self, job, done):
        """The job's task table once `done` of its tasks are done there: a
        Future may end on its worker's word before the controller has heard
        (direct_done)."""
        for _ in range(TIMEOUT_MS // 20):
            tasks = self.cluster.get(f"/api/v1/jobs/{job}/tasks")["tasks"]
            if len([t for t in tasks if t["state"] == "done"]) >= done:
                break
            time.sleep(0.02)
        return tasks

    def session(self, name):
        """A session whose tasks may fail on purpose: aborted at the end,
        its outcome (failed) ignored."""
        test = self

        class Session:
            def __enter__(self):
                self.c = test.connect(name)
                return self.c

            def __exit__(self, *exc):
                try:
                    self.c.abort()
                except hmpmd.Error:
                    pass
                return False
        return Session()

    def device_names(self):
        return {d["id"]: d["name"] for d in self.cluster.get("/api/v1/pool")["devices"]}

    # --- Python kernels ---------------------------------------------------

    def test_python_kernel_from_a_job_spec(self):
        # py.arange (Python) -> scale (C++, either worker) -> py.double (Python).
        spec = {"name": "pyspec", "tasks": [
            {"id": "a", "kernel": "py.arange", "args": {"n": 5}},
            {"id": "s", "kernel": "scale", "core": "vector", "args": {"factor": 3.0},
             "inputs": ["a"]},
            {"id": "d", "kernel": "py.double", "inputs": ["s"]}]}
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "job.json")
            with open(path, "w") as f:
                json.dump(spec, f)
            out = os.path.join(tmp, "out")
            r = subprocess.run([os.path.join(BIN, "hmpmd"), "submit", path, "--wait", "--fetch",
                                out, "--url", self.cluster.url],
                               capture_output=True, text=True, timeout=60)
            self.assertEqual(r.returncode, 0, r.stderr + r.stdout)
            got = np.fromfile(os.path.join(out, "d.0.bin"), dtype=np.float32)
        np.testing.assert_array_equal(got, np.arange(5, dtype=np.float32) * 6)

    def test_python_kernel_from_a_driver(self):
        with self.connect("pydriver") as c:
            x = c.submit("py.arange", args={"n": 4})
            y = c.submit("py.double", inputs=[x])
            a = x.get(TIMEOUT_MS)[0]
            self.assertIsInstance(a, np.ndarray)
            self.assertEqual(a.dtype, np.float32)
            np.testing.assert_array_equal(a, [0, 1, 2, 3])
            np.testing.assert_array_equal(y.get(TIMEOUT_MS)[0], [0, 2, 4, 6])

    def test_inputs_are_read_only_views_of_the_worker_buffers(self):
        with self.session("pyviews") as c:
            x = c.put(np.arange(6, dtype=np.float32).reshape(2, 3))
            info = json.loads(c.submit("py.inspect", inputs=[x, x]).get(TIMEOUT_MS)[0])
            self.assertEqual(len(info), 2)
            for got in info:
                self.assertEqual(got["dtype"], "float32")
                self.assertEqual(got["shape"], [2, 3])
                self.assertEqual(got["sum"], 15.0)
                self.assertFalse(got["writeable"])
                self.assertFalse(got["owndata"])  # a view: no copy was made
                self.assertEqual(got["base"], "PyCapsule")  # keeps the worker's buffer alive
            with self.assertRaises(hmpmd.TaskFailed) as e:
                c.submit("py.mutate", inputs=[x]).wait(TIMEOUT_MS)
            self.assertIn("ValueError: assignment destination is read-only", str(e.exception))

    def test_outputs_are_arrays_and_bytes(self):
        with self.connect("pyoutputs") as c:
            arr, data = c.submit("py.pair", args={"who": "there"}).get(TIMEOUT_MS)
            self.assertEqual(arr.dtype, np.int32)
            self.assertEqual(arr.shape, (2, 2))
            np.testing.assert_array_equal(arr, [[1, 2], [3, 4]])
            self.assertEqual(data, b"hi there")
            self.assertEqual(c.submit("py.log", args={"who": "x"}).get(TIMEOUT_MS), [])

    def test_state_is_kept_between_tasks_of_a_submodel(self):
        with self.connect("pystate") as c:
            first = c.submit("py.count")
            second = c.submit("py.count", inputs=[first])
            third = c.submit("py.count", inputs=[second])
            self.assertEqual([int(f.get(TIMEOUT_MS)[0][0]) for f in (first, second, third)],
                             [1, 2, 3])
        with self.connect("pystate2") as c:  # another job: a fresh state
            self.assertEqual(int(c.submit("py.count").get(TIMEOUT_MS)[0][0]), 1)

    def test_an_exception_is_the_task_one_line_error(self):
        with self.session("pyfail") as c:
            with self.assertRaises(hmpmd.TaskFailed) as e:
                c.submit("py.fail").wait(TIMEOUT_MS)
            message = str(e.exception)
            self.assertIn("ValueError: bad shape\\n(second line)", message)
            self.assertNotIn("\n", message)
            with self.assertRaises(hmpmd.TaskFailed) as e:
                c.submit("py.bad_return").wait(TIMEOUT_MS)
            self.assertIn("kernel 'py.bad_return' returned output 0: expected a numpy.ndarray "
                          "or bytes, not int", str(e.exception))

    def test_a_failing_kernel_is_retried_until_it_succeeds(self):
        with self.connect("pyretry") as c:
            f = c.submit("py.flaky", max_retries=2, retry_on=["ValueError"], label="flaky")
            self.assertEqual(int(f.get(TIMEOUT_MS)[0][0]), 2)
            tasks = self.tasks_when_done(f.job, 1)
            row = next(t for t in tasks if t["id"] == "flaky")
            self.assertEqual((row["attempt"], row["retries"], row["max_retries"]), (2, 2, 2))
            # ctx.log lines of each attempt, and the errors of those that failed.
            logs = self.cluster.get(f"/api/v1/jobs/{f.job}/logs?task=flaky")
            self.assertEqual([a["lines"] for a in logs["attempts"]],
                             [["INFO attempt 0"], ["INFO attempt 1"], ["INFO attempt 2"]])
            self.assertEqual([a["ok"] for a in logs["attempts"]], [False, False, True])
            self.assertIn("ValueError: flaky at attempt 1", logs["attempts"][1]["error"])

    def test_an_error_retry_on_does_not_name_is_not_retried(self):
        with self.session("pynoretry") as c:
            f = c.submit("py.flaky", max_retries=2, retry_on=["KeyError"], label="once")
            with self.assertRaises(hmpmd.TaskFailed) as e:
                f.wait(TIMEOUT_MS)
            self.assertIn("ValueError: flaky at attempt 0", str(e.exception))
            self.assertNotIn("attempts", str(e.exception))
            logs = self.cluster.get(f"/api/v1/jobs/{c.job}/logs?task=once")
            self.assertEqual(len(logs["attempts"]), 1)

    def test_out_of_retries_the_task_fails_saying_how_many_attempts(self):
        with self.session("pyretries") as c:
            f = c.submit("py.flaky", args={"ok_at": 5}, max_retries=1)
            with self.assertRaises(hmpmd.TaskFailed) as e:
                f.wait(TIMEOUT_MS)
            self.assertIn("failed after 2 attempts: ValueError: flaky at attempt 1",
                          str(e.exception))

    def test_bad_retry_arguments_are_refused(self):
        with self.session("pybadretry") as c:
            for kwargs, why in (({"max_retries": -1}, "max_retries: must be between 0 and 100"),
                                ({"max_retries": "2"}, "max_retries: must be an int, not str"),
                                ({"retry_on": "ValueError"}, "retry_on: must be a list of str"),
                                ({"retry_on": [1]}, "retry_on: must be a list of str"),
                                ({"max_retries": 1, "retry_on": [""]}, "retry_on[0]: empty")):
                with self.assertRaises(hmpmd.InvalidArgument) as e:
                    c.submit("py.flaky", **kwargs).wait(TIMEOUT_MS)
                self.assertIn(why, str(e.exception))
            call = hmpmd.Call("py.flaky", max_retries=3, retry_on=["ValueError"])
            self.assertEqual((call.max_retries, call.retry_on), (3, ["ValueError"]))

    def test_cancelled_and_log_lines_tagged_with_the_task(self):
        with self.session("pycancel") as c:
            t = c.submit("py.wait_cancel", core="vector")
            line = self.wait_for_log("waiting for a cancel")
            c.cancel(t)
            with self.assertRaises(hmpmd.Cancelled):
                t.wait(TIMEOUT_MS)
            seen = self.wait_for_log("saw the cancel")
            tag = f"[job {c.job} task '{t.label}' run 0 attempt "
            self.assertIn(tag, line)
            self.assertIn(tag, seen)
            self.assertIn("py.wait_cancel] saw the cancel", seen)

    def test_mixed_pool_sends_each_kernel_to_a_worker_that_has_it(self):
        with self.connect("pymixed") as c:
            py = [c.submit("py.arange", args={"n": 2}) for _ in range(6)]
            cxx = [c.submit("gemm", args={"m": 8, "n": 8, "k": 8}) for _ in range(6)]
            for f in py + cxx:
                f.wait(TIMEOUT_MS)
            job = c.job
            tasks = self.tasks_when_done(job, 12)
        names = self.device_names()
        py_devices = {names[t["device"]] for t in tasks if t["kernel"] == "py.arange"}
        self.assertEqual(py_devices, {PY_WORKER})
        self.assertEqual(len([t for t in tasks if t["state"] == "done"]), 12)

    def test_labels_send_a_drivers_tasks_where_they_are(self):
        # The Python worker advertises site=py (--label); the C++ one none.
        pool = {d["name"]: d.get("labels", {}) for d in self.cluster.get("/api/v1/pool")["devices"]}
        self.assertEqual(pool[PY_WORKER], {"site": "py"})
        with self.session("pylabels") as c:
            on_py = [c.submit("gemm", args={"m": 8, "n": 8, "k": 8}, requires={"site": "py"})
                     for _ in range(4)]
            actor = c.create_actor("labelled", devices=0, requires={"site": "py"})
            on_py += [actor.call("noop") for _ in range(4)]
            nowhere = c.submit("noop", requires={"site": "moon"})
            for f in on_py:
                f.wait(TIMEOUT_MS)
            with self.assertRaisesRegex(hmpmd.Error, "requires site=moon: no worker has it"):
                nowhere.wait(TIMEOUT_MS)
            with self.assertRaisesRegex(hmpmd.InvalidArgument, "requires: must be a dict of str to str"):
                c.submit("noop", requires={"site": 1})
            tasks = self.tasks_when_done(c.job, 8)
        names = self.device_names()
        ran = {names[t["device"]] for t in tasks if t["state"] == "done"}
        self.assertEqual(ran, {PY_WORKER})
        self.assertEqual(len([t for t in tasks if t["state"] == "done"]), 8)

    # --- put() and get() --------------------------------------------------

    def test_put_get_round_trip_keeps_dtype_and_shape(self):
        with self.connect("pyput") as c:
            cases = [np.arange(12, dtype=np.int16).reshape(3, 4),
                     np.linspace(0, 1, 5, dtype=np.float64),
                     np.array([True, False, True]),
                     np.zeros((0, 3), dtype=np.uint8),
                     np.array(7.5, dtype=np.float32),  # rank 0
                     np.arange(6, dtype=np.int64).reshape(2, 3).T]  # not contiguous
            futures = [c.put(a) for a in cases]
            for a, f in zip(cases, futures):
                self.assertTrue(f.is_put)
                got = f.get(TIMEOUT_MS)
                self.assertIsInstance(got, np.ndarray)
                self.assertEqual(got.dtype, a.dtype)
                self.assertEqual(got.shape, a.shape)
                np.testing.assert_array_equal(got, a)
                self.assertFalse(got.flags.writeable)
            self.assertEqual(c.put(b"\x00raw bytes").get(TIMEOUT_MS), b"\x00raw bytes")
            self.assertEqual(c.put(bytearray(b"ba")).get(TIMEOUT_MS), b"ba")

    def test_put_refuses_what_cannot_travel(self):
        with self.connect("pyputbad") as c:
            for bad, why in (([1, 2], "expected a numpy.ndarray or bytes, not list"),
                             (np.zeros(2, dtype=np.complex64), "dtype complex64 cannot travel"),
                             ("text", "not str")):
                with self.assertRaises(hmpmd.InvalidArgument) as e:
                    c.put(bad)
                self.assertIn(why, str(e.exception))

    def test_put_is_an_input_of_a_cpp_kernel(self):
        with self.connect("pyputcxx") as c:
            x = c.put(np.array([1, 2, 3, 4], dtype=np.float32))
            y = c.submit("scale", args={"factor": 2.0}, inputs=[x], core="vector")
            got = y.get(TIMEOUT_MS)[0]
            self.assertEqual(got.dtype, np.float32)
            np.testing.assert_array_equal(got, [2, 4, 6, 8])
            # And into a Python kernel on the other worker's side of the pool.
            np.testing.assert_array_equal(c.submit("py.double", inputs=[y]).get(TIMEOUT_MS)[0],
                                          [4, 8, 12, 16])


class InProcessWorkerTest(unittest.TestCase):
    """hmpmd.Worker run on a thread of this process, beside the driver."""

    def test_cpp_lanes_run_while_a_python_kernel_holds_the_gil(self):
        import threading
        started = threading.Event()
        with Cluster(BIN, workers=0) as cluster:
            w = hmpmd.Worker(controller=cluster.endpoint, cores={"cube": 1, "vector": 1},
                             name="inproc", log_level="warn")

            @w.kernel("py.busy", core="cube")
            def busy(ctx, inputs, args):
                # Pure Python: holds the GIL but for the interpreter's
                # switches to other Python threads.
                started.set()
                end = time.monotonic() + args["ms"] / 1000
                n = 0
                while time.monotonic() < end and not ctx.cancelled():
                    n += 1
                return np.array([n], dtype=np.int64)

            runner = threading.Thread(target=w.run)
            runner.start()
            try:
                deadline = time.monotonic() + 30
                while cluster.get("/api/v1/pool").get("alive_devices") != 1:
                    self.assertLess(time.monotonic(), deadline, "the in-process worker never came")
                    time.sleep(0.05)
                with hmpmd.Client.connect(cluster.endpoint, session="gil") as c:
                    b = c.submit("py.busy", args={"ms": 4000})
                    self.assertTrue(started.wait(30))
                    t0 = time.monotonic()
                    y = c.submit("scale", args={"n": 4, "factor": 2.0}, core="vector")
                    y.wait(TIMEOUT_MS)
                    # The C++ kernel and the controller link did not wait
                    # for the Python kernel to let go of the GIL.
                    self.assertFalse(b.ready, "the C++ task ended only after the Python one")
                    self.assertLess(time.monotonic() - t0, 3.0)
                    self.assertGreater(int(b.get(TIMEOUT_MS)[0][0]), 0)
            finally:
                w.stop()
                runner.join(30)
            self.assertFalse(runner.is_alive(), "run() did not return after stop()")


class WorkerCommandTest(unittest.TestCase):
    """python3 -m hmpmd.worker ends cleanly on Ctrl-C and SIGTERM."""

    def test_sigint_and_sigterm_stop_the_worker(self):
        import signal
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([MODULE_DIR, HERE]))
        with Cluster(BIN, workers=0) as cluster:
            for sig, code in ((signal.SIGINT, 130), (signal.SIGTERM, 0)):
                p = subprocess.Popen(
                    [sys.executable, "-m", "hmpmd.worker", "--controller", cluster.endpoint,
                     "--kernels", "py_kernels", "--name", f"sig{int(sig)}", "--log-level", "warn"],
                    env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
                cluster.procs.append(p)  # stopped by PID with the cluster if this fails
                deadline = time.monotonic() + 30
                while cluster.get("/api/v1/pool").get("alive_devices") != 1:
                    self.assertIsNone(p.poll(), p.stderr.read() if p.poll() is not None else "")
                    self.assertLess(time.monotonic(), deadline, "the worker never registered")
                    time.sleep(0.05)
                p.send_signal(sig)
                self.assertEqual(p.wait(timeout=20), code, p.stderr.read())
                p.stderr.close()
                cluster.procs.remove(p)
                while cluster.get("/api/v1/pool").get("alive_devices") != 0:
                    self.assertLess(time.monotonic(), deadline + 30, "the worker stayed alive")
                    time.sleep(0.05)

    def test_a_module_without_register_is_refused(self):
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([MODULE_DIR, HERE]))
        r = subprocess.run([sys.executable, "-m", "hmpmd.worker", "--controller",
                            "tcp://127.0.0.1:1", "--kernels", "cluster"],
                           env=env, capture_output=True, text=True, timeout=30)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("module 'cluster' has no register(worker) function", r.stderr)


class WorkerApiTest(unittest.TestCase):
    """Bad calls to hmpmd.Worker fail at once, in one line."""

    def test_bad_registrations_are_refused(self):
        w = hmpmd.Worker(controller="tcp://127.0.0.1:1", cores={"cube": 1})
        with self.assertRaisesRegex(hmpmd.InvalidArgument, "kernel name: must be a str, not int"):
            w.kernel(3)
        with self.assertRaisesRegex(hmpmd.InvalidArgument, "core: 'gpu' is not cube or vector"):
            w.kernel("k", core="gpu")
        with self.assertRaisesRegex(hmpmd.InvalidArgument, "kernel 'k': not callable"):
            w.register("k", 5)
        with self.assertRaisesRegex(hmpmd.InvalidArgument, "unknown core kind 'gpu'"):
            hmpmd.Worker(controller="tcp://127.0.0.1:1", cores={"gpu": 1})
        with self.assertRaisesRegex(hmpmd.InvalidArgument, "at least one core"):
            hmpmd.Worker(controller="tcp://127.0.0.1:1", cores={"cube": 0})
        with self.assertRaisesRegex(hmpmd.InvalidArgument, "labels: must be a dict of str to str"):
            hmpmd.Worker(controller="tcp://127.0.0.1:1", labels=["accel"])
        with self.assertRaisesRegex(hmpmd.InvalidArgument, "labels: key: contains '='"):
            hmpmd.Worker(controller="tcp://127.0.0.1:1", labels={"a=b": "c"})

        @w.kernel("ok")
        def ok(ctx, inputs, args):
            return None
        self.assertEqual(w.kernels, ["ok"])

    def test_stop_from_another_thread_ends_run(self):
        import threading
        w = hmpmd.Worker(controller="tcp://127.0.0.1:1", cores={"vector": 1}, log_level="off")
        timer = threading.Timer(0.2, w.stop)
        timer.start()
        started = time.monotonic()
        w.run()  # no controller answers: it keeps trying until stopped
        timer.join()
        self.assertLess(time.monotonic() - started, 10)


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0]], verbosity=2)
