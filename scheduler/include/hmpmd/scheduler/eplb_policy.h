// EplbPolicy ("spmd-eplb"): static expert parallelism with EPLB-style
// redundant experts (DeepSeek-AI, "Expert Parallelism Load Balancer",
// github.com/deepseek-ai/EPLB), the MoE baseline the field runs today:
// its global policy (EPLB's hierarchical one packs expert groups onto
// nodes first; the generators have no expert groups).
//
// 1. Everything but the experts is spmd-1f1b's plan (spmd_policy.h): fixed
//    sets, pinned shards, program order, communication on the compute core.
// 2. Experts are the job's stateful sub-models of kind `expert`; their
//    tasks carry an int arg `step` (a training step; none: step 0). Steps
//    follow the order of their values; the 1,024th and later share one
//    layout. The
//    devices of the experts' sets form the expert-parallel group, D
//    devices, each with k replica slots: `slots_per_device`, fewer where
//    memory_mb holds fewer (below), at least 1.
// 3. Per step s, the load of expert e is its tasks' estimated work in step
//    s - 1 (the routing histogram of the previous step, known once that
//    step's routing ran); step 0 takes a uniform guess. Replication
//    (EplbReplicaCounts): every expert gets one replica, then each other of
//    the D x k slots goes to the expert with the highest load per replica.
//    Packing (EplbPack): a replica stays on a device that holds its expert
//    in the step before, else on one where it is still resident (rule 5),
//    when it can (a move costs a state load); the rest go heaviest first to
//    the least loaded device with a free slot that holds no replica of that
//    expert. Step 0's "step before" is spmd-1f1b's expert sets, so with a
//    uniform guess step 0 is its plan. From step 1 the new layout replaces
//    the step before's only when, on step s - 1's routing, the time it
//    takes off the busiest device, summed over program-order slots (a
//    layer's chunk: each expert's work in it split evenly over its
//    replicas), exceeds the longest time a device spends loading replicas
//    it lacks (the cost model's state-load estimate): rebalancing is not
//    free.
// 4. A step's tasks of expert e go to its replicas in turn, in task order,
//    and keep their slot in their device's program order.
// 5. Memory: k is at most (memory_mb less an eighth for the object store,
//    less the state of the device's other stateful sub-models) / an
//    expert's part, so a step's replicas fit beside the dense state. Older
//    replicas stay resident while memory holds them (the simulator's LRU);
//    the policy counts a device as holding the replicas it gave it most
//    recently, as many as that room holds.
// 6. Prefetch (TakeStateIntents): step 0's replicas with the plan; step
//    s's once every expert task of step s - 1 is placed (its routing has
//    run): never before the histogram they come from is known. A replica
//    not loaded by then loads on demand.
// Thread-safety: not thread-safe; owned by the scheduler's thread.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "hmpmd/scheduler/spmd_policy.h"

namespace hmpmd {

struct EplbOptions {
  uint32_t slots_per_device = 1;  // replica slots per device, at most
};

class EplbPolicy final : public SpmdPolicy {
 public:
  EplbPolicy() : EplbPolicy(EplbOptions{}) {}
  explicit EplbPolicy(EplbOptions options) : options_(options) {}

  std::string_view Name() const override { return "spmd-eplb"; }
  void OnJobRemoved(JobId job) override;
  void OnPlaced(const TaskView& task, CoreId core) override;
  void TakeStateIntents(std::vector<StateIntent>* out) override;

  // Per step of `job`, per expert sub-model (index into the job's
  // sub-models), the devices of its replicas; empty when the job has no
  // experts to balance.
  const std::vector<std::vector<std::vector<DeviceId>>>& Layouts(JobId job) const;
  // Replica slots per device that `job` got (rule 5); 0 when unknown.
  uint32_t SlotsPerDevice(JobId job) const;

 protected:
  JobPlan Layout(const JobRun& job, const ResourcePool& pool) override;

 private:
  struct JobSteps {
    std::vector<int32_t> step;                   // per task: its step if an expert's, else -1
    std::vector<uint32_t> left;                  // per step: expert tasks not placed yet
    std::vector<std::vector<StateIntent>> held;  // per step: intents not released
    std::vector<bool> expert;                    // per sub-model
    std::vector<std::vector<std::vector<DeviceId>>> layouts;
    uint32_t slots = 0;
  };
  EplbOptions options_;
  std::unordered_map<JobId, JobSteps> jobs_;
  std::vector<StateIntent> released_;
};

// Rule 5: replica slots on a device of `memory_mb` (0: no cap) that holds
// `other_bytes` of other state, for experts of `expert_bytes`: at most
// `ask`, at least 1.
uint32_t EplbSlots(uint64_t memory_mb, double other_bytes, double expert_bytes, uint32_t ask);

// Rule 3, replication: how many of `slots` replicas each expert of `load`
// gets; each at least 1 and at most `max_each`, the rest to the highest
// load per replica (ties: the lower index). Slots beyond what the caps
// allow are left unused.
std::vector<uint32_t> EplbReplicaCounts(const std::vector<double>& load, uint32_t slots,
                                        uint32_t max_each);

// Rule 3, packing: per expert, the devices (0..devices-1) of its counts[e]
// replicas, at most `slots_per_device` replicas on a device and never two
// of one expert. `previous[e]` lists devices that held e before (kept
// first); replicas left over go heaviest (load / count) first to the least
// loaded device with room. A replica that finds no room is dropped.
std::vector<std::vector<uint32_t>> EplbPack(const std::vector<double>& load,
                                            const std::vector<uint32_t>& counts, uint32_t devices,
                                            uint32_t slots_per_device,
                                            const std::vector<std::vector<uint32_t>>& previous);

}  // namespace hmpmd
