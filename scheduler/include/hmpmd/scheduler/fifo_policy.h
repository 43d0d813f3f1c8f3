// FifoPolicy: the baseline. Ready tasks run in the order they became ready,
// each on the first core of its kind with capacity.
#pragma once

#include "hmpmd/scheduler/policy.h"

namespace hmpmd {

class FifoPolicy final : public Policy {
 public:
  std::string_view Name() const override { return "fifo"; }
  double Priority(const TaskView& task) const override;
  Placement Place(const TaskView& task, const ResourcePool& pool, TimeUs now) override;
};

}  // namespace hmpmd
