"""The reward model: scores a rollout. +1 for the step that reaches the
goal, STEP_COST for every other step taken; returns are discounted sums."""
import numpy as np

STEP_COST = -0.1
GAMMA = 0.95


def score(alive, reached):
    """Rewards (E, T) f32 and each episode's total (E,)."""
    rewards = np.where(reached, 1.0, np.where(alive, STEP_COST, 0.0)).astype(np.float32)
    return rewards, rewards.sum(axis=1)


def returns(rewards):
    out = np.zeros_like(rewards)
    acc = np.zeros(rewards.shape[0], dtype=np.float32)
    for t in range(rewards.shape[1] - 1, -1, -1):
        acc = rewards[:, t] + GAMMA * acc
        out[:, t] = acc
    return out
