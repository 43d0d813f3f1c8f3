#!/usr/bin/env python3
"""Trains model.py's multimodal model through HyperMPMD: each sub-model an
actor pinned to one worker, holding its weights and Adam state there; the
vision encoder in two data-parallel replicas whose gradients meet in an
`allreduce`; activations and gradients moving worker to worker.

    python3 examples/torch_multimodal/train.py --steps 40 --plot loss.svg
        # starts a controller and 4 Python workers on loopback, stops them
    python3 examples/torch_multimodal/train.py --controller tcp://HOST:PORT
        # a running pool whose workers serve kernels.py

With `--check`, it also trains the single-process PyTorch reference
(reference.py) and compares the loss and every parameter (exit 1 beyond
`--tolerance`). Exit 2: bad flags."""
import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "build", "python"))

import numpy as np  # noqa: E402

import hmpmd  # noqa: E402
from hmpmd.local import run_on  # noqa: E402
from hmpmd.plot import line_svg  # noqa: E402
import model  # noqa: E402

VISION_REPLICAS = 2


class Run:
    """One training run's actors and the futures that order its steps."""

    def __init__(self, client, seed, micro_batches, batch, lr):
        self.c = client
        self.micro_batches, self.size = micro_batches, batch // micro_batches
        self.seed = seed
        self.common = {"seed": seed, "lr": lr, "micro_batches": micro_batches}
        self.vision = [client.create_actor(f"vision{r}", kind="encoder", elastic=False)
                       for r in range(VISION_REPLICAS)]
        self.audio = client.create_actor("audio", kind="encoder", elastic=False)
        self.stages = [client.create_actor(f"stage{k}", kind="pipeline_stage", elastic=False)
                       for k in range(model.STAGES)]
        self.version = {}  # actor name -> the Future of its last apply

    def call(self, actor, kernel, name, inputs, **args):
        # A forward waits for the actor's last update: inputs order tasks.
        after = [self.version[actor.name]] if actor.name in self.version else []
        return actor.call(kernel, args={**self.common, "model": name, **args},
                          inputs=inputs + after, core="cube")

    def step(self, step):
        """Submits one step; returns the Futures of its micro-batch losses."""
        done = {a.name: [] for a in self.vision + [self.audio] + self.stages}
        losses = []
        for mb in range(self.micro_batches):
            images, audio, text, labels = [self.c.put(a) for a in model.micro_batch(
                self.seed, step, mb, self.size)]
            vis = self.vision[mb % VISION_REPLICAS]
            v = self.call(vis, "mm.forward", "vision", [images], mb=mb)
            a = self.call(self.audio, "mm.forward", "audio", [audio], mb=mb)
            h = [self.call(self.stages[0], "mm.forward", "stage0", [v, a, text], mb=mb)]
            for k in range(1, model.STAGES - 1):
                h.append(self.call(self.stages[k], "mm.forward", f"stage{k}", [h[-1]], mb=mb))
            last = self.stages[-1]
            out = self.call(last, "mm.forward_backward", last.name, [h[-1], labels], mb=mb)
            losses.append(out)
            done[last.name].append(out)
            grad = out
            for k in range(model.STAGES - 2, -1, -1):
                stage = self.stages[k]
                # The last stage's output 0 is the loss, 1 the gradient.
                grad = self.call(stage, "mm.backward", stage.name, [grad], mb=mb,
                                 grad_index=1 if k == model.STAGES - 2 else 0)
                done[stage.name].append(grad)
            done[vis.name].append(self.call(vis, "mm.backward", "vision", [grad], mb=mb,
                                            grad_index=0))
            done[self.audio.name].append(self.call(self.audio, "mm.backward", "audio", [grad],
                                                   mb=mb, grad_index=1))
        self.update(step, done)
        return losses

    def update(self, step, done):
        for actor in [self.audio] + self.stages:
            self.version[actor.name] = self.call(actor, "mm.apply", actor.name,
                                                 done[actor.name])
        # Data-parallel replicas: their summed gradients all-reduced, then
        # the same Adam step on each.
        flat = [self.call(v, "mm.grads", "vision", done[v.name]) for v in self.vision]
        group = {"group": f"vision-grads-{step}", "op": "allreduce"}
        reduced = self.c.submit_graph([hmpmd.Call("allreduce", inputs=[f], core="vector",
                                                  collective=group) for f in flat])
        for v, r in zip(self.vision, reduced):
            self.version[v.name] = self.call(v, "mm.apply", "vision", [r], allreduced=True)

    def params(self):
        """{sub-model: [parameter arrays]}, replica 0 for the vision encoder,
        and whether the replicas are equal."""
        out = {}
        for actor, name in [(self.vision[0], "vision"), (self.audio, "audio")] + [
                (s, s.name) for s in self.stages]:
            out[name] = [np.array(p) for p in self.call(actor, "mm.params", name, []).get()]
        replica = [np.array(p) for p in self.call(self.vision[1], "mm.params", "vision",
                                                  []).get()]
        same = all(np.array_equal(a, b) for a, b in zip(out["vision"], replica))
        return out, same


def train(endpoint, seed, steps, micro_batches, batch, lr, timeout_ms=120_000):
    """Returns {"losses": per step, "seconds": since the start, at each
    step's end, "params": {sub-model: arrays}, "replicas_equal": bool,
    "job": the session's job id}."""
    with hmpmd.Client.connect(endpoint, session="torch-multimodal") as c:
        run = Run(c, seed, micro_batches, batch, lr)
        losses, times = [], []
        t0 = time.monotonic()
        pending = [run.step(s) for s in range(steps)]
        job = pending[0][0].job
        for futures in pending:
            losses.append(float(sum(f.get(timeout_ms)[0][0] for f in futures)))
            times.append(time.monotonic() - t0)
        params, same = run.params()
    return {"losses": losses, "seconds": times, "params": params, "replicas_equal": same,
            "job": job}


def relative_error(a, b):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))


def compare(losses, params, ref_losses, ref_params):
    """The largest relative error over the losses and every parameter."""
    worst = relative_error(losses, ref_losses)
    for name, ps in ref_params.items():
        for i, p in enumerate(ps):
            worst = max(worst, relative_error(params[name][i], p))
    return worst


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--controller", default="",
                   help="a running controller; default: start one and --workers workers here")
    p.add_argument("--workers", type=int, default=4, help="local Python workers (default 4)")
    p.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"),
                   help="folder of the hmpmd binary (default build/bin)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--micro-batches", type=int, default=4)
    p.add_argument("--batch", type=int, default=16, help="samples per step")
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--check", action="store_true", help="compare with reference.py")
    p.add_argument("--tolerance", type=float, default=1e-5,
                   help="largest relative error --check accepts (default 1e-5)")
    p.add_argument("--plot", default="", help="write the loss curve to this SVG file")
    p.add_argument("--json", action="store_true", help="print the results as JSON")
    a = p.parse_args()
    if a.steps < 1 or a.micro_batches < VISION_REPLICAS or a.batch % a.micro_batches:
        p.error(f"--steps must be >= 1, --micro-batches >= {VISION_REPLICAS}, and --batch a "
                "multiple of --micro-batches")
    if not a.controller and a.workers < 1:
        p.error("--workers must be >= 1")

    def run(endpoint):
        return train(endpoint, a.seed, a.steps, a.micro_batches, a.batch, a.lr)

    r = run_on(run, a.controller, a.bin, workers=a.workers, python_kernels=["kernels"],
               python_path=[HERE])
    losses, times, same = r["losses"], r["seconds"], r["replicas_equal"]
    result = {"losses": losses, "seconds": times, "replicas_equal": same}
    if a.check:
        import reference
        ref_losses, ref_params = reference.train(a.seed, a.steps, a.micro_batches, a.batch,
                                                 a.lr)
        result["reference_losses"] = ref_losses
        result["max_relative_error"] = compare(losses, r["params"], ref_losses, ref_params)
    if a.plot:
        line_svg(a.plot, {"loss": (list(range(len(losses))), losses)},
                 title="training loss through HyperMPMD (4 workers)", xlabel="step",
                 y_from_zero=True)
    if a.json:
        print(json.dumps(result))
    else:
        for step, (loss, t) in enumerate(zip(losses, times)):
            print(f"step {step:3d}  loss {loss:.6f}  at {t:6.2f} s")
        if a.check:
            print(f"largest relative error against PyTorch: {result['max_relative_error']:.3g}")
    ok = same and (not a.check or result["max_relative_error"] <= a.tolerance)
    if not same:
        print("the vision replicas diverged", file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
