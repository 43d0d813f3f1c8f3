#!/usr/bin/env python3
"""The async RL example (examples/rl) run briefly, both drivers (C++ and
Python), both modes, through examples/rl/run_rl.py (which starts and stops
the controller and the rl_worker processes by PID). Asserts from the
recorded weight versions of every learner step that no rollout trained on
was more than --max-staleness versions behind the learner, that sync mode
trains only on current weights, and that every run made all its steps.
Usage: rl_staleness_test.py BIN_DIR PYTHON_MODULE_DIR SOURCE_DIR"""
import json
import os
import subprocess
import sys
import tempfile
import unittest

BIN, MODULE_DIR, SRC = sys.argv[1], sys.argv[2], sys.argv[3]
RUN_RL = os.path.join(SRC, "examples", "rl", "run_rl.py")
STEPS, BATCH, STALENESS = 10, 4, 1


class RlStalenessTest(unittest.TestCase):
    def run_example(self, driver):
        with tempfile.TemporaryDirectory() as tmp:
            record = os.path.join(tmp, "record.jsonl")
            # Many rollouts in flight for a small batch and a broadcast every
            # step: async mode meets stale rollouts and must drop them.
            r = subprocess.run(
                [sys.executable, RUN_RL, "--bin", BIN, "--python-module", MODULE_DIR,
                 "--workers", "3", "--driver", driver, "--",
                 "--mode", "both", "--steps", str(STEPS), "--batch", str(BATCH),
                 "--inflight", "12", "--broadcast-every", "1",
                 "--max-staleness", str(STALENESS), "--median-us", "1500", "--sigma", "1.0",
                 "--max-us", "20000", "--train-us", "3000", "--load-us", "200",
                 "--reward-us", "100", "--params", "256", "--sleep", "--record", record],
                capture_output=True, text=True, timeout=240)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            with open(record) as f:
                lines = [json.loads(line) for line in f]
        return r.stdout, lines

    def check(self, stdout, lines):
        self.assertIn("async / sync steps/s", stdout)
        for mode in ("sync", "async"):
            steps = [l for l in lines if l["mode"] == mode]
            self.assertEqual(len(steps), STEPS, f"{mode}: {len(steps)} learner steps recorded")
            self.assertEqual([l["learner_version"] for l in steps], list(range(STEPS)))
            ids = set()
            for l in steps:
                self.assertEqual(l["max_staleness"], STALENESS)
                self.assertEqual(len(l["rollouts"]), BATCH)
                for rollout_id, version in l["rollouts"]:
                    lag = l["learner_version"] - version
                    self.assertGreaterEqual(lag, 0, l)
                    self.assertLessEqual(lag, STALENESS, f"{mode}: staleness bound exceeded: {l}")
                    if mode == "sync":
                        self.assertEqual(lag, 0, l)
                    self.assertNotIn(rollout_id, ids, f"{mode}: rollout trained twice")
                    ids.add(rollout_id)

    def test_cpp_driver(self):
        self.check(*self.run_example("cpp"))

    def test_python_driver(self):
        self.check(*self.run_example("python"))


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0]], verbosity=2)
