"""A HyperMPMD cluster spread over Linux network namespaces (needs root).

Network builds the namespaces and links alone (fault_run.py starts its
own processes in them and drops packets between chosen ones); NetnsCluster
builds one namespace for the controller and one per worker,
joins each worker namespace to the controller namespace with its own veth
pair on a private /24 (10.201.<i+1>.0/24: controller side .1, worker side
.2), routes between the worker subnets through the controller namespace (for
the peer-to-peer data plane), starts `hmpmd controller` and one `hmpmd-worker` per worker namespace
(through `ip netns exec`), and talks to the controller's REST API on
127.0.0.1 inside the controller namespace.

Everything it creates is named after this process's PID (hmpmdt<PID>c,
hmpmdt<PID>w0, ...), so parallel runs never clash, and is removed on every
path out of the `with` block: processes are stopped by PID, then the
namespaces are deleted, which deletes the veth ends inside them. Child
processes get PR_SET_PDEATHSIG, so even a SIGKILLed test leaves no process
behind; namespaces left by a SIGKILLed run (PID gone) are removed by the
next run (remove_stale_namespaces).

Used by tests/integration/netns_test.py, bench/netns/netns_bench.py and
tests/faults/fault_run.py --netns.
Python 3 standard library only. Not thread-safe: one thread drives it.
"""

import ctypes
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

PREFIX = "hmpmdt"
CONTROLLER_PORT = 5555
HTTP = "127.0.0.1:8080"
# A standby's (NetnsCluster(standby=True)): beside the primary, in its
# namespace, on the same store.
STANDBY_PORT = 5556
STANDBY_HTTP = "127.0.0.1:8081"

_PR_SET_PDEATHSIG = 1
_CLONE_NEWNET = 0x40000000


class SkipTest(Exception):
    """The host cannot run the namespace test (not root, no iproute2, ...)."""


def _die_with_parent():
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def enter(ns):
    """Moves the calling thread into network namespace `ns`: the sockets
    it opens, and the threads and processes it starts, are in `ns` from
    then on. Returns a function that moves it back."""
    libc = ctypes.CDLL(None, use_errno=True)
    home = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    there = os.open("/var/run/netns/" + ns, os.O_RDONLY)

    def setns(fd):
        if libc.setns(fd, _CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), "setns: " + os.strerror(ctypes.get_errno()))

    try:
        setns(there)
    except BaseException:
        os.close(home)
        raise
    finally:
        os.close(there)

    def back():
        try:
            setns(home)
        finally:
            os.close(home)
    return back


def _run(args, check=True, timeout=30, env=None):
    """Runs a short command; returns its stdout. Raises with stderr on failure."""
    p = subprocess.run(args, capture_output=True, text=True, timeout=timeout, env=env)
    if check and p.returncode != 0:
        raise RuntimeError("%s: exit %d: %s" % (" ".join(args), p.returncode,
                                                (p.stderr or p.stdout).strip()))
    return p.stdout


def print_log_tails(log_dir, lines=15):
    """Prints the last `lines` of every *.log in `log_dir` to stderr (a
    failed test's processes, as NetnsCluster(log_dir=...) kept them)."""
    for name in sorted(os.listdir(log_dir)):
        if name.endswith(".log"):
            with open(os.path.join(log_dir, name)) as f:
                tail = f.read().splitlines()[-lines:]
            print("--- %s (last lines)\n%s" % (name, "\n".join(tail)), file=sys.stderr)


def check_host():
    """Raises SkipTest with a one-line reason when namespaces are out of reach."""
    if os.geteuid() != 0:
        raise SkipTest("needs root (creates network namespaces and veth pairs)")
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            raise SkipTest("needs '%s' from iproute2 (scripts/install-deps.sh installs it)" % tool)
    probe = "%s%dprobe" % (PREFIX, os.getpid())
    p = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if p.returncode != 0:
        raise SkipTest("cannot create a network namespace: " + p.stderr.strip())
    _run(["ip", "netns", "del", probe], check=False)


def netem_available():
    """Whether the kernel has the netem qdisc (sch_netem); probed on a throwaway veth."""
    ns = "%s%dnetem" % (PREFIX, os.getpid())
    try:
        _run(["ip", "netns", "add", ns])
        _run(["ip", "-n", ns, "link", "add", "p0", "type", "veth", "peer", "name", "p1"])
        p = subprocess.run(["tc", "-n", ns, "qdisc", "add", "dev", "p0", "root", "netem",
                            "delay", "1ms"], capture_output=True, text=True)
        return p.returncode == 0
    finally:
        _run(["ip", "netns", "del", ns], check=False)


def remove_stale_namespaces():
    """Deletes namespaces this module made in runs whose process no longer exists."""
    out = _run(["ip", "netns", "list"], check=False)
    for line in out.splitlines():
        m = re.match(r"(%s(\d+)\w*)" % PREFIX, line.strip())
        if m and not os.path.exists("/proc/%s" % m.group(2)):
            _run(["ip", "netns", "del", m.group(1)], check=False)


class Network:
    """The namespaces and links of a cluster: a hub namespace (the
    controller's) and one leaf namespace per worker, each joined to the hub
    by its own veth pair on 10.201.<i+1>.0/24 (hub side .1, leaf side .2),
    with the leaves routed to each other through the hub. Leaves may be none
    (loopback: everything in the hub). Faults: `lose` drops what one
    namespace sends, all or to or from one address, until `heal`."""

    def __init__(self, leaves, delay_ms=0.0, tag=None):
        tag = tag or "%s%d" % (PREFIX, os.getpid())
        self.delay_ms = delay_ms
        self.hub = tag + "c"
        self.leaves = ["%sw%d" % (tag, i) for i in range(leaves)]
        self._made = []
        self._pref = 100  # of the next blackhole rule (lose)

    def _ns_add(self, name):
        _run(["ip", "netns", "add", name])
        self._made.append(name)
        _run(["ip", "-n", name, "link", "set", "lo", "up"])

    def build(self):
        self._ns_add(self.hub)
        for i, ns in enumerate(self.leaves):
            self._ns_add(ns)
            # Both ends are created inside their namespaces: nothing appears
            # in the host's namespace, even for a moment.
            _run(["ip", "link", "add", self.controller_if(i), "netns", self.hub,
                  "type", "veth", "peer", "name", "veth0", "netns", ns])
            for where, dev, addr in ((self.hub, self.controller_if(i), self.controller_ip(i)),
                                     (ns, "veth0", self.worker_ip(i))):
                _run(["ip", "-n", where, "addr", "add", addr + "/24", "dev", dev])
                _run(["ip", "-n", where, "link", "set", dev, "up"])
                if self.delay_ms > 0:
                    # Delay on both ends: each direction gets delay_ms, a round trip 2x.
                    _run(["tc", "-n", where, "qdisc", "add", "dev", dev, "root", "netem",
                          "delay", "%gms" % self.delay_ms])
            # Workers fetch tensors from each other (the data plane): route
            # between worker subnets through the hub, as a real cluster's
            # network would.
            _run(["ip", "-n", ns, "route", "add", "default", "via", self.controller_ip(i)])
        _run(["ip", "netns", "exec", self.hub, "sysctl", "-q", "-w", "net.ipv4.ip_forward=1"])
        return self

    def close(self):
        """Deletes every namespace made (and with them the veth ends). Idempotent."""
        errors = []
        for ns in reversed(self._made):
            p = subprocess.run(["ip", "netns", "del", ns], capture_output=True, text=True)
            if p.returncode != 0:
                errors.append("%s: %s" % (ns, p.stderr.strip()))
        self._made = []
        if errors:
            raise RuntimeError("could not delete namespaces: " + "; ".join(errors))

    @staticmethod
    def controller_if(i):
        return "veth%d" % i

    @staticmethod
    def controller_ip(i):
        return "10.201.%d.1" % (i + 1)

    @staticmethod
    def worker_ip(i):
        return "10.201.%d.2" % (i + 1)

    def lose(self, ns, dst=None, src=None):
        """Drops the packets namespace `ns` sends or forwards (to `dst`,
        from `src`, or all), by a blackhole policy rule: routing drops them
        before any link, on kernels without netem or tc classifiers too.
        Packets to the namespace's own addresses are still delivered.
        Returns what `heal` takes."""
        self._pref += 1
        match = (["from", src] if src else []) + (["to", dst] if dst else [])
        _run(["ip", "-n", ns, "rule", "add"] + match + ["blackhole", "pref", str(self._pref)])
        return ns, self._pref

    @staticmethod
    def heal(cut):
        """Undoes one `lose`."""
        ns, pref = cut
        _run(["ip", "-n", ns, "rule", "del", "pref", str(pref)], check=False)


class NetnsCluster:
    """Controller in one namespace, `workers` workers in one namespace each."""

    def __init__(self, bin_dir, workers=2, cores="cube=1,vector=1", delay_ms=0.0,
                 heartbeat_ms=200, worker_timeout_ms=1000, log_dir=None, loopback=False,
                 db=None, standby=False):
        self.hmpmd_bin = os.path.join(bin_dir, "hmpmd")
        self.worker_bin = os.path.join(bin_dir, "hmpmd-worker")
        for b in (self.hmpmd_bin, self.worker_bin):
            if not os.access(b, os.X_OK):
                raise RuntimeError("%s: not an executable; build it first" % b)
        self.n = workers
        self.cores = cores
        self.delay_ms = delay_ms
        self.heartbeat_ms = heartbeat_ms
        self.worker_timeout_ms = worker_timeout_ms
        self.log_dir = log_dir
        # loopback: the workers run in the controller's namespace and connect
        # over its 127.0.0.1 (a baseline without veth links; no delay).
        self.loopback = loopback
        # db: the controller's store (none without); standby: a second
        # controller waits on it (`--standby`), and workers are given both.
        self.db = db
        self.standby = standby
        self.net = Network(0 if loopback else workers, delay_ms)
        self.ns_controller = self.net.hub
        self.ns_workers = self.net.leaves
        self._procs = []  # (name, Popen, log file)
        # The controller, bound beyond loopback, makes a token here; the
        # workers and the CLI find it through HMPMD_TOKEN_FILE, as processes
        # on one host find the default file.
        self.token_dir = tempfile.mkdtemp(prefix="hmpmd-netns-token-")
        self.token_file = os.path.join(self.token_dir, "token")
        self.env = dict(os.environ, HMPMD_TOKEN_FILE=self.token_file)

    # --- setup and teardown -------------------------------------------------

    def __enter__(self):
        try:
            self.net.build()
            self._start_processes()
            self.wait_for_workers(self.n)
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def _spawn(self, name, ns, args):
        log = None
        if self.log_dir:
            log = open(os.path.join(self.log_dir, name + ".log"), "a")
        p = subprocess.Popen(["ip", "netns", "exec", ns] + args, stdin=subprocess.DEVNULL,
                             stdout=log or subprocess.DEVNULL, stderr=log or subprocess.DEVNULL,
                             preexec_fn=_die_with_parent, env=self.env)
        self._procs.append((name, p, log))
        return p

    def _controller_args(self, port, http):
        args = [self.hmpmd_bin, "controller", "--listen", "tcp://*:%d" % port, "--http", http,
                "--heartbeat-ms", str(self.heartbeat_ms),
                "--worker-timeout-ms", str(self.worker_timeout_ms), "--log-level", "info"]
        return args + (["--db", self.db] if self.db else [])

    def _start_processes(self):
        self._spawn("controller", self.ns_controller,
                    self._controller_args(CONTROLLER_PORT, HTTP))
        if self.standby:
            # After the primary holds the store: the first to open it is primary.
            deadline = time.monotonic() + 20
            while True:
                try:
                    self.get("/api/v1/pool")
                    break
                except (RuntimeError, subprocess.SubprocessError, ValueError):
                    if time.monotonic() > deadline:
                        raise RuntimeError("the controller did not answer at start")
                    time.sleep(0.05)
            self._spawn("standby", self.ns_controller,
                        self._controller_args(STANDBY_PORT, STANDBY_HTTP) + ["--standby"])
        for i in range(self.n):
            self.start_worker(i)

    def start_worker(self, i):
        """Starts worker i (named ns-worker<i>) in its namespace."""
        ns = self.ns_controller if self.loopback else self.ns_workers[i]
        host = "127.0.0.1" if self.loopback else self.controller_ip(i)
        endpoints = "tcp://%s:%d" % (host, CONTROLLER_PORT)
        if self.standby:
            endpoints += ",tcp://%s:%d" % (host, STANDBY_PORT)
        self._spawn("worker%d" % i, ns, [
            self.worker_bin, "--controller", endpoints,
            "--name", "ns-worker%d" % i, "--cores", self.cores, "--log-level", "info"])

    def stop_worker(self, i):
        """Stops worker i's process by PID (SIGTERM, then SIGKILL after 5 s)."""
        name = "worker%d" % i
        self._stop([e for e in self._procs if e[0] == name])
        self._procs = [e for e in self._procs if e[0] != name]

    @staticmethod
    def _stop(procs):
        """SIGTERM to each of `procs` ((name, Popen, log)), then a wait of
        5 s each before SIGKILL; closes their logs."""
        for _, p, _ in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for _, p, log in procs:
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
            if log:
                log.close()

    def close(self):
        """Stops every process by PID, then deletes every namespace made. Idempotent."""
        self._stop(self._procs)
        self._procs = []
        self.net.close()
        shutil.rmtree(self.token_dir, ignore_errors=True)

    # --- addresses ----------------------------------------------------------

    controller_if = staticmethod(Network.controller_if)
    controller_ip = staticmethod(Network.controller_ip)
    worker_ip = staticmethod(Network.worker_ip)

    # --- actions ------------------------------------------------------------

    def signal(self, name, sig):
        """Sends `sig` to process `name` (controller, standby, worker<i>) by PID."""
        for n, p, _ in self._procs:
            if n == name and p.poll() is None:
                p.send_signal(sig)

    def alive(self, name):
        for n, p, _ in self._procs:
            if n == name:
                return p.poll() is None
        return False

    def cut_link(self, i):
        """Takes worker i's link down at the controller's end (`ip link set down`)."""
        _run(["ip", "-n", self.ns_controller, "link", "set", self.controller_if(i), "down"])

    def restore_link(self, i):
        """Brings worker i's link back up; its worker registers again on its own."""
        _run(["ip", "-n", self.ns_controller, "link", "set", self.controller_if(i), "up"])

    def cli(self, *args, timeout=120, http=HTTP):
        """Runs `hmpmd ARGS --url http://HTTP` in the controller namespace; (rc, stdout, stderr)."""
        p = subprocess.run(["ip", "netns", "exec", self.ns_controller, self.hmpmd_bin] + list(args) +
                           ["--url", "http://" + http], capture_output=True, text=True,
                           timeout=timeout, env=self.env)
        return p.returncode, p.stdout, p.stderr

    def cli_json(self, *args, timeout=120):
        rc, out, err = self.cli(*args, "--json", timeout=timeout)
        if rc != 0 and not out.strip().startswith("{"):
            raise RuntimeError("hmpmd %s: exit %d: %s" % (" ".join(args), rc, err.strip()))
        return json.loads(out)

    def get(self, path):
        """GET http://HTTP/PATH from inside the controller namespace, parsed as JSON."""
        # With the token the controller made: its reads need it.
        code = ("import os, sys, urllib.request\n"
                "req = urllib.request.Request(sys.argv[1])\n"
                "if os.path.exists(os.environ['HMPMD_TOKEN_FILE']):\n"
                "    with open(os.environ['HMPMD_TOKEN_FILE']) as f:\n"
                "        req.add_header('Authorization', 'Bearer ' + f.readline().strip())\n"
                "sys.stdout.write(urllib.request.urlopen(req, timeout=10).read().decode())")
        out = _run(["ip", "netns", "exec", self.ns_controller, "python3", "-c", code,
                    "http://%s%s" % (HTTP, path)], env=self.env)
        return json.loads(out)

    def all_tasks(self, job_id):
        """Every task record of a job, following /tasks' pages."""
        tasks, offset = [], 0
        while True:
            page = self.get("/api/v1/jobs/%d/tasks?offset=%d&limit=10000" % (job_id, offset))
            tasks += page["tasks"]
            offset += page["count"]
            if page["count"] == 0 or offset >= page["total"]:
                return tasks

    def alive_devices(self):
        rc, out, _ = self.cli("pool", "--json", timeout=15)
        return json.loads(out).get("alive_devices", 0) if rc == 0 else -1

    def wait_for_workers(self, count, timeout_s=20):
        """Waits until exactly `count` workers are alive in the pool."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for name, p, _ in self._procs:
                if p.poll() is not None:
                    raise RuntimeError("%s exited with %d" % (name, p.returncode))
            if self.alive_devices() == count:
                return
            time.sleep(0.1)
        raise RuntimeError("%d workers did not register within %ds (pool has %d)" %
                           (count, timeout_s, self.alive_devices()))
