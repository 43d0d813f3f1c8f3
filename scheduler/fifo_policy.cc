#include "hmpmd/scheduler/fifo_policy.h"

namespace hmpmd {

double FifoPolicy::Priority(const TaskView& task) const {
  return -static_cast<double>(task.ready_seq);
}

Placement FifoPolicy::Place(const TaskView& task, const ResourcePool& pool, TimeUs /*now*/) {
  return EarliestCore(task, task.spec->core, pool, [](DeviceId) { return true; });
}

}  // namespace hmpmd
