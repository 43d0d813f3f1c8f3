#include "hmpmd/scheduler/eplb_policy.h"

#include <algorithm>
#include <map>
#include <queue>
#include <set>
#include <tuple>
#include <utility>

#include "hmpmd/scheduler/scheduler.h"
#include "hmpmd/scheduler/state_shards.h"

namespace hmpmd {
namespace {

// The task's int arg `step`, 0 without one.
uint32_t StepOf(const TaskSpec& t) {
  for (const auto& [k, v] : t.args) {
    if (k != "step") continue;
    if (const auto* i = std::get_if<int64_t>(&v)) return *i > 0 ? static_cast<uint32_t>(*i) : 0;
    if (const auto* d = std::get_if<double>(&v)) {
      return *d > 0 && *d < 1e6 ? static_cast<uint32_t>(*d) : 0;
    }
  }
  return 0;
}

// The task's int arg `order` (its program-order slot), -1 without one.
int64_t OrderOf(const TaskSpec& t) {
  for (const auto& [k, v] : t.args) {
    if (k != "order") continue;
    if (const auto* i = std::get_if<int64_t>(&v)) return *i;
  }
  return -1;
}

// Steps balanced apart at most; later ones keep the last layout (a spec
// of a million steps costs no more than this many layouts).
constexpr int32_t kMaxSteps = 1024;

bool RunsOn(const JobRun& job, const ResourcePool& pool, uint32_t task, DeviceId d) {
  const auto& dev = pool.device(d);
  const CoreKind kind = job.graph->spec_task(task).core;
  return dev.alive && dev.desc.cores[static_cast<size_t>(kind)] > 0 &&
         pool.Supports(d, job.kernel_ids[task]);
}

// The work of the busiest of `devices` when each expert's `load` is split
// evenly over its replicas in `layout` (device indices per expert).
double BusiestDevice(const std::vector<double>& load,
                     const std::vector<std::vector<uint32_t>>& layout, uint32_t devices) {
  std::vector<double> on(devices, 0);
  for (size_t x = 0; x < layout.size() && x < load.size(); ++x) {
    for (uint32_t d : layout[x]) on[d] += load[x] / static_cast<double>(layout[x].size());
  }
  return on.empty() ? 0 : *std::max_element(on.begin(), on.end());
}

}  // namespace

uint32_t EplbSlots(uint64_t memory_mb, double other_bytes, double expert_bytes, uint32_t ask) {
  ask = std::max(1u, ask);
  if (memory_mb == 0 || expert_bytes <= 0) return ask;
  const double room = static_cast<double>(memory_mb) * (1 << 20) * 7 / 8 - other_bytes;
  const double fit = room > 0 ? room / expert_bytes : 0;
  return std::clamp(fit < ask ? static_cast<uint32_t>(fit) : ask, 1u, ask);
}

std::vector<uint32_t> EplbReplicaCounts(const std::vector<double>& load, uint32_t slots,
                                        uint32_t max_each) {
  const auto n = static_cast<uint32_t>(load.size());
  std::vector<uint32_t> count(n, max_each > 0 ? 1 : 0);
  if (n == 0 || max_each == 0 || slots <= n) return count;
  // Highest load per replica first; ties to the lower index.
  using Entry = std::pair<double, uint32_t>;
  auto worse = [](const Entry& a, const Entry& b) {
    return a.first < b.first || (a.first == b.first && a.second > b.second);
  };
  std::priority_queue<Entry, std::vector<Entry>, decltype(worse)> heap(worse);
  for (uint32_t e = 0; e < n; ++e) {
    if (max_each > 1) heap.push({std::max(0.0, load[e]), e});
  }
  for (uint32_t left = slots - n; left > 0 && !heap.empty(); --left) {
    const uint32_t e = heap.top().second;
    heap.pop();
    if (++count[e] < max_each) heap.push({std::max(0.0, load[e]) / count[e], e});
  }
  return count;
}

std::vector<std::vector<uint32_t>> EplbPack(const std::vector<double>& load,
                                            const std::vector<uint32_t>& counts, uint32_t devices,
                                            uint32_t slots_per_device,
                                            const std::vector<std::vector<uint32_t>>& previous) {
  const size_t n = counts.size();
  std::vector<std::vector<uint32_t>> out(n);
  std::vector<uint32_t> free(devices, slots_per_device);
  std::vector<double> dev_load(devices, 0);
  std::vector<std::vector<uint32_t>> holds(devices);
  auto per_replica = [&](size_t e) {
    return counts[e] > 0 && e < load.size() ? std::max(0.0, load[e]) / counts[e] : 0.0;
  };
  auto holding = [&](uint32_t d, uint32_t e) {
    return std::find(holds[d].begin(), holds[d].end(), e) != holds[d].end();
  };
  auto put = [&](uint32_t e, uint32_t d) {
    out[e].push_back(d);
    holds[d].push_back(e);
    --free[d];
    dev_load[d] += per_replica(e);
  };
  // Replicas stay where their expert was, as far as its count allows.
  for (uint32_t e = 0; e < n; ++e) {
    if (e >= previous.size()) break;
    for (uint32_t d : previous[e]) {
      if (out[e].size() >= counts[e]) break;
      if (d < devices && free[d] > 0 && !holding(d, e)) put(e, d);
    }
  }
  // The rest heaviest first, each to the least loaded device with room.
  std::vector<uint32_t> rest;
  for (uint32_t e = 0; e < n; ++e) {
    for (size_t k = out[e].size(); k < counts[e]; ++k) rest.push_back(e);
  }
  std::stable_sort(rest.begin(), rest.end(),
                   [&](uint32_t a, uint32_t b) { return per_replica(a) > per_replica(b); });
  std::set<std::pair<double, uint32_t>> open;  // (load, device) with a free slot
  for (uint32_t d = 0; d < devices; ++d) {
    if (free[d] > 0) open.insert({dev_load[d], d});
  }
  for (uint32_t e : rest) {
    auto it = open.begin();
    while (it != open.end() && holding(it->second, e)) ++it;
    if (it == open.end()) continue;  // no device without e has room
    const uint32_t d = it->second;
    open.erase(it);
    put(e, d);
    if (free[d] > 0) open.insert({dev_load[d], d});
  }
  return out;
}

SpmdPolicy::JobPlan EplbPolicy::Layout(const JobRun& job, const ResourcePool& pool) {
  JobPlan plan = MakeSpmdPlan(job, pool, SpmdOptions{Name()});
  JobSteps& js = jobs_[job.id] = JobSteps{};
  if (!plan.error.empty()) {
    plan.error = "spmd-eplb: " + plan.error;  // its plan is spmd-1f1b's
    return plan;
  }
  const JobGraph& g = *job.graph;
  const auto& submodels = g.spec().submodels;
  // Rule 2: the experts, their tasks' steps, and the expert-parallel group.
  js.expert.assign(submodels.size(), false);
  std::vector<uint32_t> experts;  // sub-model indices
  std::vector<int32_t> slot_of(submodels.size(), -1);
  for (uint32_t sm = 0; sm < submodels.size(); ++sm) {
    if (submodels[sm].kind != SubmodelKind::kExpert || sm >= job.state_device_bytes.size() ||
        job.state_device_bytes[sm] <= 0) {
      continue;
    }
    js.expert[sm] = true;
    slot_of[sm] = static_cast<int32_t>(experts.size());
    experts.push_back(sm);
  }
  // Steps in the order of their `step` values (gaps closed; the
  // kMaxSteps-th and later share one layout), and each step's tasks.
  std::map<uint32_t, int32_t> step_index;
  for (uint32_t i = 0; i < g.size(); ++i) {
    if (js.expert[g.task(i).submodel] && NeedsStatePart(g.task(i)) && plan.device[i] >= 0) {
      step_index.emplace(StepOf(g.spec_task(i)), 0);
    }
  }
  int32_t next_index = 0;
  for (auto& [value, index] : step_index) {
    index = std::min(next_index++, kMaxSteps - 1);
  }
  const auto steps = static_cast<uint32_t>(std::min<size_t>(step_index.size(), kMaxSteps));
  js.step.assign(g.size(), -1);
  std::vector<std::vector<uint32_t>> tasks_of(steps);
  for (uint32_t i = 0; i < g.size(); ++i) {
    if (js.expert[g.task(i).submodel] && NeedsStatePart(g.task(i)) && plan.device[i] >= 0) {
      js.step[i] = step_index[StepOf(g.spec_task(i))];
      tasks_of[js.step[i]].push_back(i);
    }
  }
  std::set<DeviceId> group_set;
  for (uint32_t sm : experts) group_set.insert(plan.sets[sm].begin(), plan.sets[sm].end());
  const std::vector<DeviceId> group(group_set.begin(), group_set.end());
  const auto dcount = static_cast<uint32_t>(group.size());
  if (experts.empty() || steps == 0 || dcount == 0) return plan;
  // Rule 5: slots per device from memory, beside the other stateful parts.
  double expert_bytes = 0;
  for (uint32_t sm : experts) expert_bytes = std::max(expert_bytes, job.state_device_bytes[sm]);
  uint32_t slots = std::max(1u, options_.slots_per_device);
  uint32_t capacity = 64;  // replicas a device keeps resident, at most
  for (DeviceId d : group) {
    double other = 0;
    for (uint32_t sm = 0; sm < submodels.size() && sm < job.state_device_bytes.size(); ++sm) {
      const auto& set = plan.sets[sm];
      if (!js.expert[sm] && std::find(set.begin(), set.end(), d) != set.end()) {
        other += job.state_device_bytes[sm];
      }
    }
    slots = std::min(slots, EplbSlots(pool.device(d).desc.memory_mb, other, expert_bytes, slots));
    capacity =
        std::min(capacity, EplbSlots(pool.device(d).desc.memory_mb, other, expert_bytes, 64));
  }
  js.slots = slots;
  if (uint64_t{dcount} * slots < experts.size()) return plan;  // no slot for each: spmd's plan
  // The "step before" step 0: spmd-1f1b's sets, as group indices.
  std::vector<std::vector<uint32_t>> current(experts.size());
  for (size_t x = 0; x < experts.size(); ++x) {
    for (DeviceId d : plan.sets[experts[x]]) {
      current[x].push_back(
          static_cast<uint32_t>(std::lower_bound(group.begin(), group.end(), d) - group.begin()));
    }
  }
  // Replicas the devices hold, most recent first, as many as memory keeps
  // (the simulator evicts the least recently used).
  std::vector<std::vector<uint32_t>> resident(dcount);
  auto holds = [&](uint32_t d, uint32_t x) {
    return std::find(resident[d].begin(), resident[d].end(), x) != resident[d].end();
  };
  // Rule 3 per step, rule 4 per task.
  std::vector<double> load(experts.size(), 1.0);  // step 0: uniform
  js.layouts.assign(steps, std::vector<std::vector<DeviceId>>(submodels.size()));
  js.left.assign(steps, 0);
  js.held.assign(steps, {});
  for (uint32_t s = 0; s < steps; ++s) {
    // Step s - 1's routing: per expert, and per program-order slot (a
    // layer's chunk, which every device finishes before the next).
    std::map<int64_t, std::vector<double>> by_slot;
    if (s > 0) {
      std::fill(load.begin(), load.end(), 0.0);
      for (uint32_t i : tasks_of[s - 1]) {
        const int32_t x = slot_of[g.task(i).submodel];
        load[x] += job.est_us[i];
        auto& w = by_slot[OrderOf(g.spec_task(i))];
        w.resize(experts.size(), 0.0);
        w[x] += job.est_us[i];
      }
    }
    auto step_us = [&](const std::vector<std::vector<uint32_t>>& layout) {
      double us = 0;
      for (const auto& [order, w] : by_slot) us += BusiestDevice(w, layout, dcount);
      return us;
    };
    // Replicas stay where they are, else go where they are resident.
    std::vector<std::vector<uint32_t>> prefer = current;
    for (uint32_t d = 0; d < dcount; ++d) {
      for (uint32_t x : resident[d]) {
        if (std::find(prefer[x].begin(), prefer[x].end(), d) == prefer[x].end()) {
          prefer[x].push_back(d);
        }
      }
    }
    const std::vector<uint32_t> counts = EplbReplicaCounts(load, dcount * slots, dcount);
    auto packed = EplbPack(load, counts, dcount, slots, prefer);
    // From step 1, the new layout only when, on step s - 1's routing, the
    // time it takes off the busiest device of each slot exceeds the loads
    // it needs first.
    if (s > 0) {
      std::vector<double> new_loads(dcount, 0);
      for (size_t x = 0; x < experts.size(); ++x) {
        for (uint32_t d : packed[x]) {
          if (!holds(d, static_cast<uint32_t>(x))) new_loads[d] += job.state_load_us[experts[x]];
        }
      }
      const double cost = *std::max_element(new_loads.begin(), new_loads.end());
      if (step_us(current) - step_us(packed) <= cost) {
        packed = current;
      }
    }
    current = packed;
    for (size_t x = 0; x < experts.size(); ++x) {
      for (uint32_t d : packed[x]) {
        auto& r = resident[d];
        r.erase(std::remove(r.begin(), r.end(), static_cast<uint32_t>(x)), r.end());
        r.insert(r.begin(), static_cast<uint32_t>(x));
        if (r.size() > capacity) r.pop_back();
      }
    }
    std::set<std::pair<DeviceId, uint32_t>> intended;  // (device, sub-model)
    std::vector<uint32_t> turn(experts.size(), 0);
    for (uint32_t i : tasks_of[s]) {
      const uint32_t sm = g.task(i).submodel;
      const auto& replicas = packed[slot_of[sm]];
      ++js.left[s];
      if (replicas.empty()) continue;  // dropped: spmd-1f1b's pin
      const DeviceId d = group[replicas[turn[slot_of[sm]]++ % replicas.size()]];
      if (RunsOn(job, pool, i, d)) plan.device[i] = d;
      const auto dev = static_cast<DeviceId>(plan.device[i]);
      if (intended.insert({dev, sm}).second) {
        const uint32_t part = StatePartOf(submodels[sm], g.spec_task(i));
        js.held[s].push_back({dev, job.id, sm, part});
      }
    }
    for (size_t x = 0; x < experts.size(); ++x) {
      for (uint32_t r : packed[x]) js.layouts[s][experts[x]].push_back(group[r]);
    }
  }
  SpmdLanes(job, &plan, SpmdOptions{Name()});
  if (!plan.error.empty()) {
    // Its program orders cannot be followed with the experts moved (a
    // spec whose orders only work on spmd-1f1b's sets): that plan, as is.
    jobs_[job.id] = JobSteps{};
    return MakeSpmdPlan(job, pool, SpmdOptions{Name()});
  }
  // Rule 6: step 0's replicas load with the plan.
  released_.insert(released_.end(), js.held[0].begin(), js.held[0].end());
  js.held[0].clear();
  return plan;
}

void EplbPolicy::OnPlaced(const TaskView& task, CoreId core) {
  SpmdPolicy::OnPlaced(task, core);
  auto it = jobs_.find(task.job);
  if (it == jobs_.end() || task.index >= it->second.step.size()) return;
  JobSteps& js = it->second;
  const int32_t s = js.step[task.index];
  if (s < 0 || js.left[s] == 0 || --js.left[s] > 0) return;
  // Step s's routing has run: the next step's replicas may load.
  const auto next = static_cast<size_t>(s) + 1;
  if (next >= js.held.size()) return;
  released_.insert(released_.end(), js.held[next].begin(), js.held[next].end());
  js.held[next].clear();
}

void EplbPolicy::TakeStateIntents(std::vector<StateIntent>* out) {
  // spmd-1f1b's intents but the experts' (the plan's, every step at once).
  std::vector<StateIntent> base;
  SpmdPolicy::TakeStateIntents(&base);
  for (const StateIntent& i : base) {
    auto it = jobs_.find(i.job);
    const bool expert = it != jobs_.end() && i.submodel < it->second.expert.size() &&
                        it->second.expert[i.submodel] && !it->second.layouts.empty();
    if (!expert) out->push_back(i);
  }
  out->insert(out->end(), released_.begin(), released_.end());
  released_.clear();
}

void EplbPolicy::OnJobRemoved(JobId job) {
  SpmdPolicy::OnJobRemoved(job);
  jobs_.erase(job);
}

const std::vector<std::vector<std::vector<DeviceId>>>& EplbPolicy::Layouts(JobId job) const {
  static const std::vector<std::vector<std::vector<DeviceId>>> kNone;
  auto it = jobs_.find(job);
  return it == jobs_.end() ? kNone : it->second.layouts;
}

uint32_t EplbPolicy::SlotsPerDevice(JobId job) const {
  auto it = jobs_.find(job);
  return it == jobs_.end() ? 0 : it->second.slots;
}

}  // namespace hmpmd
