#!/usr/bin/env python3
"""The controller's wall clock stepped forward and back (fault_shim.cc's
clock step, by LD_PRELOAD, on the controller alone), as an NTP correction
or an operator's `date -s` would:

  - a job that ended keeps its place under `--keep-hours 1` when the clock
    jumps two hours ahead (retention ages are durations: a step must not
    expire jobs), and a job run after the step is kept as well;
  - wall-clock times reported after the step follow the clock the
    controller read at its start (docs/rest-api.md): the job run after the
    step ended after the one before, by about the time between them;
  - the controller and its worker keep running, and no process is left
    behind (each is stopped by its PID).

Usage: clock_step_test.py BIN_DIR
"""
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from ports import free_port  # noqa: E402

TWO_HOURS_US = 2 * 3600 * 1_000_000


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def get(url, path):
    with urllib.request.urlopen(url + path, timeout=10) as r:
        return json.loads(r.read())


def status_of(url, path):
    try:
        urllib.request.urlopen(url + path, timeout=10).read()
        return 200
    except urllib.error.HTTPError as e:
        return e.code


def main():
    bin_dir = sys.argv[1]
    shim = os.path.join(bin_dir, "libhmpmd_fault_shim.so")
    if not os.path.exists(shim):
        fail(f"{shim} not found: build the hmpmd_fault_shim target")
    procs = []
    with tempfile.TemporaryDirectory() as tmp:
        step = os.path.join(tmp, "clock-step")

        def set_step(us):
            with open(step + ".new", "w") as f:
                f.write(str(us))
            os.replace(step + ".new", step)
            time.sleep(0.1)  # read by the library at most every 20 ms

        zmq, http = f"tcp://127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"
        url = "http://" + http
        log = open(os.path.join(tmp, "procs.log"), "w")
        try:
            procs.append(subprocess.Popen(
                [os.path.join(bin_dir, "hmpmd"), "controller", "--listen", zmq, "--http", http,
                 "--db", os.path.join(tmp, "jobs.db"), "--keep-hours", "1",
                 "--heartbeat-ms", "100"],
                stdout=log, stderr=log,
                env=dict(os.environ, LD_PRELOAD=shim, HMPMD_CLOCK_STEP_FILE=step)))
            procs.append(subprocess.Popen(
                [os.path.join(bin_dir, "hmpmd-worker"), "--controller", zmq], stdout=log,
                stderr=log))
            deadline = time.monotonic() + 30
            while True:
                try:
                    if get(url, "/api/v1/pool").get("alive_devices") == 1:
                        break
                except OSError:
                    pass
                if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
                    fail("the controller and its worker did not come up")
                time.sleep(0.05)

            def run_job(name):
                spec = json.dumps({"name": name, "tasks": [{"id": "a", "kernel": "noop"}]})
                req = urllib.request.Request(url + "/api/v1/jobs", data=spec.encode(),
                                             method="POST",
                                             headers={"Content-Type": "application/json"})
                with urllib.request.urlopen(req, timeout=10) as r:
                    job = json.loads(r.read())["id"]
                for _ in range(300):
                    j = get(url, f"/api/v1/jobs/{job}")
                    if j["state"] == "succeeded":
                        return j
                    time.sleep(0.02)
                fail(f"job {job} did not succeed: {j}")

            before = run_job("before")
            t0 = time.monotonic()
            set_step(TWO_HOURS_US)
            # Several liveness checks (each may forget expired jobs).
            time.sleep(1.0)
            if status_of(url, f"/api/v1/jobs/{before['id']}") != 200:
                fail("the job ended before a two-hour step of the wall clock was forgotten "
                     "under --keep-hours 1")
            after = run_job("after")
            gap_us = (time.monotonic() - t0) * 1e6
            moved = after["finished_unix_us"] - before["finished_unix_us"]
            if not 0 <= moved <= gap_us + 1e6:
                fail(f"the job after the step ended {moved} us after the one before, over "
                     f"{gap_us:.0f} us apart: the step was followed")
            set_step(-TWO_HOURS_US)
            time.sleep(1.0)
            for j in (before, after):
                if status_of(url, f"/api/v1/jobs/{j['id']}") != 200:
                    fail(f"job {j['id']} was forgotten after the clock stepped back")
            if any(p.poll() is not None for p in procs):
                fail("a process exited; see " + log.name)
            print("PASS: ended jobs kept and times unbent across steps of +2 h and -2 h")
        finally:
            for p in reversed(procs):
                if p.poll() is None:
                    p.send_signal(signal.SIGTERM)
            for p in reversed(procs):
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
            log.close()


if __name__ == "__main__":
    main()
