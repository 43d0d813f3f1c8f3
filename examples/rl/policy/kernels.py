"""The RL kernels, served by `python3 -m hmpmd.worker --kernels kernels`.

- `pg.init` (learner): builds the policy and its Adam state from the seed
  in the learner's `ctx.state`. Outputs the weights (flat float32) and
  their version (0).
- `pg.rollout` (actor): inputs the weights and their version (a learner's
  outputs); runs `episodes` episodes of env.py with that policy (a copy
  cached per version in the actor's state). Outputs obs, actions, alive,
  reached and the weights version it used.
- `pg.reward` (reward model): inputs one or more rollouts; outputs, per
  rollout, its discounted returns, and the mean episode reward of all.
- `pg.learn` (learner): inputs the rewarded rollouts, the reward model's
  outputs, then the learner's previous outputs (order only). A REINFORCE
  step with a mean baseline. Refuses a rollout whose weights are more than
  `staleness` versions older than the update's. Outputs the new weights,
  their version and stats [version, mean reward, oldest rollout's
  staleness].
"""
import numpy as np
import torch
from torch import nn

import env
import reward

ROLLOUT_OUTPUTS = 5  # obs, actions, alive, reached, version


def policy_net(seed):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(env.OBS, 32), nn.Tanh(), nn.Linear(32, env.ACTIONS))


def weights_of(net):
    return nn.utils.parameters_to_vector(net.parameters()).detach().numpy().copy()


def init(ctx, inputs, args):
    net = policy_net(int(args["seed"]))
    ctx.state = {"net": net, "opt": torch.optim.Adam(net.parameters(), lr=float(args["lr"])),
                 "version": 0}
    return weights_of(net), np.array([0], dtype=np.int64)


def rollout(ctx, inputs, args):
    weights, version = inputs[0], int(inputs[1][0])
    if ctx.state is None or ctx.state["version"] != version:
        net = policy_net(0)
        nn.utils.vector_to_parameters(torch.from_numpy(np.array(weights)), net.parameters())
        ctx.state = {"net": net, "version": version}
    net = ctx.state["net"]

    def policy(obs):
        with torch.no_grad():
            return torch.softmax(net(torch.from_numpy(obs)), -1).numpy()

    rng = np.random.default_rng([int(args["seed"]), int(args["iteration"]), int(args["actor"])])
    obs, actions, alive, reached = env.rollout(policy, rng, int(args["episodes"]))
    return obs, actions, alive, reached, np.array([version], dtype=np.int64)


def score(ctx, inputs, args):
    if len(inputs) % ROLLOUT_OUTPUTS:
        raise ValueError(f"pg.reward: {len(inputs)} inputs, not whole rollouts of "
                         f"{ROLLOUT_OUTPUTS}")
    outs, totals = [], []
    for i in range(0, len(inputs), ROLLOUT_OUTPUTS):
        rewards, total = reward.score(inputs[i + 2], inputs[i + 3])
        outs.append(reward.returns(rewards))
        totals.append(total)
    return tuple(outs) + (np.array([np.concatenate(totals).mean()], dtype=np.float32),)


def learn(ctx, inputs, args):
    st = ctx.state
    n = int(args["rollouts"])
    rollouts = [inputs[i * ROLLOUT_OUTPUTS:(i + 1) * ROLLOUT_OUTPUTS] for i in range(n)]
    scored = inputs[n * ROLLOUT_OUTPUTS:n * ROLLOUT_OUTPUTS + n + 1]
    oldest = min(int(r[4][0]) for r in rollouts)
    stale = st["version"] - oldest
    if stale > int(args["staleness"]):
        raise ValueError(f"pg.learn: a rollout used weights {oldest}, {stale} versions before "
                         f"{st['version']} (staleness bound {args['staleness']})")
    obs = torch.from_numpy(np.concatenate([np.array(r[0]) for r in rollouts]))
    actions = torch.from_numpy(np.concatenate([np.array(r[1]) for r in rollouts]))
    alive = torch.from_numpy(np.concatenate([np.array(r[2]) for r in rollouts]))
    returns = torch.from_numpy(np.concatenate([np.array(g) for g in scored[:n]]))
    advantage = returns - returns[alive].mean()
    logp = torch.log_softmax(st["net"](obs), -1).gather(-1, actions.unsqueeze(-1)).squeeze(-1)
    loss = -(logp * advantage * alive).sum() / alive.shape[0]
    st["opt"].zero_grad()
    loss.backward()
    st["opt"].step()
    st["version"] += 1
    stats = np.array([st["version"], float(scored[n][0]), stale], dtype=np.float64)
    return weights_of(st["net"]), np.array([st["version"]], dtype=np.int64), stats


def register(worker):
    torch.set_num_threads(1)  # the local workers share the machine's cores
    for name, fn in [("pg.init", init), ("pg.rollout", rollout), ("pg.reward", score),
                     ("pg.learn", learn)]:
        worker.register(name, fn, core="cube")
