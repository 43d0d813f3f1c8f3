// SpmdPolicy's plan of a job at admission (rules 1-3 of spmd_policy.h):
// device sets, each pinned task's device, program-order lanes, and the
// checks that the plan can run at all.
#include <algorithm>
#include <cmath>
#include <map>
#include <string>

#include "hmpmd/scheduler/scheduler.h"
#include "hmpmd/scheduler/spmd_policy.h"

namespace hmpmd {
namespace {

int64_t IntArg(const TaskSpec& t, std::string_view name) {
  for (const auto& [k, v] : t.args) {
    if (k != name) continue;
    if (const auto* i = std::get_if<int64_t>(&v)) return *i;
    if (const auto* d = std::get_if<double>(&v)) {
      // Out of range or not a number: no such arg (a slot must be small).
      return *d >= 0 && *d < 2147483647.0 ? static_cast<int64_t>(*d) : -1;
    }
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

// The kind of core `task` runs on on device `d` under rule 4.
CoreKind KindOn(const ResourcePool& pool, DeviceId d, const GraphTask& task, CoreKind own) {
  if (task.is_comm && pool.device(d).desc.cores[0] > 0) return CoreKind::kCube;
  return own;
}

bool HasKind(const ResourcePool& pool, DeviceId d, CoreKind kind) {
  const auto& cores = pool.device(d).cores;
  return std::any_of(cores.begin(), cores.end(),
                     [&](CoreId c) { return pool.core(c).kind == kind; });
}

// Why device `d` cannot run task `i` (empty: it can).
std::string CannotRun(const JobRun& job, const ResourcePool& pool, uint32_t i, DeviceId d) {
  const JobGraph& g = *job.graph;
  const TaskSpec& t = g.spec_task(i);
  if (!pool.device(d).alive) return "device " + std::to_string(d) + " is down";
  CoreKind kind = KindOn(pool, d, g.task(i), t.core);
  if (!HasKind(pool, d, kind)) {
    return "device " + std::to_string(d) + " has no '" + std::string(CoreKindName(kind)) + "' core";
  }
  if (!pool.Supports(d, job.kernel_ids[i])) {
    const Labels& required = pool.RequiredLabels(job.kernel_ids[i]);
    if (!HasLabels(pool.device(d).desc.labels, required)) {
      return "device " + std::to_string(d) + " lacks a label of " + LabelsText(required);
    }
    return "device " + std::to_string(d) + " does not run '" + t.kernel + "'";
  }
  return {};
}

// Assigns lanes: per pinned task with a slot, its (device[, submodel]) lane.
void BuildLanes(const JobGraph& g, bool split, SpmdPolicy::JobPlan* plan) {
  plan->split = split;
  plan->lanes.clear();
  plan->lane.assign(g.size(), -1);
  std::map<std::pair<int64_t, int64_t>, int32_t> index;
  for (uint32_t i = 0; i < g.size(); ++i) {
    const int32_t slot = plan->slot[i];
    if (slot < 0) continue;
    const std::pair<int64_t, int64_t> key{plan->device[i], split ? g.task(i).submodel : -1};
    auto [it, fresh] = index.try_emplace(key, static_cast<int32_t>(plan->lanes.size()));
    if (fresh) plan->lanes.emplace_back();
    SpmdPolicy::Lane& lane = plan->lanes[it->second];
    plan->lane[i] = it->second;
    if (lane.total.size() <= static_cast<size_t>(slot)) {
      lane.total.resize(slot + 1, 0);
      lane.placed.resize(slot + 1, 0);
    }
    ++lane.total[slot];
  }
  // Slots with no task on a lane are skipped from the start.
  for (SpmdPolicy::Lane& lane : plan->lanes) {
    while (lane.next < static_cast<int32_t>(lane.total.size()) && lane.total[lane.next] == 0) {
      ++lane.next;
    }
  }
}

// A task that can never start under the plan's lanes (-1: none): the graph
// of "starts no later than" (inputs, lane slot k before k+1, a gang's
// members together) has a cycle through it.
int64_t Deadlocked(const JobGraph& g, const SpmdPolicy::JobPlan& plan) {
  const uint32_t n = g.size();
  // Node per task (a gang's members share its first member's node), then
  // one barrier node between consecutive non-empty slots of each lane.
  std::vector<uint32_t> node(n);
  for (uint32_t i = 0; i < n; ++i) {
    const uint32_t grp = g.task(i).group;
    node[i] = grp == kNoGroup ? i : g.groups()[grp].members.front();
  }
  std::vector<std::vector<uint32_t>> out(n);
  for (uint32_t i = 0; i < n; ++i) {
    for (uint32_t p : g.task(i).inputs) out[node[p]].push_back(node[i]);
  }
  // Per lane, tasks by slot.
  std::vector<std::map<int32_t, std::vector<uint32_t>>> by_slot(plan.lanes.size());
  for (uint32_t i = 0; i < n; ++i) {
    if (plan.lane[i] >= 0) by_slot[plan.lane[i]][plan.slot[i]].push_back(node[i]);
  }
  for (const auto& slots : by_slot) {
    const std::vector<uint32_t>* prev = nullptr;
    for (const auto& [slot, tasks] : slots) {
      if (prev != nullptr) {
        const uint32_t barrier = static_cast<uint32_t>(out.size());
        out.emplace_back(tasks);
        for (uint32_t t : *prev) out[t].push_back(barrier);
      }
      prev = &tasks;
    }
  }
  std::vector<uint32_t> indegree(out.size(), 0);
  for (const auto& edges : out) {
    for (uint32_t v : edges) ++indegree[v];
  }
  std::vector<uint32_t> queue;
  for (uint32_t v = 0; v < out.size(); ++v) {
    if (indegree[v] == 0) queue.push_back(v);
  }
  for (size_t head = 0; head < queue.size(); ++head) {
    for (uint32_t v : out[queue[head]]) {
      if (--indegree[v] == 0) queue.push_back(v);
    }
  }
  for (uint32_t i = 0; i < n; ++i) {
    if (indegree[node[i]] > 0) return i;
  }
  return -1;
}

}  // namespace

SpmdPolicy::JobPlan MakeSpmdPlan(const JobRun& job, const ResourcePool& pool,
                                 const SpmdOptions& options) {
  const JobGraph& g = *job.graph;
  const std::string name(options.name);
  const auto& submodels = g.spec().submodels;
  SpmdPolicy::JobPlan plan;
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
  if (options.split != nullptr && n > 0) {
    const std::vector<uint32_t> split = options.split(job, pool, alive, size);
    for (size_t s = 0; s < submodels.size() && s < split.size(); ++s) {
      if (split[s] > 0) size[s] = std::min(split[s], n);
    }
  }
  // A submodel with tasks gets a device even when they cost nothing, and a
  // set holds its largest gang (the members it has).
  for (uint32_t i = 0; i < g.size(); ++i) {
    uint32_t& sz = size[g.task(i).submodel];
    sz = std::max(sz, std::min(1u, n));
  }
  for (const CollectiveGroup& grp : g.groups()) {
    std::vector<uint32_t> per(submodels.size(), 0);
    for (uint32_t m : grp.members) {
      const uint32_t s = g.task(m).submodel;
      size[s] = std::max(size[s], std::min(++per[s], n));
    }
  }
  // Sets in turn from a cursor over the live devices, first those that run
  // every kernel of the sub-model's tasks with the labels they require,
  // then the others: a sub-model that requires a label (or a kernel few
  // workers have) is laid out where it can run.
  std::vector<std::vector<uint32_t>> kernels_of(submodels.size());
  for (uint32_t i = 0; i < g.size(); ++i) {
    std::vector<uint32_t>& ids = kernels_of[g.task(i).submodel];
    if (std::find(ids.begin(), ids.end(), job.kernel_ids[i]) == ids.end()) {
      ids.push_back(job.kernel_ids[i]);
    }
  }
  plan.sets.resize(submodels.size());
  uint32_t cursor = 0;
  for (size_t s = 0; s < submodels.size() && n > 0; ++s) {
    auto runs_all = [&](DeviceId d) {
      return std::all_of(kernels_of[s].begin(), kernels_of[s].end(),
                         [&](uint32_t k) { return pool.Supports(d, k); });
    };
    std::vector<DeviceId>& set = plan.sets[s];
    for (const bool first : {true, false}) {
      for (uint32_t k = 0; k < n && set.size() < size[s]; ++k) {
        const DeviceId d = alive[(cursor + k) % n];
        if (runs_all(d) == first) set.push_back(d);
      }
    }
    cursor = (cursor + size[s]) % n;
  }
  // Pinned devices: set[shard % size]. A pipeline stage's micro-batch pass
  // without a shard is pinned too when its set has one device (it can run
  // nowhere else): it then gets its 1F1B slot below, which it missed.
  plan.device.assign(g.size(), -1);
  for (uint32_t i = 0; i < g.size(); ++i) {
    const TaskSpec& t = g.spec_task(i);
    const auto& set = plan.sets[g.task(i).submodel];
    const int64_t shard = IntArg(t, "shard");
    if (shard >= 0 && !set.empty()) {
      plan.device[i] = set[shard % set.size()];
    } else if (set.size() == 1 &&
               submodels[g.task(i).submodel].kind == SubmodelKind::kPipelineStage &&
               IntArg(t, "mb") >= 0 && !StrArg(t, "pass").empty()) {
      plan.device[i] = set[0];
    }
  }
  // A gang's members on distinct, fixed devices (the ranks of an SPMD
  // collective): those with a shard first, then the others, each on the
  // next device of its set no earlier member holds, else of the pool.
  for (const CollectiveGroup& grp : g.groups()) {
    std::vector<int64_t> taken;
    auto is_taken = [&](int64_t d) {
      return std::find(taken.begin(), taken.end(), d) != taken.end();
    };
    std::vector<uint32_t> members;
    for (uint32_t m : grp.members) {
      if (plan.device[m] >= 0) members.push_back(m);
    }
    for (uint32_t m : grp.members) {
      if (plan.device[m] < 0) members.push_back(m);
    }
    for (uint32_t m : members) {
      const auto& set = plan.sets[g.task(m).submodel];
      if (plan.device[m] < 0 && !set.empty()) plan.device[m] = set.back();  // then set[0], ...
      if (plan.device[m] < 0 || is_taken(plan.device[m]) ||
          !CannotRun(job, pool, m, static_cast<DeviceId>(plan.device[m])).empty()) {
        const auto at = std::find(set.begin(), set.end(), plan.device[m]) - set.begin();
        int64_t pick = -1;
        for (size_t k = 1; k <= set.size() && pick < 0; ++k) {
          const DeviceId d = set[(at + k) % set.size()];
          if (!is_taken(d) && CannotRun(job, pool, m, d).empty()) pick = d;
        }
        for (size_t k = 0; k < n && pick < 0; ++k) {
          if (!is_taken(alive[k]) && CannotRun(job, pool, m, alive[k]).empty()) pick = alive[k];
        }
        if (pick < 0) {
          plan.error = name + " cannot run this job: " + g.Describe(m) + ": collective group '" +
                       grp.name + "' has " + std::to_string(grp.members.size()) +
                       " members and no distinct device left for this one";
          return plan;
        }
        plan.device[m] = pick;
      }
      taken.push_back(plan.device[m]);
    }
  }
  // Every task has a device it can run on.
  for (uint32_t i = 0; i < g.size(); ++i) {
    const std::string& sm = submodels[g.task(i).submodel].name;
    if (plan.device[i] >= 0) {
      std::string why = CannotRun(job, pool, i, static_cast<DeviceId>(plan.device[i]));
      if (!why.empty()) {
        plan.error = name + " cannot run this job: " + g.Describe(i) + " (sub-model '" + sm +
                     "') is pinned to " + why;
        return plan;
      }
      continue;
    }
    const auto& set = plan.sets[g.task(i).submodel];
    if (set.empty()) {
      plan.error = name + ": sub-model '" + sm + "' has no devices (the pool has none up)";
      return plan;
    }
    bool any = false;
    std::string why;
    for (DeviceId d : set) {  // the first device that runs it will do
      std::string w = CannotRun(job, pool, i, d);
      any = w.empty();
      if (any) break;
      if (why.empty()) why = w;
    }
    if (!any) {
      plan.error = name + " cannot run this job: " + g.Describe(i) + ": no device of sub-model '" +
                   sm + "'s set can run it (" + why + ")";
      return plan;
    }
  }
  SpmdLanes(job, &plan, options);
  return plan;
}

void SpmdLanes(const JobRun& job, SpmdPolicy::JobPlan* out, const SpmdOptions& options) {
  const JobGraph& g = *job.graph;
  const auto& submodels = g.spec().submodels;
  SpmdPolicy::JobPlan& plan = *out;
  // 1F1B slots of pipeline stages; program order of other pinned tasks.
  std::vector<int32_t> stage_of(submodels.size(), -1);
  uint32_t stages = 0;
  for (size_t s = 0; s < submodels.size(); ++s) {
    if (submodels[s].kind == SubmodelKind::kPipelineStage)
      stage_of[s] = static_cast<int32_t>(stages++);
  }
  // Micro-batches in order of (`step`, `mb`), numbered densely (an `mb`
  // may be up to 2^28; the orders are as long as the micro-batches there
  // are). Training steps run one after another, each its own pipeline
  // schedule over its micro-batches: the flush before the optimizer step.
  std::map<std::pair<int64_t, int64_t>, uint32_t> mb_index;
  auto step_of = [&](uint32_t i) { return std::max<int64_t>(0, IntArg(g.spec_task(i), "step")); };
  for (uint32_t i = 0; i < g.size(); ++i) {
    const int64_t mb = IntArg(g.spec_task(i), "mb");
    if (stage_of[g.task(i).submodel] >= 0 && mb >= 0)
      mb_index.emplace(std::pair{step_of(i), mb}, 0);
  }
  const auto micro_batches = static_cast<uint32_t>(mb_index.size());
  uint32_t next_mb = 0;
  for (auto& [mb, index] : mb_index) index = next_mb++;
  // Per stage: the slot of (micro-batch, pass) at [3 * index + pass].
  std::vector<std::vector<int32_t>> pass_slot(stages);
  for (uint32_t st = 0; st < stages && micro_batches > 0; ++st) {
    pass_slot[st].assign(size_t{3} * micro_batches, -1);
    int32_t base = 0;
    for (auto it = mb_index.begin(); it != mb_index.end();) {
      const int64_t step = it->first.first;
      const uint32_t first = it->second;
      uint32_t count = 0;
      for (; it != mb_index.end() && it->first.first == step; ++it) ++count;
      const std::vector<PipeOp> seq = options.order(st, stages, count);
      for (size_t k = 0; k < seq.size(); ++k) {
        pass_slot[st][size_t{3} * (first + seq[k].mb) + static_cast<size_t>(seq[k].pass)] =
            base + static_cast<int32_t>(k);
      }
      base += static_cast<int32_t>(seq.size());
    }
  }
  plan.slot.assign(g.size(), -1);
  for (uint32_t i = 0; i < g.size(); ++i) {
    const TaskSpec& t = g.spec_task(i);
    const uint32_t sm = g.task(i).submodel;
    if (plan.device[i] < 0) continue;  // a lane needs a fixed device
    const int64_t mb = IntArg(t, "mb"), order = IntArg(t, "order");
    const std::string pass = StrArg(t, "pass");
    const int pass_index = pass == "f" ? 0 : pass == "b" ? 1 : pass == "w" ? 2 : -1;
    if (stage_of[sm] >= 0 && mb >= 0 && pass_index >= 0) {
      plan.slot[i] = pass_slot[stage_of[sm]][size_t{3} * mb_index[{step_of(i), mb}] + pass_index];
    } else if (order >= 0 && order < (int64_t{1} << 24)) {
      plan.slot[i] = static_cast<int32_t>(order);
    }
  }
  // One program per device; a lane per (device, submodel) when the shared
  // one cannot be followed; else the spec's orders are at fault.
  BuildLanes(g, false, &plan);
  if (Deadlocked(g, plan) < 0) return;
  BuildLanes(g, true, &plan);
  const int64_t stuck = Deadlocked(g, plan);
  if (stuck >= 0) {
    const auto i = static_cast<uint32_t>(stuck);
    plan.error = std::string(options.name) + " cannot run this job: " + g.Describe(i) +
                 " (sub-model '" + submodels[g.task(i).submodel].name + "', device " +
                 std::to_string(plan.device[i]) +
                 "): its program order (args order, or mb and pass) contradicts its inputs or "
                 "collective groups, so it could never start";
  }
}

}  // namespace hmpmd
