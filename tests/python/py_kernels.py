"""The Python kernels of worker_test.py, served by `python3 -m hmpmd.worker
--kernels py_kernels`."""
import json
import threading
import time

import numpy as np


def register(worker):
    @worker.kernel("py.arange", core="cube")
    def arange(ctx, inputs, args):
        return np.arange(args["n"], dtype=np.float32)

    @worker.kernel("py.double")
    def double(ctx, inputs, args):
        return inputs[0] * 2

    @worker.kernel("py.inspect")
    def inspect(ctx, inputs, args):
        # What the kernel got, for the driver to check: dtype, shape, and
        # whether the array is a read-only view of the worker's buffer.
        out = [{"dtype": str(a.dtype), "shape": list(a.shape), "writeable": a.flags.writeable,
                "owndata": a.flags.owndata, "base": type(a.base).__name__,
                "sum": float(a.astype(np.float64).sum())} for a in inputs]
        return json.dumps(out).encode()

    @worker.kernel("py.mutate")
    def mutate(ctx, inputs, args):
        inputs[0][0] = 1
        return inputs[0]

    @worker.kernel("py.pair")
    def pair(ctx, inputs, args):
        return np.array([[1, 2], [3, 4]], dtype=np.int32), b"hi " + args["who"].encode()

    @worker.kernel("py.count")
    def count(ctx, inputs, args):
        if ctx.state is None:
            ctx.state = {"n": 0}
        ctx.state["n"] += 1
        return np.array([ctx.state["n"]], dtype=np.int64)

    @worker.kernel("py.lock")
    def lock(ctx, inputs, args):
        # A state no pickle can copy to another worker.
        if ctx.state is None:
            ctx.state = threading.Lock()
        return np.zeros(1, dtype=np.int64)

    @worker.kernel("py.fail")
    def fail(ctx, inputs, args):
        raise ValueError("bad shape\n(second line)")

    @worker.kernel("py.flaky")
    def flaky(ctx, inputs, args):
        # Fails until its attempt `ok_at` (a retried task runs again with
        # ctx.attempt one higher), saying so in its log.
        ctx.log.info("attempt %d", ctx.attempt)
        if ctx.attempt < args.get("ok_at", 2):
            raise ValueError(f"flaky at attempt {ctx.attempt}")
        return np.array([ctx.attempt], dtype=np.int64)

    @worker.kernel("py.bad_return")
    def bad_return(ctx, inputs, args):
        return [1, 2, 3]

    @worker.kernel("py.log")
    def log(ctx, inputs, args):
        ctx.log.warning("hello %s", args["who"])

    @worker.kernel("py.wait_cancel", core="vector")
    def wait_cancel(ctx, inputs, args):
        ctx.log.warning("waiting for a cancel")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if ctx.cancelled():
                ctx.log.warning("saw the cancel")
                raise RuntimeError("cancelled")
            time.sleep(0.01)
        raise RuntimeError("no cancel within 30 s")
