#!/usr/bin/env python3
"""Trains a PyTorch policy on env.py through HyperMPMD: actors generate
rollouts, a reward model scores them, a learner takes policy-gradient steps
and its weights reach the actors through the data plane.

    python3 examples/rl/policy/train.py --mode both --plot reward.svg

`--mode sync`: every rollout of update k uses the weights of update k
(staleness 0): actors wait for the learner and the learner for them.
`--mode async`: rollouts of update k use the weights of update k - s
(`--staleness`, default 2), so actors generate while the learner trains;
the learner refuses any rollout older than that. Starts a controller and
`--workers` Python workers on loopback (or uses `--controller`). Exit 0
when every mode reached `--target` mean reward, 1 otherwise, 2 bad flags."""
import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, os.path.join(ROOT, "build", "python"))

import hmpmd  # noqa: E402
from hmpmd.local import run_on  # noqa: E402
from hmpmd.plot import line_svg  # noqa: E402


def plot(runs, path):
    """Mean reward against wall time, one line per mode."""
    line_svg(path, {m: (r["seconds"], r["rewards"]) for m, r in runs.items()},
             title="mean episode reward per update", xlabel="wall time (s)")


def train(endpoint, mode, staleness, actors, episodes, max_updates, target, seed, lr,
          timeout_ms=120_000):
    """Runs updates until the mean reward of one reaches `target` or
    `max_updates` ran. Returns {"rewards", "seconds", "staleness" (per
    update), "reached" (the update that hit the target, or None)}."""
    s = 0 if mode == "sync" else staleness
    c = hmpmd.Client.connect(endpoint, session=f"rl-policy-{mode}")
    try:
        learner = c.create_actor("learner", kind="learner", elastic=False)
        scorer = c.create_actor("reward", kind="reward", elastic=False)
        pool = [c.create_actor(f"actor{i}", kind="actor", elastic=False)
                for i in range(actors)]
        weights = [learner.call("pg.init", args={"seed": seed, "lr": lr})]  # W_0

        def submit(k):
            # Rollouts of update k use W_{k-s}: the learner's output s back.
            w = weights[max(0, k - s)]
            rollouts = [a.call("pg.rollout", inputs=[w], args={
                "seed": seed, "iteration": k, "actor": i, "episodes": episodes})
                for i, a in enumerate(pool)]
            scored = scorer.call("pg.reward", inputs=rollouts)
            weights.append(learner.call("pg.learn", inputs=rollouts + [scored, weights[-1]],
                                        args={"rollouts": actors, "staleness": s}))

        out = {"rewards": [], "seconds": [], "staleness": [], "reached": None}
        t0 = time.monotonic()
        submitted = 0
        for k in range(max_updates):
            # Keep s + 1 updates in flight: all that the bound lets run.
            while submitted < min(max_updates, k + s + 1):
                submit(submitted)
                submitted += 1
            version, mean, stale = weights[k + 1].get(timeout_ms)[2]
            out["rewards"].append(float(mean))
            out["seconds"].append(time.monotonic() - t0)
            out["staleness"].append(int(stale))
            if mean >= target:
                out["reached"] = k
                break
    finally:
        # The updates submitted past the target are not needed: cancelled.
        try:
            c.abort()
        except hmpmd.Error:
            pass
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--mode", choices=["sync", "async", "both"], default="both")
    p.add_argument("--staleness", type=int, default=2, help="async bound s (default 2)")
    p.add_argument("--actors", type=int, default=2, help="actor sub-models (default 2)")
    p.add_argument("--episodes", type=int, default=64, help="episodes per rollout (default 64)")
    p.add_argument("--max-updates", type=int, default=300)
    p.add_argument("--target", type=float, default=0.7,
                   help="mean episode reward that ends a run (default 0.7; random -0.23, "
                        "optimal 0.80)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--controller", default="", help="a running controller (default: start one)")
    p.add_argument("--workers", type=int, default=4, help="local Python workers (default 4)")
    p.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    p.add_argument("--plot", default="", help="write reward against wall time to this SVG")
    p.add_argument("--json", action="store_true")
    a = p.parse_args()
    if a.staleness < 0 or a.actors < 1 or a.episodes < 1 or a.max_updates < 1:
        p.error("--staleness must be >= 0; --actors, --episodes and --max-updates >= 1")
    modes = ["sync", "async"] if a.mode == "both" else [a.mode]

    def run_all(endpoint):
        return {m: train(endpoint, m, a.staleness, a.actors, a.episodes, a.max_updates,
                         a.target, a.seed, a.lr) for m in modes}

    runs = run_on(run_all, a.controller, a.bin, workers=a.workers, python_kernels=["kernels"],
                  python_path=[HERE])
    for r in runs.values():
        r["updates_per_s"] = len(r["rewards"]) / r["seconds"][-1]
    if a.plot:
        plot(runs, a.plot)
    if a.json:
        print(json.dumps(runs))
    else:
        for m, r in runs.items():
            where = (f"reached {a.target} at update {r['reached']}, {r['seconds'][-1]:.2f} s"
                     if r["reached"] is not None else f"did not reach {a.target}")
            print(f"{m:5s}: {where}; {r['updates_per_s']:.1f} updates/s; "
                  f"max staleness {max(r['staleness'])}")
    return 0 if all(r["reached"] is not None for r in runs.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
