// SpmdSearchPolicy ("spmd-search"): spmd-1f1b with the static device split
// found by search over allocations, as DistMM (Huang et al., NSDI'24) and
// DistTrain (Zhang et al., 2024) choose the GPUs of each module of a
// multimodal model, instead of the spec's `devices` hint.
//
// Assumptions:
// 1. A static deployment's step is bound by its busiest device: every set
//    runs its share of each micro-batch in turn, and the sets run beside
//    one another, so the step takes about the most work any one device
//    holds (pipeline fill and drain are not modelled).
// 2. A task's work is its admission estimate (JobRun::est_us), and it runs
//    where spmd-1f1b puts it: one with arg `shard` on device shard % n of
//    its sub-model's n devices, one without spread over the set.
// 3. A sub-model whose spec asks for the whole pool (`devices` at least the
//    pool: dense layers that the experts run inside) spans it, as under
//    spmd-1f1b, and is left out of the split.
// Algorithm (SearchSplit), over the N live devices:
// 1. Per sub-model s and device count n = 1..N: its modelled time T_s(n),
//    the busiest of its n devices (assumption 2); n is feasible when it
//    holds its largest collective group and each device's state parts
//    (the parts of the shards it runs) fit the smallest device memory.
// 2. The smallest bottleneck T with sum_s n_s(T) <= N, where n_s(T) is the
//    fewest feasible devices giving T_s(n) <= T: a binary search over the
//    values the T_s take (n_s(T) falls as T grows).
// 3. Devices left over go, one improvement at a time, to the sub-model
//    with the largest T_s that fewer than the devices left improve.
// 4. Rule 1's split (the spec's `devices`, else by work) stays unless the
//    searched one's modelled step is shorter: the model does not see
//    dependencies, so a tie says nothing. Where no split fits (more
//    sub-models than devices, or a state too large), rule 1 lays the job
//    out too.
// Cost: O(S x N x K) for S sub-models, N devices and K shards a sub-model
// at most, once per job at admission (docs/scheduling.md).
// Thread-safety: not thread-safe; owned by the scheduler's thread.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "hmpmd/scheduler/spmd_policy.h"

namespace hmpmd {

// What one sub-model asks of a static split.
struct SplitDemand {
  std::vector<std::pair<int64_t, double>> shard_us;  // (shard, estimated work pinned to it)
  double loose_us = 0;                               // work that runs on any device of the set
  // Per shard of shard_us, the state part its device holds (empty: none).
  std::vector<uint32_t> shard_part;
  double part_bytes = 0;     // bytes of one state part (0: stateless)
  uint32_t min_devices = 1;  // its largest collective group
  // Outside the split: it spans the pool (assumption 3), has no tasks, or
  // is pinned (elastic: false, its spec's size kept).
  bool outside = false;
};

// The modelled time of `d` on `n` devices (step 1): the most work one
// device holds; +infinity where `n` is not feasible under `memory_bytes`
// per device (0: no cap).
double SetStepUs(const SplitDemand& d, uint32_t n, double memory_bytes);

// Device counts per demand (0 for those outside) minimising the
// largest SetStepUs with their sum at most `devices`; empty when no split
// is feasible (step 4).
std::vector<uint32_t> SearchSplit(const std::vector<SplitDemand>& demands, uint32_t devices,
                                  double memory_bytes);

// The demands of `job` (assumptions 2 and 3) on `devices` live devices.
std::vector<SplitDemand> SplitDemands(const JobRun& job, uint32_t devices);

// The modelled step of `split` (the largest SetStepUs, each count raised
// to its demand's largest gang, as spmd-1f1b raises it), demands outside
// the split left out.
double ModelledStepUs(const std::vector<SplitDemand>& demands, const std::vector<uint32_t>& split,
                      double memory_bytes);

// SpmdOptions::split of this policy: SearchSplit of SplitDemands over the
// live devices less those of pinned sets, under the smallest live device
// memory, where its modelled step is shorter than `planned`'s (step 4);
// else empty.
std::vector<uint32_t> SearchedSplit(const JobRun& job, const ResourcePool& pool,
                                    const std::vector<DeviceId>& alive,
                                    const std::vector<uint32_t>& planned);

class SpmdSearchPolicy final : public SpmdPolicy {
 public:
  SpmdSearchPolicy() : SpmdPolicy(SpmdOptions{"spmd-search", OneFOneBOrder, SearchedSplit}) {}
};

}  // namespace hmpmd
