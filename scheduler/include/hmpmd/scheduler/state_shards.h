// State shards: how a sub-model's declared state (SubmodelSpec::state_bytes,
// the weights, gradients and optimizer state of one replica) spreads over
// the devices that run it.
// 1. One replica's state splits evenly into SubmodelSpec::state_shards
//    parts (tensor-parallel ranks; 1: a device holds a whole replica).
// 2. A task works on part shard % state_shards, where `shard` is its
//    integer arg (0 without one). Replicas are alike: a device that holds
//    part i serves every replica's part i.
// The scheduler refuses at admission a job whose part fits no live
// device's memory (AdmissionCheck), and the simulator loads, keeps and
// evicts parts by (job, sub-model, part).
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <vector>

#include "hmpmd/protocol/job_spec.h"
#include "hmpmd/scheduler/job_graph.h"

namespace hmpmd {

// Whether a task needs its sub-model's state part on its device: compute
// does; communication and collective gang members move their own bytes.
inline bool NeedsStatePart(const GraphTask& t) { return !t.is_comm && t.group == kNoGroup; }

// The task's integer arg `shard`, or -1 without one that is a
// non-negative integer below 2^31.
int64_t ShardArgOf(const TaskSpec& t);

// Rule 2: the part of `sm`'s state that task `t` works on.
uint32_t StatePartOf(const SubmodelSpec& sm, const TaskSpec& t);

// Rule 1: per sub-model of `submodels`, the bytes of state one device holds
// to run one of its tasks (0 for a sub-model without state).
std::vector<double> StateBytesPerDevice(const std::vector<SubmodelSpec>& submodels);

}  // namespace hmpmd
