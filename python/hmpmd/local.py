"""A controller and workers as real processes on this machine, on loopback:
started here and stopped here, by PID. What `ray.init()` starts for a Ray
driver, for examples, notebooks and tests:

    from hmpmd.local import LocalCluster
    with LocalCluster("build/bin", workers=2) as c:               # C++ workers
        client = hmpmd.Client.connect(c.endpoint)
    with LocalCluster("build/bin", python_kernels=["my_kernels"],  # Python workers
                      workers=4, python_path=["examples/x"]) as c:
        ...

`c.endpoint` is the controller's tcp://127.0.0.1:PORT, `c.url` its REST API.
"""
import json
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request


def free_port():
    """A free port on 127.0.0.1 below the kernel's ephemeral range.

    A port from the ephemeral range, free when picked, can be handed to
    another process's outgoing connection before our controller binds it
    (tests run side by side under ctest -j); ports below the range are only
    ever taken by name. Same rule as tests/integration/process_cluster.cc.
    """
    lo = 32768
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            lo = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        pass
    first = 10000
    span = max(1000, lo - first)
    rng = random.Random(os.getpid() * 7919 + time.monotonic_ns())
    for _ in range(200):
        port = first + rng.randrange(span)
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port below %d on 127.0.0.1 after 200 tries" % lo)


def run_on(fn, controller, bin_dir, **cluster):
    """fn(endpoint) against `controller` when one is given, else against a
    LocalCluster(bin_dir, **cluster) started for the call and stopped after
    it. Returns what fn returns."""
    if controller:
        return fn(controller)
    with LocalCluster(bin_dir, **cluster) as c:
        return fn(c.endpoint)


class LocalCluster:
    """`hmpmd controller` and `workers` workers: `hmpmd worker` (or
    `worker_binary`), or, with `python_kernels` (module names),
    `python3 -m hmpmd.worker --kernels M...` with `python_path` added to
    PYTHONPATH beside this package. Each worker is one device with `cores`
    (one string for all, or a list with one per worker) and `labels` (a
    dict for all, or a list with one per worker). With `token_file`,
    the controller and the workers take it as --token-file, and this
    object's REST reads send its token. With `db` (a file), the controller
    keeps its jobs there, and restart_controller() kills it and starts it
    again on them; without, it keeps none."""

    def __init__(self, bin_dir, workers=2, cores="cube=1,vector=1", worker_binary=None,
                 python_kernels=(), python_path=(), log_level="warn", start_timeout_s=60,
                 worker_args=(), controller_args=(), worker_stderr=None, token_file=None,
                 db="", labels=None):
        self.bin_dir = bin_dir
        self.workers = workers
        self.cores = cores
        self.labels = labels or {}
        self.worker_binary = worker_binary
        self.python_kernels = list(python_kernels)
        self.python_path = [os.path.abspath(p) for p in python_path]
        self.log_level = log_level
        self.start_timeout_s = start_timeout_s
        self.worker_args = list(worker_args)  # more flags for every worker
        self.controller_args = list(controller_args)  # more flags for the controller
        self.worker_stderr = worker_stderr  # a file for the workers' logs; None: discarded
        self.token_file = token_file
        self.db = db
        if token_file:
            self.controller_args += ["--token-file", token_file]
            self.worker_args += ["--token-file", token_file]
        self.procs = []
        self.controller_log = None

    def __enter__(self):
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc):
        self.stop()
        return False

    def worker_command(self, i):
        cores = self.cores if isinstance(self.cores, str) else self.cores[i]
        labels = self.labels if isinstance(self.labels, dict) else self.labels[i]
        if self.python_kernels:
            cmd = [sys.executable, "-m", "hmpmd.worker"]
            for m in self.python_kernels:
                cmd += ["--kernels", m]
        elif self.worker_binary:
            cmd = [self.worker_binary]
        else:
            cmd = [os.path.join(self.bin_dir, "hmpmd"), "worker"]
        for key, value in labels.items():
            cmd += ["--label", f"{key}={value}"]
        return cmd + ["--controller", self.endpoint, "--cores", cores, "--name", f"w{i}",
                      "--log-level", self.log_level] + self.worker_args

    def start(self):
        zmq_port, self.http_port = free_port(), free_port()
        self.endpoint = f"tcp://127.0.0.1:{zmq_port}"
        self.url = f"http://127.0.0.1:{self.http_port}"
        # Its log is kept so that a controller that exits at start says why.
        self.controller_log = tempfile.TemporaryFile()
        self.procs.append(self._start_controller())
        # This package's folder first, so Python workers import the same hmpmd.
        package_dir = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        paths = [package_dir] + self.python_path
        if os.environ.get("PYTHONPATH"):
            paths.append(os.environ["PYTHONPATH"])
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(paths))
        stderr = self.worker_stderr if self.worker_stderr is not None else subprocess.DEVNULL
        for i in range(self.workers):
            self.procs.append(subprocess.Popen(self.worker_command(i), env=env,
                                               stdout=subprocess.DEVNULL, stderr=stderr))
        # Bounded but generous: ctest -j2 on 2 cores slows start-up a lot.
        deadline = time.monotonic() + self.start_timeout_s
        last = "no answer"
        while time.monotonic() < deadline:
            for i, p in enumerate(self.procs):
                if p.poll() is not None:
                    what = "the controller" if i == 0 else f"worker {i - 1}"
                    raise RuntimeError(f"{what} ({p.args[0]}) exited with {p.returncode} at start"
                                       + (self._controller_said() if i == 0 else ""))
            try:
                pool = self.get("/api/v1/pool")
                if pool.get("alive_devices") == self.workers:
                    return
                last = f"{pool.get('alive_devices')} of {self.workers} workers alive"
            except OSError as e:
                last = str(e)
            time.sleep(0.05)
        raise RuntimeError(f"controller and {self.workers} workers did not come up: {last}")

    def _start_controller(self):
        hmpmd = os.path.join(self.bin_dir, "hmpmd")
        return subprocess.Popen(
            [hmpmd, "controller", "--listen", self.endpoint, "--http",
             f"127.0.0.1:{self.http_port}", "--db", self.db, "--log-level", self.log_level]
            + self.controller_args,
            stdout=subprocess.DEVNULL, stderr=self.controller_log)

    def restart_controller(self):
        """Kills the controller (SIGKILL) and starts it again on the same
        addresses and store; returns once its REST API answers."""
        old = self.procs[0]
        old.kill()
        old.wait()
        self.procs[0] = self._start_controller()
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            if self.procs[0].poll() is not None:
                raise RuntimeError(f"the controller exited with {self.procs[0].returncode} at "
                                   "restart" + self._controller_said())
            try:
                self.get("/api/v1/pool")
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("the restarted controller did not answer")

    def _controller_said(self):
        """The controller log's last line, as ': LINE' (or '')."""
        self.controller_log.seek(0)
        lines = self.controller_log.read().decode(errors="replace").strip().splitlines()
        return f": {lines[-1]}" if lines else ""

    def get(self, path):
        req = urllib.request.Request(self.url + path)
        if self.token_file:
            with open(self.token_file) as f:
                req.add_header("Authorization", "Bearer " + f.readline().strip())
        with urllib.request.urlopen(req, timeout=30) as r:
            return json.load(r)

    def stop(self):
        for p in reversed(self.procs):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.procs = []
        if self.controller_log:
            self.controller_log.close()
            self.controller_log = None
