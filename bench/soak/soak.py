#!/usr/bin/env python3
"""Soak: a steady stream of jobs and driver sessions for a bounded time,
while workers die and come back, the controller is killed and restarted on
its store, and many HTTP clients read the API; then the ledger.

Real processes (tests/faults/fault_run.py's Run): a controller with a job
store and --keep-jobs retention, W workers with exec logs, K submitters
each running `hmpmd submit JOB --wait --json` in a loop (a job of data
chains, 2 chains of 6 links by default), a Python driver session
(tests/faults/fault_driver.py) opened every few seconds, and R readers
polling /api/v1/jobs and /api/v1/pool on keep-alive connections. Every
--worker-kill-s a random worker is killed with SIGKILL and started again
0.3 s later under its name; every --controller-kill-s the controller is.

What must hold (exit 1 otherwise):
  - every job a submitter was told of ended succeeded, or failed only by
    the limits on what worker deaths may cost; a submit refused while the
    controller was down is counted, not failed (the submitter tries again);
  - tasks lost: 0 -- at the end no job is left unfinished;
  - tasks run twice beyond what the losses in the controller's log
    explain: 0 (fault_run.unexplained_runs over every job);
  - each driver session's chains are right, element by element: one open
    across a controller restart resumes there (a failed one is counted
    apart, as lost across a restart, and fails the soak);
  - no process is left behind.
What it reports, every --sample-s: jobs done, the controller's resident
memory and the store's size (database, WAL and shared memory); and the
growth of both after the warm-up (the first third), which retention
should hold flat.

  python3 bench/soak/soak.py build/bin --minutes 3           # the long form
  python3 bench/soak/soak.py build/bin --minutes 0.5 --smoke # CI's short form
"""
import argparse
import http.client
import json
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "faults"))
import fault_run  # noqa: E402


def rss_mib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def store_mib(db):
    return sum(os.path.getsize(db + ext) for ext in ("", "-wal", "-shm")
               if os.path.exists(db + ext)) / (1 << 20)


class Soak:
    def __init__(self, a, tmp):
        self.a, self.tmp = a, tmp
        self.run = fault_run.Run(a.bin_dir, tmp, a.workers)
        self.run.controller_args = ["--keep-jobs", str(a.keep_jobs)]
        self.spec_path = os.path.join(tmp, "job.json")
        rng = random.Random(a.seed)
        self.spec, _ = fault_run.job_spec(a.chains, a.links, rng)
        with open(self.spec_path, "w") as f:
            json.dump(self.spec, f)
        self.stop = threading.Event()
        self.lock = threading.Lock()        # guards the ledger below
        self.lifecycle = threading.Lock()   # one kill or restart at a time
        self.jobs = {}                      # job id -> final state
        self.failures = []
        self.refused = 0                    # submits the controller could not take
        self.deaths_limited = 0             # jobs failed by the worker-death limits
        self.sessions = {"right": 0, "lost": 0}
        self.driver_jobs = set()
        self.reads = 0
        self.samples = []                   # (t, jobs done, rss MiB, store MiB)
        self.kills = {"worker": 0, "controller": 0}

    # --- load -----------------------------------------------------------

    def submitter(self):
        hmpmd = os.path.join(self.a.bin_dir, "hmpmd")
        while not self.stop.is_set():
            p = subprocess.run([hmpmd, "submit", self.spec_path, "--wait", "--json", "--url",
                                self.run.url, "--wait-timeout", "120"],
                               capture_output=True, text=True, timeout=300)
            out = p.stdout.strip()
            if not out.startswith("{"):
                # Not submitted (the controller down or its store full):
                # nothing to account for; try again.
                with self.lock:
                    self.refused += 1
                time.sleep(0.2)
                continue
            job = json.loads(out)
            with self.lock:
                self.jobs[job["id"]] = job["state"]
                if job["state"] == "succeeded":
                    continue
                error = job.get("error", "")
                if job["state"] == "failed" and ("max_worker_deaths" in error
                                                 or "its worker" in error and "died" in error):
                    self.deaths_limited += 1
                else:
                    self.failures.append(f"job {job['id']} ended {job['state']}: {error} "
                                         f"(exit {p.returncode}: {p.stderr.strip()[-300:]})")

    def driver(self):
        n = 0
        while not self.stop.wait(self.a.driver_every_s):
            n += 1
            restarts = self.kills["controller"]
            p = subprocess.run(
                [sys.executable, os.path.join(HERE, "..", "..", "tests", "faults",
                                              "fault_driver.py"),
                 self.a.python_dir, self.run.zmq, str(self.a.seed + n), "1", "4", "250"],
                capture_output=True, text=True, timeout=300)
            lines = p.stdout.strip().splitlines()
            said = json.loads(lines[-1]) if lines else {"ok": False, "error": p.stderr[-300:]}
            with self.lock:
                if "job" in said:
                    self.driver_jobs.add(said["job"])
                if said.get("ok"):
                    self.sessions["right"] += 1
                elif not said.get("data") and re.search(fault_run.DEATH_LIMITS,
                                                        said.get("error", "")):
                    self.deaths_limited += 1  # as a job may (fault_driver names the cause)
                else:
                    # A session open across a restart resumes there.
                    if self.kills["controller"] > restarts:
                        self.sessions["lost"] += 1
                    self.failures.append(f"driver session {n}: {said.get('error')}")

    def reader(self):
        host, port = self.run.http.split(":")
        conn = None
        while not self.stop.is_set():
            try:
                if conn is None:
                    conn = http.client.HTTPConnection(host, int(port), timeout=5)
                for path in ("/api/v1/jobs", "/api/v1/pool"):
                    conn.request("GET", path)
                    conn.getresponse().read()
                with self.lock:
                    self.reads += 2
            except (OSError, http.client.HTTPException):
                conn = None
                time.sleep(0.2)
            time.sleep(self.a.read_pause_s)

    # --- faults ---------------------------------------------------------

    def churn(self, start):
        rng = random.Random(self.a.seed)
        next_worker = start + self.a.worker_kill_s
        next_controller = start + self.a.controller_kill_s
        while not self.stop.wait(0.05):
            now = time.monotonic()
            with self.lifecycle:
                if now >= next_worker:
                    self.run.kill_worker(rng.randrange(self.a.workers), 0.3)
                    self.kills["worker"] += 1
                    next_worker += self.a.worker_kill_s
                if now >= next_controller:
                    self.run.restart_controller(0.3)
                    self.kills["controller"] += 1
                    next_controller += self.a.controller_kill_s

    def sampler(self, start):
        while not self.stop.wait(self.a.sample_s):
            with self.lock:
                done = len(self.jobs)
            self.samples.append((time.monotonic() - start, done,
                                 rss_mib(self.run.controller.pid), store_mib(self.run.db)))

    # --- the run --------------------------------------------------------

    def guarded(self, fn, *args):
        """A thread's target: an exception ends the soak as a failure, not
        a thread that quietly stopped its share of the load."""
        def body():
            try:
                fn(*args)
            except Exception as e:  # noqa: BLE001 -- any of them fails the soak
                with self.lock:
                    self.failures.append(f"{fn.__name__}: {type(e).__name__}: {e}")
                self.stop.set()
        return threading.Thread(target=body)

    def go(self):
        run = self.run
        run.start_controller()
        for i in range(self.a.workers):
            run.start_worker(i)
        run.wait_workers()
        start = time.monotonic()
        threads = [self.guarded(self.submitter) for _ in range(self.a.submitters)]
        threads += [self.guarded(self.reader) for _ in range(self.a.readers)]
        threads += [self.guarded(self.driver), self.guarded(self.churn, start),
                    self.guarded(self.sampler, start)]
        for t in threads:
            t.start()
        self.stop.wait(self.a.minutes * 60)
        self.stop.set()
        for t in threads:
            t.join()
        elapsed = time.monotonic() - start
        # Nothing left unfinished: every job the controller still lists ended.
        unfinished = [j for j in run.get("/api/v1/jobs").get("jobs", [])
                      if j.get("state") not in ("succeeded", "failed", "cancelled")]
        for j in unfinished:
            self.failures.append(f"job {j['id']} is still '{j.get('state')}' at the end")
        runs = {}
        with open(run.exec_log) as f:
            for line in f:
                job, task, attempt, pid = (int(x) for x in line.split())
                runs.setdefault((job, task), []).append((attempt, pid))
        lost = fault_run.declared_lost(os.path.join(self.tmp, "controller.log"))
        specs = {job: self.spec for job, _ in runs if job not in self.driver_jobs}
        self.failures += fault_run.unexplained_runs(runs, lost, specs)
        reruns = sum(len(r) - 1 for r in runs.values())
        self.report(elapsed, len(runs), reruns, len(lost))

    def report(self, elapsed, tasks, reruns, lost):
        ok = sum(1 for s in self.jobs.values() if s == "succeeded")
        print(f"soak: {elapsed:.0f} s, {self.a.workers} workers, {self.a.submitters} submitters, "
              f"{self.a.readers} HTTP readers; {self.kills['worker']} worker kills, "
              f"{self.kills['controller']} controller kills")
        print(f"soak: jobs {len(self.jobs)} ended ({ok} succeeded, {self.deaths_limited} failed "
              f"by the worker-death limits), {self.refused} submits refused while the controller "
              f"was down; {tasks} task runs, {reruns} re-run(s), {lost} worker process(es) lost "
              f"by the controller's log; driver sessions: {self.sessions['right']} right, "
              f"{self.sessions['lost']} failed across a restart; {self.reads / elapsed:.0f} HTTP "
              f"reads/s")
        print("| t (s) | jobs ended | controller RSS (MiB) | store (MiB) |")
        print("|---|---|---|---|")
        for t, done, rss, store in self.samples:
            print(f"| {t:.0f} | {done} | {rss if rss is None else f'{rss:.1f}'} | {store:.2f} |")
        rss = [(t, r) for t, _, r, _ in self.samples if r is not None]
        if len(rss) >= 3:
            warm = [r for t, r in rss if t >= elapsed / 3]
            stores = [s for t, _, _, s in self.samples if t >= elapsed / 3]
            print(f"soak: after the warm-up (t >= {elapsed / 3:.0f} s): RSS {warm[0]:.1f} -> "
                  f"{warm[-1]:.1f} MiB (x{warm[-1] / warm[0]:.2f}), store {stores[0]:.2f} -> "
                  f"{stores[-1]:.2f} MiB")


def main():
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("bin_dir")
    ap.add_argument("--minutes", type=float, default=3.0)
    ap.add_argument("--smoke", action="store_true",
                    help="CI's short form: faults every few seconds, fewer readers")
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--submitters", type=int, default=3)
    ap.add_argument("--readers", type=int, default=20)
    ap.add_argument("--read-pause-s", type=float, default=0.05)
    ap.add_argument("--chains", type=int, default=2)
    ap.add_argument("--links", type=int, default=6)
    ap.add_argument("--keep-jobs", type=int, default=50, help="the controller's retention")
    ap.add_argument("--worker-kill-s", type=float, default=20.0)
    ap.add_argument("--controller-kill-s", type=float, default=60.0)
    ap.add_argument("--driver-every-s", type=float, default=5.0)
    ap.add_argument("--sample-s", type=float, default=5.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--python-dir", default=None,
                    help="where the hmpmd Python module is (default: BIN_DIR/../python)")
    a = ap.parse_args()
    if a.smoke:
        a.worker_kill_s, a.controller_kill_s, a.readers = 6.0, 15.0, 5
        a.sample_s, a.driver_every_s = 3.0, 4.0
    a.python_dir = a.python_dir or os.path.join(a.bin_dir, "..", "python")
    print(f"soak: seed {a.seed}; replay: soak.py BIN_DIR " + " ".join(sys.argv[2:]))
    with tempfile.TemporaryDirectory() as tmp:
        soak = Soak(a, tmp)
        try:
            soak.go()
        except Exception as e:  # a harness failure fails the soak
            soak.failures.append(f"{type(e).__name__}: {e}")
        finally:
            soak.stop.set()
            left = soak.run.stop_all()
            if left:
                soak.failures.append(f"processes left behind: {left}")
            if soak.failures:
                with open(os.path.join(tmp, "controller.log"), errors="replace") as f:
                    print("--- controller.log (last lines)\n" + "".join(f.readlines()[-20:]),
                          file=sys.stderr)
    for msg in soak.failures:
        print(f"soak: FAILED: {msg}", file=sys.stderr)
    return 1 if soak.failures else 0


if __name__ == "__main__":
    sys.exit(main())
