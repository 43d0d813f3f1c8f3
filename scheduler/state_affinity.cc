#include "hmpmd/scheduler/state_affinity.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "hmpmd/scheduler/device_share.h"
#include "hmpmd/scheduler/scheduler.h"
#include "hmpmd/scheduler/state_shards.h"
#include "hmpmd/scheduler/state_split.h"

namespace hmpmd {
namespace {

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

uint32_t StateAffinity::SlotOf(const JobHoldings& jh, uint32_t index) {
  const JobGraph& g = *jh.graph;
  const uint32_t sm = g.task(index).submodel;
  if (sm >= jh.first_slot.size() || jh.first_slot[sm] == kNoSlot) return kNoSlot;
  return jh.first_slot[sm] + StatePartOf(g.spec().submodels[sm], g.spec_task(index));
}

void StateAffinity::AddJob(const JobRun& job, uint32_t devices) {
  const JobGraph& g = *job.graph;
  const size_t n = g.spec().submodels.size();
  // A slot per part of each floating sub-model's state (state_shards.h).
  std::vector<uint32_t> first_slot(n, kNoSlot);
  std::vector<Holding> holdings;
  const std::vector<double> part_bytes = StateBytesPerDevice(g.spec().submodels);
  for (uint32_t s = 0; s < n; ++s) {
    if (!Floats(job, s)) continue;
    first_slot[s] = static_cast<uint32_t>(holdings.size());
    Holding h;
    h.load_us = s < job.state_load_us.size() ? job.state_load_us[s] : 0;
    h.bytes = part_bytes[s];
    h.first_start_us = std::numeric_limits<double>::infinity();
    holdings.resize(holdings.size() + std::max(1u, g.spec().submodels[s].state_shards), h);
  }
  if (holdings.empty()) return;
  JobHoldings jh{job.graph, std::move(first_slot), {}};
  // Rule 2: the width of each part of a floating sub-model: how many of
  // its compute runs can run at once. The largest such set (an antichain) costs a
  // matching to find, so two lower bounds of it, the larger wins: its runs
  // at one depth (longest path from a source), and its runs that overlap
  // in time when every run starts as soon as its inputs are done (the
  // admission estimates, unlimited devices). Neither has a path between
  // two of its runs.
  std::vector<uint32_t> depth(g.size(), 0);
  std::vector<double> end(g.size(), 0);
  std::unordered_map<uint64_t, uint32_t> at_depth;                          // (slot, depth) -> runs
  std::vector<std::vector<std::pair<double, int>>> spans(holdings.size());  // (time, +1/-1)
  std::vector<double> work(holdings.size(), 0);                      // per slot: estimated compute
  std::vector<std::unordered_set<int64_t>> shards(holdings.size());  // per slot: distinct args
  for (uint32_t i : g.topo_order()) {
    const GraphTask& t = g.task(i);
    double start = 0;
    for (uint32_t p : t.inputs) {
      depth[i] = std::max(depth[i], depth[p] + 1);
      start = std::max(start, end[p]);
    }
    end[i] = start + (i < job.est_us.size() ? job.est_us[i] : 0);
    const uint32_t slot = SlotOf(jh, i);
    if (!NeedsStatePart(t) || slot == kNoSlot) continue;
    holdings[slot].first_start_us = std::min(holdings[slot].first_start_us, start);
    const uint32_t c = ++at_depth[(uint64_t{slot} << 32) | depth[i]];
    holdings[slot].width = std::max(holdings[slot].width, c);
    work[slot] += end[i] - start;
    if (const int64_t shard = ShardArgOf(g.spec_task(i)); shard >= 0) shards[slot].insert(shard);
    if (end[i] > start) {
      spans[slot].push_back({start, 1});
      spans[slot].push_back({end[i], -1});
    }
  }
  for (uint32_t s = 0; s < holdings.size(); ++s) {
    std::sort(spans[s].begin(), spans[s].end());  // an end before a start at one time
    uint32_t open = 0;
    for (const auto& [at, delta] : spans[s]) {
      open = static_cast<uint32_t>(static_cast<int64_t>(open) + delta);
      holdings[s].width = std::max(holdings[s].width, open);
    }
    // Rule 3: a holder must have a load's worth of work to take.
    Holding& h = holdings[s];
    if (h.load_us > 0 && h.width > 0) {
      h.worth = static_cast<uint32_t>(std::clamp(work[s] / h.load_us, 1.0, 4e9));
    }
  }
  // Rule 3, idle devices: a load on a device the caps would leave idle
  // costs no other work, so caps that add up to fewer devices than the
  // pool has grow in proportion until they fill it. When every cap is set
  // by its load, the pool is split by work instead (SplitByWork), whether
  // the caps fill it or not: rule 5 loads them all at once, so the loads
  // no longer say who should pay them (multimodal: a stage part got 5
  // holders, 0.3628 s; by work 9, 0.2848 s; MoE at 64 devices: grown in
  // proportion, attention on 12 of 64 devices, 0.6583 s; by work 0.5346 s).
  double capped = 0, total_work = 0;
  bool by_load = true;  // every part's cap is set by its load, not its width
  for (uint32_t s = 0; s < holdings.size(); ++s) {
    capped += std::min(holdings[s].width, holdings[s].worth);
    if (holdings[s].worth != UINT32_MAX) total_work += work[s];
    if (holdings[s].width > 0 && holdings[s].worth >= holdings[s].width) by_load = false;
  }
  const double grow = capped > 0 && devices > capped ? devices / capped : 1;
  const bool split_by_work = by_load && devices > 0 && total_work > 0;  // filled or not
  std::vector<PartDemand> demands;  // split by work: the parts that float
  std::vector<uint32_t> split_slots;
  for (uint32_t s = 0; s < holdings.size(); ++s) {
    Holding& h = holdings[s];
    if (h.worth == UINT32_MAX) continue;
    h.worth = static_cast<uint32_t>(std::clamp(std::floor(h.worth * grow), 1.0, 4e9));
    demands.push_back({work[s], h.width, static_cast<uint32_t>(shards[s].size())});
    split_slots.push_back(s);
  }
  if (split_by_work) {
    const std::vector<uint32_t> caps = SplitByWork(demands, devices);
    for (size_t k = 0; k < caps.size(); ++k) holdings[split_slots[k]].worth = caps[k];
  }
  for (Holding& h : holdings) h.width = std::min(h.width, h.worth);
  jh.slots = std::move(holdings);
  jobs_[job.id] = std::move(jh);
}

void StateAffinity::RemoveJob(JobId job) {
  auto it = jobs_.find(job);
  if (it == jobs_.end()) return;
  for (const Holding& h : it->second.slots) {
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
  for (const Held& x : held) Drop(x.job, x.slot, device);
}

const StateAffinity::Holding* StateAffinity::Find(JobId job, uint32_t slot) const {
  auto it = jobs_.find(job);
  if (it == jobs_.end() || slot >= it->second.slots.size() || it->second.slots[slot].width == 0) {
    return nullptr;
  }
  return &it->second.slots[slot];
}

uint32_t StateAffinity::SlotOf(const TaskView& task) const {
  auto it = jobs_.find(task.job);
  return it == jobs_.end() ? kNoSlot : SlotOf(it->second, task.index);
}

void StateAffinity::Drop(JobId job, uint32_t slot, DeviceId device) {
  Holding& h = jobs_[job].slots[slot];
  h.has.erase(device);
  h.holders.erase(std::remove(h.holders.begin(), h.holders.end(), device), h.holders.end());
}

bool StateAffinity::Handles(const TaskView& task) const {
  if (jobs_.empty() || task.task == nullptr || !NeedsStatePart(*task.task)) return false;
  return Find(task.job, SlotOf(task)) != nullptr;
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

uint64_t StateAffinity::GangKey(const TaskView& task, size_t* members) {
  if (task.task == nullptr || task.graph == nullptr) return UINT64_MAX;
  uint32_t gang = kNoGroup, member = 0;
  for (uint32_t c : task.task->consumers) {
    if (task.graph->task(c).group < gang) {
      gang = task.graph->task(c).group;
      member = c;
    }
  }
  // A member with several producers (a MoE combine's expert blocks, a
  // gradient all-reduce after every micro-batch) is no tensor-parallel
  // shard's: its producers are not one op's slices.
  if (gang == kNoGroup || task.graph->task(member).inputs.size() != 1) return UINT64_MAX;
  if (members != nullptr) *members = task.graph->groups()[gang].members.size();
  return (uint64_t{task.run / std::max(1u, task.graph->size())} << 32) | gang;
}

CoreId StateAffinity::GangHolder(const Holding& h, const TaskView& task, CoreKind kind,
                                 const ResourcePool& pool) const {
  const uint64_t key = GangKey(task);
  if (key == UINT64_MAX) return kNoCore;
  const auto& gangs = jobs_.at(task.job).gangs;
  auto it = gangs.find(key);
  if (it == gangs.end()) return kNoCore;
  const GangSpot& spot = it->second;
  std::vector<DeviceId> near;
  for (DeviceId d : h.holders) {
    if (pool.device(d).desc.node == spot.node &&
        std::find(spot.devices.begin(), spot.devices.end(), d) == spot.devices.end()) {
      near.push_back(d);
    }
  }
  const Placement p = EarliestCoreOn(task, kind, pool, near);
  return p.kind == Placement::Kind::kPlaced ? p.core : kNoCore;
}

Placement StateAffinity::Place(const TaskView& task, CoreKind kind, const ResourcePool& pool,
                               TimeUs now) const {
  const Holding& h = *Find(task.job, SlotOf(task));
  CoreId hold = BestHolder(h, task, kind, pool);
  if (const CoreId near = GangHolder(h, task, kind, pool);
      near != kNoCore && near != hold &&
      (hold == kNoCore || static_cast<double>(StartAt(pool, near, now)) <=
                              static_cast<double>(StartAt(pool, hold, now)) + task.est_us)) {
    hold = near;
  }
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
  const Holding& h = *Find(task.job, SlotOf(task));
  return h.holders.size() < h.width || h.has.count(device) > 0;
}

uint64_t StateAffinity::RunKey(JobId job, uint32_t run) { return (uint64_t{job} << 32) | run; }

void StateAffinity::OnReady(const TaskView& task) {
  if (task.early || !Handles(task) || !in_flight_.insert(RunKey(task.job, task.run)).second) {
    return;
  }
  Holding& h = jobs_[task.job].slots[SlotOf(task)];
  h.width = std::max(h.width, std::min(++h.in_flight, h.worth));
}

void StateAffinity::OnReleased(JobId job, uint32_t run) {
  if (run == kNoRun || in_flight_.erase(RunKey(job, run)) == 0) return;
  auto it = jobs_.find(job);
  if (it == jobs_.end()) return;
  const JobGraph& g = *it->second.graph;
  const uint32_t slot = SlotOf(it->second, run % g.size());
  if (slot == kNoSlot) return;
  Holding& h = it->second.slots[slot];
  if (h.in_flight > 0) --h.in_flight;
}

void StateAffinity::OnPlaced(const TaskView& task, DeviceId device, const ResourcePool& pool) {
  if (!Handles(task)) return;
  Hold(task.job, SlotOf(task), device, pool);
  size_t members = 0;
  const uint64_t key = GangKey(task, &members);
  if (key == UINT64_MAX) return;
  auto& gangs = jobs_[task.job].gangs;
  const uint32_t node = pool.device(device).desc.node;
  auto it = gangs.find(key);
  if (it == gangs.end()) {
    // A gang wider than the node cannot keep to it. The spots are hints
    // only: a producer that never comes (its run taken back) must not
    // keep them growing.
    if (members > NodeSize(pool, node)) return;
    if (gangs.size() >= kMaxGangSpots) gangs.clear();
    it = gangs.emplace(key, GangSpot{node, {}}).first;
  }
  it->second.devices.push_back(device);
  if (it->second.devices.size() >= members) gangs.erase(it);
}

uint32_t StateAffinity::NodeSize(const ResourcePool& pool, uint32_t node) {
  if (node_size_devices_ != pool.device_count()) {
    node_size_.clear();
    for (DeviceId d = 0; d < pool.device_count(); ++d) {
      const uint32_t n = pool.device(d).desc.node;
      if (n >= node_size_.size()) node_size_.resize(size_t{n} + 1, 0);
      ++node_size_[n];
    }
    node_size_devices_ = pool.device_count();
  }
  return node < node_size_.size() ? node_size_[node] : 0;
}

void StateAffinity::Hold(JobId job, uint32_t slot, DeviceId device, const ResourcePool& pool) {
  Holding& h = jobs_[job].slots[slot];
  if (on_device_.size() <= device) on_device_.resize(device + 1);
  std::vector<Held>& held = on_device_[device];
  // Held already: now the most recently used.
  for (size_t i = 0; i < held.size(); ++i) {
    if (held[i].job == job && held[i].slot == slot) {
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
  held.push_back({job, slot, h.bytes});
  h.holders.push_back(device);
  h.has.insert(device);
  for (const Held& x : gone) Drop(x.job, x.slot, device);
}

void StateAffinity::PlaceInitial(const JobRun& job, const ResourcePool& pool) {
  auto it = jobs_.find(job.id);
  if (it == jobs_.end()) return;
  const JobHoldings& jh = it->second;
  // Sub-models whose runs can start earliest first (they are needed
  // first). A sub-model's holders are laid out replica by replica: parts
  // 0..P-1 of one replica on consecutive devices, so on one node where the
  // pool's nodes allow, as tensor-parallel shards that all-reduce together
  // need (holders part by part put each replica's parts on P nodes, and
  // every such all-reduce on the fabric).
  std::vector<uint32_t> order;
  for (uint32_t sm = 0; sm < jh.first_slot.size(); ++sm) {
    if (jh.first_slot[sm] != kNoSlot) order.push_back(sm);
  }
  auto parts_of = [&](uint32_t sm) {
    return std::max(1u, jh.graph->spec().submodels[sm].state_shards);
  };
  auto first_start = [&](uint32_t sm) {
    double t = std::numeric_limits<double>::infinity();
    for (uint32_t p = 0; p < parts_of(sm); ++p) {
      t = std::min(t, jh.slots[jh.first_slot[sm] + p].first_start_us);
    }
    return t;
  };
  std::stable_sort(order.begin(), order.end(),
                   [&](uint32_t a, uint32_t b) { return first_start(a) < first_start(b); });
  std::vector<DeviceId> free;
  for (DeviceId d = 0; d < pool.device_count(); ++d) {
    if (pool.device(d).alive) free.push_back(d);
  }
  size_t next = 0;
  for (uint32_t sm : order) {
    const uint32_t first = jh.first_slot[sm], parts = parts_of(sm);
    uint32_t replicas = 0;
    for (uint32_t p = 0; p < parts; ++p) {
      const Holding& h = jh.slots[first + p];
      if (h.width > 0) replicas = std::max(replicas, std::min(h.width, h.worth));
    }
    for (uint32_t k = 0; k < replicas && next < free.size(); ++k) {
      for (uint32_t p = 0; p < parts && next < free.size(); ++p) {
        const Holding& h = jh.slots[first + p];
        if (h.width == 0 || k >= std::min(h.width, h.worth)) continue;
        const DeviceId d = free[next++];
        Hold(job.id, first + p, d, pool);
        intents_.push_back({d, job.id, sm, p});
      }
    }
  }
}

void StateAffinity::TakeIntents(std::vector<StateIntent>* out) {
  out->insert(out->end(), intents_.begin(), intents_.end());
  intents_.clear();
}

uint32_t StateAffinity::SlotOf(JobId job, uint32_t sm, uint32_t part) const {
  auto it = jobs_.find(job);
  if (it == jobs_.end() || sm >= it->second.first_slot.size() ||
      it->second.first_slot[sm] == kNoSlot ||
      part >= std::max(1u, it->second.graph->spec().submodels[sm].state_shards)) {
    return kNoSlot;
  }
  return it->second.first_slot[sm] + part;
}

std::vector<DeviceId> StateAffinity::Holders(JobId job, uint32_t sm, uint32_t part) const {
  const Holding* h = Find(job, SlotOf(job, sm, part));
  return h == nullptr ? std::vector<DeviceId>{} : h->holders;
}

uint32_t StateAffinity::Width(JobId job, uint32_t sm, uint32_t part) const {
  const Holding* h = Find(job, SlotOf(job, sm, part));
  return h == nullptr ? 0 : h->width;
}

}  // namespace hmpmd
