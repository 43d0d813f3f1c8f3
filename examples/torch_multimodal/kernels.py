"""The model's kernels, served by `python3 -m hmpmd.worker --kernels kernels`.

Each sub-model (an actor of the driver's session) keeps its weights, its
Adam moments and the activations of the micro-batches in flight in
`ctx.state` on the worker that holds it: built from the seed at its first
task, never sent anywhere but by `mm.params`. Tasks carry activations
forward and gradients backward; a task's `args` say which sub-model of
model.py it runs (`model`) and on which micro-batch (`mb`).

- `mm.forward`: inputs are the sub-model's data inputs (vision: images;
  audio: clips; stage0: vision tokens, audio tokens, text; other stages:
  hidden states), then any inputs only for ordering. Output: its
  activations.
- `mm.forward_backward` (the last stage): inputs hidden states, labels.
  Outputs: the micro-batch's loss and the gradient of its input.
- `mm.backward`: input the gradient of the sub-model's output (of
  output `grad_index` of the producing task). Outputs: the gradients of its
  float inputs (none for an encoder: a one-value token).
- `mm.grads`: the gradients summed over the step's micro-batches, as one
  flat float32 array (for `allreduce` between data-parallel replicas).
- `mm.apply`: an Adam step with the summed gradients (or, with
  `allreduced`, input 0: the all-reduced flat gradients); output the new
  version, a one-value token later forwards take as an input.
- `mm.params`: every parameter, one output each, in `parameters()` order.
"""
import numpy as np
import torch

import model

# Data inputs of each sub-model's forward; more inputs only order the task.
DATA_INPUTS = {"vision": 1, "audio": 1, "stage0": 3}


def data_inputs(name):
    return DATA_INPUTS.get(name, 2 if name == f"stage{model.STAGES - 1}" else 1)


def tensor(array):
    # The inputs are read-only views of the worker's buffers; torch wants
    # writable memory, so this copies (activations are small).
    return torch.from_numpy(np.array(array))


def state_of(ctx, args):
    if ctx.state is None:
        module = model.build(args["model"], int(args["seed"]))
        ctx.state = {"module": module, "opt": model.optimizer(module, float(args["lr"])),
                     "saved": {}, "grads": {}, "version": 0}
    return ctx.state


def forward(ctx, inputs, args):
    st = state_of(ctx, args)
    name = args["model"]
    xs = [tensor(a) for a in inputs[:data_inputs(name)]]
    for x in xs:
        if x.is_floating_point():
            x.requires_grad_(True)
    out = st["module"](*xs)
    st["saved"][int(args["mb"])] = (xs, out)
    return out.detach().numpy()


def gradients(st, mb, out, grad_out):
    """Backward of one micro-batch: stores the parameters' gradients under
    `mb` (summed at apply, in micro-batch order) and returns those of the
    float inputs."""
    xs, _ = st["saved"].pop(mb)
    params = list(st["module"].parameters())
    wrt = params + [x for x in xs if x.requires_grad]
    grads = torch.autograd.grad(out, wrt, grad_out)
    st["grads"][mb] = grads[:len(params)]
    return [g.numpy() for g in grads[len(params):]]


def forward_backward(ctx, inputs, args):
    st = state_of(ctx, args)
    mb = int(args["mb"])
    h = tensor(inputs[0]).requires_grad_(True)
    labels = tensor(inputs[1])
    st["saved"][mb] = ([h], None)
    loss = model.loss_of(st["module"](h), labels, int(args["micro_batches"]))
    (grad_h,) = gradients(st, mb, loss, None)
    return np.array([loss.item()], dtype=np.float64), grad_h


def backward(ctx, inputs, args):
    st = state_of(ctx, args)
    mb = int(args["mb"])
    _, out = st["saved"][mb]
    grad_out = tensor(inputs[int(args.get("grad_index", 0))])
    grads = gradients(st, mb, out, grad_out)
    return tuple(grads) if grads else np.zeros(1, dtype=np.float32)


def summed(st):
    """The step's gradients: micro-batches added in index order, as a
    single-process loop accumulates them."""
    total = None
    for mb in sorted(st["grads"]):
        g = st["grads"][mb]
        total = [t.clone() for t in g] if total is None else [a + b for a, b in zip(total, g)]
    if total is None:
        raise RuntimeError("no micro-batch went backward on this sub-model in this step")
    return total


def grads(ctx, inputs, args):
    return model.flat(summed(state_of(ctx, args)))


def apply(ctx, inputs, args):
    st = state_of(ctx, args)
    params = list(st["module"].parameters())
    total = model.unflat(inputs[0], params) if args.get("allreduced") else summed(st)
    for p, g in zip(params, total):
        p.grad = g
    st["opt"].step()
    st["opt"].zero_grad(set_to_none=True)
    st["grads"].clear()
    if st["saved"]:
        raise RuntimeError(f"apply with micro-batches {sorted(st['saved'])} not backward yet")
    st["version"] += 1
    return np.array([st["version"]], dtype=np.int64)


def params(ctx, inputs, args):
    return tuple(p.detach().numpy().copy() for p in state_of(ctx, args)["module"].parameters())


def register(worker):
    # One PyTorch thread per worker: the worker's lanes and the other local
    # workers share the machine's cores.
    torch.set_num_threads(1)
    # Compute on the cube lane; the vector lane stays free for the
    # collectives and puts, which then overlap the compute.
    for name, fn in [("mm.forward", forward), ("mm.forward_backward", forward_backward),
                     ("mm.backward", backward), ("mm.grads", grads), ("mm.apply", apply),
                     ("mm.params", params)]:
        worker.register(name, fn, core="cube")
