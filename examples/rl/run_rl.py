#!/usr/bin/env python3
"""Runs the async RL example end to end on this machine: starts `hmpmd
controller` and N `rl_worker` processes on loopback (one device each, one
cube and one vector core), runs the C++ driver (rl_driver) or the Python one
(rl_driver.py) with the flags after `--`, and stops every process it
started, by PID.

    examples/rl/run_rl.py --workers 4 -- --mode both --runs 3
    examples/rl/run_rl.py --driver python -- --mode async --steps 20 --record /tmp/rl.jsonl

Exit code: the driver's (0 success, 1 a run failed, 2 bad flags)."""
import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def alive_devices(url):
    with urllib.request.urlopen(url + "/api/v1/pool", timeout=5) as r:
        return json.load(r).get("alive_devices", 0)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"),
                   help="folder of hmpmd, rl_worker and rl_driver (default: build/bin)")
    p.add_argument("--python-module", default=os.path.join(ROOT, "build", "python"),
                   help="folder of the hmpmd Python module (default: build/python)")
    p.add_argument("--workers", type=int, default=4, help="devices of the pool (default: 4)")
    p.add_argument("--driver", choices=["cpp", "python"], default="cpp")
    p.add_argument("--log-level", default="error",
                   help="of the controller and the workers (default: error)")
    p.add_argument("driver_args", nargs="*", help="after --: flags of the driver")
    a = p.parse_args()
    if a.workers < 2:
        p.error("--workers: needs at least 2")

    zmq_port, http_port = free_port(), free_port()
    endpoint, url = f"tcp://127.0.0.1:{zmq_port}", f"http://127.0.0.1:{http_port}"
    procs = []
    try:
        procs.append(subprocess.Popen(
            [os.path.join(a.bin, "hmpmd"), "controller", "--listen", endpoint,
             "--http", f"127.0.0.1:{http_port}", "--db", "", "--log-level", a.log_level]))
        for i in range(a.workers):
            procs.append(subprocess.Popen(
                [os.path.join(a.bin, "rl_worker"), "--controller", endpoint,
                 "--cores", "cube=1,vector=1", "--name", f"rl{i}", "--log-level", a.log_level]))
        deadline, up = time.time() + 30, 0
        while time.time() < deadline and up < a.workers:
            for proc in procs:
                if proc.poll() is not None:
                    print(f"run_rl.py: {proc.args[0]} exited with {proc.returncode}",
                          file=sys.stderr)
                    return 1
            try:
                up = alive_devices(url)
            except OSError:
                pass
            time.sleep(0.05)
        if up < a.workers:
            print(f"run_rl.py: only {up} of {a.workers} workers came up", file=sys.stderr)
            return 1
        common = ["--controller", endpoint, "--devices", str(a.workers)] + a.driver_args
        if a.driver == "cpp":
            cmd = [os.path.join(a.bin, "rl_driver")] + common
            env = None
        else:
            cmd = [sys.executable, os.path.join(HERE, "rl_driver.py")] + common
            env = dict(os.environ, PYTHONPATH=os.pathsep.join(
                x for x in (a.python_module, os.environ.get("PYTHONPATH")) if x))
        return subprocess.run(cmd, env=env).returncode
    finally:
        for proc in reversed(procs):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


if __name__ == "__main__":
    sys.exit(main())
