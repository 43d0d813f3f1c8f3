#include "hmpmd/scheduler/hmpmd_policy.h"

namespace hmpmd {

double HmpmdPolicy::Priority(const TaskView& task) const { return task.rank_us; }

Placement HmpmdPolicy::Place(const TaskView& task, const ResourcePool& pool, TimeUs /*now*/) {
  // Cores of a kind are equally fast, so the earliest-draining one also
  // finishes the task earliest.
  return EarliestCore(task, task.spec->core, pool, [](DeviceId) { return true; });
}

}  // namespace hmpmd
