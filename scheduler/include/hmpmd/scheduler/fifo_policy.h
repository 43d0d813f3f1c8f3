// FifoPolicy: the baseline.
// 1. Ready tasks run in the order they became ready.
// 2. A task goes to the first core of its kind with capacity, except that a
//    sub-model that keeps state between its tasks (DeviceShare rule 0: kinds
//    actor, reward and learner, and a driver session's actors) with
//    `devices` = N runs only on a set of N devices laid out at admission:
//    its later tasks find the state earlier ones stored there. The sets are
//    static (FixedSetOptions()): no device moves between
//    them, apart from replacing a dead one, so the baseline stays simple.
// Thread-safety: not thread-safe; owned by the scheduler's thread.
#pragma once

#include "hmpmd/scheduler/device_set_policy.h"

namespace hmpmd {

class FifoPolicy final : public DeviceSetPolicy {
 public:
  FifoPolicy() : DeviceSetPolicy(FixedSetOptions()) {}

  std::string_view Name() const override { return "fifo"; }
  double Priority(const TaskView& task) const override;
  Placement Place(const TaskView& task, const ResourcePool& pool, TimeUs now) override;
  // Tasks of one set, core kind and kernel wait together (as in hmpmd).
  uint64_t WaitClass(const TaskView& task) const override;
};

}  // namespace hmpmd
