#include "hmpmd/sim/schedule_metrics.h"

#include <algorithm>
#include <limits>
#include <unordered_map>
#include <utility>

namespace hmpmd {
namespace {

using Interval = std::pair<TimeUs, TimeUs>;

// Sorts and merges overlapping intervals in place.
void MergeIntervals(std::vector<Interval>* v) {
  std::sort(v->begin(), v->end());
  size_t w = 0;
  for (size_t r = 0; r < v->size(); ++r) {
    if (w > 0 && (*v)[r].first <= (*v)[w - 1].second) {
      (*v)[w - 1].second = std::max((*v)[w - 1].second, (*v)[r].second);
    } else {
      (*v)[w++] = (*v)[r];
    }
  }
  v->resize(w);
}

TimeUs Length(const std::vector<Interval>& merged) {
  TimeUs sum = 0;
  for (const auto& [a, b] : merged) sum += b - a;
  return sum;
}

// Length of [a, b) covered by the merged, sorted intervals.
TimeUs Covered(const std::vector<Interval>& merged, TimeUs a, TimeUs b) {
  auto it = std::upper_bound(merged.begin(), merged.end(),
                             Interval{a, std::numeric_limits<TimeUs>::max()});
  if (it != merged.begin()) --it;
  TimeUs sum = 0;
  for (; it != merged.end() && it->first < b; ++it) {
    TimeUs lo = std::max(a, it->first), hi = std::min(b, it->second);
    if (hi > lo) sum += hi - lo;
  }
  return sum;
}

// The energetic head/tail bound of one step (see tight_bound_s): `dur`,
// `kind` per task of the step (dur 0: not run). Thresholds are up to
// kLevels quantiles of the heads and of the tails (any threshold gives a
// valid bound), so the cost is O(tasks + kLevels^2) per core kind.
double EnergeticBound(const JobGraph& g, const std::vector<double>& dur,
                      const std::vector<CoreKind>& kind,
                      const std::array<uint32_t, kNumCoreKinds>& cores) {
  constexpr size_t kLevels = 64;
  const uint32_t n = g.size();
  std::vector<double> head(n, 0), tail(n, 0);
  for (uint32_t i : g.topo_order()) {
    for (uint32_t in : g.task(i).inputs) head[i] = std::max(head[i], head[in] + dur[in]);
  }
  const auto& topo = g.topo_order();
  for (auto it = topo.rbegin(); it != topo.rend(); ++it) {
    for (uint32_t c : g.task(*it).consumers) tail[*it] = std::max(tail[*it], dur[c] + tail[c]);
  }
  auto levels = [&](const std::vector<double>& v) {
    std::vector<double> sorted = v;
    std::sort(sorted.begin(), sorted.end());
    sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
    std::vector<double> out;
    for (size_t l = 0; l < kLevels && !sorted.empty(); ++l) {
      double x = sorted[l * (sorted.size() - 1) / std::max<size_t>(1, kLevels - 1)];
      if (out.empty() || x > out.back()) out.push_back(x);
    }
    if (out.empty() || out.front() > 0) out.insert(out.begin(), 0.0);
    return out;
  };
  const std::vector<double> hs = levels(head), ts = levels(tail);
  // Level of x: the largest threshold <= x.
  auto level = [](const std::vector<double>& th, double x) {
    return static_cast<size_t>(std::upper_bound(th.begin(), th.end(), x) - th.begin()) - 1;
  };
  double best = 0;
  for (int k = 0; k < kNumCoreKinds; ++k) {
    if (cores[k] == 0) continue;
    // work[a][b]: the kind's work of runs at head level a and tail level b,
    // then summed over levels >= (a, b).
    std::vector<double> work(hs.size() * ts.size(), 0);
    for (uint32_t i = 0; i < n; ++i) {
      if (dur[i] <= 0 || static_cast<int>(kind[i]) != k) continue;
      work[level(hs, head[i]) * ts.size() + level(ts, tail[i])] += dur[i];
    }
    for (size_t a = hs.size(); a-- > 0;) {
      for (size_t b = ts.size(); b-- > 0;) {
        double& w = work[a * ts.size() + b];
        if (a + 1 < hs.size()) w += work[(a + 1) * ts.size() + b];
        if (b + 1 < ts.size()) w += work[a * ts.size() + b + 1];
        if (a + 1 < hs.size() && b + 1 < ts.size()) w -= work[(a + 1) * ts.size() + b + 1];
        if (w > 0) best = std::max(best, hs[a] + ts[b] + w / cores[k]);
      }
    }
  }
  return best;
}

}  // namespace

void StepSoFar(JobRun* job, TimeUs now) {
  const uint64_t size = job->graph->size();
  const uint64_t first = job->step * size, last = first + size;
  // Per core: the step's latest done end, and the run executing there.
  std::unordered_map<CoreId, std::pair<TimeUs, int64_t>> cores;
  for (uint64_t i = 0; i < job->runs.size(); ++i) {
    TaskRecord& rec = job->runs[i];
    const bool in_step = i >= first && i < last && rec.core != kNoCore;
    if (!in_step || (rec.state != TaskState::kDone && rec.state != TaskState::kRunning)) {
      rec.state = TaskState::kBlocked;
      continue;
    }
    auto& [done_end, executing] = cores.try_emplace(rec.core, TimeUs{0}, int64_t{-1}).first->second;
    if (rec.state == TaskState::kDone) {
      done_end = std::max(done_end, rec.end);
    } else if (executing < 0 || rec.dispatched < job->runs[executing].dispatched) {
      executing = static_cast<int64_t>(i);
    }
  }
  for (uint64_t i = first; i < last && i < job->runs.size(); ++i) {
    TaskRecord& rec = job->runs[i];
    if (rec.state != TaskState::kRunning) continue;
    const auto& [done_end, executing] = cores.at(rec.core);
    rec.start = std::max(rec.dispatched, done_end);
    rec.end = now;
    const bool counted = executing == static_cast<int64_t>(i) && rec.start < now;
    rec.state = counted ? TaskState::kDone : TaskState::kBlocked;
  }
}

double MakespanS(const JobRun& job) {
  TimeUs first = std::numeric_limits<TimeUs>::max(), last = std::numeric_limits<TimeUs>::min();
  for (const TaskRecord& r : job.runs) {
    if (r.state != TaskState::kDone) continue;
    first = std::min(first, r.start);
    last = std::max(last, r.end);
  }
  if (first > last) return 0;
  return static_cast<double>(std::max<TimeUs>(1, last - first)) / 1e6;
}

namespace {

// The load charged to run `r` (0 without loads).
double LoadOf(const StateLoadTimes* loads, uint64_t r) {
  return loads != nullptr && r < loads->run_us.size() ? loads->run_us[r] : 0;
}

}  // namespace

ScheduleMetrics ComputeMetrics(const JobRun& job, const ResourcePool& pool,
                               const StateLoadTimes* loads) {
  ScheduleMetrics m;
  const JobGraph& g = *job.graph;
  const uint32_t n = g.size();

  std::vector<bool> counted(pool.device_count(), false);
  for (DeviceId d = 0; d < pool.device_count(); ++d) counted[d] = pool.device(d).alive;
  for (const TaskRecord& r : job.runs) {
    if (r.state != TaskState::kDone) continue;
    ++m.tasks;
    counted[pool.core(r.core).device] = true;
  }
  if (m.tasks == 0) return m;
  m.makespan_s = MakespanS(job);
  const double makespan_us = m.makespan_s * 1e6;

  // Busy time per device and core kind; comm and compute intervals per device.
  std::vector<double> busy_dev(pool.device_count(), 0);
  std::array<double, kNumCoreKinds> busy_kind{};
  std::array<double, kNumCoreKinds> work_kind{};  // busy_kind less the loads charged
  std::vector<std::vector<Interval>> compute(pool.device_count()), comm(pool.device_count());
  for (uint32_t r = 0; r < job.runs.size(); ++r) {
    const TaskRecord& rec = job.runs[r];
    if (rec.state != TaskState::kDone) continue;
    const auto& core = pool.core(rec.core);
    double d = static_cast<double>(rec.end - rec.start);
    busy_dev[core.device] += d;
    busy_kind[static_cast<size_t>(core.kind)] += d;
    work_kind[static_cast<size_t>(core.kind)] += d - LoadOf(loads, r);
    (g.task(r % n).is_comm ? comm : compute)[core.device].push_back({rec.start, rec.end});
  }

  std::array<uint32_t, kNumCoreKinds> cores_kind{};
  uint32_t cores_total = 0, devices = 0;
  double busy_total = 0;
  for (DeviceId d = 0; d < pool.device_count(); ++d) {
    if (!counted[d]) continue;
    ++devices;
    const DeviceDesc& desc = pool.device(d).desc;
    uint32_t dev_cores = 0;
    for (int k = 0; k < kNumCoreKinds; ++k) {
      cores_kind[k] += desc.cores[k];
      dev_cores += desc.cores[k];
    }
    cores_total += dev_cores;
    busy_total += busy_dev[d];
    m.utilisation_by_device.push_back(
        {d, desc.name, dev_cores ? busy_dev[d] / (dev_cores * makespan_us) : 0});
  }
  m.utilisation = cores_total ? busy_total / (cores_total * makespan_us) : 0;
  double work_bound_us = 0;
  for (int k = 0; k < kNumCoreKinds; ++k) {
    if (cores_kind[k] == 0) continue;
    m.utilisation_by_kind[k] = busy_kind[k] / (cores_kind[k] * makespan_us);
    work_bound_us = std::max(work_bound_us, work_kind[k] / cores_kind[k]);
  }

  // Masking: comm time covered by compute on the same device.
  double comm_us = 0, masked_us = 0;
  for (DeviceId d = 0; d < pool.device_count(); ++d) {
    if (comm[d].empty()) continue;
    MergeIntervals(&compute[d]);
    for (const auto& [a, b] : comm[d]) {
      comm_us += static_cast<double>(b - a);
      masked_us += static_cast<double>(Covered(compute[d], a, b));
    }
  }
  m.comm_s = comm_us / 1e6;
  m.masking_ratio = comm_us > 0 ? masked_us / comm_us : 0;

  // Bubbles: per step, device time with no core busy inside the step's span.
  double idle_us = 0, capacity_us = 0;
  std::vector<std::vector<Interval>> busy(pool.device_count());
  for (uint32_t s = 0; s < g.steps(); ++s) {
    TimeUs s0 = std::numeric_limits<TimeUs>::max(), s1 = std::numeric_limits<TimeUs>::min();
    for (auto& b : busy) b.clear();
    for (uint32_t i = 0; i < n; ++i) {
      const TaskRecord& rec = job.runs[s * n + i];
      if (rec.state != TaskState::kDone) continue;
      s0 = std::min(s0, rec.start);
      s1 = std::max(s1, rec.end);
      busy[pool.core(rec.core).device].push_back({rec.start, rec.end});
    }
    if (s1 <= s0) continue;
    for (DeviceId d = 0; d < pool.device_count(); ++d) {
      if (!counted[d]) continue;
      MergeIntervals(&busy[d]);
      idle_us += static_cast<double>((s1 - s0) - Length(busy[d]));
      capacity_us += static_cast<double>(s1 - s0);
    }
  }
  m.bubble_ratio = capacity_us > 0 ? idle_us / capacity_us : 0;

  // Critical path of measured durations: longest chain per step, steps in
  // sequence (a step starts after the previous one ends). The chain itself
  // is kept: from[i] is the input it came through.
  double cp_us = 0;
  std::vector<double> step_cps;
  std::vector<double> chain(n);
  std::vector<int64_t> from(n);
  for (uint32_t s = 0; s < g.steps(); ++s) {
    const TaskRecord* runs = job.runs.data() + uint64_t{s} * n;
    auto later = [&](int64_t a, int64_t b) {  // ties: the one that ended last
      return b < 0 || chain[a] > chain[b] ||
             (chain[a] == chain[b] && runs[a].state == TaskState::kDone &&
              (runs[b].state != TaskState::kDone || runs[a].end > runs[b].end));
    };
    int64_t last = -1;
    for (uint32_t i : g.topo_order()) {
      const TaskRecord& rec = runs[i];
      const uint64_t r = uint64_t{s} * n + i;
      double own = rec.state == TaskState::kDone
                       ? static_cast<double>(rec.end - rec.start) - LoadOf(loads, r)
                       : 0;
      from[i] = -1;
      for (uint32_t in : g.task(i).inputs) {
        if (later(in, from[i])) from[i] = in;
      }
      const double part = loads != nullptr && r < loads->part_us.size() ? loads->part_us[r] : 0;
      chain[i] = std::max(from[i] < 0 ? 0 : chain[from[i]], part) + own;
      if (later(i, last)) last = i;
    }
    const double step_cp = last < 0 ? 0 : chain[last];
    cp_us += step_cp;
    step_cps.push_back(step_cp);
    const size_t step_first = m.critical_path.size();
    for (int64_t i = last; i >= 0; i = from[i]) {
      const TaskRecord& rec = runs[i];
      if (rec.state != TaskState::kDone) continue;
      m.critical_path.push_back({g.spec_task(static_cast<uint32_t>(i)).id, s,
                                 pool.core(rec.core).device, pool.core(rec.core).kind,
                                 static_cast<double>(rec.end - rec.start)});
    }
    std::reverse(m.critical_path.begin() + static_cast<ptrdiff_t>(step_first),
                 m.critical_path.end());
  }
  m.critical_path_s = cp_us / 1e6;
  m.lower_bound_s = std::max(cp_us, work_bound_us) / 1e6;
  // Steps run in sequence: their bounds add up.
  double tight_us = 0;
  std::vector<double> dur(n);
  std::vector<CoreKind> kind(n, CoreKind::kCube);
  for (uint32_t s = 0; s < g.steps(); ++s) {
    for (uint32_t i = 0; i < n; ++i) {
      const TaskRecord& rec = job.runs[s * n + i];
      const bool ran = rec.state == TaskState::kDone;
      dur[i] = ran ? static_cast<double>(rec.end - rec.start) - LoadOf(loads, s * n + i) : 0;
      kind[i] = ran ? pool.core(rec.core).kind : CoreKind::kCube;
    }
    tight_us += std::max(step_cps[s], EnergeticBound(g, dur, kind, cores_kind));
  }
  m.tight_bound_s = std::max(m.lower_bound_s, tight_us / 1e6);
  return m;
}

}  // namespace hmpmd
