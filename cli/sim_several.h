// `hmpmd sim A B ...`: several jobs submitted together on one simulated
// pool, per policy, to show how the pool is shared (each job's `weight`).
#pragma once

#include <array>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "hmpmd/scheduler/job_graph.h"
#include "hmpmd/scheduler/scheduler.h"
#include "hmpmd/sim/pool_spec.h"
#include "hmpmd/sim/simulator.h"

namespace hmpmd {

struct SimSeveralArgs {
  PoolSpec pool;
  std::vector<std::string> policies;
  std::vector<std::shared_ptr<const JobGraph>> graphs;  // all submitted at t=0
  std::vector<std::string> workloads;                   // as given on the command line, by graph
  bool json = false;
  std::string trace_file;  // empty: none; several policies: FILE.POLICY.json
};

// Runs every policy, prints a row per job (or one JSON object) and returns
// the exit code: kExitOk when every job of every policy succeeded.
int SimSeveral(const SimSeveralArgs& a);

// Job `id`'s figures as `hmpmd sim --json` reports them for one job or
// several: its summary and metrics (less utilisation by device), the tight
// bound, its device moves (hmpmd's elastic sets) and its device sets short
// of their ask.
nlohmann::json SimulatedJobJson(const Simulator& sim, JobId id);

// `--trace FILE` for `policy`: FILE itself, or FILE.POLICY.json when
// several policies run.
std::string TraceFile(const std::string& file, const std::string& policy, bool several);

// The share of the core time given to the jobs while all of them were
// running (from 0 to the first job's end) that each job got, in submission
// order; all zero when that window is empty.
std::vector<double> ShareWhileAllRun(const std::vector<const JobRun*>& jobs);
// The same per core kind (each kind's core time on its own; runs on
// `pool`'s cores): [job][kind].
std::vector<std::array<double, kNumCoreKinds>> ShareWhileAllRunByKind(
    const std::vector<const JobRun*>& jobs, const ResourcePool& pool);

}  // namespace hmpmd
