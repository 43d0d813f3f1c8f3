#!/usr/bin/env python3
"""Sync against async RL with the PyTorch policy of examples/rl/policy, on
one local pool (a controller and 4 Python workers), repeated: the median
updates per second and seconds to the target reward of each mode, and the
ratio async / sync from the same run. The baseline is the synchronous loop
(every rollout on the newest weights) that on-policy trainers run.

    python3 bench/rl_policy/rl_policy_bench.py --repeats 5 [--plot reward.svg]"""
import argparse
import os
import statistics
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLE = os.path.join(ROOT, "examples", "rl", "policy")
sys.path[:0] = [os.path.join(ROOT, "build", "python"), EXAMPLE]

from hmpmd.local import LocalCluster  # noqa: E402
import train  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--staleness", type=int, default=2)
    p.add_argument("--target", type=float, default=0.7)
    p.add_argument("--max-updates", type=int, default=300)
    p.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    p.add_argument("--plot", default="", help="reward against wall time of the first repeat")
    a = p.parse_args()
    runs = {"sync": [], "async": []}
    with LocalCluster(a.bin, workers=4, python_kernels=["kernels"],
                      python_path=[EXAMPLE]) as cluster:
        for i in range(a.repeats):
            for mode in runs:  # side by side, alternating
                runs[mode].append(train.train(cluster.endpoint, mode, a.staleness, 2, 64,
                                              a.max_updates, a.target, seed=i, lr=0.01))
    print(f"{a.repeats} repeats (seeds 0..{a.repeats - 1}), 4 workers, 2 actors x 64 "
          f"episodes per update, target {a.target}, async staleness {a.staleness}")
    med = {}
    for mode, rs in runs.items():
        rate = statistics.median(len(r["rewards"]) / r["seconds"][-1] for r in rs)
        hit = [r for r in rs if r["reached"] is not None]
        secs = statistics.median(r["seconds"][-1] for r in hit) if hit else float("nan")
        ups = statistics.median(r["reached"] + 1 for r in hit) if hit else float("nan")
        med[mode] = (rate, secs)
        print(f"{mode:5s}: {rate:6.1f} updates/s, target reached in {len(hit)}/{len(rs)} runs, "
              f"median {ups:.0f} updates, {secs:.2f} s")
    print(f"async / sync: updates/s x{med['async'][0] / med['sync'][0]:.2f}, "
          f"time to target x{med['async'][1] / med['sync'][1]:.2f}")
    if a.plot:
        train.plot({m: rs[0] for m, rs in runs.items()}, a.plot)


if __name__ == "__main__":
    main()
