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
#pragma once

#include "hmpmd/scheduler/policy.h"

namespace hmpmd {

class HmpmdPolicy final : public Policy {
 public:
  std::string_view Name() const override { return "hmpmd"; }
  double Priority(const TaskView& task) const override;
  Placement Place(const TaskView& task, const ResourcePool& pool, TimeUs now) override;
};

}  // namespace hmpmd
