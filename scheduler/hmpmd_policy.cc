#include "hmpmd/scheduler/hmpmd_policy.h"

namespace hmpmd {

double HmpmdPolicy::Priority(const TaskView& task) const {
  // Critical path first, aged by readiness: a task ready at r with upward
  // rank R goes before one ready at r' with rank R' when R - r > R' - r'.
  // Pure rank starves shallow work that became ready earlier (later MoE
  // layers' all-to-alls pile up at the end); pure arrival order ignores the
  // critical path.
  return task.rank_us - static_cast<double>(task.ready_at);
}

Placement HmpmdPolicy::Place(const TaskView& task, const ResourcePool& pool, TimeUs now) {
  CoreKind kind = task.spec->core;
  if (task.task->is_comm && pool.alive_cores(CoreKind::kVector) > 0 &&
      pool.HasCapacity(CoreKind::kVector)) {
    kind = CoreKind::kVector;
  }
  if (task.input_device >= 0) {
    DeviceId near = static_cast<DeviceId>(task.input_device);
    const ResourcePool::Device& d = pool.device(near);
    if (d.alive && pool.Supports(near, task.kernel_id)) {
      for (CoreId c : d.cores) {
        const ResourcePool::Core& core = pool.core(c);
        // Communication stays with its data on the producer's device (its
        // vector core overlaps the cube core's next compute); compute goes
        // there only when the core is free now.
        bool idle = core.queued == 0 && core.busy_until <= now;
        if (core.kind == kind && (idle || task.task->is_comm) && pool.HasCapacity(c)) {
          return Placement::Placed(c);
        }
      }
    }
  }
  // Cores of a kind are equally fast, so the earliest-draining one also
  // finishes the task earliest.
  return EarliestCore(task, kind, pool, [](DeviceId) { return true; });
}

}  // namespace hmpmd
