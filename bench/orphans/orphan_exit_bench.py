#!/usr/bin/env python3
"""How long the workers of a `hmpmd run` killed by SIGKILL live on.

Starts `hmpmd run` with N local workers on a job whose tasks keep every lane
busy (`spin` or `sleep`), kills the `hmpmd run` process with SIGKILL once its
workers run, and times until the last worker has exited (polled every 2 ms
through /proc). The workers check their parent every 200 ms
(worker/serve_loop.cc, kParentCheckUs), so that is the figure to compare
with. Prints each run and the median; every process is stopped by PID.

usage: orphan_exit_bench.py BIN_DIR [--runs 5] [--workers 2] [--kernel spin]
"""
import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests",
                                "python"))
from procs import children, running  # noqa: E402


def one_run(hmpmd, spec, workers):
    p = subprocess.Popen([hmpmd, "run", spec, "--workers", str(workers)],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    kids = []
    try:
        deadline = time.monotonic() + 30
        while len(kids) < workers and time.monotonic() < deadline:
            time.sleep(0.05)
            kids = children(p.pid)
        if len(kids) < workers:
            raise RuntimeError("the workers did not start")
        time.sleep(0.5)  # their lanes run the job's tasks by now
        p.send_signal(signal.SIGKILL)
        killed = time.monotonic()
        p.wait()
        deadline = killed + 20
        while any(map(running, kids)) and time.monotonic() < deadline:
            time.sleep(0.002)
        left = [k for k in kids if running(k)]
        if left:
            raise RuntimeError("workers %s still run 20 s after" % left)
        return time.monotonic() - killed
    finally:
        for k in kids:
            if running(k):
                os.kill(k, signal.SIGKILL)
        if p.poll() is None:
            p.kill()
            p.wait()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bin_dir")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--kernel", choices=["spin", "sleep"], default="spin")
    a = ap.parse_args()
    hmpmd = os.path.join(a.bin_dir, "hmpmd")
    with tempfile.TemporaryDirectory() as tmp:
        spec = os.path.join(tmp, "busy.json")
        tasks = [{"id": "t%d" % i, "kernel": a.kernel, "core": core, "args": {"us": 30e6}}
                 for i, core in enumerate(["cube", "vector"] * a.workers)]
        with open(spec, "w") as f:
            json.dump({"name": "busy", "tasks": tasks}, f)
        times = []
        for r in range(a.runs):
            t = one_run(hmpmd, spec, a.workers)
            times.append(t)
            print("run %d: last worker gone %.3f s after SIGKILL" % (r + 1, t))
    print("orphan exit (%s, %d workers): median %.3f s of %d runs; parent check period 0.200 s"
          % (a.kernel, a.workers, statistics.median(times), a.runs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
