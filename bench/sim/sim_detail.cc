#include "sim_detail.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <map>
#include <vector>

#include "hmpmd/scheduler/hmpmd_policy.h"
#include "hmpmd/sim/schedule_metrics.h"
#include "hmpmd/sim/simulator.h"

namespace hmpmd {
namespace {

// "ar3_2_17_3" -> "ar#_#_#_3": digit runs as '#' but the last (or, with
// `keep_first`, but the first: "ar3_#_#_#").
std::string Pattern(const std::string& id, bool keep_first = false) {
  auto digit = [&](size_t i) { return std::isdigit(static_cast<unsigned char>(id[i])) != 0; };
  size_t keep = std::string::npos, keep_end = std::string::npos;
  for (size_t k = 0; k < id.size(); ++k) {
    size_t i = keep_first ? k : id.size() - 1 - k;
    if (!digit(i)) continue;
    keep = keep_end = i;
    while (keep > 0 && digit(keep - 1)) --keep;
    while (keep_end < id.size() && digit(keep_end)) ++keep_end;
    break;
  }
  std::string out;
  for (size_t i = 0; i < id.size(); ++i) {
    if ((i >= keep && i < keep_end) || !digit(i)) {
      out += id[i];
    } else if (out.empty() || out.back() != '#') {
      out += '#';
    }
  }
  return out;
}

struct Sum {
  double comm_us = 0, bare_us = 0;
  uint64_t n = 0;
};

}  // namespace

int PrintDetail(const JobSpec& spec, uint32_t devices, const std::string& policy) {
  SimOptions o;
  o.policy = policy;
  o.pool = MakePoolSpec(devices);
  auto graph = JobGraph::Build(spec);
  auto sim = graph.ok() ? Simulator::Create(o) : graph.status();
  auto id = sim.ok() ? (*sim)->Submit(*graph) : sim.status();
  Status run = id.ok() ? (*sim)->Run() : id.status();
  if (!run.ok()) {
    std::fprintf(stderr, "bench_sim --detail: %s\n", run.message().c_str());
    return 1;
  }
  const Scheduler& sched = (*sim)->scheduler();
  const ResourcePool& pool = sched.pool();
  const JobRun& job = *sched.job(*id);
  const JobGraph& g = *job.graph;
  const uint32_t n = g.size();
  const ScheduleMetrics m = ComputeMetrics(job, pool, (*sim)->LoadsOf(*id));
  std::printf(
      "%s, %s, %u devices: makespan %.4f s, bound %.4f s (critical path %.4f s), "
      "tight %.4f s, masking %.1f%%, bubble %.1f%%\n",
      spec.name.c_str(), policy.c_str(), devices, m.makespan_s, m.lower_bound_s, m.critical_path_s,
      m.tight_bound_s, 100 * m.masking_ratio, 100 * m.bubble_ratio);

  // Compute runs per device in start order.
  struct Run {
    TimeUs start, end;
    uint32_t r;
  };
  std::vector<std::vector<Run>> compute(pool.device_count());
  TimeUs first = INT64_MAX, last = 0;
  for (uint32_t r = 0; r < job.runs.size(); ++r) {
    const TaskRecord& rec = job.runs[r];
    if (rec.state != TaskState::kDone) continue;
    first = std::min(first, rec.start);
    last = std::max(last, rec.end);
    if (!g.task(r % n).is_comm)
      compute[pool.core(rec.core).device].push_back({rec.start, rec.end, r});
  }
  for (auto& v : compute)
    std::sort(v.begin(), v.end(), [](auto& a, auto& b) { return a.start < b.start; });

  std::map<std::string, Sum> by_kind, by_pattern, by_next;
  const auto& sms = g.spec().submodels;
  for (uint32_t r = 0; r < job.runs.size(); ++r) {
    const TaskRecord& rec = job.runs[r];
    const GraphTask& t = g.task(r % n);
    if (rec.state != TaskState::kDone || !t.is_comm) continue;
    const auto& runs = compute[pool.core(rec.core).device];
    double covered = 0;
    for (const Run& c : runs) {
      TimeUs lo = std::max(c.start, rec.start), hi = std::min(c.end, rec.end);
      if (hi > lo) covered += static_cast<double>(hi - lo);
    }
    const double dur = static_cast<double>(rec.end - rec.start);
    const double bare = std::max(0.0, dur - covered);
    const std::string sm = t.submodel < sms.size() ? sms[t.submodel].name : "?";
    for (auto* s : {&by_kind[sm + " " + g.spec_task(r % n).kernel],
                    &by_pattern[Pattern(g.spec_task(r % n).id)]}) {
      s->comm_us += dur;
      s->bare_us += bare;
      ++s->n;
    }
    if (bare <= 0) continue;
    // What the device ran next on its compute cores, and how soon.
    auto next =
        std::find_if(runs.begin(), runs.end(), [&](const Run& c) { return c.start >= rec.end; });
    std::string what = "nothing after";
    if (next != runs.end()) {
      const uint32_t nsm = g.task(next->r % n).submodel;
      what = (nsm == t.submodel ? "same sub-model" : "other sub-model (" + sms[nsm].name + ")") +
             std::string(next->start - rec.end <= 100 ? ", within 100 us" : ", later");
    }
    Sum& s = by_next[what];
    s.comm_us += dur;
    s.bare_us += bare;
    ++s.n;
  }
  auto print = [](const char* title, const std::map<std::string, Sum>& sums, size_t top) {
    std::vector<std::pair<std::string, Sum>> v(sums.begin(), sums.end());
    std::sort(v.begin(), v.end(),
              [](auto& a, auto& b) { return a.second.bare_us > b.second.bare_us; });
    std::printf("\n%-44s %6s %10s %10s %8s\n", title, "runs", "comm_ms", "bare_ms", "masked");
    for (size_t i = 0; i < v.size() && i < top; ++i) {
      const Sum& s = v[i].second;
      std::printf("%-44s %6llu %10.2f %10.2f %7.1f%%\n", v[i].first.c_str(),
                  static_cast<unsigned long long>(s.n), s.comm_us / 1e3, s.bare_us / 1e3,
                  s.comm_us > 0 ? 100 * (1 - s.bare_us / s.comm_us) : 0);
    }
  };
  print("communication by sub-model and kernel", by_kind, 20);
  print("by task id (digits '#', last kept), most bare", by_pattern, 12);
  print("bare communication: the device's next compute", by_next, 12);

  // Phases: first start and last end per task-id pattern (first digit run
  // kept, e.g. an iteration).
  struct Phase {
    TimeUs start = INT64_MAX, end = 0;
    uint64_t n = 0;
  };
  std::map<std::string, Phase> phases;
  for (uint32_t r = 0; r < job.runs.size(); ++r) {
    const TaskRecord& rec = job.runs[r];
    if (rec.state != TaskState::kDone) continue;
    Phase& p = phases[Pattern(g.spec_task(r % n).id, true)];
    p.start = std::min(p.start, rec.start);
    p.end = std::max(p.end, rec.end);
    ++p.n;
  }
  std::vector<std::pair<std::string, Phase>> ph(phases.begin(), phases.end());
  std::sort(ph.begin(), ph.end(), [](auto& a, auto& b) { return a.second.start < b.second.start; });
  std::printf("\nphases (task ids, first digit run kept): first start, last end (ms)\n");
  for (size_t i = 0; i < ph.size() && i < 40; ++i) {
    std::printf("%-20s %7llu %9.2f %9.2f\n", ph[i].first.c_str(),
                static_cast<unsigned long long>(ph[i].second.n), (ph[i].second.start - first) / 1e3,
                (ph[i].second.end - first) / 1e3);
  }

  // Busy compute cores per sub-model over 20 slices of the makespan.
  constexpr int kSlices = 20;
  const double span = static_cast<double>(std::max<TimeUs>(1, last - first));
  std::vector<std::vector<double>> busy(sms.size(), std::vector<double>(kSlices, 0));
  for (const auto& runs : compute) {
    for (const Run& c : runs) {
      const uint32_t sm = g.task(c.r % n).submodel;
      for (int k = 0; k < kSlices; ++k) {
        double a = first + span * k / kSlices, b = first + span * (k + 1) / kSlices;
        double lo = std::max<double>(a, c.start), hi = std::min<double>(b, c.end);
        if (hi > lo) busy[sm][k] += (hi - lo) / (b - a);
      }
    }
  }
  std::printf("\nbusy compute cores per sub-model, %d slices of %.2f ms:\n", kSlices,
              span / kSlices / 1e3);
  for (size_t s = 0; s < sms.size(); ++s) {
    std::printf("%-9s", sms[s].name.c_str());
    for (int k = 0; k < kSlices; ++k) std::printf(" %4.0f", busy[s][k]);
    std::printf("\n");
  }
  std::printf("%-9s", "idle");
  for (int k = 0; k < kSlices; ++k) {
    double sum = 0;
    for (size_t s = 0; s < sms.size(); ++s) sum += busy[s][k];
    std::printf(" %4.0f", std::max(0.0, pool.alive_cores(CoreKind::kCube) - sum) + 0.0);
  }
  std::printf("\n");
  if (const auto* hp = dynamic_cast<const HmpmdPolicy*>(&sched.policy())) {
    // Device moves between sub-models (from>to) per slice.
    std::map<std::string, std::vector<int>> flows;
    for (const DeviceMove& mv : hp->share().moves()) {
      if (mv.job != *id || mv.from < 0 || mv.to < 0) continue;
      int k = std::clamp(static_cast<int>((mv.at - first) * kSlices / span), 0, kSlices - 1);
      auto& row = flows[sms[mv.from].name + ">" + sms[mv.to].name];
      row.resize(kSlices, 0);
      ++row[k];
    }
    std::printf("device moves per slice:\n");
    for (const auto& [name, row] : flows) {
      std::printf("%-15s", name.c_str());
      for (int v : row) std::printf(" %4d", v);
      std::printf("\n");
    }
    std::printf(
        "device moves %llu, state loads %llu (%.3f s device time, %.3f s exposed, %.3f s hidden "
        "under compute)\n",
        static_cast<unsigned long long>(hp->share().MoveCount(*id)),
        static_cast<unsigned long long>((*sim)->state_loads()), (*sim)->state_load_us() / 1e6,
        (*sim)->state_load_exposed_us() / 1e6, (*sim)->state_load_hidden_us() / 1e6);
  }
  return 0;
}

}  // namespace hmpmd
