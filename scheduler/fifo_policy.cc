#include "hmpmd/scheduler/fifo_policy.h"

namespace hmpmd {

double FifoPolicy::Priority(const TaskView& task) const {
  return -static_cast<double>(task.ready_seq);
}

uint64_t FifoPolicy::WaitClass(const TaskView& task) const {
  return share_.WaitClass(task, /*to_vector=*/false);
}

Placement FifoPolicy::Place(const TaskView& task, const ResourcePool& pool, TimeUs now) {
  // A stateful sub-model's task stays on its set, where its state is.
  if (share_.Constrained(task)) return share_.Place(task, task.spec->core, pool, now);
  return EarliestCore(task, task.spec->core, pool, [](DeviceId) { return true; });
}

}  // namespace hmpmd
