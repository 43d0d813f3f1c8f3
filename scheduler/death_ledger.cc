#include "hmpmd/scheduler/death_ledger.h"

#include <algorithm>
#include <tuple>

namespace hmpmd {

void DeathLedger::Report(DeviceId id, std::span<const StartedRun> runs, size_t lanes) {
  if (started_.size() <= id) started_.resize(id + 1);
  if (runs.size() > lanes) runs = runs.first(lanes);
  started_[id].assign(runs.begin(), runs.end());
}

void DeathLedger::Forget(DeviceId id) {
  if (id < started_.size()) started_[id].clear();
}

std::vector<std::pair<JobId, uint32_t>> DeathLedger::Blamed(
    DeviceId id, const ResourcePool& pool, const std::map<JobId, JobRun>& jobs) const {
  const std::vector<CoreId>& cores = pool.device(id).cores;
  struct Lane {
    bool named = false;    // its last word names a run still running
    bool unknown = false;  // it holds a run adopted after a restart
    std::tuple<uint64_t, JobId, uint32_t> next{UINT64_MAX, 0, 0};
  };
  std::vector<Lane> lanes(cores.size());
  std::vector<std::pair<JobId, uint32_t>> blamed;
  // 1. What its worker last said its lanes run.
  static const std::vector<StartedRun> kNone;
  for (const StartedRun& s : id < started_.size() ? started_[id] : kNone) {
    auto it = jobs.find(s.job);
    if (it == jobs.end() || IsTerminal(it->second.state)) continue;
    if (s.run >= it->second.runs.size()) continue;
    const TaskRecord& rec = it->second.runs[s.run];
    if (rec.state != TaskState::kRunning || rec.attempt != s.attempt) continue;
    auto c = std::find(cores.begin(), cores.end(), rec.core);
    if (c == cores.end()) continue;
    const ResourcePool::Core& core = pool.core(rec.core);
    if (core.kind != s.kind || core.lane != s.lane) continue;
    lanes[static_cast<size_t>(c - cores.begin())].named = true;
    blamed.emplace_back(s.job, s.run);
  }
  // 2. Lanes that named none: the run each was next to start.
  for (const auto& [job_id, job] : jobs) {
    if (IsTerminal(job.state)) continue;
    for (uint32_t r = 0; r < job.runs.size() && job.running > 0; ++r) {
      const TaskRecord& rec = job.runs[r];
      if (rec.state != TaskState::kRunning || rec.pending > 0) continue;
      auto c = std::find(cores.begin(), cores.end(), rec.core);
      if (c == cores.end()) continue;
      Lane& lane = lanes[static_cast<size_t>(c - cores.begin())];
      if (rec.lane_seq == 0) lane.unknown = true;
      if (rec.lane_seq < std::get<0>(lane.next)) lane.next = {rec.lane_seq, job_id, r};
    }
  }
  for (const Lane& lane : lanes) {
    if (!lane.named && !lane.unknown && std::get<0>(lane.next) != UINT64_MAX) {
      blamed.emplace_back(std::get<1>(lane.next), std::get<2>(lane.next));
    }
  }
  return blamed;
}

std::string DeathLedger::Charge(JobRun& job, uint32_t run, DeviceId id, const ResourcePool& pool,
                                uint32_t attempts_used, uint32_t max_attempts,
                                uint32_t max_worker_deaths, bool* retryable) {
  std::vector<DeviceId>& died = job.worker_deaths[run];
  died.push_back(id);
  // Only where it would run again (else out of attempts says it).
  if (max_worker_deaths == 0 || died.size() < max_worker_deaths ||
      attempts_used + 1 >= max_attempts) {
    return "its worker (" + pool.device(id).desc.name + ") died";
  }
  // Likely its own doing (a kernel that aborts its process): running it
  // again would take down worker after worker.
  *retryable = false;
  std::string names;
  for (DeviceId d : died) names += (names.empty() ? "" : ", ") + pool.device(d).desc.name;
  return "it killed " + std::to_string(died.size()) + " workers (" + names +
         "): each died while running it, so it is not run again (max_worker_deaths " +
         std::to_string(max_worker_deaths) + ")";
}

}  // namespace hmpmd
