#include "hmpmd/scheduler/hmpmd_policy.h"

namespace hmpmd {

double HmpmdPolicy::Priority(const TaskView& task) const { return task.rank_us; }

Placement HmpmdPolicy::Place(const TaskView& task, const ResourcePool& pool, TimeUs /*now*/) {
  // Cores of a kind are equally fast, so the earliest-draining one also
  // finishes the task earliest.
  Placement best = EarliestCore(task, task.spec->core, pool, [](DeviceId) { return true; });
  if (best.kind != Placement::Kind::kPlaced || task.input_device == UINT32_MAX ||
      pool.core(best.core).device == task.input_device) {
    return best;
  }
  // Locality: the device that holds the largest input wins while its core
  // drains no later than the earliest one plus the time fetching that
  // input would take.
  Placement local = EarliestCore(task, task.spec->core, pool,
                                 [&](DeviceId d) { return d == task.input_device; });
  if (local.kind != Placement::Kind::kPlaced) return best;
  const double fetch_us = static_cast<double>(task.input_bytes) / kFetchBytesPerUs;
  if (static_cast<double>(pool.core(local.core).busy_until) <=
      static_cast<double>(pool.core(best.core).busy_until) + fetch_us) {
    return local;
  }
  return best;
}

}  // namespace hmpmd
