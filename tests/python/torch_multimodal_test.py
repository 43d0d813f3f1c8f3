#!/usr/bin/env python3
"""examples/torch_multimodal through 4 Python workers: a few training steps
equal a single-process PyTorch run of the same model, data and seed (loss
and every parameter within 1e-5 relative), each sub-model's tasks run on the
one worker that holds its weights, and activations cross workers.

    torch_multimodal_test.py BIN_DIR PYTHON_MODULE_DIR SOURCE_DIR"""
import os
import sys
import unittest

BIN, MODULE_DIR, SRC = sys.argv[1], sys.argv[2], sys.argv[3]
EXAMPLE = os.path.join(SRC, "examples", "torch_multimodal")
sys.path[:0] = [MODULE_DIR, EXAMPLE]
del sys.argv[1:]

import hmpmd  # noqa: E402,F401
from hmpmd.local import LocalCluster  # noqa: E402
import reference  # noqa: E402
import train  # noqa: E402

SEED, STEPS, MICRO_BATCHES, BATCH, LR = 3, 4, 4, 16, 3e-3


class TorchMultimodalTest(unittest.TestCase):
    def test_training_through_hmpmd_equals_pytorch(self):
        with LocalCluster(BIN, workers=4, python_kernels=["kernels"],
                          python_path=[EXAMPLE]) as cluster:
            r = train.train(cluster.endpoint, SEED, STEPS, MICRO_BATCHES, BATCH, LR)
            tasks = cluster.get(f"/api/v1/jobs/{r['job']}/tasks?limit=10000")["tasks"]
        ref_losses, ref_params = reference.train(SEED, STEPS, MICRO_BATCHES, BATCH, LR)

        self.assertTrue(r["replicas_equal"], "the vision replicas diverged")
        self.assertEqual(sorted(r["params"]), sorted(ref_params))
        for name, ps in ref_params.items():
            self.assertEqual(len(r["params"][name]), len(ps), name)
            for i, p in enumerate(ps):
                self.assertEqual(r["params"][name][i].shape, p.shape, f"{name}[{i}]")
                err = train.relative_error(r["params"][name][i], p)
                self.assertLessEqual(err, 1e-5, f"{name} parameter {i}")
        self.assertLessEqual(train.relative_error(r["losses"], ref_losses), 1e-5)
        self.assertLess(r["losses"][-1], r["losses"][0], "the loss did not go down")

        # Residency: each sub-model ran where its state is, on one device.
        devices = {}
        for t in tasks:
            self.assertEqual(t["state"], "done", t)
            if t["kernel"].startswith("mm."):
                devices.setdefault(t["submodel"], set()).add(t["device"])
        self.assertEqual(sorted(devices), sorted(["audio", "vision0", "vision1"] +
                                                 [f"stage{k}" for k in range(4)]))
        for name, ds in devices.items():
            self.assertEqual(len(ds), 1, f"{name} ran on devices {sorted(ds)}")
        # The two replicas all-reduced their gradients once per step, and
        # the pipeline crossed workers.
        self.assertEqual(sum(t["kernel"] == "allreduce" for t in tasks), 2 * STEPS)
        self.assertGreater(len(set().union(*devices.values())), 1)


if __name__ == "__main__":
    unittest.main()
