// DeviceShare: placement on the sets and the task events that feed them
// (see device_share.h). Layout and pool changes are in
// device_share_layout.cc, moves between sets in device_share_lend.cc.
#include "hmpmd/scheduler/device_share.h"

#include <algorithm>
#include <tuple>

#include "hmpmd/scheduler/scheduler.h"

namespace hmpmd {
namespace {

constexpr DeviceId kNoDevice = UINT32_MAX;

}  // namespace

bool DeviceShare::KeepsState(const SubmodelSpec& sm, bool open_job) {
  if (open_job) return true;  // a driver's actor: its state lives on its devices
  // Declared state, of any kind (a stage's or an expert's weights), or the
  // kinds whose kernels keep state between tasks.
  return sm.state_bytes > 0 || sm.kind == SubmodelKind::kActor ||
         sm.kind == SubmodelKind::kReward || sm.kind == SubmodelKind::kLearner;
}

const DeviceShare::Set* DeviceShare::Find(JobId job, uint32_t sm) const {
  auto it = jobs_.find(job);
  if (it == jobs_.end() || sm >= it->second.sets.size()) return nullptr;
  return &it->second.sets[sm];
}

void DeviceShare::Insert(JobId job, JobShare& js, uint32_t sm, DeviceId d,
                         const ResourcePool& pool) {
  Set& set = js.sets[sm];
  if (set.slot.size() <= d) set.slot.resize(d + 1, 0);
  if (set.slot[d] != 0) return;
  set.devices.push_back(d);
  set.slot[d] = static_cast<uint32_t>(set.devices.size());
  if (claims_.size() <= d) claims_.resize(d + 1, 0);
  ++claims_[d];
  if (holders_.size() <= d) holders_.resize(d + 1);
  holders_[d].push_back({job, sm});
  for (CoreId c : pool.device(d).cores) {
    set.free[static_cast<size_t>(pool.core(c).kind)].push_back(c);
  }
  for (size_t k = 0; k < kNumCoreKinds; ++k) set.with_kind[k] += pool.device(d).desc.cores[k] > 0;
  set.max_store = std::max(set.max_store, ResourcePool::StoreCap(pool.device(d).desc));
}

void DeviceShare::Erase(JobId job, JobShare& js, uint32_t sm, DeviceId d,
                        const ResourcePool& pool) {
  Set& set = js.sets[sm];
  if (d >= set.slot.size() || set.slot[d] == 0) return;
  uint32_t i = set.slot[d] - 1;
  DeviceId last = set.devices.back();
  set.devices[i] = last;
  set.slot[last] = i + 1;
  set.devices.pop_back();
  set.slot[d] = 0;
  --claims_[d];
  std::erase(holders_[d], std::pair<JobId, uint32_t>{job, sm});
  for (size_t k = 0; k < kNumCoreKinds; ++k) set.with_kind[k] -= pool.device(d).desc.cores[k] > 0;
  if (ResourcePool::StoreCap(pool.device(d).desc) >= set.max_store) RecountStore(set, pool);
  // Its cores stay in the free list until looked at.
}

void DeviceShare::RecountStore(Set& set, const ResourcePool& pool) {
  set.max_store = 0;
  for (DeviceId d : set.devices) {
    set.max_store = std::max(set.max_store, ResourcePool::StoreCap(pool.device(d).desc));
  }
}

bool DeviceShare::GrowForStore(const TaskView& task, JobShare& js, uint32_t sm, CoreKind kind,
                               uint64_t bytes, const ResourcePool& pool) {
  Set& set = js.sets[sm];
  // Of the alive devices outside the set whose store holds the outputs,
  // with a core of the kind, that run the task: those fewest sets of the
  // job hold, then fewest sets of any job, then the smallest store that
  // holds them (the larger ones stay for larger outputs), then on the
  // set's node.
  std::vector<uint32_t> held(pool.device_count(), 0);
  for (const Set& s : js.sets) {
    for (DeviceId d : s.devices) ++held[d];
  }
  const uint32_t home = set.devices.empty() ? 0 : pool.device(set.devices[0]).desc.node;
  auto key = [&](DeviceId d) {
    return std::tuple(held[d], claims_[d], ResourcePool::StoreCap(pool.device(d).desc),
                      pool.device(d).desc.node != home);
  };
  DeviceId best = kNoDevice;
  for (DeviceId d = 0; d < pool.device_count(); ++d) {
    if (d < set.slot.size() && set.slot[d] != 0) continue;
    const DeviceDesc& desc = pool.device(d).desc;
    if (desc.cores[static_cast<size_t>(kind)] == 0 || ResourcePool::StoreCap(desc) < bytes ||
        !pool.device(d).alive || !pool.Supports(d, task.kernel_id)) {
      continue;
    }
    if (best == kNoDevice || key(d) < key(best)) best = d;
  }
  if (best == kNoDevice) return false;
  Insert(task.job, js, sm, best, pool);
  Record(task.job, best, kNoSubmodel, static_cast<int32_t>(sm));
  for (Set::Full& f : set.full) f.at = -1;
  return true;
}

bool DeviceShare::GrowForKind(const TaskView& task, JobShare& js, uint32_t sm, CoreKind kind,
                              uint32_t need, const ResourcePool& pool) {
  Set& set = js.sets[sm];
  bool grew = false;
  while (Short(set, kind, need)) {
    // Of the alive devices outside the set with a core of the kind that
    // run the task: those fewest sets of the job hold, then fewest sets of
    // any job, then on the set's node.
    std::vector<uint32_t> held(pool.device_count(), 0);
    for (const Set& s : js.sets) {
      for (DeviceId d : s.devices) ++held[d];
    }
    const uint32_t home = pool.device(set.devices[0]).desc.node;
    DeviceId best = kNoDevice;
    auto key = [&](DeviceId d) {
      return std::tuple(held[d], claims_[d], pool.device(d).desc.node != home);
    };
    for (DeviceId d = 0; d < pool.device_count(); ++d) {
      if (d < set.slot.size() && set.slot[d] != 0) continue;
      if (pool.device(d).desc.cores[static_cast<size_t>(kind)] == 0 || !Usable(task, d, pool)) {
        continue;
      }
      if (best == kNoDevice || key(d) < key(best)) best = d;
    }
    if (best == kNoDevice) break;  // the task waits for one (or for its own kind's)
    Insert(task.job, js, sm, best, pool);
    Record(task.job, best, kNoSubmodel, static_cast<int32_t>(sm));
    grew = true;
  }
  if (grew) {
    for (Set::Full& f : set.full) f.at = -1;
  }
  return grew;
}

void DeviceShare::OnReleased(JobId job, uint32_t run, CoreId core, const ResourcePool& pool) {
  const DeviceId d = pool.core(core).device;
  if (run != kNoRun) {
    auto it = jobs_.find(job);
    if (it != jobs_.end()) {
      const JobGraph& g = *it->second.run->graph;
      const uint32_t sm = g.task(run % g.size()).submodel;
      if (sm < it->second.sets.size()) {
        Set& set = it->second.sets[sm];
        if (d < set.running.size() && set.running[d] > 0) {
          --set.running[d];
          --set.running_total;
        }
        MaybeLend(job, it->second, sm, d, pool);
      }
    }
  }
  if (d >= holders_.size()) return;
  const size_t kind = static_cast<size_t>(pool.core(core).kind);
  for (const auto& [holder, sm] : holders_[d]) {
    auto it = jobs_.find(holder);
    if (it == jobs_.end() || sm >= it->second.sets.size()) continue;
    Set& set = it->second.sets[sm];
    set.free[kind].push_back(core);
    // Releases of cores that stayed free pile up: compact now and then.
    if (set.free[kind].size() > 4 * pool.device(d).cores.size() * set.devices.size() + 64) {
      RebuildFree(set, static_cast<CoreKind>(kind), pool);
    }
  }
}

void DeviceShare::RebuildFree(Set& set, CoreKind kind, const ResourcePool& pool) const {
  std::vector<CoreId>& list = set.free[static_cast<size_t>(kind)];
  list.clear();
  for (DeviceId d : set.devices) {
    for (CoreId c : pool.device(d).cores) {
      if (pool.core(c).kind == kind && pool.HasCapacity(c)) list.push_back(c);
    }
  }
}

void DeviceShare::Record(JobId job, DeviceId d, int32_t from, int32_t to) {
  ++move_count_;
  ++moves_by_job_[job];
  if (moves_.size() < options_.max_recorded_moves) moves_.push_back({last_now_, job, d, from, to});
}

void DeviceShare::RemoveJob(JobId job) {
  auto it = jobs_.find(job);
  if (it == jobs_.end()) return;
  for (uint32_t s = 0; s < it->second.sets.size(); ++s) {
    if (it->second.sets[s].want > 0) --wanting_;
    for (DeviceId d : it->second.sets[s].devices) {
      --claims_[d];
      std::erase(holders_[d], std::pair<JobId, uint32_t>{job, s});
    }
  }
  jobs_.erase(it);
}

void DeviceShare::OnReady(const TaskView& task) {
  auto it = jobs_.find(task.job);
  if (it == jobs_.end()) return;
  JobShare& js = it->second;
  if (task.task->submodel >= js.sets.size() || task.index >= js.run->est_us.size()) return;
  Set& set = js.sets[task.task->submodel];
  ++set.ready;
  set.ready_us += js.run->est_us[task.index];
  if (set.want == 0) return;  // no set: nothing to lend or grow
  set.ready_slack.insert(Slack(js, task.index));
  set.ready_chain_us += Chain(js, task.index);
}

void DeviceShare::OnPlaced(const TaskView& task, CoreId core) {
  auto it = jobs_.find(task.job);
  if (it == jobs_.end()) return;
  JobShare& js = it->second;
  if (task.task->submodel >= js.sets.size() || task.index >= js.run->est_us.size()) return;
  Set& set = js.sets[task.task->submodel];
  const double est = js.run->est_us[task.index];
  set.ready = std::max<int64_t>(0, set.ready - 1);
  set.ready_us = std::max(0.0, set.ready_us - est);
  set.placed_us += est;
  if (set.want > 0) {
    auto slack = set.ready_slack.find(Slack(js, task.index));
    if (slack != set.ready_slack.end()) set.ready_slack.erase(slack);
    set.ready_chain_us = std::max(0.0, set.ready_chain_us - Chain(js, task.index));
    if (set.ready_slack.empty()) set.ready_chain_us = 0;
  }
  if (pool_ == nullptr || core >= pool_->core_count()) return;
  const DeviceId d = pool_->core(core).device;
  if (set.running.size() <= d) set.running.resize(d + 1, 0);
  ++set.running[d];
  ++set.running_total;
}

uint64_t DeviceShare::WaitClass(const TaskView& task, bool to_vector) const {
  if (task.task == nullptr || task.task->group != kNoGroup || !Constrained(task)) return 0;
  return SubmodelWaitClass(task, to_vector);
}

uint64_t DeviceShare::SubmodelWaitClass(const TaskView& task, bool to_vector) {
  uint64_t h = task.job;
  h = h * 1'000'003 + task.task->submodel;
  h = h * 31 + static_cast<uint64_t>(task.spec->core) * 2 + (to_vector ? 1 : 0);
  h = h * 1'000'033 + task.kernel_id;
  h = h * 2 + (task.input_bytes > 0 ? 1 : 0);
  return h | (uint64_t{1} << 63);
}

bool DeviceShare::Constrained(const TaskView& task) const {
  if (wanting_ == 0) return false;  // no job has a set: no lookup per task
  const Set* set = Find(task.job, task.task->submodel);
  return set != nullptr && set->want > 0;
}

bool DeviceShare::Allows(const TaskView& task, DeviceId device) const {
  const Set* set = Find(task.job, task.task->submodel);
  if (set == nullptr || set->want == 0) return true;
  return device < set->slot.size() && set->slot[device] != 0;
}

const std::vector<DeviceId>& DeviceShare::DeviceSet(JobId job, uint32_t submodel) const {
  static const std::vector<DeviceId> kEmpty;
  const Set* set = Find(job, submodel);
  return set == nullptr ? kEmpty : set->devices;
}

uint64_t DeviceShare::MoveCount(JobId job) const {
  auto it = moves_by_job_.find(job);
  return it == moves_by_job_.end() ? 0 : it->second;
}

Placement DeviceShare::Earliest(Set& set, const TaskView& task, CoreKind kind,
                                const ResourcePool& pool) const {
  // The most recently freed core first; entries that lost capacity or left
  // the set go. Cores the task cannot use (kernel, full store) are skipped
  // for scan_limit entries, then the set's devices are looked at directly.
  // An idle core wins over one with room in its queue: the core just given
  // a task stays last in the list while it has room, and two independent
  // tasks queued there one behind the other while the set's other devices
  // idled (live, where a core queues more than one run).
  std::vector<CoreId>& list = set.free[static_cast<size_t>(kind)];
  uint32_t skipped = 0, queued_seen = 0;
  CoreId queued_best = kNoCore;
  for (size_t i = list.size(); i-- > 0;) {
    const CoreId c = list[i];
    const DeviceId d = pool.core(c).device;
    if (d >= set.slot.size() || set.slot[d] == 0 || !pool.HasCapacity(c)) {
      list[i] = list.back();
      list.pop_back();
      continue;
    }
    if (Usable(task, d, pool)) {
      const ResourcePool::Core& core = pool.core(c);
      if (core.queued == 0) return Placement::Placed(c);
      if (queued_best == kNoCore || core.busy_until < pool.core(queued_best).busy_until) {
        queued_best = c;
      }
      if (++queued_seen == options_.scan_limit) break;
      continue;
    }
    if (++skipped == options_.scan_limit) break;
  }
  if (queued_best != kNoCore) return Placement::Placed(queued_best);
  if (skipped < options_.scan_limit) return Placement::RetryLater();
  return EarliestCoreOn(task, kind, pool, set.devices);
}

Placement DeviceShare::Place(const TaskView& task, CoreKind kind, const ResourcePool& pool,
                             TimeUs now) {
  last_now_ = std::max(last_now_, now);
  auto it = jobs_.find(task.job);
  if (it == jobs_.end()) return Placement::RetryLater();
  JobShare& js = it->second;
  const uint32_t sm = task.task->submodel;
  Set& set = js.sets[sm];
  if (pool.alive_device_count() == 0) return Placement::RetryLater();
  if (set.devices.empty()) {
    // Every device it had died (or it gave them away with no work left):
    // one comes back, from an idle sub-model or shared.
    if (Rebalance(task.job, js, sm, kind, pool, now) == kNoDevice) {
      DeviceId d = SpareDevice(js, pool);
      Insert(task.job, js, sm, d, pool);
      Record(task.job, d, kNoSubmodel, static_cast<int32_t>(sm));
    }
    for (Set::Full& f : set.full) f.at = -1;
  }
  // A gang member of a set below its floor (it lent devices while idle),
  // when no run of the job is running: the set takes devices back first,
  // dwell or not. Its members need distinct devices, which a free core
  // beside another member's is not, and nothing else would move time on.
  if (task.task->group != kNoGroup && set.elastic && !set.spans && set.devices.size() < set.floor &&
      std::all_of(js.sets.begin(), js.sets.end(),
                  [](const Set& s) { return s.running_total == 0; })) {
    while (set.devices.size() < set.floor &&
           Recall(task.job, js, sm, kind, pool, now, /*urgent=*/true) != kNoDevice) {
    }
    for (Set::Full& f : set.full) f.at = -1;
  }
  // Rule 4: no device of the set has a core of the kind (a gang: too few
  // for its members), though it holds devices of other kinds. A
  // communication task headed for a vector core takes its own kind's core
  // if the set has enough of those; else the set grows by pool devices
  // that have the kind. (O(1) unless the set is short.)
  const uint32_t need =
      task.task->group == kNoGroup
          ? 1
          : static_cast<uint32_t>(js.run->graph->groups()[task.task->group].members.size());
  if (Short(set, kind, need)) {
    if (kind != task.spec->core && !Short(set, task.spec->core, need)) {
      kind = task.spec->core;
    } else {
      GrowForKind(task, js, sm, kind, need, pool);
    }
  }
  // Rule 5: its outputs fit no store of the set, while a device's store of
  // the pool would hold them (StoreTakes then refuses every device of the
  // set, for good: caps do not change). (O(1) unless so.)
  if (task.output_known && task.output_bytes > set.max_store &&
      pool.LargestStore(task.spec->core) >= task.output_bytes) {
    if (!set.elastic) {
      const auto mib = [](uint64_t b) { return std::to_string((b + (1 << 20) - 1) >> 20); };
      return Placement::Infeasible(
          "its outputs (" + std::to_string(task.output_bytes) + " bytes) exceed the store cap of " +
          "every device of its pinned set (largest " + mib(set.max_store) + " MiB, --memory-mb" +
          "); a device outside the set has a store of " + mib(pool.LargestStore(task.spec->core)) +
          " MiB, but a pinned set does not grow: make the sub-model elastic or give its " +
          "workers a larger --memory-mb");
    }
    GrowForStore(task, js, sm, kind, task.output_bytes, pool);
  }
  // Locality: the device of its largest input, when it is in the set and a
  // core of the kind there is free now (communication: has room).
  DeviceId near = task.input_device;
  if (near != UINT32_MAX && near < set.slot.size() && set.slot[near] != 0 &&
      Usable(task, near, pool)) {
    for (CoreId c : pool.device(near).cores) {
      const ResourcePool::Core& core = pool.core(c);
      bool idle = core.queued == 0 && core.busy_until <= now;
      if (core.kind == kind && (idle || task.task->is_comm) && pool.HasCapacity(c)) {
        return Placement::Placed(c);
      }
    }
  }
  Set::Full& full = set.full[static_cast<size_t>(kind)];
  if (full.at != now || full.changes != pool.changes()) {
    Placement p = Earliest(set, task, kind, pool);
    if (p.kind == Placement::Kind::kPlaced) return p;
    full = {now, pool.changes(), false};
  }
  // The set is full: bring in a device if another sub-model idles.
  if (full.tried || !pool.HasCapacity(kind)) return Placement::RetryLater();
  DeviceId d = Rebalance(task.job, js, sm, kind, pool, now);
  if (d == kNoDevice) {
    full.tried = true;  // until a core is released or time moves on
    return Placement::RetryLater();
  }
  for (CoreId c : pool.device(d).cores) {
    if (pool.core(c).kind == kind && pool.HasCapacity(c)) return Placement::Placed(c);
  }
  return Placement::RetryLater();
}

}  // namespace hmpmd
