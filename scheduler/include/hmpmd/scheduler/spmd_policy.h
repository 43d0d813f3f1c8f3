// SpmdPolicy ("spmd-1f1b"): the static SPMD pipeline users run today, the
// baseline hmpmd must beat on the same work.
//
// 1. When a job is admitted every submodel gets a fixed, contiguous device
//    set for the whole job: `devices` when the spec asks, otherwise a share
//    of the rest proportional to its estimated work (at least one device).
//    Sets are laid out in device order and wrap around, so a submodel that
//    asks for the whole pool overlaps the others (expert parallelism).
// 2. A task with an integer arg `shard` runs on device set[shard % size];
//    other tasks on the set's device whose core drains first.
// 3. Submodels of kind pipeline_stage run their tasks in 1F1B order: tasks
//    with args `mb` (micro-batch) and `pass` ("f" or "b") take slots of the
//    1F1B sequence of their stage (stage = order among the job's
//    pipeline_stage submodels); a device starts slot k+1 only after every
//    task of slot k on it has started. Communication of a slot (same `mb`
//    and `pass`) belongs to the slot, so it runs before the next compute.
//    Other pinned tasks with an integer arg `order` run in that program
//    order on their device, as an SPMD program would (a device runs its
//    ops one after another, collectives included).
// 4. Communication kernels run on the compute (cube) core of their device,
//    after the compute before them: no core-level overlap.
// Ready tasks are taken in critical-path order, as hmpmd does.
// Thread-safety: not thread-safe; owned by the scheduler's thread.
#pragma once

#include <unordered_map>
#include <vector>

#include "hmpmd/scheduler/policy.h"

namespace hmpmd {

class SpmdPolicy final : public Policy {
 public:
  std::string_view Name() const override { return "spmd-1f1b"; }
  void OnJobAdded(const JobRun& job, const ResourcePool& pool) override;
  void OnJobRemoved(JobId job) override { jobs_.erase(job); }
  double Priority(const TaskView& task) const override;
  Placement Place(const TaskView& task, const ResourcePool& pool, TimeUs now) override;
  void OnPlaced(const TaskView& task, CoreId core) override;

  // The device set of `submodel` of `job` (empty when unknown).
  const std::vector<DeviceId>& DeviceSet(JobId job, uint32_t submodel) const;

 private:
  struct JobPlan {
    std::vector<std::vector<DeviceId>> sets;  // per submodel
    std::vector<int32_t> slot;                // per task: 1F1B slot, -1 none
    std::vector<int32_t> shard;               // per task: arg shard, -1 none
    // Per device: next slot, and tasks of each slot placed.
    struct Lane {
      int32_t next = 0;
      std::vector<uint32_t> total;   // tasks per slot on this device
      std::vector<uint32_t> placed;  // of those, placed
    };
    std::unordered_map<DeviceId, Lane> lanes;
  };
  JobPlan* Plan(JobId job);

  std::unordered_map<JobId, JobPlan> jobs_;
};

// The 1F1B slot of (micro-batch `mb`, forward or backward) for stage `stage`
// of `stages` with `micro_batches`: warm-up forwards, then one forward one
// backward, then cool-down backwards.
int32_t OneFOneBSlot(uint32_t stage, uint32_t stages, uint32_t micro_batches, uint32_t mb,
                     bool forward);

}  // namespace hmpmd
