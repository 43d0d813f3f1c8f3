#include "hmpmd/scheduler/spmd_policy.h"

#include <algorithm>

#include "hmpmd/scheduler/scheduler.h"

namespace hmpmd {

int32_t OneFOneBSlot(uint32_t stage, uint32_t stages, uint32_t micro_batches, uint32_t mb,
                     bool forward) {
  int32_t m = static_cast<int32_t>(micro_batches);
  int32_t warm = std::min(static_cast<int32_t>(stages - stage - 1), m);
  int32_t j = static_cast<int32_t>(mb);
  int32_t steady = m - warm;  // forward/backward pairs
  if (forward) return j < warm ? j : warm + 2 * (j - warm);
  if (j < steady) return warm + 2 * j + 1;
  return warm + 2 * steady + (j - steady);
}

void SpmdPolicy::OnJobAdded(const JobRun& job, const ResourcePool& pool) {
  jobs_[job.id] = MakeSpmdPlan(job, pool);
}

SpmdPolicy::JobPlan* SpmdPolicy::Plan(JobId job) {
  auto it = jobs_.find(job);
  return it == jobs_.end() ? nullptr : &it->second;
}

const SpmdPolicy::JobPlan* SpmdPolicy::Plan(JobId job) const {
  auto it = jobs_.find(job);
  return it == jobs_.end() ? nullptr : &it->second;
}

const std::vector<DeviceId>& SpmdPolicy::DeviceSet(JobId job, uint32_t submodel) const {
  static const std::vector<DeviceId> kEmpty;
  const JobPlan* plan = Plan(job);
  if (plan == nullptr || submodel >= plan->sets.size()) return kEmpty;
  return plan->sets[submodel];
}

std::string SpmdPolicy::JobError(JobId job) const {
  const JobPlan* plan = Plan(job);
  return plan == nullptr ? std::string() : plan->error;
}

bool SpmdPolicy::SplitLanes(JobId job) const {
  const JobPlan* plan = Plan(job);
  return plan != nullptr && plan->split;
}

double SpmdPolicy::Priority(const TaskView& task) const { return task.rank_us; }

bool SpmdPolicy::Allows(const TaskView& task, DeviceId device) const {
  const JobPlan* plan = Plan(task.job);
  if (plan == nullptr || task.index >= plan->device.size()) return true;
  const int64_t pinned = plan->device[task.index];
  if (pinned >= 0 && pinned != static_cast<int64_t>(device)) return false;
  const int32_t lane = plan->lane[task.index];
  if (lane >= 0 && plan->lanes[lane].next != plan->slot[task.index]) return false;
  if (pinned >= 0) return true;
  const auto& set = plan->sets[task.task->submodel];
  return std::find(set.begin(), set.end(), device) != set.end();
}

Placement SpmdPolicy::Place(const TaskView& task, const ResourcePool& pool, TimeUs /*now*/) {
  JobPlan* plan = Plan(task.job);
  // Not admitted through OnJobAdded, or appended later: the whole pool.
  if (plan == nullptr || task.index >= plan->device.size()) {
    return EarliestCore(task, task.spec->core, pool, [](DeviceId) { return true; });
  }
  if (!plan->error.empty()) return Placement::Infeasible(plan->error);
  const std::vector<DeviceId>& set = plan->sets[task.task->submodel];
  if (set.empty()) return Placement::Infeasible("spmd-1f1b: submodel has no devices");
  // Communication runs on the compute core, after the compute.
  auto kind_on = [&](DeviceId d) {
    if (task.task->is_comm && pool.device(d).desc.cores[0] > 0) return CoreKind::kCube;
    return task.spec->core;
  };
  auto free_core = [&](DeviceId d) -> int64_t {
    if (!pool.device(d).alive || !pool.Supports(d, task.kernel_id)) return -1;
    CoreKind kind = kind_on(d);
    for (CoreId c : pool.device(d).cores) {
      if (pool.core(c).kind == kind && pool.HasCapacity(c)) return c;
    }
    return -1;
  };
  const int64_t pinned = plan->device[task.index];
  if (pinned >= 0) {
    const auto dev = static_cast<DeviceId>(pinned);
    if (!pool.device(dev).alive) return Placement::Infeasible("spmd-1f1b: its device died");
    const int32_t lane = plan->lane[task.index];
    if (lane >= 0 && plan->lanes[lane].next != plan->slot[task.index]) {
      return Placement::RetryLater();
    }
    int64_t core = free_core(dev);
    if (core < 0) return Placement::RetryLater();
    return Placement::Placed(static_cast<CoreId>(core));
  }
  int64_t best = -1;
  for (DeviceId d : set) {
    int64_t c = free_core(d);
    if (c >= 0 && (best < 0 || pool.core(c).busy_until < pool.core(best).busy_until)) best = c;
  }
  if (best < 0) return Placement::RetryLater();
  return Placement::Placed(static_cast<CoreId>(best));
}

void SpmdPolicy::OnPlaced(const TaskView& task, CoreId /*core*/) {
  JobPlan* plan = Plan(task.job);
  if (plan == nullptr || task.index >= plan->lane.size() || plan->lane[task.index] < 0) return;
  Lane& lane = plan->lanes[plan->lane[task.index]];
  const int32_t slot = plan->slot[task.index];
  if (++lane.placed[slot] < lane.total[slot] || slot != lane.next) return;
  const auto end = static_cast<int32_t>(lane.total.size());
  do {
    ++lane.next;
  } while (lane.next < end && lane.placed[lane.next] >= lane.total[lane.next]);
  if (lane.next < end) return;
  // The step's order is done: the next step (spec repeat) runs it again.
  std::fill(lane.placed.begin(), lane.placed.end(), 0);
  lane.next = 0;
  while (lane.next < end && lane.total[lane.next] == 0) ++lane.next;
}

}  // namespace hmpmd
