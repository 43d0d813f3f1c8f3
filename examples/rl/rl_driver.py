#!/usr/bin/env python3
"""The async RL example's driver in Python: the same loop as rl_driver.cc
(see rl_loop.h for the two modes), written against `import hmpmd`.

    PYTHONPATH=build/python examples/rl/rl_driver.py --controller tcp://127.0.0.1:5555 \\
        --devices 4 --mode both --runs 3

examples/rl/run_rl.py starts the controller and the rl_worker processes.
Exit codes: 0 success, 1 a run failed, 2 bad flags."""
import argparse
import json
import statistics
import sys
import time

import hmpmd

ROLLOUT_FIELDS, RECORD_HEADER, RECORD_FIELDS = 4, 3, 3  # rl_format.h


class Run:
    """One run of one mode on a connected session."""

    def __init__(self, client, o, mode, run, record):
        self.c, self.o, self.mode, self.run, self.record = client, o, mode, run, record
        self.next_id = 0
        self.steps = self.rollouts = self.discarded = self.cancelled = self.max_lag = 0
        self.busy_s = 0.0

    def rollout_args(self):
        self.next_id += 1
        o = self.o
        return {"id": self.next_id - 1, "seed": o.seed, "median_us": o.median_us,
                "sigma": o.sigma, "max_us": o.max_us, "load_us": o.load_us, "spin": o.spin}

    def train_args(self):
        return {"train_us": self.o.train_us, "max_staleness": self.o.max_staleness,
                "spin": self.o.spin}

    def score(self, reward, rollout):
        return reward.call("rl.reward", args={"reward_us": self.o.reward_us, "spin": self.o.spin},
                           inputs=[rollout], core="vector")

    def collect(self, train):
        """Reads a finished learner step's record: counts and logs it."""
        out = train.get(self.o.timeout_ms)
        rec = memoryview(out[2]).tolist()
        if len(rec) != RECORD_HEADER + RECORD_FIELDS * rec[2]:
            raise RuntimeError("rl.train: malformed record")
        learner_version = rec[0] - 1
        self.busy_s += rec[1] / 1e6
        self.steps += 1
        pairs = []
        for i in range(RECORD_HEADER, len(rec), RECORD_FIELDS):
            self.max_lag = max(self.max_lag, learner_version - rec[i + 1])
            if self.mode == "sync":
                self.busy_s += rec[i + 2] / 1e6
            pairs.append([rec[i], rec[i + 1]])
        if self.record:
            self.record.write(json.dumps({"mode": self.mode, "run": self.run,
                                          "learner_version": learner_version,
                                          "max_staleness": self.o.max_staleness,
                                          "rollouts": pairs}) + "\n")

    def sync(self):
        o, c = self.o, self.c
        n_actors = max(1, o.devices - 1)
        actors = [c.create_actor(f"actor{i}", kind="actor", devices=1, elastic=False)
                  for i in range(n_actors)]
        learner = c.create_actor("learner", kind="learner", devices=1, elastic=False)
        reward = c.create_actor("reward", kind="reward", devices=0)
        t0 = time.monotonic()
        weights = learner.call("rl.init", args={"params": o.params, "seed": o.seed})
        load = {"load_us": o.load_us, "spin": o.spin}
        loaded = [a.call("rl.load_weights", args=load, inputs=[weights]) for a in actors]
        trains = []
        for _ in range(o.steps):
            inputs = [weights]
            for j in range(o.batch):
                a = j % n_actors
                r = actors[a].call("rl.rollout", args=self.rollout_args(),
                                   inputs=[loaded[a], weights])
                inputs.append(self.score(reward, r))
            weights = learner.call("rl.train", args=self.train_args(), inputs=inputs)
            loaded = [a.call("rl.load_weights", args=load, inputs=[weights]) for a in actors]
            self.busy_s += n_actors * o.load_us / 1e6
            self.rollouts += o.batch
            trains.append(weights)
            if len(trains) > 1:  # one step ahead
                self.collect(trains.pop(0))
        while trains:
            self.collect(trains.pop(0))
        return time.monotonic() - t0

    def async_(self):
        o, c = self.o, self.c
        inflight = o.inflight or o.batch + o.devices
        s, k = o.max_staleness, max(1, o.broadcast_every)
        actors = c.create_actor("rollout", kind="actor", devices=max(1, o.devices - 1))
        learner = c.create_actor("learner", kind="learner", devices=1)
        reward = c.create_actor("reward", kind="reward", devices=0)
        t0 = time.monotonic()
        weights = learner.call("rl.init", args={"params": o.params, "seed": o.seed})
        version = 0
        broadcast, broadcast_version = weights, 0
        generating = []  # [rollout, scored, launched_with]
        ready = []       # [scored, version]
        trains = []
        submitted = 0
        while self.steps < o.steps:
            while submitted < o.steps and len(generating) < inflight:
                r = actors.call("rl.rollout", args=self.rollout_args(), inputs=[broadcast])
                generating.append([r, self.score(reward, r), broadcast_version])
            if submitted < o.steps and len(trains) < 2:
                before = len(ready)
                ready = [x for x in ready if version - x[1] <= s]
                self.discarded += before - len(ready)
                if len(ready) >= o.batch:
                    ready.sort(key=lambda x: -x[1])  # stable: freshest first
                    batch, ready = ready[:o.batch], ready[o.batch:]
                    weights = learner.call("rl.train", args=self.train_args(),
                                           inputs=[weights] + [x[0] for x in batch])
                    version += 1
                    submitted += 1
                    trains.append(weights)
                    if version - broadcast_version >= k:
                        broadcast, broadcast_version = weights, version
                    for g in generating:
                        if version - g[2] > s and not g[0].ready:
                            c.cancel(g[0])
                            self.cancelled += 1
                    continue
            waiting = [g[1] for g in generating] + trains[:1]
            c.wait_any(waiting, timeout_ms=o.timeout_ms)
            if trains and trains[0].ready:
                self.collect(trains.pop(0))
            still = []
            for g in generating:
                if not g[1].ready:
                    still.append(g)
                    continue
                try:
                    out = g[1].get(o.timeout_ms)
                except hmpmd.Error:
                    if g[0].ready and self._was_cancelled(g[0]):
                        continue  # counted when cancelled
                    raise
                meta = memoryview(out[0]).tolist()
                self.busy_s += meta[2] / 1e6
                self.rollouts += 1
                ready.append([g[1], meta[1]])
            generating = still
        wall = time.monotonic() - t0
        for g in generating:
            if not g[0].ready:
                c.cancel(g[0])
                self.cancelled += 1
        return wall

    @staticmethod
    def _was_cancelled(rollout):
        try:
            rollout.wait(0)
            return False
        except hmpmd.Cancelled:
            return True
        except hmpmd.Error:
            return False


def parse(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--controller", default="tcp://127.0.0.1:5555")
    p.add_argument("--mode", choices=["both", "sync", "async"], default="both")
    p.add_argument("--runs", type=int, default=1)
    p.add_argument("--devices", type=int, default=4)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--broadcast-every", type=int, default=1)
    p.add_argument("--max-staleness", type=int, default=2)
    p.add_argument("--inflight", type=int, default=0)
    p.add_argument("--median-us", type=int, default=4000)
    p.add_argument("--sigma", type=float, default=0.8)
    p.add_argument("--max-us", type=int, default=40000)
    p.add_argument("--train-us", type=int, default=20000)
    p.add_argument("--load-us", type=int, default=500)
    p.add_argument("--reward-us", type=int, default=200)
    p.add_argument("--params", type=int, default=4096)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--sleep", action="store_true", help="kernels sleep instead of spinning")
    p.add_argument("--record", help="one JSON line per learner step")
    p.add_argument("--timeout-ms", type=int, default=60000)
    o = p.parse_args(argv)
    if o.devices < 2 or o.steps < 1 or o.batch < 1 or o.runs < 1:
        p.error("--devices must be >= 2 and --steps, --batch, --runs >= 1")
    o.spin = not o.sleep
    return o


def main(argv):
    o = parse(argv)
    record = open(o.record, "w") if o.record else None
    modes = [m for m in ("sync", "async") if o.mode in (m, "both")]
    print(f"rl: {o.devices} devices, {o.steps} learner steps of {o.batch} rollouts, rollouts "
          f"lognormal(median {o.median_us} us, sigma {o.sigma:.2f}), train {o.train_us} us, "
          f"broadcast every {o.broadcast_every}, max staleness {o.max_staleness}, "
          f"{'spin' if o.spin else 'sleep'}")
    rate, util = {m: [] for m in modes}, {m: [] for m in modes}
    for run in range(o.runs):
        for mode in modes:
            client = hmpmd.Client.connect(o.controller, session=f"rl-{mode}-{run}")
            r = Run(client, o, mode, run, record)
            try:
                wall = r.sync() if mode == "sync" else r.async_()
            except hmpmd.Error as e:
                print(f"rl_driver.py: {mode} run {run}: {e}", file=sys.stderr)
                return 1
            try:
                client.close()
            except hmpmd.Error as e:
                if r.cancelled == 0:  # cancelled rollouts fail the session by design
                    print(f"rl_driver.py: {mode} run {run}: {e}", file=sys.stderr)
                    return 1
            steps_per_s = r.steps / wall
            utilisation = r.busy_s / (o.devices * wall)
            print(f"{mode:<5} run {run + 1}: {r.steps:3d} steps in {wall:6.3f} s = "
                  f"{steps_per_s:6.2f} steps/s, utilisation {100 * utilisation:5.1f}%, "
                  f"rollouts {r.rollouts} (discarded {r.discarded}, cancelled {r.cancelled}), "
                  f"max lag {r.max_lag}", flush=True)
            rate[mode].append(steps_per_s)
            util[mode].append(utilisation)
    if record:
        record.close()
    print(f"median of {o.runs} run(s):")
    for mode in modes:
        print(f"  {mode:<5} {statistics.median(rate[mode]):6.2f} steps/s "
              f"[{min(rate[mode]):.2f} .. {max(rate[mode]):.2f}], "
              f"utilisation {100 * statistics.median(util[mode]):5.1f}%")
    if len(modes) == 2:
        print(f"  async / sync steps/s = "
              f"{statistics.median(rate['async']) / statistics.median(rate['sync']):.2f}x "
              f"(target >= 1.3x)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
