#include "hmpmd/scheduler/state_affinity.h"

#include <algorithm>

#include "hmpmd/scheduler/device_share.h"
#include "hmpmd/scheduler/scheduler.h"

namespace hmpmd {
namespace {

// Communication and gang members load no state (the simulator charges
// none): only compute places the state.
bool Stateful(const GraphTask& t) { return !t.is_comm && t.group == kNoGroup; }

TimeUs StartAt(const ResourcePool& pool, CoreId c, TimeUs now) {
  return std::max(now, pool.core(c).busy_until);
}

}  // namespace

bool StateAffinity::Floats(const JobRun& job, uint32_t sm) {
  const JobGraph& g = *job.graph;
  if (job.open || sm >= g.spec().submodels.size()) return false;
  const SubmodelSpec& spec = g.spec().submodels[sm];
  // Declared state_bytes: the state is data of a known size any device can
  // load (weights). Without, it is whatever the kernels stored, which a
  // device set keeps in one place.
  return DeviceShare::KeepsState(spec, false) && g.spec().elastic && spec.elastic &&
         spec.state_bytes > 0;
}

void StateAffinity::AddJob(const JobRun& job) {
  const JobGraph& g = *job.graph;
  const size_t n = g.spec().submodels.size();
  std::vector<Holding> holdings(n);
  bool any = false;
  for (uint32_t s = 0; s < n; ++s) {
    if (!Floats(job, s)) continue;
    any = true;
    holdings[s].load_us = s < job.state_load_us.size() ? job.state_load_us[s] : 0;
    holdings[s].bytes = g.spec().submodels[s].state_bytes;
  }
  if (!any) return;
  // Rule 2: the width of each floating sub-model: how many of its compute
  // runs can run at once. The largest such set (an antichain) costs a
  // matching to find, so two lower bounds of it, the larger wins: its runs
  // at one depth (longest path from a source), and its runs that overlap
  // in time when every run starts as soon as its inputs are done (the
  // admission estimates, unlimited devices). Neither has a path between
  // two of its runs.
  std::vector<uint32_t> depth(g.size(), 0);
  std::vector<double> end(g.size(), 0);
  std::unordered_map<uint64_t, uint32_t> at_depth;            // (sub-model, depth) -> runs
  std::vector<std::vector<std::pair<double, int>>> spans(n);  // per sub-model: (time, +1/-1)
  for (uint32_t i : g.topo_order()) {
    const GraphTask& t = g.task(i);
    double start = 0;
    for (uint32_t p : t.inputs) {
      depth[i] = std::max(depth[i], depth[p] + 1);
      start = std::max(start, end[p]);
    }
    end[i] = start + (i < job.est_us.size() ? job.est_us[i] : 0);
    if (!Stateful(t) || !Floats(job, t.submodel)) continue;
    const uint32_t c = ++at_depth[(uint64_t{t.submodel} << 32) | depth[i]];
    holdings[t.submodel].width = std::max(holdings[t.submodel].width, c);
    if (end[i] > start) {
      spans[t.submodel].push_back({start, 1});
      spans[t.submodel].push_back({end[i], -1});
    }
  }
  for (uint32_t s = 0; s < n; ++s) {
    std::sort(spans[s].begin(), spans[s].end());  // an end before a start at one time
    uint32_t open = 0;
    for (const auto& [at, delta] : spans[s]) {
      open = static_cast<uint32_t>(static_cast<int64_t>(open) + delta);
      holdings[s].width = std::max(holdings[s].width, open);
    }
  }
  jobs_[job.id] = JobHoldings{job.graph, std::move(holdings)};
}

void StateAffinity::RemoveJob(JobId job) {
  auto it = jobs_.find(job);
  if (it == jobs_.end()) return;
  for (const Holding& h : it->second.subs) {
    for (DeviceId d : h.holders) {
      std::vector<Held>& held = on_device_[d];
      held.erase(
          std::remove_if(held.begin(), held.end(), [&](const Held& x) { return x.job == job; }),
          held.end());
    }
  }
  std::erase_if(in_flight_, [&](uint64_t key) { return key >> 32 == job; });
  jobs_.erase(it);
}

void StateAffinity::OnDeviceRemoved(DeviceId device) {
  if (device >= on_device_.size()) return;
  std::vector<Held> held = std::move(on_device_[device]);
  on_device_[device].clear();
  for (const Held& x : held) Drop(x.job, x.sm, device);
}

const StateAffinity::Holding* StateAffinity::Find(JobId job, uint32_t sm) const {
  auto it = jobs_.find(job);
  if (it == jobs_.end() || sm >= it->second.subs.size() || it->second.subs[sm].width == 0) {
    return nullptr;
  }
  return &it->second.subs[sm];
}

void StateAffinity::Drop(JobId job, uint32_t sm, DeviceId device) {
  Holding& h = jobs_[job].subs[sm];
  h.has.erase(device);
  h.holders.erase(std::remove(h.holders.begin(), h.holders.end(), device), h.holders.end());
}

bool StateAffinity::Handles(const TaskView& task) const {
  if (jobs_.empty() || task.task == nullptr || !Stateful(*task.task)) return false;
  return Find(task.job, task.task->submodel) != nullptr;
}

CoreId StateAffinity::BestHolder(const Holding& h, const TaskView& task, CoreKind kind,
                                 const ResourcePool& pool) const {
  const Placement p =
      h.holders.size() > kScanHolders
          ? EarliestCore(task, kind, pool, [&](DeviceId d) { return h.has.count(d) > 0; })
          : EarliestCoreOn(task, kind, pool, h.holders);
  return p.kind == Placement::Kind::kPlaced ? p.core : kNoCore;
}

bool StateAffinity::HolderCanRun(const Holding& h, const TaskView& task, CoreKind kind,
                                 const ResourcePool& pool) {
  for (DeviceId d : h.holders) {
    if (!Usable(task, d, pool)) continue;
    for (CoreId c : pool.device(d).cores) {
      if (pool.core(c).kind == kind) return true;
    }
  }
  return false;
}

Placement StateAffinity::Place(const TaskView& task, CoreKind kind, const ResourcePool& pool,
                               TimeUs now) const {
  const Holding& h = *Find(task.job, task.task->submodel);
  const CoreId hold = BestHolder(h, task, kind, pool);
  if (h.holders.size() >= h.width) {
    if (hold != kNoCore) return Placement::Placed(hold);
    // Full spread: wait for a holder, unless none could ever run it.
    if (HolderCanRun(h, task, kind, pool)) return Placement::RetryLater();
  }
  Placement any = EarliestCore(task, kind, pool, [](DeviceId) { return true; });
  if (hold == kNoCore) return any;
  if (any.kind != Placement::Kind::kPlaced ||
      static_cast<double>(StartAt(pool, hold, now)) <=
          static_cast<double>(StartAt(pool, any.core, now)) + h.load_us) {
    return Placement::Placed(hold);
  }
  return any;
}

bool StateAffinity::Allows(const TaskView& task, DeviceId device) const {
  if (!Handles(task)) return true;
  const Holding& h = *Find(task.job, task.task->submodel);
  return h.holders.size() < h.width || h.has.count(device) > 0;
}

uint64_t StateAffinity::RunKey(JobId job, uint32_t run) { return (uint64_t{job} << 32) | run; }

void StateAffinity::OnReady(const TaskView& task) {
  if (task.early || !Handles(task) || !in_flight_.insert(RunKey(task.job, task.run)).second) {
    return;
  }
  Holding& h = jobs_[task.job].subs[task.task->submodel];
  h.width = std::max(h.width, ++h.in_flight);
}

void StateAffinity::OnReleased(JobId job, uint32_t run) {
  if (run == kNoRun || in_flight_.erase(RunKey(job, run)) == 0) return;
  auto it = jobs_.find(job);
  if (it == jobs_.end()) return;
  const JobGraph& g = *it->second.graph;
  Holding& h = it->second.subs[g.task(run % g.size()).submodel];
  if (h.in_flight > 0) --h.in_flight;
}

void StateAffinity::OnPlaced(const TaskView& task, DeviceId device, const ResourcePool& pool) {
  if (!Handles(task)) return;
  const uint32_t sm = task.task->submodel;
  Holding& h = jobs_[task.job].subs[sm];
  if (on_device_.size() <= device) on_device_.resize(device + 1);
  std::vector<Held>& held = on_device_[device];
  // Held already: now the most recently used.
  for (size_t i = 0; i < held.size(); ++i) {
    if (held[i].job == task.job && held[i].sm == sm) {
      std::rotate(held.begin() + static_cast<ptrdiff_t>(i),
                  held.begin() + static_cast<ptrdiff_t>(i) + 1, held.end());
      return;
    }
  }
  // Loaded beside what the device holds while its memory has room; else
  // the least recently used states go first (as the simulator charges).
  const double cap = static_cast<double>(pool.device(device).desc.memory_mb) * (1 << 20);
  double bytes = h.bytes;
  for (const Held& x : held) bytes += x.bytes;
  size_t evict = 0;
  while (cap > 0 && bytes > cap && evict < held.size()) bytes -= held[evict++].bytes;
  std::vector<Held> gone(held.begin(), held.begin() + static_cast<ptrdiff_t>(evict));
  held.erase(held.begin(), held.begin() + static_cast<ptrdiff_t>(evict));
  held.push_back({task.job, sm, h.bytes});
  h.holders.push_back(device);
  h.has.insert(device);
  for (const Held& x : gone) Drop(x.job, x.sm, device);
}

std::vector<DeviceId> StateAffinity::Holders(JobId job, uint32_t sm) const {
  const Holding* h = Find(job, sm);
  return h == nullptr ? std::vector<DeviceId>{} : h->holders;
}

uint32_t StateAffinity::Width(JobId job, uint32_t sm) const {
  const Holding* h = Find(job, sm);
  return h == nullptr ? 0 : h->width;
}

}  // namespace hmpmd
