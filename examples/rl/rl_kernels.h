// The kernels of the async RL example, registered by rl_worker:
//
//   rl.init          learner: makes version 0 of the weights (`params`
//                    floats, `seed`). Out: weights, version, empty record.
//   rl.load_weights  actor: stores the weights and version it gets as inputs
//                    in its actor state (busy `load_us`). Out: nothing.
//   rl.rollout       actor: generates one rollout with the weights in its
//                    actor state, busy for a duration drawn from a seeded
//                    lognormal (`median_us`, `sigma`, capped at `max_us`;
//                    `seed`, `id`); `spin` true busy-waits, false sleeps. When
//                    given weights and version as inputs and its state holds
//                    an older version (or none), it loads them first (busy
//                    `load_us`). Out: rollout (tagged with the version used).
//   rl.reward        reward model: scores a rollout (busy `reward_us`).
//                    Out: scored rollout.
//   rl.train         learner: one momentum-SGD step on a batch of scored
//                    rollouts (busy `train_us`); inputs: the 3 outputs of
//                    rl.init or rl.train, then each scored rollout. Fails when a rollout's version
//                    is more than `max_staleness` (>= 0) behind the weights'. Keeps its momentum in
//                    its actor state. Out: weights, version + 1, record.
// Buffer layouts: rl_format.h. Bad arguments or inputs throw
// std::invalid_argument naming the kernel and the field.
//
// Thread-safety: the kernels are safe to run on several lanes at once.
#pragma once

#include "hmpmd/worker/worker.h"

namespace rl {

// Registers every rl.* kernel on `worker` (before its Run()).
void RegisterKernels(hmpmd::worker::Worker& worker);

}  // namespace rl
