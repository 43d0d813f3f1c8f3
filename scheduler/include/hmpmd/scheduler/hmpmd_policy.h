// HmpmdPolicy: the product's dynamic list scheduler.
//
// Assumptions:
// 1. Cost hints (and, live, calibrated durations) give each task's run time.
// 2. Cores of one kind are equally fast; tasks on different core kinds of a
//    device run at the same time.
// Algorithm:
// 1. Order ready tasks by upward rank (own estimate plus the longest
//    estimated path to a sink): the critical path goes first.
// 2. Place each on the core of its kind that frees up earliest, so the task
//    finishes earliest; cores only of devices that run its kernel.
// 3. Locality: the device holding the task's largest input is preferred
//    while its core drains no later than the earliest plus the time that
//    input takes to fetch (at kFetchBytesPerUs).
#pragma once

#include "hmpmd/scheduler/policy.h"

namespace hmpmd {

class HmpmdPolicy final : public Policy {
 public:
  // Peer-to-peer fetch bandwidth the locality rule assumes: 1 GB/s.
  static constexpr double kFetchBytesPerUs = 1000.0;

  std::string_view Name() const override { return "hmpmd"; }
  double Priority(const TaskView& task) const override;
  Placement Place(const TaskView& task, const ResourcePool& pool, TimeUs now) override;
};

}  // namespace hmpmd
