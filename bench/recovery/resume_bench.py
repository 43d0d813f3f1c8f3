#!/usr/bin/env python3
"""How soon a controller killed with SIGKILL dispatches again after a restart.

Each run: a controller with --db and two workers run a job of sleep chains;
the controller is killed mid-job and restarted with the same --db. Its log
says when dispatch resumed ("dispatch resumes after N ms", from its start):
as soon as every worker alive at the kill has registered again, or when the
grace (--recovery-grace-ms) ends. The baseline is the grace itself, which
every restart used to wait in full. Prints the median over the runs.

With --standby, a second controller waits on the same store
(`hmpmd controller --standby`, its own ports) and the workers are given
both endpoints; nobody restarts the one killed. It reports the time from
the kill until the standby answers with both workers back, and until the
job's next task is done there, beside the same two times for a restart
started the moment the controller died (what a supervisor at its quickest
does), measured in the same run. A Python driver session beside the job
(one 20 ms task at a time, given both endpoints) reports when its first
Future after the kill resolved: its session resumed on the new primary.

  bench/recovery/resume_bench.py --bin build/bin [--runs 5] [--grace-ms 2000] [--standby]
"""
import argparse
import json
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url):
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return r.read().decode()
    except OSError:
        return None


def wait_success(base, job):
    for _ in range(6000):
        j = json.loads(get(f"{base}/api/v1/jobs/{job}") or "{}")
        if j.get("state") in ("succeeded", "failed", "cancelled"):
            break
        time.sleep(0.01)
    if j.get("state") != "succeeded":
        raise RuntimeError(f"job ended {j.get('state')}")


def wait_failover(base, job, done_at_kill, killed):
    """Seconds from `killed` until `base` answers with 2 live workers, and
    until the job has a task more done than at the kill."""
    serving = None
    for _ in range(6000):
        pool = json.loads(get(base + "/api/v1/pool") or "{}")
        if serving is None and pool.get("alive_devices") == 2:
            serving = time.monotonic() - killed
        j = json.loads(get(f"{base}/api/v1/jobs/{job}") or "{}")
        if serving is not None and j.get("done", 0) > done_at_kill:
            return serving, time.monotonic() - killed
        time.sleep(0.005)
    raise RuntimeError("no progress after the kill")


# A driver session that runs one 20 ms task at a time and prints, on the
# monotonic clock every process shares, when each one's Future resolved.
DRIVER = """
import sys, time
sys.path.insert(0, sys.argv[1])
import hmpmd
c = hmpmd.Client.connect(sys.argv[2], session="bench-driver", heartbeat_ms=100,
                         connect_timeout_ms=20000)
while True:
    c.submit("sleep", args={"us": 20000}).wait(60000)
    print(time.monotonic(), flush=True)
"""


def driver_after(out_path, killed):
    """Seconds from `killed` until the driver's first Future after it."""
    for _ in range(6000):
        with open(out_path) as f:
            after = [float(line) for line in f if line.strip() and float(line) > killed]
        if after:
            return after[0] - killed
        time.sleep(0.005)
    raise RuntimeError("the driver's session did not go on after the kill")


def one_run(args, workdir):
    zmq, http = free_port(), free_port()
    db = os.path.join(workdir, "jobs.db")
    log = os.path.join(workdir, "controller.log")
    base = f"http://127.0.0.1:{http}"
    ctl_argv = [os.path.join(args.bin, "hmpmd"), "controller",
                "--listen", f"tcp://127.0.0.1:{zmq}", "--http", f"127.0.0.1:{http}",
                "--db", db, "--recovery-grace-ms", str(args.grace_ms),
                "--heartbeat-ms", str(args.heartbeat_ms), "--log-level", "info"]
    procs = []
    endpoints = f"tcp://127.0.0.1:{zmq}"
    if args.standby:
        szmq, shttp = free_port(), free_port()
        standby_base = f"http://127.0.0.1:{shttp}"
        standby_argv = [a for a in ctl_argv]
        standby_argv[3] = f"tcp://127.0.0.1:{szmq}"
        standby_argv[5] = f"127.0.0.1:{shttp}"
        standby_argv.append("--standby")
        endpoints += f",tcp://127.0.0.1:{szmq}"

    def start_controller():
        p = subprocess.Popen(ctl_argv, stdout=open(log, "a"), stderr=subprocess.STDOUT)
        for _ in range(500):
            if get(base + "/api/v1/pool") is not None:
                return p
            time.sleep(0.01)
        raise RuntimeError("controller did not start")

    try:
        ctl = start_controller()
        if args.standby:
            procs.append(subprocess.Popen(standby_argv, stdout=open(log + ".standby", "a"),
                                          stderr=subprocess.STDOUT))
        for _ in range(2):
            procs.append(subprocess.Popen(
                [os.path.join(args.bin, "hmpmd-worker"), "--controller",
                 endpoints, "--cores", "cube=1,vector=1", "--log-level", "warn"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        # The driver first: it is running its tasks when the job starts.
        driver_out = os.path.join(workdir, "driver.out")
        if args.standby or args.compare:
            python_dir = os.path.join(args.bin, os.pardir, "python")
            procs.append(subprocess.Popen([sys.executable, "-c", DRIVER, python_dir, endpoints],
                                          stdout=open(driver_out, "w"),
                                          stderr=open(driver_out + ".err", "w")))
            for _ in range(3000):
                if os.path.getsize(driver_out) > 0:
                    break
                time.sleep(0.01)
        tasks = []
        for c in range(2):
            for i in range(40):
                t = {"id": f"c{c}_{i}", "kernel": "sleep", "args": {"us": 20000}}
                if i:
                    t["inputs"] = [f"c{c}_{i - 1}"]
                tasks.append(t)
        req = urllib.request.Request(base + "/api/v1/jobs", data=json.dumps(
            {"name": "chains", "tasks": tasks}).encode(), method="POST",
            headers={"Content-Type": "application/json"})
        job = json.loads(urllib.request.urlopen(req, timeout=5).read())["id"]
        for _ in range(3000):
            j = json.loads(get(f"{base}/api/v1/jobs/{job}") or "{}")
            if j.get("done", 0) >= 10:
                break
            time.sleep(0.01)
        done_at_kill = j.get("done", 0)
        ctl.send_signal(signal.SIGKILL)
        ctl.wait()
        killed = time.monotonic()
        if args.standby:
            times = wait_failover(standby_base, job, done_at_kill, killed)
            wait_success(standby_base, job)
            return times + (driver_after(driver_out, killed),)
        open(log, "a").write("--- restart ---\n")
        ctl = start_controller()
        if args.compare:
            return wait_failover(base, job, done_at_kill, killed) + (
                driver_after(driver_out, killed),)
        wait_success(base, job)
        text = open(log).read().split("--- restart ---")[-1]
        m = re.search(r"dispatch resumes after (\d+) ms: (all workers back|grace expired)", text)
        if not m:
            raise RuntimeError("no 'dispatch resumes' line in " + log)
        return int(m.group(1)), m.group(2)
    except BaseException:
        if os.environ.get("RESUME_BENCH_DEBUG"):
            os.system(f"cp -r {workdir} /tmp/resume-debug")
        raise
    finally:
        for p in procs + [locals().get("ctl")]:
            if p is not None and p.poll() is None:
                p.send_signal(signal.SIGKILL)
                p.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", required=True, help="directory with hmpmd and hmpmd-worker")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--grace-ms", type=int, default=2000)
    ap.add_argument("--heartbeat-ms", type=int, default=500)
    ap.add_argument("--standby", action="store_true",
                    help="fail over to a standby instead; compare with an immediate restart")
    args = ap.parse_args()
    args.compare = False
    if args.standby:
        return failover(args)
    resumed, how = [], []
    for _ in range(args.runs):
        with tempfile.TemporaryDirectory(prefix="hmpmd-resume-") as d:
            ms, why = one_run(args, d)
        resumed.append(ms)
        how.append(why)
    med = statistics.median(resumed)
    print(f"bench/recovery: restart after kill -9, 2 workers, heartbeat {args.heartbeat_ms} ms, "
          f"median of {args.runs} run(s) [min .. max]")
    print(f"  dispatch resumes after     {med:7.0f} ms [{min(resumed)} .. {max(resumed)}]  "
          f"({how.count('all workers back')} of {args.runs}: all workers back)")
    print(f"  fixed grace (baseline)     {args.grace_ms:7d} ms")
    print(f"  ratio resume/grace = {med / args.grace_ms:.2f}")
    return 0


def failover(args):
    times = {"standby": [], "restart": []}
    for _ in range(args.runs):
        for mode in ("standby", "restart"):
            args.standby, args.compare = mode == "standby", mode == "restart"
            with tempfile.TemporaryDirectory(prefix="hmpmd-failover-") as d:
                times[mode].append(one_run(args, d))
    print(f"bench/recovery --standby: kill -9 of the primary, 2 workers, heartbeat "
          f"{args.heartbeat_ms} ms, median of {args.runs} run(s) [min .. max], seconds from the kill")
    for mode, label in (("standby", "standby takes over"), ("restart", "restart at once (baseline)")):
        print(f"  {label:28s}", end="")
        for i, what in enumerate(("serving with 2 workers", "next task done",
                                  "driver's next Future")):
            xs = [t[i] for t in times[mode]]
            print(f" {what} {statistics.median(xs):6.3f} [{min(xs):.3f} .. {max(xs):.3f}]",
                  end="")
        print()
    ratio = statistics.median(p for _, p, _ in times["standby"]) / statistics.median(
        p for _, p, _ in times["restart"])
    print(f"  ratio standby/restart (next task done) = {ratio:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
