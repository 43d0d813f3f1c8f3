"""The environment, in NumPy: a walk on a line of POSITIONS cells towards a
goal cell. An observation is one-hot(position) ++ one-hot(goal); the
actions are left and right; an episode ends at the goal or after
MAX_STEPS moves. Many episodes step at once, as arrays.

The reward is not computed here but by the reward sub-model (reward.py),
as a reward model scores an actor's rollouts in RLHF."""
import numpy as np

POSITIONS = 8
MAX_STEPS = 10
OBS = 2 * POSITIONS
ACTIONS = 2  # 0: left, 1: right


def reset(rng, episodes):
    pos = rng.integers(0, POSITIONS, episodes)
    goal = (pos + rng.integers(1, POSITIONS, episodes)) % POSITIONS  # never the start
    return pos, goal


def observe(pos, goal):
    obs = np.zeros((len(pos), OBS), dtype=np.float32)
    obs[np.arange(len(pos)), pos] = 1
    obs[np.arange(len(pos)), POSITIONS + goal] = 1
    return obs


def step(pos, actions):
    return np.clip(pos + np.where(actions == 1, 1, -1), 0, POSITIONS - 1)


def rollout(policy, rng, episodes):
    """Runs `episodes` episodes with `policy(obs) -> action probabilities`.
    Returns obs (E, T, OBS) f32, actions (E, T) i64, alive (E, T) bool (the
    step was taken) and reached (E, T) bool (it reached the goal)."""
    pos, goal = reset(rng, episodes)
    obs = np.zeros((episodes, MAX_STEPS, OBS), dtype=np.float32)
    actions = np.zeros((episodes, MAX_STEPS), dtype=np.int64)
    alive = np.zeros((episodes, MAX_STEPS), dtype=bool)
    reached = np.zeros((episodes, MAX_STEPS), dtype=bool)
    live = np.ones(episodes, dtype=bool)
    for t in range(MAX_STEPS):
        o = observe(pos, goal)
        p = policy(o)
        a = (rng.random(episodes) < p[:, 1]).astype(np.int64)
        obs[:, t], actions[:, t], alive[:, t] = o, a, live
        pos = np.where(live, step(pos, a), pos)
        reached[:, t] = live & (pos == goal)
        live = live & (pos != goal)
    return obs, actions, alive, reached
