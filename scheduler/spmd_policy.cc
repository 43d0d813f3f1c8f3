#include "hmpmd/scheduler/spmd_policy.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "hmpmd/scheduler/scheduler.h"

namespace hmpmd {
namespace {

int64_t IntArg(const TaskSpec& t, std::string_view name) {
  for (const auto& [k, v] : t.args) {
    if (k != name) continue;
    if (const auto* i = std::get_if<int64_t>(&v)) return *i;
    if (const auto* d = std::get_if<double>(&v)) return static_cast<int64_t>(*d);
  }
  return -1;
}

std::string StrArg(const TaskSpec& t, std::string_view name) {
  for (const auto& [k, v] : t.args) {
    if (k != name) continue;
    if (const auto* s = std::get_if<std::string>(&v)) return *s;
  }
  return {};
}

}  // namespace

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
  const JobGraph& g = *job.graph;
  const auto& submodels = g.spec().submodels;
  JobPlan plan;
  std::vector<DeviceId> alive;
  for (DeviceId d = 0; d < pool.device_count(); ++d) {
    if (pool.device(d).alive) alive.push_back(d);
  }
  const uint32_t n = static_cast<uint32_t>(alive.size());
  // Sizes: asked for, else a share of what is left by estimated work.
  std::vector<double> work(submodels.size(), 0);
  for (uint32_t i = 0; i < g.size(); ++i) work[g.task(i).submodel] += job.est_us[i];
  std::vector<uint32_t> size(submodels.size(), 0);
  uint64_t asked = 0;
  double free_work = 0;
  for (size_t s = 0; s < submodels.size(); ++s) {
    if (submodels[s].devices > 0) {
      size[s] = std::min(submodels[s].devices, n);
      asked += size[s];
    } else if (work[s] > 0) {
      free_work += work[s];
    }
  }
  uint32_t left = asked >= n ? n : n - static_cast<uint32_t>(asked);
  for (size_t s = 0; s < submodels.size(); ++s) {
    if (submodels[s].devices > 0 || work[s] <= 0) continue;
    size[s] = std::max<uint32_t>(1, static_cast<uint32_t>(std::floor(left * work[s] / free_work)));
  }
  plan.sets.resize(submodels.size());
  uint32_t cursor = 0;
  for (size_t s = 0; s < submodels.size() && n > 0; ++s) {
    for (uint32_t i = 0; i < size[s]; ++i) plan.sets[s].push_back(alive[(cursor + i) % n]);
    cursor = (cursor + size[s]) % n;
  }
  // 1F1B slots of pipeline stages.
  std::vector<int32_t> stage_of(submodels.size(), -1);
  uint32_t stages = 0;
  for (size_t s = 0; s < submodels.size(); ++s) {
    if (submodels[s].kind == SubmodelKind::kPipelineStage)
      stage_of[s] = static_cast<int32_t>(stages++);
  }
  uint32_t micro_batches = 0;
  plan.slot.assign(g.size(), -1);
  plan.shard.assign(g.size(), -1);
  for (uint32_t i = 0; i < g.size(); ++i) {
    const TaskSpec& t = g.spec_task(i);
    int64_t shard = IntArg(t, "shard");
    if (shard >= 0) plan.shard[i] = static_cast<int32_t>(shard);
    int64_t mb = IntArg(t, "mb");
    if (stage_of[g.task(i).submodel] >= 0 && mb >= 0) {
      micro_batches = std::max(micro_batches, static_cast<uint32_t>(mb) + 1);
    }
  }
  for (uint32_t i = 0; i < g.size(); ++i) {
    const TaskSpec& t = g.spec_task(i);
    uint32_t sm = g.task(i).submodel;
    if (plan.shard[i] < 0 || plan.sets[sm].empty()) continue;  // a lane needs a fixed device
    int64_t mb = IntArg(t, "mb"), order = IntArg(t, "order");
    std::string pass = StrArg(t, "pass");
    int32_t slot = -1;
    if (stage_of[sm] >= 0 && mb >= 0 && (pass == "f" || pass == "b")) {
      slot = OneFOneBSlot(static_cast<uint32_t>(stage_of[sm]), stages, micro_batches,
                          static_cast<uint32_t>(mb), pass == "f");
    } else if (order >= 0) {
      slot = static_cast<int32_t>(order);
    }
    if (slot < 0) continue;
    plan.slot[i] = slot;
    DeviceId dev = plan.sets[sm][plan.shard[i] % plan.sets[sm].size()];
    JobPlan::Lane& lane = plan.lanes[dev];
    if (lane.total.size() <= static_cast<size_t>(slot)) {
      lane.total.resize(slot + 1, 0);
      lane.placed.resize(slot + 1, 0);
    }
    ++lane.total[slot];
  }
  // Slots with no task on a device are skipped from the start.
  for (auto& [key, lane] : plan.lanes) {
    while (lane.next < static_cast<int32_t>(lane.total.size()) && lane.total[lane.next] == 0) {
      ++lane.next;
    }
  }
  jobs_[job.id] = std::move(plan);
}

SpmdPolicy::JobPlan* SpmdPolicy::Plan(JobId job) {
  auto it = jobs_.find(job);
  return it == jobs_.end() ? nullptr : &it->second;
}

const std::vector<DeviceId>& SpmdPolicy::DeviceSet(JobId job, uint32_t submodel) const {
  static const std::vector<DeviceId> kEmpty;
  auto it = jobs_.find(job);
  if (it == jobs_.end() || submodel >= it->second.sets.size()) return kEmpty;
  return it->second.sets[submodel];
}

double SpmdPolicy::Priority(const TaskView& task) const { return task.rank_us; }

Placement SpmdPolicy::Place(const TaskView& task, const ResourcePool& pool, TimeUs /*now*/) {
  JobPlan* plan = Plan(task.job);
  if (plan == nullptr) {  // not admitted through OnJobAdded: the whole pool is its set
    return EarliestCore(task, task.spec->core, pool, [](DeviceId) { return true; });
  }
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
  int32_t shard = plan->shard[task.index];
  if (shard >= 0) {
    DeviceId dev = set[shard % set.size()];
    if (!pool.device(dev).alive) return Placement::Infeasible("spmd-1f1b: its device died");
    int32_t slot = plan->slot[task.index];
    JobPlan::Lane* lane = nullptr;
    if (slot >= 0) {
      lane = &plan->lanes[dev];
      if (lane->next != slot) return Placement::RetryLater();
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
  if (plan == nullptr) return;
  int32_t slot = plan->slot[task.index], shard = plan->shard[task.index];
  if (slot < 0 || shard < 0) return;
  const std::vector<DeviceId>& set = plan->sets[task.task->submodel];
  JobPlan::Lane& lane = plan->lanes[set[shard % set.size()]];
  if (++lane.placed[slot] < lane.total[slot]) return;
  do {
    ++lane.next;
  } while (lane.next < static_cast<int32_t>(lane.total.size()) && lane.total[lane.next] == 0);
}

}  // namespace hmpmd
