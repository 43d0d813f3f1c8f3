"""The same training in one process with plain PyTorch: the whole model,
the same data and seed, gradients accumulated over the micro-batches with
`loss.backward()`, one Adam step per step. What train.py's run through
HyperMPMD must equal.

    python3 reference.py --steps 3
"""
import argparse

import torch

import model


def train(seed, steps, micro_batches, batch, lr):
    """Returns (loss per step, {sub-model: [parameter arrays]})."""
    torch.set_num_threads(1)
    mods = {name: model.build(name, seed) for name in model.SUBMODELS}
    opts = [model.optimizer(m, lr) for m in mods.values()]
    last = f"stage{model.STAGES - 1}"
    losses = []
    for step in range(steps):
        total = 0.0
        for mb in range(micro_batches):
            images, audio, text, labels = [torch.from_numpy(a) for a in model.micro_batch(
                seed, step, mb, batch // micro_batches)]
            h = mods["stage0"](mods["vision"](images), mods["audio"](audio), text)
            for k in range(1, model.STAGES - 1):
                h = mods[f"stage{k}"](h)
            loss = model.loss_of(mods[last](h), labels, micro_batches)
            loss.backward()
            total += loss.item()
        for o in opts:
            o.step()
            o.zero_grad(set_to_none=True)
        losses.append(total)
    return losses, {name: [p.detach().numpy().copy() for p in m.parameters()]
                    for name, m in mods.items()}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--micro-batches", type=int, default=4)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--lr", type=float, default=3e-3)
    a = p.parse_args()
    losses, _ = train(a.seed, a.steps, a.micro_batches, a.batch, a.lr)
    for step, loss in enumerate(losses):
        print(f"step {step} loss {loss:.6f}")


if __name__ == "__main__":
    main()
