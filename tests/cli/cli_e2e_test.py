#!/usr/bin/env python3
"""End to end through the command line, as a user runs it: `hmpmd controller`,
`hmpmd worker` x2, `hmpmd pool|submit --wait [--fetch]|status|cancel|forget` as separate
processes on loopback, and `hmpmd run --json --trace`. Every process started
here is stopped here, by PID. Usage: cli_e2e_test.py BIN_DIR SOURCE_DIR"""
import json
import os
import select
import signal
import struct
import socket
import subprocess
import sys
import tempfile
import time
import unittest

BIN, SRC = sys.argv[1], sys.argv[2]
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from cluster import Cluster  # noqa: E402
from ports import free_port  # noqa: E402
from procs import children, running  # noqa: E402
HMPMD = os.path.join(BIN, "hmpmd")
EXAMPLE = os.path.join(SRC, "examples", "multimodal.json")


def run(*args, timeout=60, env=None):
    return subprocess.run([HMPMD, *args], capture_output=True, text=True, timeout=timeout,
                          env=env)


class SeparateProcesses(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.cluster = Cluster(BIN, workers=2, cores=["cube=1,vector=1", "cube=2,vector=1"],
                              start_timeout_s=60)
        cls.cluster.__enter__()
        cls.url = cls.cluster.url
        cls.env = dict(os.environ, HMPMD_URL=cls.url)

    @classmethod
    def tearDownClass(cls):
        cls.cluster.stop()
        cls.tmp.cleanup()

    def test_pool_lists_both_workers_and_their_cores(self):
        pool = json.loads(run("pool", "--json", env=self.env).stdout)
        cores = sorted(len(d["cores"]) for d in pool["devices"] if d["alive"])
        self.assertEqual(cores, [2, 3])
        self.assertEqual(pool["cores"], {"cube": 3, "vector": 2})
        for d in pool["devices"]:
            self.assertGreaterEqual(d["store_bytes"], 0, d)
        self.assertIn(" STORED ", run("pool", env=self.env).stdout.splitlines()[0])

    def test_status_names_device_sets_short_of_their_ask(self):
        # Three actors asking 1 device each on the 2 workers: one set overlaps.
        spec = os.path.join(self.tmp.name, "actors.json")
        with open(spec, "w") as f:
            json.dump({"name": "three-actors",
                       "submodels": [{"name": n, "kind": "actor", "devices": 1}
                                     for n in ("a", "b", "c")],
                       "tasks": [{"id": n + "0", "submodel": n, "kernel": "spin",
                                  "args": {"us": 1000}} for n in ("a", "b", "c")]}, f)
        r = run("submit", spec, "--wait", "--json", env=self.env)
        self.assertEqual(r.returncode, 0, r.stderr)
        job = json.loads(r.stdout)
        status = json.loads(run("status", str(job["id"]), "--json", env=self.env).stdout)
        short = status.get("short_sets", [])
        self.assertTrue(short, status)
        for s in short:
            self.assertEqual((s["asked"], s["got"], s["shared"]), (1, 1, 1), s)
        text = run("status", str(job["id"]), env=self.env).stdout
        self.assertIn("short sets", text)
        self.assertIn("asked for 1 device and got 1, 1 of them shared", text)

    def test_submit_wait_json_reports_a_succeeded_job(self):
        r = run("submit", EXAMPLE, "--wait", "--json", env=self.env)
        self.assertEqual(r.returncode, 0, r.stderr)
        job = json.loads(r.stdout)
        for key in ("state", "tasks", "makespan_s", "lower_bound_s", "utilisation",
                    "masking_ratio", "bubble_ratio"):
            self.assertIn(key, job)
        self.assertEqual(job["state"], "succeeded")
        self.assertEqual(job["tasks"], 78)
        self.assertGreaterEqual(job["makespan_s"], job["lower_bound_s"])
        status = json.loads(run("status", str(job["id"]), "--json", env=self.env).stdout)
        self.assertEqual(status["state"], "succeeded")
        listing = run("status", env=self.env)
        self.assertIn("multimodal-step", listing.stdout)

    def test_bad_spec_is_one_line_and_exit_2(self):
        bad = os.path.join(self.tmp.name, "bad.json")
        with open(bad, "w") as f:
            f.write('{"tasks": [{"id": "a", "kernel": "noop", "inputs": ["ghost"]}]}')
        r = run("submit", bad, env=self.env)
        self.assertEqual(r.returncode, 2)
        self.assertEqual(r.stderr.count("\n"), 1, r.stderr)
        self.assertIn("bad.json: tasks[0] 'a': inputs: unknown task 'ghost'", r.stderr)

    def test_unknown_job_and_cancel_of_ended_job_fail_cleanly(self):
        r = run("status", "424242", env=self.env)
        self.assertEqual(r.returncode, 2)
        self.assertIn("no such job", r.stderr)
        r = run("submit", EXAMPLE, "--wait", "--json", env=self.env)
        job_id = json.loads(r.stdout)["id"]
        r = run("cancel", str(job_id), env=self.env)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("already succeeded", r.stderr)

    def test_cancel_stops_a_running_job(self):
        spec = os.path.join(self.tmp.name, "long.json")
        with open(spec, "w") as f:
            json.dump({"name": "long", "tasks": [
                {"id": f"s{i}", "kernel": "sleep", "args": {"us": 50000}} for i in range(200)]}, f)
        r = run("submit", spec, "--json", env=self.env)
        self.assertEqual(r.returncode, 0, r.stderr)
        job_id = str(json.loads(r.stdout)["id"])
        r = run("cancel", job_id, env=self.env)
        self.assertEqual(r.returncode, 0, r.stderr)
        status = json.loads(run("status", job_id, "--json", env=self.env).stdout)
        self.assertEqual(status["state"], "cancelled")
        self.assertLess(status["done"], 200)

    def test_forget_frees_an_ended_job_and_refuses_a_running_one(self):
        spec = os.path.join(self.tmp.name, "out.json")
        with open(spec, "w") as f:
            json.dump({"name": "out", "tasks": [
                {"id": "a", "kernel": "scale", "args": {"n": 1024, "factor": 2}}]}, f)
        r = run("submit", spec, "--wait", "--json", env=self.env)
        self.assertEqual(r.returncode, 0, r.stderr)
        job_id = str(json.loads(r.stdout)["id"])
        r = run("forget", job_id, env=self.env)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout, "forgot job %s; the workers free its outputs (4096 bytes)\n"
                         % job_id)
        r = run("status", job_id, env=self.env)
        self.assertEqual(r.returncode, 2)
        self.assertIn("no such job", r.stderr)
        self.assertNotIn("out", run("status", env=self.env).stdout.split())
        # A running job is not forgotten: it is cancelled first.
        with open(spec, "w") as f:
            json.dump({"name": "long", "tasks": [
                {"id": "s", "kernel": "sleep", "args": {"us": 3600000000}}]}, f)
        r = run("submit", spec, "--json", env=self.env)
        long_id = str(json.loads(r.stdout)["id"])
        r = run("forget", long_id, env=self.env)
        self.assertNotEqual(r.returncode, 0)
        self.assertEqual(r.stderr.count("\n"), 1, r.stderr)
        self.assertIn("job %s not forgotten: it has not ended" % long_id, r.stderr)
        self.assertEqual(run("cancel", long_id, env=self.env).returncode, 0)
        r = run("forget", long_id, "--json", env=self.env)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(json.loads(r.stdout),
                         {"id": int(long_id), "forgotten": True, "freed_bytes": 0})

    def test_submit_wait_fetch_writes_each_final_output(self):
        # a and b (generated values, scaled) feed sum on whichever worker the
        # scheduler picks, so at least one input may cross workers; sum and
        # neg are the final outputs. The generator is FillDeterministic
        # (worker/f32_util.cc): multiples of 1/8, exact in float32.
        n = 65536
        spec = os.path.join(self.tmp.name, "fetch.json")
        with open(spec, "w") as f:
            json.dump({"name": "fetch", "tasks": [
                {"id": "a", "kernel": "scale", "args": {"n": n, "factor": 2.0}},
                {"id": "b", "kernel": "scale", "args": {"n": n, "factor": 0.5}},
                {"id": "sum", "kernel": "add", "inputs": ["a", "b"]},
                {"id": "neg", "kernel": "scale", "core": "vector",
                 "args": {"n": n, "factor": -1.0}}]}, f)
        out = os.path.join(self.tmp.name, "out")
        r = run("submit", spec, "--wait", "--fetch", out + "/", env=self.env)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(f"outputs written to {out}/manifest.json\n", r.stdout)
        with open(os.path.join(out, "manifest.json")) as f:
            manifest = sorted(json.load(f), key=lambda e: e["task"])
        self.assertEqual([(e["task"], e["index"], e["file"]) for e in manifest],
                         [("neg", 0, "neg.0.bin"), ("sum", 0, "sum.0.bin")])
        generated = [((i * 7 + 13) % 17 - 8) / 8.0 for i in range(n)]
        want = {"sum": [2.5 * g for g in generated], "neg": [-g for g in generated]}
        for e in manifest:
            self.assertEqual((e["dtype"], e["shape"], e["bytes"]), ("f32", [n], 4 * n))
            with open(os.path.join(out, e["file"]), "rb") as f:
                data = f.read()
            self.assertEqual(len(data), 4 * n, e["file"])
            got = struct.unpack(f"<{n}f", data)
            bad = [i for i in range(n) if got[i] != want[e["task"]][i]][:1]
            self.assertEqual(bad, [], f"{e['file']}: first wrong element" +
                             (f" [{bad[0]}] = {got[bad[0]]}" if bad else ""))
        self.assertEqual(sorted(os.listdir(out)), ["manifest.json", "neg.0.bin", "sum.0.bin"])

    def test_fetch_without_wait_is_refused(self):
        r = run("submit", EXAMPLE, "--fetch", os.path.join(self.tmp.name, "never"), env=self.env)
        self.assertEqual(r.returncode, 2)
        self.assertIn("--fetch: needs --wait", r.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.tmp.name, "never")))

    def test_unreachable_controller_is_one_line_and_exit_1(self):
        r = run("pool", "--url", f"http://127.0.0.1:{free_port()}")
        self.assertEqual(r.returncode, 1)
        self.assertIn("cannot reach", r.stderr)
        self.assertEqual(r.stderr.count("\n"), 1, r.stderr)


class EmbeddedRun(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.tmp.cleanup()

    def test_run_json_and_trace_follow_the_design(self):
        with tempfile.TemporaryDirectory() as tmp:
            trace_path = os.path.join(tmp, "trace.json")
            r = run("run", EXAMPLE, "--workers", "2", "--json", "--trace", trace_path)
            self.assertEqual(r.returncode, 0, r.stderr)
            summary = json.loads(r.stdout)
            self.assertEqual(summary["state"], "succeeded")
            with open(trace_path) as f:
                trace = json.load(f)
            slices = [e for e in trace["traceEvents"]
                      if e["ph"] == "X" and e.get("cat") != "state_load"]
            self.assertEqual(len(slices), summary["tasks"])
            # The backbone stages hold their weights: each load is a slice
            # of its own, as many as the summary counts.
            loads = [e for e in trace["traceEvents"] if e.get("cat") == "state_load"]
            self.assertEqual(len(loads), summary.get("state_loads", 0))
            for e in loads:
                self.assertTrue(e["name"].startswith("load llm"), e)
                self.assertGreater(e["args"]["bytes"], 0)
            for e in slices:
                self.assertIn("task", e["args"])
                self.assertEqual(e["args"]["job"], summary["id"])
                self.assertIsInstance(e["pid"], int)
                self.assertIsInstance(e["tid"], int)
                self.assertGreaterEqual(e["dur"], 0)

    def test_every_policy_runs_the_examples_whose_submodels_hold_weights(self):
        # Live, not simulated: the static baselines and the dynamic policies
        # alike run the examples whose stages and experts keep their weights
        # in their state; what loads they make, the summary says.
        moe = os.path.join(SRC, "examples", "moe.json")
        for policy in ("hmpmd", "fifo", "spmd-1f1b", "spmd-zb-h1", "spmd-search", "spmd-eplb"):
            for example in (EXAMPLE, moe):
                r = run("run", example, "--workers", "4", "--policy", policy, "--json",
                        timeout=120)
                self.assertEqual(r.returncode, 0, f"{policy} {example}: {r.stderr}")
                summary = json.loads(r.stdout)
                self.assertEqual(summary["state"], "succeeded", f"{policy} {example}")
                if "state_loads" in summary:
                    self.assertGreater(summary["state_loads"], 0)
                    self.assertGreater(summary["state_load_bytes"], 0)
                    self.assertGreaterEqual(summary["state_load_hidden_fraction"], 0)
                    self.assertLessEqual(summary["state_load_hidden_fraction"], 1)

    def test_run_rejects_a_missing_file_and_bad_flags(self):
        r = run("run", "/nonexistent/job.json")
        self.assertEqual(r.returncode, 2)
        self.assertIn("/nonexistent/job.json", r.stderr)
        r = run("run", EXAMPLE, "--workers", "0")
        self.assertEqual(r.returncode, 2)
        self.assertIn("--workers", r.stderr)
        # Said once by `run` itself, not once by each worker it would start.
        r = run("run", EXAMPLE, "--cores", "cube=1000")
        self.assertEqual(r.returncode, 2)
        self.assertEqual(r.stderr, "hmpmd: --cores: count '1000' of cube is not an integer"
                         " in [0, 256]\n")

    def test_a_worker_nobody_answers_says_so(self):
        # As a controller with --curve-keys ignores a worker without keys:
        # the worker used to wait without a word.
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        worker = subprocess.Popen([os.path.join(BIN, "hmpmd-worker"), "--controller",
                                   f"tcp://127.0.0.1:{port}", "--log-level", "warn"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            line = ""
            deadline = time.monotonic() + 30
            while "no answer" not in line and time.monotonic() < deadline:
                ready, _, _ = select.select([worker.stderr], [], [], deadline - time.monotonic())
                if ready:
                    line = worker.stderr.readline()
            self.assertRegex(line, f"no answer from the controller at tcp://127.0.0.1:{port}"
                             r" for [5-9] s: is it running and reachable\?")
            self.assertIn("give --curve-keys DIR", line)
        finally:
            worker.kill()
            worker.wait(timeout=30)

    def test_keygen_names_the_files_it_wrote(self):
        with tempfile.TemporaryDirectory() as tmp:
            keys = os.path.join(tmp, "keys")
            r = run("keygen", keys + "/")
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(r.stdout, f"wrote {keys}/{{controller,worker}}.{{pub,key}} and"
                             f" {keys}/authorized/worker.pub\n")
            self.assertTrue(os.path.exists(os.path.join(keys, "authorized", "worker.pub")))

    def test_run_memory_mb_reaches_its_workers(self):
        for value in ("-5", "abc", "1073741825", "1.5"):
            r = run("run", EXAMPLE, "--memory-mb", value)
            self.assertEqual(r.returncode, 2, value)
            self.assertEqual(r.stderr, "hmpmd: --memory-mb: expected a whole number from 0 to"
                             f" 1073741824, got '{value}'\n")
        with tempfile.TemporaryDirectory() as tmp:
            spec = os.path.join(tmp, "big.json")
            with open(spec, "w") as f:  # a 4 MiB final output
                f.write('{"tasks": [{"id": "big", "kernel": "scale",'
                        ' "args": {"n": 1048576, "factor": 2}}]}')
            r = run("run", spec, "--workers", "1", "--memory-mb", "1")
            self.assertEqual(r.returncode, 1, r.stderr)
            self.assertIn("need 4194304 bytes; 0 of the 1048576 allowed (--memory-mb)", r.stdout)
            r = run("run", spec, "--workers", "1", "--memory-mb", "8")
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

    def test_run_gives_its_workers_labels_and_device_files(self):
        h2 = os.path.join(os.path.dirname(EXAMPLE), "multimodal-h2.json")  # vision requires accel=910c
        r = run("run", h2, "--workers", "2", "--json")
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        self.assertIn("requires accel=910c: no worker has it", r.stderr)
        r = run("run", h2, "--workers", "2", "--label", "accel=910c", "--json")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual(json.loads(r.stdout)["state"], "succeeded")
        with tempfile.TemporaryDirectory() as tmp:
            files = []
            for name, accel, cores in (("b", "910b", {"cube": 1, "vector": 1}),
                                       ("c", "910c", {"cube": 2, "vector": 1})):
                files.append(os.path.join(tmp, name + ".json"))
                with open(files[-1], "w") as f:
                    json.dump({"cores": cores, "labels": {"accel": accel}}, f)
            r = run("run", h2, "--device", files[0], "--device", files[1], "--json")
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            summary = json.loads(r.stdout)
            self.assertEqual(summary["state"], "succeeded")
            # One worker per file.
            self.assertEqual(len(summary["utilisation_by_device"]), 2, summary)
            r = run("run", h2, "--device", files[0], "--workers", "2")
            self.assertEqual(r.returncode, 2)
            self.assertIn("--workers excludes --device", r.stderr)
        r = run("run", h2, "--label", "accel")
        self.assertEqual(r.returncode, 2)
        self.assertEqual(r.stderr, "hmpmd: --label: expected KEY=VALUE, found no '='\n")

    def test_outputs_that_together_pass_a_store_go_to_different_workers(self):
        # The two earliest-free cores are one worker's; 40 + 40 MiB of
        # outputs do not fit its 64 MiB store, so the second goes elsewhere.
        with tempfile.TemporaryDirectory() as tmp:
            spec = os.path.join(tmp, "two.json")
            with open(spec, "w") as f:
                f.write('{"tasks": ['
                        '{"id": "a", "kernel": "scale", "args": {"n": 10485760, "factor": 2}},'
                        '{"id": "b", "kernel": "scale", "args": {"n": 10485760, "factor": 3}}]}')
            r = run("run", spec, "--workers", "2", "--cores", "cube=2", "--memory-mb", "64")
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            self.assertIn("tasks        2 of 2", r.stdout)

    def test_worker_rejects_bad_flags_in_one_line_without_starting(self):
        ctl = "tcp://127.0.0.1:%d" % free_port()
        for args, what in ((["--cores", "cube=x"], "--cores: count 'x' of cube"),
                           (["--cores", "gpu=1"], "--cores: 'gpu' is not a core kind"),
                           (["--memory-mb", "-5"], "--memory-mb"),
                           (["--prefetch-mb", "-1"], "--prefetch-mb"),
                           (["--log-level", "loud"], "loud")):
            # A worker that started anyway would wait for the controller
            # until the timeout below fails the test.
            r = subprocess.run([os.path.join(BIN, "hmpmd-worker"), "--controller", ctl, *args],
                               capture_output=True, text=True, timeout=20)
            self.assertEqual(r.returncode, 2, args)
            self.assertEqual(r.stderr.count("\n"), 1, r.stderr)
            self.assertIn(what, r.stderr)
        r = subprocess.run([os.path.join(BIN, "hmpmd-worker"), "--controller", "nonsense"],
                           capture_output=True, text=True, timeout=20)
        self.assertEqual(r.returncode, 2)
        self.assertIn("--controller: 'nonsense' is not tcp://HOST:PORT", r.stderr)

    def test_controller_and_client_reject_bad_flags_without_starting(self):
        listen = ["--listen", "tcp://127.0.0.1:%d" % free_port(), "--db", ""]
        for args in (["--keep-jobs", "-1"], ["--max-tasks", "0"], ["--max-spec-mb", "-1"],
                     ["--keep-hours", "-2"], ["--http-nice", "50"], ["--heartbeat-ms", "0"]):
            # A controller that started anyway runs until the timeout, which
            # kills it and fails the test.
            r = run("controller", *listen, *args, timeout=20)
            self.assertEqual(r.returncode, 2, args)
            self.assertIn(args[0], r.stderr)
        # ZeroMQ would listen on a random port for 99999; refused before
        # the --db file is created.
        with tempfile.TemporaryDirectory() as tmp:
            db = os.path.join(tmp, "jobs.db")
            for endpoint in ("garbage", "tcp://127.0.0.1:99999"):
                r = run("controller", "--listen", endpoint, "--db", db, "--http", "", timeout=20)
                self.assertEqual(r.returncode, 2, endpoint)
                self.assertIn("--listen: '%s' " % endpoint, r.stderr)
                self.assertEqual(os.listdir(tmp), [])
        for args in (["--request-timeout", "-1"], ["--wait", "--wait-timeout", "-5"]):
            r = run("submit", EXAMPLE, *args)
            self.assertEqual(r.returncode, 2, args)
            self.assertIn(args[-2], r.stderr)

    def test_run_stopped_by_a_signal_leaves_no_worker_behind(self):
        with tempfile.TemporaryDirectory() as tmp:
            spec = os.path.join(tmp, "long.json")
            with open(spec, "w") as f:
                json.dump({"tasks": [{"id": "a", "kernel": "sleep", "args": {"us": 60e6}}]}, f)
            for sig, code in ((signal.SIGINT, 130), (signal.SIGTERM, 143),
                              (signal.SIGKILL, -signal.SIGKILL)):
                with open(os.path.join(tmp, "stderr"), "w+") as err:
                    p = subprocess.Popen([HMPMD, "run", spec, "--workers", "2"],
                                         stdout=subprocess.DEVNULL, stderr=err)
                    workers = []
                    try:
                        deadline = time.monotonic() + 30
                        while len(workers) < 2 and time.monotonic() < deadline:
                            time.sleep(0.05)
                            workers = children(p.pid)
                        self.assertEqual(len(workers), 2, sig)
                        p.send_signal(sig)
                        self.assertEqual(p.wait(timeout=30), code, sig)
                        deadline = time.monotonic() + 20
                        while any(map(running, workers)) and time.monotonic() < deadline:
                            time.sleep(0.05)
                        self.assertEqual([w for w in workers if running(w)], [], sig)
                        err.seek(0)
                        if sig != signal.SIGKILL:
                            # One line: the controller's log of the cancel
                            # (a warning) came before it.
                            self.assertEqual(err.read(),
                                             "hmpmd: interrupted by %s: the job was cancelled\n"
                                             % sig.name)
                    finally:
                        for w in workers:
                            if running(w):
                                os.kill(w, signal.SIGKILL)
                        if p.poll() is None:
                            p.kill()
                            p.wait()

    def test_run_interrupted_while_its_workers_start_exits_at_once(self):
        with tempfile.TemporaryDirectory() as tmp:
            never = os.path.join(tmp, "never-registers")
            with open(never, "w") as f:
                f.write("#!/bin/sh\nexec sleep 60\n")
            os.chmod(never, 0o755)
            with open(os.path.join(tmp, "stderr"), "w+") as err:
                p = subprocess.Popen([HMPMD, "run", EXAMPLE, "--workers", "1",
                                      "--worker-binary", never],
                                     stdout=subprocess.DEVNULL, stderr=err)
                try:
                    time.sleep(1)  # within the 30 s the start waits for workers
                    p.send_signal(signal.SIGINT)
                    self.assertEqual(p.wait(timeout=20), 130)
                    err.seek(0)
                    self.assertIn("hmpmd: interrupted by SIGINT", err.read())
                finally:
                    if p.poll() is None:
                        p.kill()
                        p.wait()

    def test_sim_json_reports_every_policy_within_its_bound(self):
        r = run("sim", EXAMPLE, "--devices", "16", "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        out = json.loads(r.stdout)
        self.assertEqual(set(out["policies"]), {"hmpmd", "fifo", "spmd-1f1b", "spmd-zb-h1",
                                                "spmd-search", "spmd-eplb"})
        for name, p in out["policies"].items():
            self.assertEqual(p["state"], "succeeded", name)
            self.assertGreaterEqual(p["makespan_s"], p["lower_bound_s"] * (1 - 1e-9), name)
            for key in ("tasks", "utilisation", "masking_ratio", "bubble_ratio"):
                self.assertIn(key, p, name)

    def test_sim_takes_a_builtin_name_beside_a_directory_of_that_name(self):
        # From examples/, whose rl/ directory was read as the workload.
        with tempfile.TemporaryDirectory() as tmp:
            os.mkdir(os.path.join(tmp, "rl"))
            r = subprocess.run([HMPMD, "sim", "rl", "--devices", "16", "--policy", "fifo",
                                "--json"], capture_output=True, text=True, timeout=60, cwd=tmp)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(json.loads(r.stdout)["policies"]["fifo"]["state"], "succeeded")

    def test_sim_spmd_on_small_pools_and_plans_it_cannot_follow(self):
        # spmd-1f1b used to end "simulation stuck" on multimodal below 16 devices.
        for devices in ("3", "8", "15"):
            for policy in ("spmd-1f1b", "spmd-zb-h1", "spmd-search"):
                r = run("sim", "multimodal", "--devices", devices, "--policy", policy)
                self.assertEqual(r.returncode, 0, policy + ": " + r.stdout + r.stderr)
        # A program order against the inputs: that policy's run fails at
        # once, naming the task; the others' figures still come.
        spec = os.path.join(self.tmp.name, "order.json")
        with open(spec, "w") as f:
            json.dump({"submodels": [{"name": "s", "devices": 1}],
                       "tasks": [{"id": "a", "submodel": "s", "kernel": "spin",
                                  "args": {"us": 5, "shard": 0, "order": 1}},
                                 {"id": "b", "submodel": "s", "kernel": "spin", "inputs": ["a"],
                                  "args": {"us": 5, "shard": 0, "order": 0}}]}, f)
        r = run("sim", spec, "--devices", "2")
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("spmd-1f1b cannot run this job: tasks[0] 'a'", r.stdout)
        self.assertIn("program order", r.stdout)
        self.assertNotIn("stuck", r.stdout)
        out = json.loads(run("sim", spec, "--devices", "2", "--json").stdout)
        self.assertEqual(out["policies"]["hmpmd"]["state"], "succeeded")
        self.assertEqual(out["policies"]["spmd-1f1b"]["state"], "failed")
        self.assertIn("program order", out["policies"]["spmd-1f1b"]["error"])
        # Two actors asking 5 + 5 of 8 devices overlap, and the table says so.
        spec = os.path.join(self.tmp.name, "two.json")
        with open(spec, "w") as f:
            json.dump({"submodels": [{"name": n, "kind": "actor", "devices": 5}
                                     for n in ("a", "b")],
                       "tasks": [{"id": n, "submodel": n, "kernel": "spin", "args": {"us": 5}}
                                 for n in ("a", "b")]}, f)
        r = run("sim", spec, "--devices", "8")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("hmpmd: sub-model 'a' asked for 5 devices and got 5, 2 of them shared",
                      r.stdout)
        out = json.loads(run("sim", spec, "--devices", "8", "--json").stdout)
        self.assertEqual(out["policies"]["hmpmd"]["short_sets"],
                         [{"submodel": n, "asked": 5, "got": 5, "shared": 2} for n in ("a", "b")])
        # fifo keeps actors on sets too (laid out the same way, never moved).
        self.assertEqual(out["policies"]["fifo"]["short_sets"],
                         out["policies"]["hmpmd"]["short_sets"])

    def test_sim_trace_shows_each_state_load_as_its_own_slice(self):
        spec = os.path.join(self.tmp.name, "stateful.json")
        with open(spec, "w") as f:
            json.dump({"submodels": [{"name": "enc", "kind": "encoder", "state_bytes": 1e9}],
                       "tasks": [{"id": "a", "kernel": "spin", "args": {"us": 100},
                                  "submodel": "enc"},
                                 {"id": "b", "kernel": "spin", "args": {"us": 100},
                                  "submodel": "enc", "inputs": ["a"]}]}, f)
        trace = os.path.join(self.tmp.name, "stateful_trace.json")
        r = run("sim", spec, "--devices", "1", "--policy", "fifo", "--json", "--trace", trace)
        self.assertEqual(r.returncode, 0, r.stderr)
        job = json.loads(r.stdout)["policies"]["fifo"]
        self.assertEqual(job["state_loads"], 1)
        with open(trace) as f:
            events = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]
        loads = [e for e in events if e.get("cat") == "state_load"]
        self.assertEqual([e["name"] for e in loads], ["load enc"])
        self.assertEqual(loads[0]["args"]["task"], "a")
        self.assertAlmostEqual(loads[0]["dur"] / 1e6, job["state_load_s"], delta=1e-6)
        task_a = next(e for e in events if e["name"] == "a")
        self.assertEqual(loads[0]["ts"], task_a["ts"])

    def test_sim_several_jobs_share_the_pool_by_weight(self):
        specs = []
        for name in ("heavy", "light"):
            spec = os.path.join(self.tmp.name, name + ".json")
            with open(spec, "w") as f:
                json.dump({"name": name, "tasks": [{"id": f"{name}{i}", "kernel": "spin",
                                                     "args": {"us": 100}} for i in range(400)]}, f)
            specs.append(spec)
        trace = os.path.join(self.tmp.name, "two.json")
        r = run("sim", *specs, "--devices", "4", "--weights", "3,1", "--policy", "hmpmd",
                "--json", "--trace", trace)
        self.assertEqual(r.returncode, 0, r.stderr)
        out = json.loads(r.stdout)
        self.assertEqual([w["weight"] for w in out["workloads"]], [3, 1])
        p = out["policies"]["hmpmd"]
        jobs = p["jobs"]
        self.assertEqual([j["name"] for j in jobs], ["heavy", "light"])
        self.assertEqual([j["state"] for j in jobs], ["succeeded"] * 2)
        self.assertEqual(p["makespan_s"], max(j["end_s"] for j in jobs))
        # Equal work, weights 3 and 1: while both run the heavy job gets
        # about three quarters of the cores, and finishes first.
        self.assertAlmostEqual(jobs[0]["share_while_all_run"], 0.75, delta=0.1)
        # Spins run on the cube cores only: that kind's share is the same.
        self.assertAlmostEqual(jobs[0]["share_while_all_run_by_kind"]["cube"], 0.75, delta=0.05)
        self.assertEqual(jobs[0]["share_while_all_run_by_kind"]["vector"], 0)
        self.assertAlmostEqual(jobs[0]["fair_share"], 0.75)
        self.assertLess(jobs[0]["end_s"], jobs[1]["end_s"])
        # Each job's figures as for one job (they lacked these), and the
        # state loads of all jobs at the policy's level.
        for j in jobs:
            for key in ("tight_bound_s", "device_moves", "short_sets", "lower_bound_s"):
                self.assertIn(key, j)
            self.assertGreaterEqual(j["makespan_s"], j["tight_bound_s"] * (1 - 1e-9))
        self.assertEqual((p["state_loads"], p["state_load_s"]), (0, 0))
        out = json.loads(run("sim", "rl", "rl", "--devices", "64", "--policy", "hmpmd",
                             "--json").stdout)["policies"]["hmpmd"]
        self.assertGreater(out["state_loads"], 0)
        # rl's stateful sub-models declare state_bytes, so under hmpmd they
        # float by state affinity: loads where they run, no device moves.
        self.assertEqual(sum(j["device_moves"] for j in out["jobs"]), 0)
        # One trace with both jobs on the pool's clock.
        with open(trace) as f:
            events = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]
        self.assertEqual(len(events), 800)
        self.assertEqual({e["args"]["job"] for e in events}, {1, 2})
        end = max(e["ts"] + e["dur"] for e in events)
        self.assertAlmostEqual(end / 1e6, p["makespan_s"], delta=1e-6)
        # The table names each job with its weight.
        r = run("sim", *specs, "--devices", "4", "--weights", "3,1")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("2 jobs on pool", r.stdout)
        self.assertRegex(r.stdout, r"hmpmd +heavy +3 +succeeded")
        self.assertRegex(r.stdout, r" moves +wall_s\n")
        # fifo serves them in order: the light job waits, and its end (not
        # its own span from its first run) says so.
        out = json.loads(run("sim", *specs, "--devices", "4", "--weights", "3,1", "--policy",
                             "fifo", "--json").stdout)
        fifo = out["policies"]["fifo"]["jobs"]
        self.assertEqual([j["share_while_all_run"] for j in fifo], [1.0, 0.0])
        self.assertAlmostEqual(fifo[1]["end_s"], 2 * fifo[0]["end_s"])
        self.assertAlmostEqual(out["policies"]["fifo"]["makespan_s"], fifo[1]["end_s"])
        r = run("sim", *specs, "--weights", "3")
        self.assertEqual(r.returncode, 2)
        self.assertIn("--weights: 1 given for 2 workloads", r.stderr)

    def test_sim_rejects_bad_flags_in_one_line(self):
        for args, what in ((["--devices", "0"], "--devices: must be at least 1"),
                           (["--devices", "2000000"], "--devices: more than 1000000"),
                           (["--policy", "bogus"], "--policy: unknown policy 'bogus'")):
            r = run("sim", EXAMPLE, *args)
            self.assertEqual(r.returncode, 2, args)
            self.assertEqual(r.stderr.count("\n"), 1, r.stderr)
            self.assertIn(what, r.stderr)
        r = run("sim", "no_such_workload")
        self.assertEqual(r.returncode, 2)
        self.assertIn("neither a readable job spec nor a built-in workload", r.stderr)
        two = ("sim", "pipeline", "pipeline", "--devices", "8")
        for args, what in (
                ([*two, "--weights", "3,,1"], "--weights: expected a whole number from 1 to "
                                              "1000000, got ''"),
                ([*two, "--weights", "1,1,"], "got ''"),
                ([*two, "--weights", ",", "--policy", "fifo"], "--weights: expected a whole"),
                ([*two, "--weights", "0,1"], "got '0'"),
                ([*two, "--weights", "1,x"], "got 'x'"),
                (["sim", "pipeline", "--seed", "99999999999999999999999"],
                 "--seed: expected a whole number from 0 to 18446744073709551615"),
                (["sim", "pipeline", "--seed", ""], "--seed: expected a whole number"),
                (["sim", "pipeline", "--seed", "1.5"], "got '1.5'")):
            r = run(*args)
            self.assertEqual(r.returncode, 2, (args, r.stderr))
            self.assertEqual(r.stderr.count("\n"), 1, r.stderr)
            self.assertIn(what, r.stderr)
        with tempfile.TemporaryDirectory() as tmp:
            # Several policies write FILE.POLICY.json beside the path named:
            # a directory made 'DIR.fifo' and friends.
            for path in (tmp, tmp + "/"):
                r = run("sim", "pipeline", "--devices", "8", "--trace", path)
                self.assertEqual(r.returncode, 2, r.stderr)
                self.assertIn("is a directory; give a file name", r.stderr)
            self.assertEqual(os.listdir(tmp), [])
            self.assertFalse(os.path.exists(tmp + ".fifo"))
        r = run("sim", "pipeline", "pipeline", "--devices", "8", "--weights", "3,1",
                "--policy", "hmpmd", "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual([j["weight"] for j in json.loads(r.stdout)["policies"]["hmpmd"]["jobs"]],
                         [3, 1])

    def test_sim_warns_once_about_kernels_it_cannot_time(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "typo.json")
            with open(path, "w") as f:
                json.dump({"tasks": [{"id": "a", "kernel": "gemn"},
                                     {"id": "b", "kernel": "gemn", "inputs": ["a"]},
                                     {"id": "c", "kernel": "mine", "cost": {"flops": 1e9}},
                                     {"id": "d", "kernel": "gemm", "args": {"m": 8, "n": 8,
                                                                             "k": 8}}]}, f)
            r = run("sim", path, "--policy", "fifo", "--json")
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(r.stderr.count("\n"), 1, r.stderr)
            self.assertIn("tasks[0] 'a': kernel 'gemn' is not built in and has no cost.flops "
                          "to time it by; it and 1 more such tasks take 1 us", r.stderr)
            self.assertEqual(json.loads(r.stdout)["policies"]["fifo"]["state"], "succeeded")
            r = run("sim", "multimodal", "--policy", "fifo", "--devices", "16")
            self.assertEqual((r.returncode, r.stderr), (0, ""))

    def test_sim_times_communication_sized_by_its_arguments(self):
        # A send of args.bytes moves those bytes live; the simulator used to
        # time it at 1 us because it read cost.bytes only.
        with tempfile.TemporaryDirectory() as tmp:
            def makespan(task):
                path = os.path.join(tmp, "comm.json")
                with open(path, "w") as f:
                    json.dump({"tasks": [dict(task, id="s", core="vector")]}, f)
                r = run("sim", path, "--devices", "8", "--policy", "fifo", "--json")
                self.assertEqual(r.returncode, 0, r.stderr)
                return json.loads(r.stdout)["policies"]["fifo"]["makespan_s"], r.stderr
            by_args, err = makespan({"kernel": "send", "args": {"bytes": 1 << 30}})
            self.assertEqual(err, "")
            by_cost, _ = makespan({"kernel": "send", "cost": {"bytes": 1 << 30}})
            self.assertEqual(by_args, by_cost)
            self.assertGreater(by_args, 0.001)
            small, _ = makespan({"kernel": "send", "args": {"bytes": 1 << 20}})
            self.assertLess(small, by_args)
            # Sized by its inputs alone: a guess, and a warning saying so.
            path = os.path.join(tmp, "fed.json")
            with open(path, "w") as f:
                json.dump({"tasks": [{"id": "g", "kernel": "gemm",
                                      "args": {"m": 64, "n": 64, "k": 64}},
                                     {"id": "s", "kernel": "send", "core": "vector",
                                      "inputs": ["g"]}]}, f)
            r = run("sim", path, "--devices", "8", "--policy", "fifo")
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(r.stderr, f"hmpmd sim: warning: {path}: tasks[1] 's': 'send' moves"
                             " its inputs' data, whose size the simulator does not know; give"
                             " cost.bytes (timed as 4096 bytes)\n")


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v"])
