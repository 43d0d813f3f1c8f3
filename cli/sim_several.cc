#include "sim_several.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "hmpmd/controller/job_report.h"
#include "hmpmd/protocol/json_text.h"
#include "hmpmd/sim/simulator.h"

namespace hmpmd {
namespace {

using json = nlohmann::json;

// Where TraceJson puts a job's time 0: its first run that finished.
TimeUs FirstStart(const JobRun& job) {
  TimeUs first = -1;
  for (const TaskRecord& r : job.runs) {
    if (r.state == TaskState::kDone && (first < 0 || r.start < first)) first = r.start;
  }
  return first < 0 ? std::max<TimeUs>(job.started, 0) : first;
}

}  // namespace

json SimulatedJobJson(const Simulator& sim, JobId id) {
  const JobRun& job = *sim.scheduler().job(id);
  const ResourcePool& rp = sim.scheduler().pool();
  const ScheduleMetrics m = ComputeMetrics(job, rp, sim.LoadsOf(id));
  json j = JobSummaryJson(job, rp, false);
  j.update(MetricsJson(m, rp));
  j["tight_bound_s"] = m.tight_bound_s;
  j.erase("utilisation_by_device");
  j["tasks"] = m.tasks;
  j["device_moves"] = sim.scheduler().policy().DeviceMoves(id);
  // Sets short of their ask (too few devices for the sets to be disjoint).
  j["short_sets"] = ShortSetsJson(job);
  return j;
}

std::string TraceFile(const std::string& file, const std::string& policy, bool several) {
  if (!several) return file;
  std::filesystem::path p(file);
  return (p.parent_path() / (p.stem().string() + "." + policy + p.extension().string())).string();
}

namespace {

// Core time of each job (per kind when `pool` is set, else in slot 0)
// from 0 to the first job's end, as parts of the total.
std::vector<std::array<double, kNumCoreKinds>> Shares(const std::vector<const JobRun*>& jobs,
                                                      const ResourcePool* pool) {
  std::vector<std::array<double, kNumCoreKinds>> share(jobs.size());
  if (jobs.empty()) return share;
  TimeUs until = jobs.front()->finished;
  for (const JobRun* j : jobs) until = std::min(until, j->finished);
  std::array<double, kNumCoreKinds> total{};
  for (size_t i = 0; i < jobs.size(); ++i) {
    for (const TaskRecord& r : jobs[i]->runs) {
      const TimeUs from = std::max<TimeUs>(r.start, 0), to = std::min(r.end, until);
      if (to <= from) continue;
      size_t k = 0;
      if (pool != nullptr) {
        if (r.core >= pool->core_count()) continue;
        k = static_cast<size_t>(pool->core(r.core).kind);
      }
      share[i][k] += static_cast<double>(to - from);
      total[k] += static_cast<double>(to - from);
    }
  }
  for (auto& s : share) {
    for (size_t k = 0; k < kNumCoreKinds; ++k) s[k] = total[k] > 0 ? s[k] / total[k] : 0;
  }
  return share;
}

}  // namespace

std::vector<double> ShareWhileAllRun(const std::vector<const JobRun*>& jobs) {
  std::vector<double> out;
  for (const auto& s : Shares(jobs, nullptr)) out.push_back(s[0]);
  return out;
}

std::vector<std::array<double, kNumCoreKinds>> ShareWhileAllRunByKind(
    const std::vector<const JobRun*>& jobs, const ResourcePool& pool) {
  return Shares(jobs, &pool);
}

int SimSeveral(const SimSeveralArgs& a) {
  json out;
  out["workloads"] = json::array();
  uint64_t weights = 0;
  for (const auto& g : a.graphs) {
    out["workloads"].push_back(
        {{"name", g->spec().name}, {"tasks_per_step", g->size()}, {"weight", g->spec().weight}});
    weights += std::max(1u, g->spec().weight);
  }
  out["pool"] = {{"name", a.pool.name}, {"devices", a.pool.devices()}, {"nodes", a.pool.nodes}};
  out["policies"] = json::object();
  std::string table;
  char line[256];
  std::snprintf(line, sizeof line, "%-10s %-14s %6s %-9s %9s %11s %8s %8s %8s %8s %6s %7s\n",
                "policy", "job", "weight", "state", "tasks", "end_s", "fair", "share", "cube",
                "vector", "moves", "wall_s");
  table += line;
  bool all_ok = true;
  const bool several = a.policies.size() > 1;
  for (const std::string& name : a.policies) {
    SimOptions so;
    so.policy = name;
    so.pool = a.pool;
    auto sim = Simulator::Create(so);
    if (!sim.ok()) return Fail(sim.status());
    auto wall0 = std::chrono::steady_clock::now();
    std::vector<JobId> ids;
    for (size_t i = 0; i < a.graphs.size(); ++i) {
      const auto& g = a.graphs[i];
      auto id = (*sim)->Submit(g);
      if (!id.ok()) {
        // The file, as one workload's errors name it (specs' names may repeat).
        const std::string& where = i < a.workloads.size() ? a.workloads[i] : g->spec().name;
        return Fail(Status::InvalidArgument(where + ": " + id.status().message()));
      }
      ids.push_back(*id);
    }
    Status st = (*sim)->Run();
    const double wall =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
    const ResourcePool& rp = (*sim)->scheduler().pool();
    std::vector<const JobRun*> jobs;
    for (JobId id : ids) jobs.push_back((*sim)->scheduler().job(id));
    const std::vector<double> share = ShareWhileAllRun(jobs);
    const auto by_kind = ShareWhileAllRunByKind(jobs, rp);
    json p;
    p["state"] = st.ok() ? "done" : "failed";
    if (!st.ok()) p["error"] = st.message();
    p["sim_wall_s"] = wall;
    p["jobs"] = json::array();
    double makespan = 0;
    json trace;
    for (size_t i = 0; i < jobs.size(); ++i) {
      const JobRun& job = *jobs[i];
      ScheduleMetrics m = ComputeMetrics(job, rp, (*sim)->LoadsOf(job.id));
      all_ok = all_ok && st.ok() && job.state == JobState::kSucceeded;
      // Its end on the pool's clock (all are submitted at 0): its own
      // makespan_s starts at its first run, later for a job that waited.
      const double end_s = static_cast<double>(std::max<TimeUs>(job.finished, 0)) / 1e6;
      makespan = std::max(makespan, end_s);
      const uint32_t weight = std::max(1u, job.graph->spec().weight);
      const double fair = static_cast<double>(weight) / static_cast<double>(weights);
      json j = SimulatedJobJson(**sim, ids[i]);
      const uint64_t moves = j["device_moves"].get<uint64_t>();
      // A simulation that stopped (time limit) fails the jobs it left
      // unfinished; one that had ended keeps its state.
      const bool ended = st.ok() || job.state == JobState::kSucceeded;
      j["state"] = ended ? std::string(JobStateName(job.state)) : "failed";
      j["end_s"] = end_s;
      j["weight"] = weight;
      j["fair_share"] = fair;
      j["share_while_all_run"] = share[i];
      json kinds = json::object();
      for (size_t k = 0; k < kNumCoreKinds; ++k) {
        kinds[std::string(CoreKindName(static_cast<CoreKind>(k)))] = by_kind[i][k];
      }
      j["share_while_all_run_by_kind"] = std::move(kinds);
      const std::string short_note =
          job.short_sets.empty() ? "" : "  " + name + ": " + ShortSetsText(j["short_sets"]) + "\n";
      p["jobs"].push_back(std::move(j));
      std::snprintf(line, sizeof line,
                    "%-10s %s %6u %-9s %9llu %11.6f %7.1f%% %7.1f%% %7.1f%% %7.1f%% %6llu %7.2f\n",
                    name.c_str(), Column(job.graph->spec().name, 14, /*cut=*/true).c_str(), weight,
                    ended ? std::string(JobStateName(job.state)).c_str() : "failed",
                    static_cast<unsigned long long>(m.tasks), end_s, fair * 100, share[i] * 100,
                    by_kind[i][0] * 100, by_kind[i][1] * 100,
                    static_cast<unsigned long long>(moves), wall);
      table += line;
      if (!job.error.empty()) table += "  " + name + ": " + OneLine(job.error) + "\n";
      table += short_note;
      if (!a.trace_file.empty()) {
        // One trace for all jobs: each job's events start at its first run
        // (TraceJson), so they are shifted back to the pool's time 0.
        json t = TraceJson(job, rp, (*sim)->LoadsOf(job.id));
        const TimeUs first = FirstStart(job);
        for (auto& e : t["traceEvents"]) {
          if (e.contains("ts")) e["ts"] = e["ts"].get<TimeUs>() + first;
        }
        if (trace.is_null()) {
          trace = std::move(t);
        } else {
          for (auto& e : t["traceEvents"]) trace["traceEvents"].push_back(std::move(e));
        }
      }
    }
    if (!st.ok()) table += "  " + name + ": " + st.message() + "\n";
    p["makespan_s"] = makespan;
    // State loads the simulator charged, all jobs together.
    p["state_loads"] = (*sim)->state_loads();
    p["state_load_s"] = (*sim)->state_load_us() / 1e6;
    p["state_load_exposed_s"] = (*sim)->state_load_exposed_us() / 1e6;
    p["state_load_hidden_s"] = (*sim)->state_load_hidden_us() / 1e6;
    p["state_load_hidden_fraction"] =
        (*sim)->state_load_us() > 0 ? (*sim)->state_load_hidden_us() / (*sim)->state_load_us() : 0;
    p["state_prefetches"] = (*sim)->state_prefetches();
    p["state_evictions"] = (*sim)->state_evictions();
    out["policies"][name] = std::move(p);
    if (!a.trace_file.empty()) {
      Status w = WriteFile(TraceFile(a.trace_file, name, several), JsonText(trace));
      if (!w.ok()) return Fail(w);
    }
  }
  if (a.json) {
    std::cout << JsonText(out, 2) << std::endl;
  } else {
    std::cout << a.graphs.size() << " jobs on pool " << a.pool.name << " (" << a.pool.devices()
              << " devices, " << a.pool.nodes << (a.pool.nodes == 1 ? " node" : " nodes")
              << "), submitted together; fair: the job's "
              << "weight / all weights; share: its part of the core time the jobs got while all "
                 "ran (cube, vector: of that kind's)\n"
              << table;
  }
  return all_ok ? kExitOk : kExitFailed;
}

}  // namespace hmpmd
