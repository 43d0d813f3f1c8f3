#!/usr/bin/env python3
"""No port beyond loopback opens without a secret (docs/operations.md, "Security").

A controller bound to every interface with no --token-file makes a token in
HMPMD_TOKEN_FILE (mode 0600, its folder 0700) and refuses workers, driver
sessions and mutating REST calls without it; workers, `hmpmd` commands and
drivers given no token read that file. Restarted, it keeps the token. A
token file every user may read is refused; --insecure opens the ports with
a warning; bound to loopback, nothing is made. Every process is contacted
over 127.0.0.1 and stopped by its PID.

    cli_secure_default_test.py BIN_DIR SOURCE_DIR
"""
import json
import os
import stat
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.error
import urllib.request

BIN, SRC = sys.argv[1], sys.argv[2]
del sys.argv[1:]
sys.path.insert(0, os.path.join(SRC, "tests", "python"))
from cluster import free_port  # noqa: E402

HMPMD = os.path.join(BIN, "hmpmd")
WORKER = os.path.join(BIN, "hmpmd-worker")
PYTHON_DIR = os.path.join(BIN, "..", "python")
JOB = {"name": "secure", "tasks": [{"id": "a", "kernel": "sleep", "args": {"us": 1}}]}


class SecureByDefaultTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="hmpmd-secure-")
        self.token = os.path.join(self.tmp.name, "config", "hmpmd", "token")
        self.env = dict(os.environ, HMPMD_TOKEN_FILE=self.token)
        self.procs = []
        self.zmq, self.http = free_port(), free_port()

    def tearDown(self):
        for p in self.procs:
            self.stop(p)
        self.tmp.cleanup()

    @staticmethod
    def stop(p):
        """SIGTERM by PID, then SIGKILL after 10 s."""
        if p.poll() is None:
            p.terminate()
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()

    def spawn(self, args, env=None):
        """Starts a process whose output goes to a log file of its own: p.log."""
        log = os.path.join(self.tmp.name, "proc%d.log" % len(self.procs))
        with open(log, "w") as out:
            p = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, env=env or self.env)
        p.log = log
        self.procs.append(p)
        return p

    @staticmethod
    def log(p):
        with open(p.log) as f:
            return f.read()

    def controller(self, *extra, listen=None, http=None, env=None):
        p = self.spawn([HMPMD, "controller", "--listen", listen or f"tcp://*:{self.zmq}",
                        "--http", http or f"127.0.0.1:{self.http}", "--db", "",
                        "--log-level", "info"] + list(extra), env=env)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and p.poll() is None:
            try:
                self.get("/api/v1/pool")
                return p
            except OSError:
                time.sleep(0.05)
        self.fail("the controller never answered: " + self.log(p))

    def read_token(self):
        with open(self.token) as f:
            return f.read().strip()

    def get(self, path):
        """A REST read, with the token when the controller made one."""
        req = urllib.request.Request(f"http://127.0.0.1:{self.http}{path}")
        if os.path.exists(self.token):
            req.add_header("Authorization", "Bearer " + self.read_token())
        with urllib.request.urlopen(req, timeout=5) as r:
            return json.loads(r.read())

    def alive_devices(self):
        return self.get("/api/v1/pool").get("alive_devices")

    def wait_devices(self, n):
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self.alive_devices() == n:
                return
            time.sleep(0.05)
        self.fail(f"{self.alive_devices()} workers alive, expected {n}")

    def worker(self, env=None):
        return self.spawn([WORKER, "--controller", f"tcp://127.0.0.1:{self.zmq}"], env=env)

    def submit(self, env):
        spec = os.path.join(self.tmp.name, "job.json")
        with open(spec, "w") as f:
            json.dump(JOB, f)
        return subprocess.run([HMPMD, "submit", spec, "--wait", "--url",
                               f"http://127.0.0.1:{self.http}"], capture_output=True, text=True,
                              env=env, timeout=60)

    def test_a_controller_bound_beyond_loopback_makes_a_token_that_local_processes_find(self):
        ctl = self.controller()
        st = os.stat(self.token)
        self.assertEqual(stat.S_IMODE(st.st_mode), 0o600)
        self.assertEqual(stat.S_IMODE(os.stat(os.path.dirname(self.token)).st_mode), 0o700)
        made = self.read_token()
        self.assertRegex(made, r"^[0-9a-f]{64}$")

        # A worker given no token reads the file and joins; one that finds
        # no file (another user's HOME) is refused and exits.
        self.worker()
        self.wait_devices(1)
        without = dict(self.env, HMPMD_TOKEN_FILE=os.path.join(self.tmp.name, "none"))
        stranger = self.worker(env=without)
        self.assertNotEqual(stranger.wait(timeout=30), 0)
        self.assertIn("rejected the registration: wrong or missing token; it was given no token "
                      "and found none in " + without["HMPMD_TOKEN_FILE"], self.log(stranger))
        self.assertEqual(self.alive_devices(), 1)

        # `hmpmd submit` reads it too; without it the POST is refused.
        done = self.submit(self.env)
        self.assertEqual(done.returncode, 0, done.stderr)
        refused = self.submit(without)
        self.assertNotEqual(refused.returncode, 0)
        self.assertIn("missing Authorization: Bearer token", refused.stderr)

        # A driver session, from the Python client, given no token.
        code = ("import sys; sys.path.insert(0, sys.argv[1]); import hmpmd\n"
                "with hmpmd.Client.connect(sys.argv[2], connect_timeout_ms=10000) as c:\n"
                "    print(c.submit('sleep', {'us': 1}).get())")
        for env, ok in ((self.env, True), (without, False)):
            r = subprocess.run(["/usr/bin/python3", "-c", code, PYTHON_DIR,
                                f"tcp://127.0.0.1:{self.zmq}"], capture_output=True, text=True,
                               env=env, timeout=60)
            if ok:
                self.assertEqual(r.returncode, 0, r.stderr)
            else:
                self.assertNotEqual(r.returncode, 0, r.stdout)
                self.assertIn("wrong or missing token; it was given no token and found none in "
                              + without["HMPMD_TOKEN_FILE"], r.stderr)

        # Restarted, the controller keeps the token it made: the file is not
        # rewritten and the running worker is taken back.
        self.stop(ctl)
        self.assertIn("made " + self.token, self.log(ctl))
        again = self.controller()
        self.assertEqual(self.read_token(), made)
        self.wait_devices(1)
        self.assertIn("using " + self.token, self.log(again))

    def test_a_worker_started_before_its_controller_finds_the_token_made_after(self):
        # As one systemd target or script starts both: the worker reads the
        # default file before the controller has made it, is refused, reads
        # it again and joins. It still ends on a refusal that a second read
        # does not change.
        early = self.worker()
        time.sleep(0.5)
        self.controller()
        self.wait_devices(1)
        self.assertIsNone(early.poll())
        self.assertIn("the default token file " + self.token + " changed; registering with "
                      "its token", self.log(early))
        with open(self.token + ".other", "w") as f:
            f.write("not-the-token\n")
        os.chmod(self.token + ".other", 0o600)
        wrong = self.worker(env=dict(self.env, HMPMD_TOKEN_FILE=self.token + ".other"))
        self.assertNotEqual(wrong.wait(timeout=30), 0)
        self.assertIn("wrong or missing token; it was given no token and sent the one in",
                      self.log(wrong))

    def test_a_token_file_every_user_may_read_is_refused(self):
        os.makedirs(os.path.dirname(self.token))
        with open(self.token, "w") as f:
            f.write("0123456789abcdef\n")
        os.chmod(self.token, 0o644)
        r = subprocess.run([HMPMD, "controller", "--listen", f"tcp://*:{self.zmq}", "--http", "",
                            "--db", ""], capture_output=True, text=True, env=self.env, timeout=30)
        self.assertEqual(r.returncode, 2)
        self.assertIn(self.token + ": every user of this host may read or change it", r.stderr)
        self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)

    def test_insecure_opens_the_ports_with_a_warning(self):
        ctl = self.controller("--insecure", http=f"0.0.0.0:{self.http}")
        self.assertFalse(os.path.exists(self.token))
        without = dict(self.env, HMPMD_TOKEN_FILE=os.path.join(self.tmp.name, "none"))
        self.worker(env=without)
        self.wait_devices(1)
        self.assertEqual(self.submit(without).returncode, 0)
        self.stop(ctl)
        log = self.log(ctl)
        self.assertIn("--insecure: tcp://*:%d and http://0.0.0.0:%d open with no secret"
                      % (self.zmq, self.http), log)

    def test_bound_to_loopback_nothing_is_made(self):
        self.controller(listen=f"tcp://127.0.0.1:{self.zmq}")
        self.assertFalse(os.path.exists(self.token))
        without = dict(self.env, HMPMD_TOKEN_FILE=os.path.join(self.tmp.name, "none"))
        self.worker(env=without)
        self.wait_devices(1)
        self.assertEqual(self.submit(without).returncode, 0)


if __name__ == "__main__":
    unittest.main()
