#!/usr/bin/env python3
"""examples/rl/policy through 4 Python workers: the PyTorch policy learns
(mean episode reward from about -0.23 at random to the target) within a
bounded number of updates, synchronously and asynchronously, and no update
used a rollout older than the staleness bound; the learner refuses one that
is.

    rl_policy_test.py BIN_DIR PYTHON_MODULE_DIR SOURCE_DIR"""
import os
import sys
import unittest

BIN, MODULE_DIR, SRC = sys.argv[1], sys.argv[2], sys.argv[3]
EXAMPLE = os.path.join(SRC, "examples", "rl", "policy")
sys.path[:0] = [MODULE_DIR, EXAMPLE]
del sys.argv[1:]

import numpy as np  # noqa: E402

import hmpmd  # noqa: E402,F401
from hmpmd.local import LocalCluster  # noqa: E402
import kernels  # noqa: E402
import train  # noqa: E402

TARGET, MAX_UPDATES, STALENESS = 0.6, 150, 2


class LearnsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.cluster = LocalCluster(BIN, workers=4, python_kernels=["kernels"],
                                   python_path=[EXAMPLE]).__enter__()

    @classmethod
    def tearDownClass(cls):
        cls.cluster.stop()  # every process, by PID

    def run_mode(self, mode):
        r = train.train(self.cluster.endpoint, mode, STALENESS, actors=2, episodes=64,
                        max_updates=MAX_UPDATES, target=TARGET, seed=1, lr=0.01)
        self.assertIsNotNone(r["reached"], f"{mode}: rewards {r['rewards'][-5:]}")
        self.assertLess(r["rewards"][0], TARGET - 0.3, "the policy did not start untrained")
        return r

    def test_sync_learns_on_fresh_weights(self):
        r = self.run_mode("sync")
        self.assertEqual(set(r["staleness"]), {0})

    def test_async_learns_within_the_staleness_bound(self):
        r = self.run_mode("async")
        self.assertLessEqual(max(r["staleness"]), STALENESS)
        # Actors ran ahead of the learner: some update used older weights.
        self.assertEqual(max(r["staleness"]), STALENESS)


class Ctx:
    state = None


class StalenessBoundTest(unittest.TestCase):
    def test_the_learner_refuses_a_rollout_older_than_the_bound(self):
        learner, actor = Ctx(), Ctx()
        w0 = kernels.init(learner, [], {"seed": 0, "lr": 0.01})
        rollout = list(kernels.rollout(actor, list(w0), {
            "seed": 0, "iteration": 0, "actor": 0, "episodes": 8}))
        scored = list(kernels.score(Ctx(), rollout, {}))
        args = {"rollouts": 1, "staleness": 1}
        kernels.learn(learner, rollout + scored, args)  # version 0 -> 1, staleness 0
        kernels.learn(learner, rollout + scored, args)  # 1 -> 2, staleness 1
        with self.assertRaisesRegex(ValueError, "used weights 0, 2 versions before 2"):
            kernels.learn(learner, rollout + scored, args)
        self.assertEqual(learner.state["version"], 2)
        self.assertTrue(np.all(np.isfinite(kernels.weights_of(learner.state["net"]))))


if __name__ == "__main__":
    unittest.main()
