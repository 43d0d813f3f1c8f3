"""A controller and workers as real processes on loopback, for the Python
tests and the RL example's runner: started here, stopped here by PID.

    with Cluster(bin_dir, workers=2) as c:
        c.endpoint   # tcp://127.0.0.1:PORT, for hmpmd.Client.connect
        c.url        # http://127.0.0.1:PORT, the REST API
"""
import json
import os
import signal
import subprocess
import time
import urllib.request

from ports import free_port


class Cluster:
    def __init__(self, bin_dir, workers=2, cores="cube=1,vector=1", worker_binary=None,
                 log_level="warn", start_timeout_s=60, worker_args=(), controller_args=()):
        self.bin_dir = bin_dir
        self.workers = workers
        self.cores = cores
        self.worker_binary = worker_binary
        self.log_level = log_level
        self.start_timeout_s = start_timeout_s
        self.worker_args = list(worker_args)  # more flags for every worker
        self.controller_args = list(controller_args)  # more flags for the controller
        self.procs = []

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

    def start(self):
        zmq_port, http_port = free_port(), free_port()
        self.endpoint = f"tcp://127.0.0.1:{zmq_port}"
        self.url = f"http://127.0.0.1:{http_port}"
        hmpmd = os.path.join(self.bin_dir, "hmpmd")
        self.procs.append(subprocess.Popen(
            [hmpmd, "controller", "--listen", self.endpoint, "--http", f"127.0.0.1:{http_port}",
             "--db", "", "--log-level", self.log_level] + self.controller_args,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        for i in range(self.workers):
            # One core list for every worker, or one per worker.
            cores = self.cores if isinstance(self.cores, str) else self.cores[i]
            binary = [self.worker_binary] if self.worker_binary else [hmpmd, "worker"]
            cmd = binary + ["--controller", self.endpoint, "--cores", cores, "--name", f"w{i}",
                            "--log-level", self.log_level] + self.worker_args
            self.procs.append(subprocess.Popen(cmd, stdout=subprocess.DEVNULL,
                                               stderr=subprocess.DEVNULL))
        # Bounded but generous: ctest -j2 on 2 cores slows start-up a lot.
        deadline = time.monotonic() + self.start_timeout_s
        last = "no answer"
        while time.monotonic() < deadline:
            for p in self.procs:
                if p.poll() is not None:
                    raise RuntimeError(f"{p.args[0]} exited with {p.returncode} at start")
            try:
                pool = self.get("/api/v1/pool")
                if pool.get("alive_devices") == self.workers:
                    return
                last = f"{pool.get('alive_devices')} of {self.workers} workers alive"
            except OSError as e:
                last = str(e)
            time.sleep(0.05)
        raise RuntimeError(f"controller and {self.workers} workers did not come up: {last}")

    def get(self, path):
        with urllib.request.urlopen(self.url + path, timeout=30) as r:
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
