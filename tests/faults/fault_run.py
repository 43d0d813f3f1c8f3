#!/usr/bin/env python3
"""One seeded fault-injection run against real processes: a controller
with a job store, workers with exec logs, and a job of data chains and
allreduce gangs submitted with `hmpmd submit --wait --fetch`, while a
schedule of faults drawn from the seed hits them:
  - process faults: SIGSTOP/SIGCONT of the controller or of a worker for
    durations around the worker time-out, SIGKILL of a worker (restarted
    under its name) or of the controller (restarted on its store);
  - disk faults: a full or a slow disk under the controller (its
    file-size limit lowered, so every write of its store fails; or each of
    its file writes and syncs delayed by 100 ms, through the LD_PRELOAD
    library libhmpmd_fault_shim.so beside the binaries), then restored;
  - clock faults: the wall clock of every process stepped two hours
    forward or back (the same library), then back;
  - aimed kills: the controller killed in the middle of a store write (a
    torn write, by the library), or a worker killed while REST shows it
    running a member of a collective;
  - with --netns (root): each worker in a network namespace of its own,
    and packets dropped between chosen processes: a worker cut off both
    ways, one-way loss from the controller to a worker or back, or two
    workers cut off from each other (blackhole rules);
  - a Python driver session (fault_driver.py) runs chains of its own
    beside the job, and is stopped with SIGSTOP for half or twice its
    time-out.
Each kind of fault is drawn from a stream of its own, so adding one leaves
the others of a seed as they were.

The run then checks what must hold whatever the faults were:
  - the job succeeded, every chain's output is its source times the
    product of its factors, and every allreduce member's output the sum
    of what each member made, element by element;
  - every re-run is explained: a task runs again only after a worker was
    lost (killed, or stopped or cut off past the time-out), so at most one
    of its runs is on a process never lost, unless it, its gang or a task
    downstream of it ran on a lost one (lineage); re-runs are counted and
    printed;
  - a job may fail only by the scheduler's limits on what worker deaths
    may cost (a task whose worker died on each of its attempts, or that
    was running on two workers that died: max_attempts,
    max_worker_deaths), which random kills can bring about; final outputs
    may be lost only with a lost worker (--fetch names them);
  - the store reopens: a controller killed after the run and started on
    it again reports the job as it ended;
  - the driver's chains are right, element by element, unless its
    session was lost as documented (stopped past its time-out), or one of
    its tasks failed by the limits on worker deaths (as the job may), which
    it must then say; a session open when the controller was killed
    resumes on the restarted one;
  - no process is left behind (each is stopped by its PID), and no
    namespace.

Each fault's time to recover is measured: from the fault's end (the
process resumed or restarted, the disk given room, the link healed) to
the next task the job finishes, against the same wait from a moment of
the run with no fault (the baseline: tasks end every few tens of
milliseconds); with --runs, a table of their medians per fault closes the
output.

The seed and the schedule are printed first: `fault_run.py BIN_DIR --seed
S` (with the options printed) replays a run. Exit code 0 when every check
held, 1 otherwise, 77 when --netns cannot run here.
Usage: fault_run.py BIN_DIR [--seed S] [--runs N] [--netns] [--faults N] ...
"""
import argparse
import array
import contextlib
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

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
from ports import free_port  # noqa: E402
import netns_cluster  # noqa: E402

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


# What a task that the worker-death limits ended says (scheduling.md).
DEATH_LIMITS = r"attempts( of its collective group '[^']*')?: its worker .* died|max_worker_deaths"
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


NET_KINDS = ("partition-worker", "drop-to-worker", "drop-from-worker", "partition-peers")


def net_schedule(seed, faults, workers, span_s):
    """Network faults (--netns), from a stream of their own: (at, kind,
    worker, hold seconds), for 0.5, 1 or 2 times the worker time-out."""
    rng = random.Random(f"net-{seed}")
    plan = []
    for _ in range(faults):
        at = round(rng.uniform(0.3, span_s), 2)
        plan.append((at, rng.choice(NET_KINDS), rng.randrange(workers),
                     rng.choice((0.5, 1.0, 2.0)) * TIMEOUT_MS / 1000))
    return sorted(plan)


CLOCK_KINDS = ("clock-forward", "clock-back")
CLOCK_STEP_US = 2 * 3600 * 1000000  # two hours, past the controller's --keep-hours 1


def clock_schedule(seed, faults, span_s):
    """Wall-clock steps of every process (the host's clock, stepped by
    two hours forward or back, and back again after the hold), from a
    stream of their own."""
    rng = random.Random(f"clock-{seed}")
    return sorted((round(rng.uniform(0.3, span_s), 2), rng.choice(CLOCK_KINDS), 0,
                   rng.choice((0.5, 1.0, 2.0))) for _ in range(faults))


CRASH_KINDS = ("kill-controller-in-write", "kill-worker-in-collective")


def crash_schedule(seed, faults, workers, span_s):
    """Kills aimed at a moment, from a stream of their own: the controller
    in the middle of a write of its store, or a worker running a member of
    a collective. (at, kind, 0, hold before the restart)."""
    rng = random.Random(f"crash-{seed}")
    return sorted((round(rng.uniform(0.3, span_s), 2), rng.choice(CRASH_KINDS), 0, 0.3)
                  for _ in range(faults))


class Run:
    def __init__(self, bin_dir, tmp, workers, net=None, log_level="info"):
        self.bin, self.tmp, self.workers = bin_dir, tmp, workers
        self.log_level = log_level
        # With a network (--netns), this process is in the controller's
        # namespace, each worker in one of its own, joined by a veth link.
        self.net = net
        self.port = free_port()
        self.zmq = f"tcp://127.0.0.1:{self.port}"
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
        # The host's wall clock is stepped while this file holds an offset.
        self.clock_step = os.path.join(tmp, "clock-step")
        # The controller kills itself in its next store write while this
        # file holds 1.
        self.crash_write = os.path.join(tmp, "crash-write")
        self.notes = []            # what aimed faults found, printed after the run
        self.copiers = []          # threads copying piped output to the logs
        self.controller_args = []  # beyond start_controller's own
        self.shim = os.path.join(bin_dir, "libhmpmd_fault_shim.so")
        if not os.path.exists(self.shim):
            raise RuntimeError(f"{self.shim} not found: build the hmpmd_fault_shim target")

    def spawn(self, args, log, env=None, piped=False):
        """Starts a process whose output goes to `log` in the run's folder:
        written by the process itself, or, `piped`, through a pipe this
        harness copies (as journald takes a service's output), so that a
        full disk of the process's own (RLIMIT_FSIZE) does not lose the
        lines that explain re-runs."""
        env = dict(os.environ, LD_PRELOAD=self.shim, HMPMD_CLOCK_STEP_FILE=self.clock_step,
                   **(env or {}))
        path = os.path.join(self.tmp, log)
        if not piped:
            with open(path, "ab") as out:
                p = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, env=env)
        else:
            p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)

            def copy(src=p.stdout):
                with open(path, "ab") as out:
                    for line in iter(src.readline, b""):
                        out.write(line)
                        out.flush()
                src.close()
            t = threading.Thread(target=copy, daemon=True)
            t.start()
            self.copiers.append(t)
        self.procs.append(p)
        return p

    def start_controller(self):
        listen = f"tcp://0.0.0.0:{self.port}" if self.net else self.zmq
        self.controller = self.spawn(
            [os.path.join(self.bin, "hmpmd"), "controller", "--listen", listen, "--http",
             self.http, "--db", self.db, "--heartbeat-ms", str(HEARTBEAT_MS),
             "--worker-timeout-ms", str(TIMEOUT_MS), "--recovery-grace-ms", "2000",
             "--keep-hours", "1", "--log-level", self.log_level] + self.controller_args,
            "controller.log",
            env={"HMPMD_SLOW_DISK_FILE": self.slow_disk, "HMPMD_CRASH_WRITE_FILE": self.crash_write},
            piped=True)
        self.wait_http()

    def wait_http(self):
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.controller.poll() is not None:
                raise RuntimeError("the controller exited; see controller.log")
            try:
                api_get(self.url + "/api/v1/pool", timeout=2).read()
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("the controller never answered on " + self.url)

    def start_worker(self, i):
        where, endpoint = [], self.zmq
        if self.net:
            where = ["ip", "netns", "exec", self.net.leaves[i]]
            endpoint = f"tcp://{self.net.controller_ip(i)}:{self.port}"
        self.worker_procs[i] = self.spawn(
            where + [os.path.join(self.bin, "hmpmd-worker"), "--controller", endpoint, "--cores",
                     "cube=1,vector=1", "--name", f"w{i}", "--exec-log", self.exec_log,
                     "--log-level", self.log_level],
            f"worker{i}.log")

    def get(self, path):
        with api_get(self.url + path, timeout=30) as r:
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
            self.kill_worker(worker, hold)
        elif kind == "kill-controller":
            self.restart_controller(hold)
        elif kind == "stop-driver":
            p = self.driver
            p.send_signal(signal.SIGSTOP)
            time.sleep(hold)
            if hold >= DRIVER_TIMEOUT_S:
                self.session_lost = f"the driver was stopped for {hold:.2f} s"
            p.send_signal(signal.SIGCONT)
        elif kind == "full-disk":
            # A write past the soft RLIMIT_FSIZE fails (EFBIG), as on a full
            # disk; the controller ignores SIGXFSZ. Its output goes through
            # a pipe (spawn), which the limit does not touch, as to journald.
            # A controller killed meanwhile restarts with room.
            pid = self.controller.pid
            try:
                _, hard = resource.prlimit(pid, resource.RLIMIT_FSIZE)
                resource.prlimit(pid, resource.RLIMIT_FSIZE, (1, hard))
                time.sleep(hold)
                resource.prlimit(pid, resource.RLIMIT_FSIZE, (hard, hard))
            except ProcessLookupError:
                pass
        elif kind in NET_KINDS:
            self.cut(kind, worker, hold)
        elif kind in CLOCK_KINDS:
            step = CLOCK_STEP_US if kind == "clock-forward" else -CLOCK_STEP_US
            for offset in (step, 0):
                self.set_knob(self.clock_step, offset)
                if offset:
                    time.sleep(hold)
        elif kind == "kill-controller-in-write":
            self.kill_controller_in_write(hold)
        elif kind == "kill-worker-in-collective":
            self.kill_worker_in_collective(hold)
        elif kind == "slow-disk":
            # Read by the library at most every 20 ms; a restarted
            # controller reads it too, as a disk stays slow across one.
            for delay in (SLOW_DISK_US, 0):
                self.set_knob(self.slow_disk, delay)
                if delay:
                    time.sleep(hold)

    @staticmethod
    def set_knob(path, value):
        """Writes a value for fault_shim.cc, which reads it within 20 ms."""
        with open(path + ".new", "w") as f:
            f.write(str(value))
        os.replace(path + ".new", path)

    def cut(self, kind, worker, hold):
        """Drops packets around worker `worker` for `hold` seconds:
        everything to and from it (partition-worker), the controller's
        packets to it or its packets to the controller (drop-to-worker,
        drop-from-worker: one-way loss; traffic between workers passes),
        or those between it and the next worker (partition-peers: the data
        plane; both still reach the controller)."""
        net, i = self.net, worker
        peer = (i + 1) % self.workers
        hub, leaf = net.hub, net.leaves
        cuts = {
            "partition-worker": [(hub, {"dst": net.worker_ip(i)}), (leaf[i], {})],
            "drop-to-worker": [(hub, {"src": net.controller_ip(i), "dst": net.worker_ip(i)})],
            "drop-from-worker": [(leaf[i], {"dst": net.controller_ip(i)})],
            "partition-peers": [(leaf[i], {"dst": net.worker_ip(peer)}),
                                (leaf[peer], {"dst": net.worker_ip(i)})],
        }[kind]
        if kind in ("partition-worker", "drop-from-worker") and hold * 1000 >= TIMEOUT_MS:
            # The controller hears nothing from it past the time-out.
            self.lost_pids.add(self.worker_procs[i].pid)
        made = []
        try:
            for ns, match in cuts:
                made.append(net.lose(ns, **match))
            time.sleep(hold)
        finally:
            for cut in made:
                net.heal(cut)

    def restart_controller(self, hold):
        # The driver's session resumes on the restarted controller: it is
        # not excused (driver-api.md, Liveness).
        self.controller.kill()
        self.controller.wait()
        time.sleep(hold)
        self.start_controller()

    def kill_controller_in_write(self, hold):
        """Arms fault_shim.cc: the controller's next pwrite64 (its store's
        files are the only ones it writes so) writes half its bytes and
        kills the process with SIGKILL, a torn write. Then it restarts on
        that store. Without a store write within 5 s it is killed where it
        is."""
        self.set_knob(self.crash_write, 1)
        try:
            rc = self.controller.wait(timeout=5)
            self.notes.append("the controller died in a store write" if rc == -signal.SIGKILL
                              else f"the controller exited {rc} before a store write")
        except subprocess.TimeoutExpired:
            self.notes.append("the controller made no store write in 5 s; killed where it was")
        finally:
            self.set_knob(self.crash_write, 0)
        self.restart_controller(hold)

    def kill_worker_in_collective(self, hold):
        """SIGKILL of a worker while REST shows it running a member of a
        collective (polled every 5 ms, up to 5 s), then its restart."""
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            try:
                tasks = self.get("/api/v1/jobs/1/tasks?state=running&limit=1000")["tasks"]
            except (OSError, ValueError, KeyError):
                tasks = []
            for t in tasks:
                m = re.fullmatch(r"w(\d+)", t.get("worker", ""))
                if t.get("kernel") == "allreduce" and m:
                    self.notes.append(f"killed worker w{m.group(1)} running {t['id']}")
                    self.kill_worker(int(m.group(1)), hold)
                    return
            time.sleep(0.005)
        self.notes.append("no collective ran within 5 s; no worker killed")

    def kill_worker(self, i, hold):
        p = self.worker_procs[i]
        self.lost_pids.add(p.pid)
        p.kill()
        p.wait()
        time.sleep(hold)
        self.start_worker(i)

    def stop_all(self):
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGCONT)
                p.kill()
            p.wait()
        for t in self.copiers:
            t.join(timeout=10)
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


def add_weights(spec, chains, links):
    """Each chain's links feed a gemm of a sub-model of its own that keeps
    its weights in its state (docs/scheduling.md#live-state): a worker that
    runs one without them loads them from the holder, which a fault may
    take down meanwhile. A = the link's 4096 floats as 64 x 64; the last
    link stays the chain's final output, which the run checks."""
    spec["submodels"] = [{"name": f"w{c}", "kind": "generic", "state_bytes": 64 * 64 * 4}
                         for c in range(chains)]
    for c in range(chains):
        for k in range(1, links):
            spec["tasks"].append({"id": f"c{c}g{k}", "kernel": "gemm", "submodel": f"w{c}",
                                  "inputs": [f"c{c}x{k}"],
                                  "args": {"m": 64, "n": 64, "k": 64, "weights": "state"}})


COLLECTIVE_N = 1 << 20  # floats per member: 4 MiB, long enough to be killed in


def add_collectives(spec, gangs, members, chains, links):
    """`gangs` allreduce gangs of `members` members, spread over the job:
    member m of gang g waits for a sleep of chain m (which holds no data),
    so makes COLLECTIVE_N floats of its own (worker/collective_kernels.cc:
    element i of rank r is (i % 251) / 2 + r); each member's output is a
    final output. Appended after the chains, so the seed's draws stay."""
    for g in range(gangs):
        r = (g + 1) * links // (gangs + 1) or 1
        for m in range(members):
            spec["tasks"].append({
                "id": f"g{g}m{m}", "kernel": "allreduce", "inputs": [f"c{m % chains}s{r}"],
                "args": {"n": COLLECTIVE_N},
                "collective": {"group": f"g{g}", "op": "allreduce", "bytes": COLLECTIVE_N * 4}})


def allreduce_wrong(got, members):
    """Where an allreduce member's output differs from the sum over
    ranks of what each made (exact in float32: halves below 2^24)."""
    import numpy as np
    got = np.frombuffer(got, dtype=np.float32)
    i = np.arange(COLLECTIVE_N)
    want = (members * (i % 251) * 0.5 + members * (members - 1) / 2).astype(np.float32)
    if got.shape != want.shape:
        return f"{got.size} elements, not {COLLECTIVE_N}"
    bad = np.flatnonzero(got != want)
    return None if bad.size == 0 else f"element {bad[0]} is {got[bad[0]]}, not {want[bad[0]]}"


def api_get(url, timeout):
    """urlopen(url) with the token the controller made, if it made one
    (HMPMD_TOKEN_FILE, under --netns): its reads need it."""
    req = urllib.request.Request(url)
    path = os.environ.get("HMPMD_TOKEN_FILE", "")
    if os.path.exists(path):
        with open(path) as f:
            req.add_header("Authorization", "Bearer " + f.readline().strip())
    return urllib.request.urlopen(req, timeout=timeout)


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
                with api_get(self.url + "/api/v1/jobs/1", timeout=0.25) as r:
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

    def longest_stall(self):
        """The longest time the job's done count stood still while sampled,
        up to its last task."""
        longest, since, last = 0.0, None, None
        final = max((d for _, d in self.samples), default=0)
        for s, d in self.samples:
            if d != last:
                since, last = s, d
            longest = max(longest, s - since)
            if d == final:
                break
        return longest

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


def declared_lost(log_path):
    """The worker processes the controller's log says it lost, by pid:
    declared dead (`worker 3 'w1' (pid 812) declared dead: ...`), or not
    back when a restarted controller's recovery grace ran out (`not back:
    w0 (pid 790), ...`), whose outputs it then rebuilt."""
    pids = set()
    with open(log_path, errors="replace") as f:
        for line in f:
            m = re.search(r"\(pid (\d+)\) declared dead", line)
            if m:
                pids.add(int(m.group(1)))
            m = re.search(r"not back: ([^)]*\)(, [^)]*\))*)", line)
            if m:
                pids.update(int(p) for p in re.findall(r"\(pid (\d+)\)", m.group(0)))
    return pids


def explained_tasks(ran_by_task, lost_pids, spec):
    """The tasks of one job (indices into spec["tasks"]) whose re-runs a
    loss may explain: those that ran on a lost process or needed a second
    attempt, the members of their gangs, and everything upstream of them
    (lineage rebuilds an output from the nearest inputs still held)."""
    tasks = spec["tasks"]
    index = {t["id"]: k for k, t in enumerate(tasks)}
    group = {k: t["collective"]["group"] for k, t in enumerate(tasks) if "collective" in t}
    hit = [k for k, ran in ran_by_task.items()
           if any(pid in lost_pids or attempt > 0 for attempt, pid in ran)]
    hit += [k for k, g in group.items() if any(group.get(h) == g for h in hit)]
    explained = set()
    while hit:
        k = hit.pop()
        if k not in explained and k < len(tasks):
            explained.add(k)
            hit += [index[i] for i in tasks[k].get("inputs", [])]
    return explained


def unexplained_runs(runs, lost_pids, specs):
    """Task runs that no loss in the controller's log explains. runs:
    (job, task) -> [(attempt, pid)], one per kernel run that ended well
    (the workers' exec logs); lost_pids: declared_lost(); specs: job id ->
    its spec (one step each). A task runs again only when a worker was
    lost: what was running there runs elsewhere (a later attempt), and an
    output that lived only there is rebuilt by running its producer again,
    and the producers of that one's inputs where those were already freed
    (lineage), a whole gang for a collective. So a task may run more than
    once on processes never lost only if explained_tasks() has it. Tasks
    of other jobs (driver sessions, whose graph is the driver's) may run
    again only if a worker was lost."""
    by_job = {}
    for (job, task), ran in runs.items():
        by_job.setdefault(job, {})[task] = ran
    explained = {job: explained_tasks(by_job.get(job, {}), lost_pids, spec)
                 for job, spec in specs.items()}
    out = []
    for (job, task), ran in sorted(runs.items()):
        kept = [r for r in ran if r[1] not in lost_pids]
        if len(ran) > 1 and job not in specs and not lost_pids:
            out.append(f"job {job} run {task} ran {len(ran)} times with no worker lost: {ran}")
        elif len(kept) > 1 and job in specs and task not in explained[job]:
            out.append(f"job {job} run {task} ('{specs[job]['tasks'][task]['id']}') ran "
                       f"{len(ran)} times, {len(kept)} of them on processes never lost, and no "
                       f"lost worker explains it: (attempt, pid) {ran}")
    return out


def read_f32(out_dir, manifest, task):
    files = manifest[task] if isinstance(manifest, dict) else None
    name = files[0] if isinstance(files, list) else f"{task}.0.bin"
    data = array.array("f")
    with open(os.path.join(out_dir, name if isinstance(name, str) else name["file"]), "rb") as f:
        data.frombytes(f.read())
    return data


def main():
    # SIGTERM (a test runner giving up) unwinds like Ctrl-C: every process
    # is stopped by its PID and every namespace deleted on the way out.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
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
    ap.add_argument("--clock-faults", type=int, default=1,
                    help="wall-clock steps of every process, beside --faults")
    ap.add_argument("--crash-faults", type=int, default=1,
                    help="kills aimed at a store write or a collective, beside --faults")
    ap.add_argument("--gangs", type=int, default=2,
                    help="allreduce gangs (one member per worker) in the job")
    ap.add_argument("--netns", action="store_true",
                    help="each worker in a network namespace of its own (needs root and "
                         "iproute2), so that packets between chosen processes can be dropped")
    ap.add_argument("--net-faults", type=int, default=None,
                    help="partitions and one-way losses, beside --faults (default 2 with "
                         "--netns; needs --netns)")
    ap.add_argument("--weights", action="store_true",
                    help="add gemms whose weights live in their sub-models' states, loaded "
                         "from worker to worker")
    ap.add_argument("--workers", type=int, default=3)
    ap.add_argument("--chains", type=int, default=6)
    ap.add_argument("--links", type=int, default=12)
    ap.add_argument("--log-level", default="info",
                    help="the controller's and the workers' (debug shows each cancel and each "
                         "result a controller found stale)")
    a = ap.parse_args()
    if a.net_faults is None:
        a.net_faults = 2 if a.netns else 0
    if a.net_faults and not a.netns:
        ap.error("--net-faults needs --netns (links are cut between network namespaces)")
    if a.netns:
        try:
            netns_cluster.check_host()
        except netns_cluster.SkipTest as e:
            print(f"SKIPPED: {e}")
            return 77
        netns_cluster.remove_stale_namespaces()
    first = a.seed if a.seed is not None else random.SystemRandom().randrange(1 << 31)
    recovered = {}
    failed = [seed for seed in range(first, first + a.runs) if run_once(seed, a, recovered)]
    if a.runs > 1:
        print(f"fault_run: {a.runs - len(failed)} of {a.runs} runs held every check"
              + (f"; failed seeds: {failed}" if failed else ""))
        print("| fault | measured | median s to the next task done | max s |")
        print("|---|---|---|---|")
        for kind in KINDS + DISK_KINDS + NET_KINDS + CLOCK_KINDS + CRASH_KINDS + ("baseline",):
            xs = recovered.get(kind, [])
            if xs:
                print(f"| {kind} | {len(xs)} | {median(xs):.2f} | {max(xs):.2f} |")
        stalls = recovered.get("longest wait", [])
        if stalls:
            worst = max(stalls)
            print(f"fault_run: the longest wait for a task to end, a run: median "
                  f"{median([x for x, _ in stalls]):.2f} s, max {worst[0]:.2f} s (seed {worst[1]})")
    return 1 if failed else 0


def run_once(seed, a, recovered):
    """One run; returns its failures (printed). Adds each fault's time to
    recover to recovered[kind], and the baseline's waits to
    recovered["baseline"]."""
    rng = random.Random(seed)
    spec, factors = job_spec(a.chains, a.links, rng)
    add_collectives(spec, a.gangs, a.workers, a.chains, a.links)
    if a.weights:
        add_weights(spec, a.chains, a.links)
    # The job's length on the critical path: faults fall inside it.
    span = a.links * 0.12
    plan = schedule(seed, a.faults, a.workers, span)
    # Each stream runs in a thread of its own, beside the process faults.
    streams = [disk_schedule(seed, a.disk_faults, span),
               net_schedule(seed, a.net_faults, a.workers, span),
               clock_schedule(seed, a.clock_faults, span),
               crash_schedule(seed, a.crash_faults, a.workers, span)]
    driver_plan = driver_schedule(seed, a.driver_faults, span)
    print(f"fault_run: seed {seed}; replay: fault_run.py BIN_DIR --seed {seed} --faults "
          f"{a.faults} --disk-faults {a.disk_faults} --driver-faults {a.driver_faults} "
          f"--clock-faults {a.clock_faults} --crash-faults {a.crash_faults} "
          + (f"--netns --net-faults {a.net_faults} " if a.netns else "")
          + ("--weights " if a.weights else "")
          + f"--gangs {a.gangs} --workers {a.workers} --chains {a.chains} --links {a.links}")
    for at, kind, worker, hold in sorted(plan + driver_plan + sum(streams, [])):
        target = ("driver" if "driver" in kind else "every process" if kind in CLOCK_KINDS
                  else f"w{worker}/w{(worker + 1) % a.workers}" if kind == "partition-peers"
                  else "a worker" if kind in CRASH_KINDS[1:]
                  else f"worker w{worker}" if "worker" in kind else "controller")
        print(f"  at {at:5.2f} s  {kind:25s} {target:13s} hold {hold:.2f} s")
    sys.stdout.flush()
    failures = []
    net, leave_netns = None, None
    with tempfile.TemporaryDirectory() as tmp:
        # Bound beyond loopback (--netns), the controller makes a token;
        # every process here, the workers, the CLI and the driver, finds it
        # there (DefaultTokenPath), and none touches this user's own.
        os.environ["HMPMD_TOKEN_FILE"] = os.path.join(tmp, "token")
        if a.netns:
            net = netns_cluster.Network(a.workers).build()
            # This process (REST reads, the submitting CLI, the driver)
            # lives beside the controller, in its namespace.
            leave_netns = netns_cluster.enter(net.hub)
        run = Run(a.bin_dir, tmp, a.workers, net, a.log_level)
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
                 python_dir, run.zmq, str(seed), "2", str(a.links), str(DRIVER_HEARTBEAT_MS),
                 # Workers tell the driver of its tasks done on its data
                 # socket: one they can reach from their namespaces.
                 run.net.controller_ip(0) if run.net else ""],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            run.procs.append(run.driver)
            start = time.monotonic()
            progress = Progress(run.url)

            lifecycle = threading.Lock()  # one stop, kill or restart of a process at a time

            def follow(faults, target=client):
                for at, kind, worker, hold in faults:
                    time.sleep(max(0.0, start + at - time.monotonic()))
                    if target.poll() is not None:
                        break  # it ended first: later faults have nothing to hit
                    with lifecycle if kind in KINDS + CRASH_KINDS else contextlib.nullcontext():
                        t0 = time.monotonic()
                        run.inject(kind, worker, hold)
                        progress.windows.append((kind, t0, time.monotonic()))
            others = [threading.Thread(target=follow, args=(stream,)) for stream in streams]
            others.append(threading.Thread(target=follow, args=(driver_plan, run.driver)))
            for t in others:
                t.start()
            try:
                follow(plan)
            finally:
                for t in others:
                    t.join()
            stdout, stderr = client.communicate(timeout=240)
            took = time.monotonic() - start
            driver_out, driver_err = run.driver.communicate(timeout=240)
            progress.finish()
            # What the controller lost, by its log: what explains re-runs.
            lost = declared_lost(os.path.join(tmp, "controller.log"))
            lines = driver_out.strip().splitlines()
            said = json.loads(lines[-1]) if lines else {"ok": False, "error": driver_err.strip()}
            if said.get("ok"):
                print("fault_run: the driver's chains are right")
            elif run.session_lost and not said.get("data"):
                print(f"fault_run: the driver's session was lost ({run.session_lost}): "
                      f"{said.get('error')}")
            elif len(lost) >= 2 and not said.get("data") and re.search(
                    DEATH_LIMITS, said.get("error", "")):
                # As the job may (below): a task of the session killed the
                # workers that ran it, and is not run again.
                print("fault_run: the driver's session failed by the limits on worker deaths: "
                      f"{said.get('error')}")
            elif lost and not said.get("data") and re.search(r"fetch of job \d+ run \d+ from",
                                                             said.get("error", "")):
                # driver-api.md: Get() of an output on a dead worker, not
                # read by a task since (which would rebuild it), fails: at
                # once when its port refuses, else when the fetch times out.
                print(f"fault_run: the driver's output was lost with a worker: "
                      f"{said.get('error')}")
            else:
                failures.append(f"the driver failed: {said.get('error')}")
            for kind, seconds in progress.recoveries():
                print(f"fault_run: {kind}: the job went on {seconds:.2f} s after it")
                recovered.setdefault(kind, []).append(seconds)
            # One figure a run (its median), so that a long run does not
            # outweigh the others.
            waits = progress.baseline()
            if waits:
                recovered.setdefault("baseline", []).append(median(waits))
            fetched = client.returncode == 0
            job = run.get("/api/v1/jobs/1")
            state_loads = job.get("state_loads", 0)
            # Failed by the scheduler's limits on what worker deaths may cost.
            poisoned = (not fetched and len(lost) >= 2 and job.get("state") == "failed"
                        and re.search(DEATH_LIMITS, job.get("error", "")))
            if poisoned:
                print("fault_run: the job failed by the limits on worker deaths: "
                      + job.get("error", ""))
            elif not fetched and lost and "its final outputs were lost" in stderr:
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
                for g in range(a.gangs):
                    for m in range(a.workers):
                        wrong = allreduce_wrong(read_f32(out, manifest, f"g{g}m{m}"), a.workers)
                        if wrong:
                            failures.append(f"allreduce g{g}m{m}: {wrong}")
            # Runs per task, and on which pids.
            runs = {}
            with open(run.exec_log) as f:
                for line in f:
                    job, task, attempt, pid = (int(x) for x in line.split())
                    runs.setdefault((job, task), []).append((attempt, pid))
            ran = len([key for key in runs if key[0] == 1])  # the job's; the driver's is 2
            if not poisoned and ran != len(spec["tasks"]):
                failures.append(f"{ran} of {len(spec['tasks'])} tasks ran")
            failures += unexplained_runs(runs, lost, {1: spec})
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
            for note in run.notes:
                print(f"fault_run: {note}")
            stall = progress.longest_stall()
            recovered.setdefault("longest wait", []).append((stall, seed))
            print(f"fault_run: the job ran {took:.1f} s; its longest wait for a task to end "
                  f"was {stall:.2f} s")
            print(f"fault_run: {ran} tasks, {reruns} re-run(s), {len(lost)} worker process(es) "
                  f"lost by the controller's log, {len(run.lost_pids)} by the faults; "
                  f"the driver's: {len(runs) - ran} tasks, {driver_reruns} re-run(s); "
                  f"{state_loads} state load(s) before the last restart")
        except Exception as e:  # a harness failure is a failed run, with its seed
            failures.append(f"{type(e).__name__}: {e}")
        finally:
            left = run.stop_all()
            if left:
                failures.append(f"processes left behind: {left}")
            if net:
                leave_netns()
                try:
                    net.close()
                except RuntimeError as e:
                    failures.append(f"namespaces left behind: {e}")
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
