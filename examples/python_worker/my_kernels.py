"""Kernels for `python3 -m hmpmd.worker --kernels my_kernels` (run from this
directory, or with it on PYTHONPATH)."""
import numpy as np


def register(worker):
    @worker.kernel("relu", core="cube")
    def relu(ctx, inputs, args):
        # inputs[0] is a read-only view of the worker's buffer: no copy.
        return np.maximum(inputs[0], 0)

    @worker.kernel("running_mean", core="vector")
    def running_mean(ctx, inputs, args):
        # ctx.state lives on this worker per (job, sub-model), between tasks.
        if ctx.state is None:
            ctx.state = {"n": 0, "sum": np.zeros_like(inputs[0], dtype=np.float64)}
        ctx.state["n"] += 1
        ctx.state["sum"] += inputs[0]
        ctx.log.info("seen %d batches", ctx.state["n"])
        return (ctx.state["sum"] / ctx.state["n"]).astype(np.float32), b"ok"
