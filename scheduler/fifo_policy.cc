#include "hmpmd/scheduler/fifo_policy.h"

namespace hmpmd {

double FifoPolicy::Priority(const TaskView& task) const {
  return -static_cast<double>(task.ready_seq);
}

uint64_t FifoPolicy::WaitClass(const TaskView& task) const {
  // DeviceShare::Place answers alike for every such task at one moment: a
  // core of the kind with capacity on a usable device of the set.
  if (task.task == nullptr || task.task->group != kNoGroup || !share_.Constrained(task)) return 0;
  uint64_t h = task.job;
  h = h * 1'000'003 + task.task->submodel;
  h = h * 31 + static_cast<uint64_t>(task.spec->core);
  h = h * 1'000'033 + task.kernel_id;
  h = h * 2 + (task.input_bytes > 0 ? 1 : 0);
  return h | (uint64_t{1} << 63);
}

Placement FifoPolicy::Place(const TaskView& task, const ResourcePool& pool, TimeUs now) {
  // A stateful sub-model's task stays on its set, where its state is.
  if (share_.Constrained(task)) return share_.Place(task, task.spec->core, pool, now);
  return EarliestCore(task, task.spec->core, pool, [](DeviceId) { return true; });
}

}  // namespace hmpmd
