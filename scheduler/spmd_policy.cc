#include "hmpmd/scheduler/spmd_policy.h"

#include <algorithm>
#include <set>
#include <tuple>

#include "hmpmd/scheduler/scheduler.h"
#include "hmpmd/scheduler/state_shards.h"

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

std::vector<PipeOp> OneFOneBOrder(uint32_t stage, uint32_t stages, uint32_t micro_batches) {
  // OneFOneBSlot numbers the forwards and backwards 0 .. 2m-1 once each.
  std::vector<PipeOp> fused(size_t{2} * micro_batches);
  for (uint32_t mb = 0; mb < micro_batches; ++mb) {
    fused[OneFOneBSlot(stage, stages, micro_batches, mb, true)] = {mb, PipePass::kForward};
    fused[OneFOneBSlot(stage, stages, micro_batches, mb, false)] = {mb, PipePass::kBackward};
  }
  std::vector<PipeOp> order;
  order.reserve(size_t{3} * micro_batches);
  for (const PipeOp& op : fused) {
    if (op.pass == PipePass::kBackward) order.push_back({op.mb, PipePass::kWeight});
    order.push_back(op);
  }
  return order;
}

void SpmdPolicy::OnJobAdded(const JobRun& job, const ResourcePool& pool) {
  if (job.open) sessions_.AddJob(job, pool);
  // No device to lay it out on yet: at its first placement.
  if (pool.alive_device_count() == 0 && !job.open) {
    jobs_[job.id].waiting = &job;
    return;
  }
  MakePlan(job, pool);
}

SpmdPolicy::JobPlan SpmdPolicy::Layout(const JobRun& job, const ResourcePool& pool) {
  return MakeSpmdPlan(job, pool, options_);
}

void SpmdPolicy::MakePlan(const JobRun& job, const ResourcePool& pool) {
  JobPlan& plan = jobs_[job.id] = Layout(job, pool);
  plan.job = &job;
  plan.lookup.resize(plan.sets.size());
  for (size_t s = 0; s < plan.sets.size(); ++s) {
    if (plan.sets[s].size() > kScanSet) {
      plan.lookup[s].insert(plan.sets[s].begin(), plan.sets[s].end());
    }
  }
  plan.first_key = next_key_;
  plan.lane_key.resize(plan.lanes.size());
  for (size_t i = 0; i < plan.lanes.size(); ++i) {
    plan.lane_key[i] = next_key_ - plan.first_key;
    next_key_ += plan.lanes[i].total.size();
  }
  const JobGraph& g = *job.graph;
  std::set<std::tuple<DeviceId, uint32_t, uint32_t>> intended;  // (device, sub-model, part)
  for (uint32_t i = 0; i < g.size() && i < plan.device.size(); ++i) {
    const uint32_t sm = g.task(i).submodel;
    if (plan.device[i] < 0 || !NeedsStatePart(g.task(i)) || sm >= job.state_device_bytes.size() ||
        job.state_device_bytes[sm] <= 0) {
      continue;
    }
    const auto d = static_cast<DeviceId>(plan.device[i]);
    const uint32_t part = StatePartOf(g.spec().submodels[sm], g.spec_task(i));
    if (intended.insert({d, sm, part}).second) {
      intents_.push_back({d, job.id, sm, part});
    }
  }
  // Laid out late (reloaded after a restart): what of its step ran or runs
  // already took its turn in the order.
  const uint32_t n = job.graph->size();
  for (uint32_t i = 0; i < n && i < plan.lane.size(); ++i) {
    const uint64_t r = uint64_t{job.step} * n + i;
    if (r >= job.runs.size() || plan.lane[i] < 0) continue;
    const TaskState st = job.runs[r].state;
    if (st == TaskState::kRunning || st == TaskState::kDone) TakeTurn(plan, i);
  }
}

void SpmdPolicy::TakeStateIntents(std::vector<StateIntent>* out) {
  out->insert(out->end(), intents_.begin(), intents_.end());
  intents_.clear();
}

bool SpmdPolicy::TakeTurn(JobPlan& plan, uint32_t index) {
  Lane& lane = plan.lanes[plan.lane[index]];
  const int32_t slot = plan.slot[index];
  if (++lane.placed[slot] < lane.total[slot] || slot != lane.next) return false;
  const auto end = static_cast<int32_t>(lane.total.size());
  do {
    ++lane.next;
  } while (lane.next < end && lane.placed[lane.next] >= lane.total[lane.next]);
  if (lane.next >= end) {
    // The step's order is done: the next step (spec repeat) runs it again.
    std::fill(lane.placed.begin(), lane.placed.end(), 0);
    lane.next = 0;
    while (lane.next < end && lane.total[lane.next] == 0) ++lane.next;
  }
  return true;
}

void SpmdPolicy::OnJobRemoved(JobId job) {
  sessions_.RemoveJob(job);
  auto it = jobs_.find(job);
  if (it == jobs_.end()) return;
  // Its sleeping tasks go back to the engine, which drops them as stale.
  const JobPlan& plan = it->second;
  for (size_t i = 0; i < plan.lanes.size(); ++i) {
    for (size_t s = 0; s < plan.lanes[i].total.size() && !asleep_.empty(); ++s) {
      const uint64_t key = plan.first_key + plan.lane_key[i] + s;
      if (asleep_.erase(key) > 0) woken_.push_back(key);
    }
  }
  jobs_.erase(it);
}

void SpmdPolicy::WakeLane(const JobPlan& plan, int32_t lane) {
  const Lane& l = plan.lanes[lane];
  if (asleep_.empty() || l.next < 0 || l.next >= static_cast<int32_t>(l.total.size())) return;
  const uint64_t key = plan.first_key + plan.lane_key[lane] + static_cast<uint64_t>(l.next);
  if (asleep_.erase(key) > 0) woken_.push_back(key);
}

void SpmdPolicy::WakeAll() {
  woken_.insert(woken_.end(), asleep_.begin(), asleep_.end());
  asleep_.clear();
}

void SpmdPolicy::TakeWoken(std::vector<uint64_t>* keys) {
  keys->insert(keys->end(), woken_.begin(), woken_.end());
  woken_.clear();
}

// A run left the core: tasks pinned to its device may fit now.
void SpmdPolicy::OnReleased(JobId job, uint32_t run, CoreId core, const ResourcePool& pool) {
  sessions_.OnReleased(job, run, core, pool);
  if (asleep_.empty()) return;
  const uint64_t key = kDeviceKey | pool.core(core).device;
  if (asleep_.erase(key) > 0) woken_.push_back(key);
}

// A device that joins changes no plan, but a woken task only costs a
// Place(). One that dies leaves the plans that use it to be laid out again
// on the devices up at their next placement, as after a restart (a static
// deployment restarts on the devices it has, rather than wait for the dead
// device for ever).
void SpmdPolicy::OnDeviceAdded(DeviceId device, const ResourcePool& pool) {
  sessions_.OnDeviceAdded(device, pool);
  WakeAll();
}
void SpmdPolicy::OnDeviceRemoved(DeviceId device, const ResourcePool& pool) {
  sessions_.OnDeviceRemoved(device, pool);
  for (auto& [id, plan] : jobs_) {
    if (plan.waiting != nullptr || plan.job == nullptr || !plan.error.empty()) continue;
    bool uses =
        std::find(plan.device.begin(), plan.device.end(), int64_t{device}) != plan.device.end();
    for (uint32_t s = 0; s < plan.sets.size() && !uses; ++s) uses = InSet(plan, s, device);
    if (uses) plan.waiting = plan.job;
  }
  WakeAll();
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
  if (plan == nullptr || task.index >= plan->device.size()) return sessions_.Allows(task, device);
  const int64_t pinned = plan->device[task.index];
  if (pinned >= 0 && pinned != static_cast<int64_t>(device)) return false;
  const int32_t lane = plan->lane[task.index];
  if (lane >= 0 && plan->lanes[lane].next != plan->slot[task.index]) return false;
  if (pinned >= 0) return true;
  return InSet(*plan, task.task->submodel, device);
}

bool SpmdPolicy::InSet(const JobPlan& plan, uint32_t sm, DeviceId device) {
  if (sm < plan.lookup.size() && !plan.lookup[sm].empty()) return plan.lookup[sm].count(device) > 0;
  const auto& set = plan.sets[sm];
  return std::find(set.begin(), set.end(), device) != set.end();
}

Placement SpmdPolicy::Place(const TaskView& task, const ResourcePool& pool, TimeUs now) {
  JobPlan* plan = Plan(task.job);
  // Admitted on an empty pool, or a device of its plan died: laid out now.
  if (plan != nullptr && plan->waiting != nullptr) {
    if (pool.alive_device_count() == 0) return Placement::RetryLater();
    MakePlan(*plan->waiting, pool);
    plan = Plan(task.job);
  }
  // Not admitted through OnJobAdded, or appended later: a session actor's
  // set (rule 5), else the whole pool.
  if (plan == nullptr || task.index >= plan->device.size()) {
    if (sessions_.Constrained(task)) return sessions_.Place(task, task.spec->core, pool, now);
    return EarliestCore(task, task.spec->core, pool, [](DeviceId) { return true; });
  }
  if (!plan->error.empty()) return Placement::JobInfeasible(plan->error);
  const std::vector<DeviceId>& set = plan->sets[task.task->submodel];
  if (set.empty()) return Placement::Infeasible(std::string(Name()) + ": submodel has no devices");
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
    if (!pool.device(dev).alive)
      return Placement::Infeasible(std::string(Name()) + ": its device died");
    const int32_t lane = plan->lane[task.index];
    if (lane >= 0 && plan->lanes[lane].next != plan->slot[task.index]) {
      const uint64_t key =
          plan->first_key + plan->lane_key[lane] + static_cast<uint64_t>(plan->slot[task.index]);
      asleep_.insert(key);
      return Placement::RetryWhen(key);
    }
    int64_t core = free_core(dev);
    if (core < 0) {
      asleep_.insert(kDeviceKey | dev);
      return Placement::RetryWhen(kDeviceKey | dev);
    }
    return Placement::Placed(static_cast<CoreId>(core));
  }
  // The earliest-draining core of the set; an idle one cannot be beaten,
  // so the scan stops there (a set of 150,000 devices took 20 ms a task).
  int64_t best = -1;
  for (DeviceId d : set) {
    int64_t c = free_core(d);
    if (c >= 0 && (best < 0 || pool.core(c).busy_until < pool.core(best).busy_until)) best = c;
    if (best >= 0 && pool.core(best).busy_until <= now) break;
  }
  if (best < 0) return Placement::RetryLater();
  return Placement::Placed(static_cast<CoreId>(best));
}

void SpmdPolicy::OnPlaced(const TaskView& task, CoreId core) {
  sessions_.OnPlaced(task, core);
  JobPlan* plan = Plan(task.job);
  if (plan == nullptr || task.index >= plan->lane.size() || plan->lane[task.index] < 0) return;
  if (TakeTurn(*plan, task.index)) WakeLane(*plan, plan->lane[task.index]);  // the next slot's turn
}

}  // namespace hmpmd
