#!/usr/bin/env python3
"""One seeded fault-injection run against real processes: a controller
with a job store, workers with exec logs, and a job of data chains
submitted with `hmpmd submit --wait --fetch`, while a schedule of faults
drawn from the seed hits them: SIGSTOP/SIGCONT of the controller or of a
worker for durations around the worker time-out, SIGKILL of a worker
(restarted under its name) or of the controller (restarted on its store),
and a full or a slow disk under the controller (its file-size limit
lowered, so every write of its store fails; or each of its file writes
and syncs delayed by 100 ms, through the LD_PRELOAD library
libhmpmd_fault_shim.so beside the binaries), then restored. Beside the
job, a Python driver session (fault_driver.py) runs chains of its own,
and is stopped with SIGSTOP for half or twice its time-out.

The run then checks what must hold whatever the faults were:
  - the job succeeded, and every chain's output is its source times the
    product of its factors, element by element;
  - with no worker lost (killed, or stopped past the time-out), no task
    ran twice; after a loss the re-runs are counted and printed;
  - a job may fail only by the scheduler's limits on what worker deaths
    may cost (a task whose worker died on each of its attempts, or that
    was running on two workers that died: max_attempts,
    max_worker_deaths), which random kills can bring about; final outputs
    may be lost only with a lost worker (--fetch names them);
  - the store reopens: a controller killed after the run and started on
    it again reports the job as succeeded;
  - the driver's chains are right, element by element, unless its
    session was lost as documented (stopped past its time-out, or open
    when the controller was killed), which it must then say;
  - no process is left behind (each is stopped by its PID).

Each fault's time to recover is measured: from the fault's end (the
process resumed or restarted, the disk given room) to the next task the
job finishes, against the same wait from a moment of the run with no
fault (the baseline: tasks end every few tens of milliseconds); with
--runs, a table of their medians per fault closes the output.

The seed and the schedule are printed first: `fault_run.py BIN_DIR --seed
S` replays a run. Exit code 0 when every check held, 1 otherwise.
Usage: fault_run.py BIN_DIR [--seed S] [--faults N] [--workers W] [--chains C]
"""
import argparse
import array
import json
import os
import random
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from ports import free_port  # noqa: E402

HEARTBEAT_MS = 100
TIMEOUT_MS = 1000  # --worker-timeout-ms: the durations below are around it
KINDS = ("stop-controller", "stop-worker", "kill-worker", "kill-controller")


def schedule(seed, faults, workers, span_s):
    """The faults of a run: (at seconds after submission, kind, worker, hold seconds)."""
    rng = random.Random(seed)
    plan, at = [], 0.3
    for _ in range(faults):
        at += rng.uniform(0.2, span_s / max(faults, 1))
        kind = rng.choice(KINDS)
        hold = rng.choice((0.5, 1.0, 2.0)) * TIMEOUT_MS / 1000 if kind.startswith("stop") else 0.3
        plan.append((round(at, 2), kind, rng.randrange(workers), round(hold, 2)))
    return plan


DISK_KINDS = ("full-disk", "slow-disk")
SLOW_DISK_US = 100000  # each write and sync of the store, while slow


DRIVER_HEARTBEAT_MS = 250  # its session is lost after 10 silent heartbeats
DRIVER_TIMEOUT_S = 10 * DRIVER_HEARTBEAT_MS / 1000


def driver_schedule(seed, faults, span_s):
    """SIGSTOPs of the driver, from a stream of their own: (at,
    "stop-driver", 0, hold seconds), half or twice its time-out."""
    rng = random.Random(f"stop-driver-{seed}")
    return sorted((round(rng.uniform(0.3, span_s), 2), "stop-driver", 0,
                   rng.choice((0.5, 2.0)) * DRIVER_TIMEOUT_S) for _ in range(faults))


def disk_schedule(seed, faults, span_s):
    """Disk faults, drawn from a stream of their own (the process faults
    of a seed stay as they were) and injected beside them, from another
    thread: (at, kind, 0, hold seconds)."""
    rng = random.Random(f"disk-{seed}")
    plan = []
    for _ in range(faults):
        at = round(rng.uniform(0.3, span_s), 2)
        plan.append((at, rng.choice(DISK_KINDS), 0, rng.choice((0.5, 1.0, 2.0))))
    return sorted(plan)


class Run:
    def __init__(self, bin_dir, tmp, workers):
        self.bin, self.tmp, self.workers = bin_dir, tmp, workers
        self.zmq = f"tcp://127.0.0.1:{free_port()}"
        self.http = f"127.0.0.1:{free_port()}"
        self.url = "http://" + self.http
        self.db = os.path.join(tmp, "jobs.db")
        self.exec_log = os.path.join(tmp, "exec.log")
        self.procs = []            # every process started, stopped by PID at the end
        self.worker_procs = {}     # worker index -> its current process
        self.lost_pids = set()     # worker pids killed, or stopped past the time-out
        self.controller = None
        self.driver = None
        self.session_lost = None   # why the driver's session may be lost
        # The controller's disk is slow while this file holds a delay.
        self.slow_disk = os.path.join(tmp, "slow-disk")
        self.shim = os.path.join(bin_dir, "libhmpmd_fault_shim.so")
        if not os.path.exists(self.shim):
            raise RuntimeError(f"{self.shim} not found: build the hmpmd_fault_shim target")

    def spawn(self, args, log, env=None):
        with open(os.path.join(self.tmp, log), "ab") as out:
            p = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, env=env)
        self.procs.append(p)
        return p

    def start_controller(self):
        self.controller = self.spawn(
            [os.path.join(self.bin, "hmpmd"), "controller", "--listen", self.zmq, "--http",
             self.http, "--db", self.db, "--heartbeat-ms", str(HEARTBEAT_MS),
             "--worker-timeout-ms", str(TIMEOUT_MS), "--recovery-grace-ms", "2000"],
            "controller.log",
            env=dict(os.environ, LD_PRELOAD=self.shim, HMPMD_SLOW_DISK_FILE=self.slow_disk))
        self.wait_http()

    def wait_http(self):
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.controller.poll() is not None:
                raise RuntimeError("the controller exited; see controller.log")
            try:
                urllib.request.urlopen(self.url + "/api/v1/pool", timeout=2).read()
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("the controller never answered on " + self.url)

    def start_worker(self, i):
        self.worker_procs[i] = self.spawn(
            [os.path.join(self.bin, "hmpmd-worker"), "--controller", self.zmq, "--cores",
             "cube=1,vector=1", "--name", f"w{i}", "--exec-log", self.exec_log],
            f"worker{i}.log")

    def get(self, path):
        with urllib.request.urlopen(self.url + path, timeout=30) as r:
            return json.loads(r.read())

    def wait_workers(self):
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.get("/api/v1/pool").get("alive_devices") == self.workers:
                return
            time.sleep(0.05)
        raise RuntimeError("the workers did not all register")

    def inject(self, kind, worker, hold):
        if kind == "stop-controller":
            self.controller.send_signal(signal.SIGSTOP)
            time.sleep(hold)
            self.controller.send_signal(signal.SIGCONT)
        elif kind == "stop-worker":
            p = self.worker_procs[worker]
            p.send_signal(signal.SIGSTOP)
            time.sleep(hold)
            if hold * 1000 >= TIMEOUT_MS:
                self.lost_pids.add(p.pid)  # may have been declared dead meanwhile
            p.send_signal(signal.SIGCONT)
        elif kind == "kill-worker":
            p = self.worker_procs[worker]
            self.lost_pids.add(p.pid)
            p.kill()
            p.wait()
            time.sleep(hold)
            self.start_worker(worker)
        elif kind == "kill-controller":
            if self.driver is not None and self.driver.poll() is None:
                self.session_lost = "its session was open when the controller was killed"
            self.controller.kill()
            self.controller.wait()
            time.sleep(hold)
            self.start_controller()
        elif kind == "stop-driver":
            p = self.driver
            p.send_signal(signal.SIGSTOP)
            time.sleep(hold)
            if hold >= DRIVER_TIMEOUT_S:
                self.session_lost = f"the driver was stopped for {hold:.2f} s"
            p.send_signal(signal.SIGCONT)
        elif kind == "full-disk":
            # A write past the soft RLIMIT_FSIZE fails (EFBIG), as on a full
            # disk; the controller ignores SIGXFSZ. Its log (a file here)
            # fails alike. A controller killed meanwhile restarts with room.
            pid = self.controller.pid
            try:
                _, hard = resource.prlimit(pid, resource.RLIMIT_FSIZE)
                resource.prlimit(pid, resource.RLIMIT_FSIZE, (1, hard))
                time.sleep(hold)
                resource.prlimit(pid, resource.RLIMIT_FSIZE, (hard, hard))
            except ProcessLookupError:
                pass
        elif kind == "slow-disk":
            # Read by the library at most every 20 ms; a restarted
            # controller reads it too, as a disk stays slow across one.
            for delay in (SLOW_DISK_US, 0):
                with open(self.slow_disk + ".new", "w") as f:
                    f.write(str(delay))
                os.replace(self.slow_disk + ".new", self.slow_disk)
                if delay:
                    time.sleep(hold)

    def stop_all(self):
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGCONT)
                p.kill()
            p.wait()
        return [p.pid for p in self.procs if p.poll() is None]


def job_spec(chains, links, rng):
    """`chains` data chains of `links` scale links, each link after a sleep,
    plus a copy of each chain's source as a final output of its own; the
    factors (powers of two, exact in float32) are returned too."""
    tasks, factors = [], []
    for c in range(chains):
        src = f"c{c}x0"
        tasks.append({"id": src, "kernel": "scale", "args": {"n": 4096, "factor": 1.0}})
        tasks.append({"id": f"c{c}copy", "kernel": "scale", "inputs": [src],
                      "args": {"factor": 1.0}})
        prev, product = src, 1.0
        for k in range(1, links + 1):
            nap = f"c{c}s{k}"
            tasks.append({"id": nap, "kernel": "sleep", "core": "vector",
                          "args": {"us": rng.choice((50000, 100000, 200000))}, "inputs": [prev]})
            f = rng.choice((0.5, 2.0))
            product *= f
            tasks.append({"id": f"c{c}x{k}", "kernel": "scale", "inputs": [prev, nap],
                          "args": {"factor": f}})
            prev = f"c{c}x{k}"
        factors.append((prev, product))
    return {"name": "faults", "tasks": tasks}, factors


class Progress:
    """The job's done count, sampled every 20 ms from REST (a sample that
    gets no answer in 250 ms, as while the controller is down, is skipped),
    and each fault's window."""

    def __init__(self, url):
        self.url, self.samples, self.windows = url, [], []  # (t, done); (kind, t0, t1)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.sample, daemon=True)
        self.thread.start()

    def sample(self):
        while not self.stop.wait(0.02):
            try:
                with urllib.request.urlopen(self.url + "/api/v1/jobs/1", timeout=0.25) as r:
                    self.samples.append((time.monotonic(), json.loads(r.read()).get("done", 0)))
            except (OSError, ValueError):
                pass

    def finish(self):
        self.stop.set()
        self.thread.join()

    def next_done_after(self, t):
        """Seconds from t to the first sample after it whose done count is
        above the last one at or before t; None if none is."""
        before = [d for s, d in self.samples if s <= t]
        base = before[-1] if before else 0
        for s, d in self.samples:
            if s > t and d > base:
                return s - t
        return None

    def overlaps(self, a, b, skip=None):
        """Whether [a, b] meets a fault's window or the second after it."""
        return any(k != skip and t0 <= b and a <= t1 + 1.0
                   for k, (_kind, t0, t1) in enumerate(self.windows))

    def recoveries(self):
        """[(kind, seconds)] for each fault after which the job went on
        before another fault began (overlapping ones are not told apart)."""
        out = []
        for k, (kind, _t0, t1) in enumerate(self.windows):
            r = self.next_done_after(t1)
            if r is not None and not any(j != k and t1 <= t0 <= t1 + r
                                         for j, (_kind, t0, _t1) in enumerate(self.windows)):
                out.append((kind, r))
        return out

    def baseline(self):
        """The same wait from each sample whose wait meets no fault's
        window nor the second after it."""
        waits = []
        for s, _ in self.samples:
            r = self.next_done_after(s)
            if r is not None and not self.overlaps(s, s + r):
                waits.append(r)
        return waits


def median(xs):
    xs = sorted(xs)
    n = len(xs)
    return None if n == 0 else (xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2)


def double_runs(runs, lost_pids):
    """With no worker lost (killed, or stopped past the time-out), a task
    that ran more than once. After a loss the controller runs again what was
    running on the lost worker, and rebuilds by lineage the inputs those
    runs need that were already freed; those re-runs are counted, not
    failed."""
    if lost_pids:
        return []
    return [f"job {job} run {task} ran {len(pids)} times with no worker lost (pids {pids})"
            for (job, task), pids in sorted(runs.items()) if len(pids) > 1]


def read_f32(out_dir, manifest, task):
    files = manifest[task] if isinstance(manifest, dict) else None
    name = files[0] if isinstance(files, list) else f"{task}.0.bin"
    data = array.array("f")
    with open(os.path.join(out_dir, name if isinstance(name, str) else name["file"]), "rb") as f:
        data.frombytes(f.read())
    return data


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bin_dir")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--runs", type=int, default=1,
                    help="runs with seeds SEED, SEED+1, ...; a summary line at the end")
    ap.add_argument("--faults", type=int, default=4)
    ap.add_argument("--disk-faults", type=int, default=1, help="full disks, beside --faults")
    ap.add_argument("--driver-faults", type=int, default=1, help="driver stops, beside --faults")
    ap.add_argument("--python-dir", default=None,
                    help="where the hmpmd Python module is (default: BIN_DIR/../python)")
    ap.add_argument("--keep-logs", default=None, metavar="DIR",
                    help="copy a failed run's logs (exec log included) to DIR/seed-S")
    ap.add_argument("--workers", type=int, default=3)
    ap.add_argument("--chains", type=int, default=6)
    ap.add_argument("--links", type=int, default=12)
    a = ap.parse_args()
    first = a.seed if a.seed is not None else random.SystemRandom().randrange(1 << 31)
    recovered = {}
    failed = [seed for seed in range(first, first + a.runs) if run_once(seed, a, recovered)]
    if a.runs > 1:
        print(f"fault_run: {a.runs - len(failed)} of {a.runs} runs held every check"
              + (f"; failed seeds: {failed}" if failed else ""))
        print("| fault | measured | median s to the next task done | max s |")
        print("|---|---|---|---|")
        for kind in list(KINDS) + list(DISK_KINDS) + ["baseline"]:
            xs = recovered.get(kind, [])
            if xs:
                print(f"| {kind} | {len(xs)} | {median(xs):.2f} | {max(xs):.2f} |")
    return 1 if failed else 0


def run_once(seed, a, recovered):
    """One run; returns its failures (printed). Adds each fault's time to
    recover to recovered[kind], and the baseline's waits to
    recovered["baseline"]."""
    rng = random.Random(seed)
    spec, factors = job_spec(a.chains, a.links, rng)
    # The job's length on the critical path: faults fall inside it.
    span = a.links * 0.12
    plan = schedule(seed, a.faults, a.workers, span)
    disk_plan = disk_schedule(seed, a.disk_faults, span)
    driver_plan = driver_schedule(seed, a.driver_faults, span)
    print(f"fault_run: seed {seed}; replay: fault_run.py BIN_DIR --seed {seed} --faults "
          f"{a.faults} --disk-faults {a.disk_faults} --driver-faults {a.driver_faults} "
          f"--workers {a.workers} --chains {a.chains} --links {a.links}")
    for at, kind, worker, hold in sorted(plan + disk_plan + driver_plan):
        target = (f"worker w{worker}" if "worker" in kind else "driver" if "driver" in kind
                  else "controller")
        print(f"  at {at:5.2f} s  {kind:16s} {target:10s} hold {hold:.2f} s")
    sys.stdout.flush()
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        run = Run(a.bin_dir, tmp, a.workers)
        try:
            run.start_controller()
            for i in range(a.workers):
                run.start_worker(i)
            run.wait_workers()
            spec_path, out = os.path.join(tmp, "job.json"), os.path.join(tmp, "out")
            with open(spec_path, "w") as f:
                json.dump(spec, f)
            client = subprocess.Popen(
                [os.path.join(a.bin_dir, "hmpmd"), "submit", spec_path, "--wait", "--json",
                 "--fetch", out, "--url", run.url, "--wait-timeout", "180"],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            run.procs.append(client)
            # The job is job 1: the driver's session (job 2) opens after it.
            deadline = time.monotonic() + 30
            while True:
                try:
                    run.get("/api/v1/jobs/1")
                    break
                except OSError:
                    if time.monotonic() > deadline or client.poll() is not None:
                        raise RuntimeError("job 1 was never submitted")
                    time.sleep(0.01)
            python_dir = a.python_dir or os.path.join(a.bin_dir, "..", "python")
            run.driver = subprocess.Popen(
                [sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                              "fault_driver.py"),
                 python_dir, run.zmq, str(seed), "2", str(a.links), str(DRIVER_HEARTBEAT_MS)],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            run.procs.append(run.driver)
            start = time.monotonic()
            progress = Progress(run.url)

            def follow(faults, target=client):
                for at, kind, worker, hold in faults:
                    time.sleep(max(0.0, start + at - time.monotonic()))
                    if target.poll() is not None:
                        break  # it ended first: later faults have nothing to hit
                    t0 = time.monotonic()
                    run.inject(kind, worker, hold)
                    progress.windows.append((kind, t0, time.monotonic()))
            others = [threading.Thread(target=follow, args=(disk_plan,)),
                      threading.Thread(target=follow, args=(driver_plan, run.driver))]
            for t in others:
                t.start()
            try:
                follow(plan)
            finally:
                for t in others:
                    t.join()
            stdout, stderr = client.communicate(timeout=240)
            driver_out, driver_err = run.driver.communicate(timeout=240)
            progress.finish()
            lines = driver_out.strip().splitlines()
            said = json.loads(lines[-1]) if lines else {"ok": False, "error": driver_err.strip()}
            if said.get("ok"):
                print("fault_run: the driver's chains are right")
            elif run.session_lost and not said.get("data"):
                print(f"fault_run: the driver's session was lost ({run.session_lost}): "
                      f"{said.get('error')}")
            else:
                failures.append(f"the driver failed: {said.get('error')}")
            for kind, seconds in progress.recoveries():
                print(f"fault_run: {kind}: the job went on {seconds:.2f} s after it")
                recovered.setdefault(kind, []).append(seconds)
            recovered.setdefault("baseline", []).extend(progress.baseline())
            fetched = client.returncode == 0
            job = run.get("/api/v1/jobs/1")
            # Failed by the scheduler's limits on what worker deaths may cost.
            poisoned = (not fetched and len(run.lost_pids) >= 2 and job.get("state") == "failed"
                        and re.search(r"attempts: its worker .* died|max_worker_deaths",
                                      job.get("error", "")))
            if poisoned:
                print("fault_run: the job failed by the limits on worker deaths: "
                      + job.get("error", ""))
            elif not fetched and run.lost_pids and "its final outputs were lost" in stderr:
                # A final output held only by a worker that died as the
                # job ended (its death noticed after the end, when nothing
                # rebuilds it): the job succeeded, and --fetch names what is
                # gone (cli.md).
                state = run.get("/api/v1/jobs/1").get("state")
                if state != "succeeded":
                    failures.append(f"the job is '{state}' after its outputs were lost")
                print("fault_run: final outputs lost with a lost worker; data not checked")
            elif not fetched:
                failures.append(f"submit --wait exited {client.returncode}: {stderr.strip()}; "
                                f"the job is '{job.get('state')}': {job.get('error', '')}")
            else:
                with open(os.path.join(out, "manifest.json")) as f:
                    manifest = json.load(f)
                for c, (last, product) in enumerate(factors):
                    src, got = read_f32(out, manifest, f"c{c}copy"), read_f32(out, manifest, last)
                    want = [x * product for x in src]
                    if len(got) != len(want) or any(g != w for g, w in zip(got, want)):
                        failures.append(f"chain {c}: output '{last}' is not its source times "
                                        f"{product}")
            # Runs per task, and on which pids.
            runs = {}
            with open(run.exec_log) as f:
                for line in f:
                    job, task, _attempt, pid = (int(x) for x in line.split())
                    runs.setdefault((job, task), []).append(pid)
            ran = len([key for key in runs if key[0] == 1])  # the job's; the driver's is 2
            if not poisoned and ran != len(spec["tasks"]):
                failures.append(f"{ran} of {len(spec['tasks'])} tasks ran")
            failures += double_runs(runs, run.lost_pids)
            reruns = sum(len(p) - 1 for key, p in runs.items() if key[0] == 1)
            driver_reruns = sum(len(p) - 1 for key, p in runs.items() if key[0] != 1)
            # The store reopens on what this run left in it, and the job ends
            # as it did (results not yet written when it was killed come back
            # from the workers).
            run.controller.kill()
            run.controller.wait()
            run.start_controller()
            state, deadline = None, time.monotonic() + 60
            while time.monotonic() < deadline:
                state = run.get("/api/v1/jobs/1").get("state")
                if state in ("succeeded", "failed", "cancelled"):
                    break
                time.sleep(0.1)
            if state != ("failed" if poisoned else "succeeded"):
                failures.append(f"after a restart on its store the job is '{state}'")
            print(f"fault_run: {ran} tasks, {reruns} re-run(s), {len(run.lost_pids)} worker "
                  f"process(es) lost; the driver's: {len(runs) - ran} tasks, {driver_reruns} "
                  f"re-run(s)")
        except Exception as e:  # a harness failure is a failed run, with its seed
            failures.append(f"{type(e).__name__}: {e}")
        finally:
            left = run.stop_all()
            if left:
                failures.append(f"processes left behind: {left}")
            if failures and a.keep_logs:
                kept = os.path.join(a.keep_logs, f"seed-{seed}")
                shutil.copytree(tmp, kept, dirs_exist_ok=True,
                                ignore=shutil.ignore_patterns("*.db*", "out"))
                print(f"fault_run: logs kept in {kept}", file=sys.stderr)
            if failures:
                for name in sorted(os.listdir(tmp)):
                    if name.endswith(".log") and name != "exec.log":
                        with open(os.path.join(tmp, name), errors="replace") as f:
                            tail = f.readlines()[-15:]
                        print(f"--- {name} (last lines)\n" + "".join(tail), file=sys.stderr)
    for msg in failures:
        print(f"fault_run: seed {seed}: FAILED: {msg}", file=sys.stderr)
    return failures


if __name__ == "__main__":
    sys.exit(main())
