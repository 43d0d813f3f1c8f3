#!/usr/bin/env python3
"""Runs deploy/systemd's units as systemd would, on loopback.

Each unit's ExecStart is expanded with deploy/systemd/hmpmd.default as its
EnvironmentFile (`${VAR}` one word, `$VAR` split on spaces), the paths it
names under /usr/bin, /var/lib/hmpmd and /etc/hmpmd mapped to the build and
a scratch directory, and started in the unit's WorkingDirectory. Where this
process may make a private mount namespace (root in CI), the root file
system is read-only there, as under ProtectSystem=strict, and only the
state directory is writable: the controller must come up and write its
store there, and the worker must join it. A controller whose store cannot
be written exits 2, which RestartPreventExitStatus=2 keeps from restarting
in a loop. `systemd-analyze verify` must have nothing to say about the units.

    deploy_units_test.py BIN_DIR SOURCE_DIR
"""
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.request

BIN, SRC = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
del sys.argv[1:]
sys.path.insert(0, os.path.join(SRC, "tests", "python"))
from cluster import free_port  # noqa: E402

UNITS = os.path.join(SRC, "deploy", "systemd")


def unit(name):
    """{key: [values]} of a unit file's [Service] section, continuations joined."""
    text = open(os.path.join(UNITS, name)).read().replace("\\\n", " ")
    section, out = None, {}
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("["):
            section = line
        elif section == "[Service]" and "=" in line and not line.startswith("#"):
            key, value = line.split("=", 1)
            out.setdefault(key, []).append(value)
    return out


def environment():
    env = {}
    for line in open(os.path.join(UNITS, "hmpmd.default")):
        m = re.match(r"^([A-Z_]+)=(.*)$", line.strip())
        if m:
            env[m.group(1)] = m.group(2)
    return env


def expand(command, env):
    """systemd's ExecStart expansion: ${VAR} is one word, $VAR is split."""
    words = []
    for word in command.split():
        if re.fullmatch(r"\$\{[A-Z_]+\}", word):
            words.append(env.get(word[2:-1], ""))
        elif re.fullmatch(r"\$[A-Z_]+", word):
            words.extend(env.get(word[1:], "").split())
        else:
            words.append(re.sub(r"\$\{([A-Z_]+)\}", lambda m: env.get(m.group(1), ""), word))
    return words


def can_make_read_only_root():
    """Whether this process may make the mounts start() makes (root with
    CAP_SYS_ADMIN; not in every container)."""
    d = tempfile.mkdtemp(prefix="hmpmd_units_probe_")
    try:
        script = (f"mount --bind {shlex.quote(d)} {shlex.quote(d)} && "
                  "mount -o remount,bind,ro / && touch " + shlex.quote(os.path.join(d, "w")))
        return subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c",
                               script], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False
    finally:
        shutil.rmtree(d, ignore_errors=True)


READ_ONLY_ROOT = can_make_read_only_root()


class UnitsTest(unittest.TestCase):
    def setUp(self):
        self.scratch = tempfile.mkdtemp(prefix="hmpmd_units_")
        self.state = os.path.join(self.scratch, "var-lib-hmpmd")
        os.mkdir(self.state)
        self.procs = []
        self.zmq, self.http = free_port(), free_port()

    def tearDown(self):
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        shutil.rmtree(self.scratch, ignore_errors=True)

    def mapped(self, words):
        """The unit's paths moved to the build and the scratch directory."""
        out = []
        for w in words:
            w = w.replace("/usr/bin/hmpmd-worker", os.path.join(BIN, "hmpmd-worker"))
            w = re.sub(r"^/usr/bin/hmpmd$", os.path.join(BIN, "hmpmd"), w)
            w = w.replace("/var/lib/hmpmd", self.state)
            w = w.replace("/etc/hmpmd/device-0.json", os.path.join(UNITS, "device-0.json"))
            out.append(w)
        return out

    def start(self, name, overrides, instance="0"):
        u = unit(name)
        env = environment()
        env.update(overrides)
        argv = self.mapped(expand(u["ExecStart"][0].replace("%i", instance), env))
        cwd = self.mapped(u.get("WorkingDirectory", ["/"]))[0]
        if READ_ONLY_ROOT:
            # The state directory stays writable; everything else is not.
            script = (f"mount --bind {shlex.quote(self.state)} {shlex.quote(self.state)} && "
                      f"mount -o remount,bind,ro / && cd {shlex.quote(cwd)} && "
                      f"exec {shlex.join(argv)}")
            argv = ["unshare", "--mount", "--propagation", "private", "sh", "-c", script]
        # EnvironmentFile= variables reach the process's environment too.
        proc_env = dict(os.environ, **{k: self.mapped([v])[0] for k, v in env.items()})
        p = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                             text=True, env=proc_env)
        self.procs.append(p)
        return p

    def controller_env(self, **more):
        env = {"HMPMD_LISTEN": f"tcp://127.0.0.1:{self.zmq}",
               "HMPMD_HTTP": f"127.0.0.1:{self.http}",
               "HMPMD_CONTROLLER": f"tcp://127.0.0.1:{self.zmq}"}
        env.update(more)
        return env

    def pool(self):
        req = urllib.request.Request(f"http://127.0.0.1:{self.http}/api/v1/pool")
        token = os.path.join(self.state, "token")  # made by a controller bound beyond loopback
        if os.path.exists(token):
            with open(token) as f:
                req.add_header("Authorization", "Bearer " + f.readline().strip())
        with urllib.request.urlopen(req, timeout=5) as r:
            return json.load(r)

    def wait_for(self, what, ok, proc, seconds=30):
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            self.assertIsNone(proc.poll(), f"{what}: exited {proc.returncode}: "
                              f"{proc.stderr.read() if proc.poll() is not None else ''}")
            try:
                if ok():
                    return
            except OSError:
                pass
            time.sleep(0.1)
        self.fail(f"{what}: not within {seconds} s")

    def test_the_controller_and_a_worker_start_as_shipped(self):
        u = unit("hmpmd-controller.service")
        self.assertIn("2", u.get("RestartPreventExitStatus", [""])[0].split())
        self.assertEqual(u.get("WorkingDirectory"), ["/var/lib/hmpmd"])
        db = environment().get("HMPMD_DB", "")
        self.assertTrue(db.startswith("/var/lib/hmpmd/"), f"HMPMD_DB={db!r}")
        env = self.controller_env()
        ctl = self.start("hmpmd-controller.service", env)
        self.wait_for("controller", lambda: self.pool() is not None, ctl)
        self.assertTrue(os.path.exists(os.path.join(self.state, os.path.basename(db))),
                        os.listdir(self.state))
        self.start("hmpmd-worker@.service", env)
        worker = self.procs[-1]
        self.wait_for("worker", lambda: self.pool().get("alive_devices") == 1, worker)

    def test_bound_beyond_loopback_it_keeps_a_token_in_the_state_directory(self):
        # As shipped (HMPMD_LISTEN=tcp://*:PORT, no --token-file): the token
        # is made where HMPMD_TOKEN_FILE says, in the only writable folder,
        # and the worker on this host finds it there.
        self.assertEqual(environment().get("HMPMD_TOKEN_FILE"), "/var/lib/hmpmd/token")
        env = self.controller_env(HMPMD_LISTEN=f"tcp://*:{self.zmq}")
        ctl = self.start("hmpmd-controller.service", env)
        self.wait_for("controller", lambda: self.pool() is not None, ctl)
        token = os.path.join(self.state, "token")
        self.assertEqual(os.stat(token).st_mode & 0o777, 0o600)
        self.start("hmpmd-worker@.service", env)
        self.wait_for("worker", lambda: self.pool().get("alive_devices") == 1, self.procs[-1])

    @unittest.skipUnless(READ_ONLY_ROOT, "needs a private mount namespace (root) for a "
                         "read-only root")
    def test_a_store_it_cannot_write_exits_2(self):
        # Outside the state directory the root is read-only, as it was for
        # the relative store before the unit had WorkingDirectory and HMPMD_DB.
        elsewhere = os.path.join(self.scratch, "hmpmd.db")
        ctl = self.start("hmpmd-controller.service", self.controller_env(HMPMD_DB=elsewhere))
        try:
            code = ctl.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.fail("the controller started with a store it cannot write")
        err = ctl.stderr.read()
        self.assertEqual(code, 2, err)
        self.assertIn("Read-only file system", err)
        self.assertFalse(os.path.exists(elsewhere))

    @unittest.skipUnless(shutil.which("systemd-analyze"), "no systemd-analyze")
    def test_systemd_analyze_verify_is_silent(self):
        paths = []
        for name, as_name in [("hmpmd-controller.service", "hmpmd-controller.service"),
                              ("hmpmd-worker@.service", "hmpmd-worker@0.service")]:
            text = open(os.path.join(UNITS, name)).read()
            text = text.replace("/usr/bin/hmpmd-worker", os.path.join(BIN, "hmpmd-worker"))
            text = text.replace("/usr/bin/hmpmd ", os.path.join(BIN, "hmpmd") + " ")
            path = os.path.join(self.scratch, as_name)
            with open(path, "w") as f:
                f.write(text)
            paths.append(path)
        r = subprocess.run(["systemd-analyze", "verify", "--man=no"] + paths,
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stderr.strip(), "", "systemd-analyze verify has something to say")


if __name__ == "__main__":
    unittest.main()
