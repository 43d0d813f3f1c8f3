#include "hmpmd/scheduler/spmd_search_policy.h"

#include <algorithm>
#include <limits>
#include <map>

#include "hmpmd/scheduler/scheduler.h"
#include "hmpmd/scheduler/state_shards.h"

namespace hmpmd {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

int64_t ShardOf(const TaskSpec& t) {
  for (const auto& [k, v] : t.args) {
    if (k != "shard") continue;
    if (const auto* i = std::get_if<int64_t>(&v)) return *i;
    if (const auto* d = std::get_if<double>(&v)) {
      return *d >= 0 && *d < 2147483647.0 ? static_cast<int64_t>(*d) : -1;
    }
  }
  return -1;
}

// A sub-model's feasible device counts whose time strictly falls, from 1.
struct Frontier {
  std::vector<std::pair<uint32_t, double>> points;  // (n, SetStepUs)
};

Frontier FrontierOf(const SplitDemand& d, uint32_t devices, double memory_bytes) {
  Frontier f;
  int64_t max_shard = -1;
  for (const auto& [shard, us] : d.shard_us) max_shard = std::max(max_shard, shard);
  for (uint32_t n = std::max(1u, d.min_devices); n <= devices; ++n) {
    // Past one device per shard only the loose work still spreads.
    if (d.loose_us <= 0 && max_shard >= 0 && n > max_shard + 1 && !f.points.empty()) break;
    const double t = SetStepUs(d, n, memory_bytes);
    if (t < (f.points.empty() ? kInf : f.points.back().second)) f.points.push_back({n, t});
  }
  return f;
}

// The fewest devices of `f` whose time is at most `t` (index into points;
// -1: none).
int64_t PointFor(const Frontier& f, double t) {
  for (size_t k = 0; k < f.points.size(); ++k) {
    if (f.points[k].second <= t) return static_cast<int64_t>(k);
  }
  return -1;
}

}  // namespace

double SetStepUs(const SplitDemand& d, uint32_t n, double memory_bytes) {
  if (n == 0 || n < d.min_devices) return kInf;
  // (device, work) of the pinned shards, then per device.
  std::vector<std::pair<uint64_t, double>> on;
  on.reserve(d.shard_us.size());
  for (const auto& [shard, us] : d.shard_us) on.push_back({static_cast<uint64_t>(shard) % n, us});
  std::sort(on.begin(), on.end());
  double busiest = 0;
  for (size_t k = 0; k < on.size();) {
    double sum = 0;
    size_t e = k;
    for (; e < on.size() && on[e].first == on[k].first; ++e) sum += on[e].second;
    busiest = std::max(busiest, sum);
    k = e;
  }
  if (d.part_bytes > 0 && memory_bytes > 0 && !d.shard_part.empty()) {
    // The distinct parts of the shards each device runs.
    std::vector<std::pair<uint64_t, uint32_t>> parts;
    parts.reserve(d.shard_us.size());
    for (size_t k = 0; k < d.shard_us.size() && k < d.shard_part.size(); ++k) {
      parts.push_back({static_cast<uint64_t>(d.shard_us[k].first) % n, d.shard_part[k]});
    }
    std::sort(parts.begin(), parts.end());
    parts.erase(std::unique(parts.begin(), parts.end()), parts.end());
    for (size_t k = 0; k < parts.size();) {
      size_t e = k;
      while (e < parts.size() && parts[e].first == parts[k].first) ++e;
      if (static_cast<double>(e - k) * d.part_bytes > memory_bytes) return kInf;
      k = e;
    }
  }
  return busiest + d.loose_us / n;
}

std::vector<uint32_t> SearchSplit(const std::vector<SplitDemand>& demands, uint32_t devices,
                                  double memory_bytes) {
  const size_t s_count = demands.size();
  std::vector<Frontier> fronts(s_count);
  std::vector<double> values;
  for (size_t s = 0; s < s_count; ++s) {
    if (demands[s].outside) continue;
    fronts[s] = FrontierOf(demands[s], devices, memory_bytes);
    if (fronts[s].points.empty()) return {};  // no feasible count at all
    for (const auto& [n, t] : fronts[s].points) values.push_back(t);
  }
  if (values.empty()) return std::vector<uint32_t>(s_count, 0);
  std::sort(values.begin(), values.end());
  values.erase(std::unique(values.begin(), values.end()), values.end());
  auto need = [&](double t) {
    uint64_t sum = 0;
    for (size_t s = 0; s < s_count; ++s) {
      if (demands[s].outside) continue;
      const int64_t k = PointFor(fronts[s], t);
      if (k < 0) return std::numeric_limits<uint64_t>::max();
      sum += fronts[s].points[k].first;
    }
    return sum;
  };
  // Step 2: need() falls as t grows; the smallest t that fits.
  size_t lo = 0, hi = values.size();
  while (lo < hi) {
    const size_t mid = (lo + hi) / 2;
    if (need(values[mid]) <= devices) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  if (lo == values.size()) return {};
  std::vector<uint32_t> split(s_count, 0);
  std::vector<size_t> at(s_count, 0);
  uint64_t used = 0;
  for (size_t s = 0; s < s_count; ++s) {
    if (demands[s].outside) continue;
    at[s] = static_cast<size_t>(PointFor(fronts[s], values[lo]));
    split[s] = fronts[s].points[at[s]].first;
    used += split[s];
  }
  // Step 3: each round moves one sub-model one point on; there are fewer
  // rounds than frontier points.
  for (;;) {
    const uint64_t left = devices - used;
    int64_t pick = -1;
    for (size_t s = 0; s < s_count; ++s) {
      if (demands[s].outside || at[s] + 1 >= fronts[s].points.size()) continue;
      if (fronts[s].points[at[s] + 1].first - split[s] > left) continue;
      if (pick < 0 || fronts[s].points[at[s]].second > fronts[pick].points[at[pick]].second) {
        pick = static_cast<int64_t>(s);
      }
    }
    if (pick < 0) break;
    ++at[pick];
    used += fronts[pick].points[at[pick]].first - split[pick];
    split[pick] = fronts[pick].points[at[pick]].first;
  }
  return split;
}

std::vector<SplitDemand> SplitDemands(const JobRun& job, uint32_t devices) {
  const JobGraph& g = *job.graph;
  const auto& submodels = g.spec().submodels;
  std::vector<SplitDemand> demands(submodels.size());
  std::vector<std::map<int64_t, std::pair<double, uint32_t>>> shards(submodels.size());
  std::vector<bool> has_tasks(submodels.size(), false);
  for (uint32_t i = 0; i < g.size() && i < job.est_us.size(); ++i) {
    const uint32_t sm = g.task(i).submodel;
    has_tasks[sm] = true;
    const TaskSpec& t = g.spec_task(i);
    const int64_t shard = ShardOf(t);
    if (shard < 0) {
      demands[sm].loose_us += job.est_us[i];
      continue;
    }
    auto& entry = shards[sm][shard];
    entry.first += job.est_us[i];
    entry.second = StatePartOf(submodels[sm], t);
  }
  for (size_t s = 0; s < submodels.size(); ++s) {
    SplitDemand& d = demands[s];
    // A pinned set (elastic: false) keeps the size its spec asks.
    d.outside = submodels[s].devices >= devices || !has_tasks[s] || !submodels[s].elastic;
    d.part_bytes = s < job.state_device_bytes.size() ? job.state_device_bytes[s] : 0;
    for (const auto& [shard, work] : shards[s]) {
      d.shard_us.push_back({shard, work.first});
      if (d.part_bytes > 0) d.shard_part.push_back(work.second);
    }
  }
  for (const CollectiveGroup& grp : g.groups()) {
    std::map<uint32_t, uint32_t> per;
    for (uint32_t m : grp.members) {
      const uint32_t s = g.task(m).submodel;
      demands[s].min_devices = std::max(demands[s].min_devices, ++per[s]);
    }
  }
  return demands;
}

double ModelledStepUs(const std::vector<SplitDemand>& demands, const std::vector<uint32_t>& split,
                      double memory_bytes) {
  double worst = 0;
  for (size_t s = 0; s < demands.size(); ++s) {
    if (demands[s].outside) continue;
    const uint32_t n = s < split.size() ? std::max(split[s], demands[s].min_devices) : 0;
    worst = std::max(worst, SetStepUs(demands[s], n, memory_bytes));
  }
  return worst;
}

std::vector<uint32_t> SearchedSplit(const JobRun& job, const ResourcePool& pool,
                                    const std::vector<DeviceId>& alive,
                                    const std::vector<uint32_t>& planned) {
  uint64_t memory = UINT64_MAX;
  for (DeviceId d : alive) memory = std::min(memory, ResourcePool::StoreCap(pool.device(d).desc));
  const double cap = memory == UINT64_MAX ? 0 : static_cast<double>(memory);
  const auto n = static_cast<uint32_t>(alive.size());
  const std::vector<SplitDemand> demands = SplitDemands(job, n);
  // The devices of pinned sets are not the split's to give.
  const auto& submodels = job.graph->spec().submodels;
  uint64_t pinned = 0;
  for (size_t s = 0; s < submodels.size() && s < planned.size(); ++s) {
    if (!submodels[s].elastic && submodels[s].devices < n) pinned += planned[s];
  }
  if (pinned >= n) return {};
  std::vector<uint32_t> split = SearchSplit(demands, n - static_cast<uint32_t>(pinned), cap);
  if (split.empty() ||
      ModelledStepUs(demands, split, cap) >= ModelledStepUs(demands, planned, cap)) {
    return {};
  }
  return split;
}

}  // namespace hmpmd
