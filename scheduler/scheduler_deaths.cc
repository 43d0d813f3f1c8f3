// Scheduler: a device that leaves the pool (its worker died or
// reconnected), and which of its runs its death is blamed on
// (SchedulerOptions::max_worker_deaths). The rest of the class is in
// scheduler.cc.
//
// Blame, for a worker that died, lane by lane:
//  1. Its worker tells which run each busy lane has started and not
//     finished, in every heartbeat, with every batch of results and when it
//     registers (ReportStarted keeps the last word). A run it named that is
//     still running here as the same attempt (no result came since) died
//     with it and is charged. Every busy lane's is (any of them may have
//     killed it; a bystander is failed only if it dies beside such a run on
//     max_worker_deaths workers). Runs queued behind it are not; nor are
//     runs dispatched to the lane before it, whose results died with the
//     worker: they had finished, or it would not have started.
//  2. A lane whose last word names no run still running (idle then, or its
//     run's result came since, and with it the results of the runs before
//     it) may have started one after that word, which then killed the
//     worker before the next word could leave (a kernel that aborts at
//     once). A lane runs its queue in dispatch order (lane_seq), so that is
//     the first dispatched of the runs still on it; it is charged. Runs
//     sent ahead of an unfinished input (pending > 0) cannot have started.
//     A lane holding a run adopted after a restart (lane_seq 0, order
//     unknown) that its worker did not name charges none.
#include <algorithm>
#include <tuple>

#include "hmpmd/scheduler/scheduler.h"

namespace hmpmd {

void Scheduler::ReportStarted(DeviceId id, std::span<const StartedRun> runs) {
  if (id >= pool_.device_count() || !pool_.device(id).alive) return;
  if (started_.size() <= id) started_.resize(id + 1);
  // One run per lane at most: a longer list (from the network) is cut, so
  // what is kept per device stays bounded by its cores.
  const size_t lanes = pool_.device(id).cores.size();
  if (runs.size() > lanes) runs = runs.first(lanes);
  started_[id].assign(runs.begin(), runs.end());
}

std::vector<std::pair<JobId, uint32_t>> Scheduler::RunsThatDiedWith(DeviceId id) const {
  const std::vector<CoreId>& cores = pool_.device(id).cores;
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
    auto it = jobs_.find(s.job);
    if (it == jobs_.end() || IsTerminal(it->second.state)) continue;
    if (s.run >= it->second.runs.size()) continue;
    const TaskRecord& rec = it->second.runs[s.run];
    if (rec.state != TaskState::kRunning || rec.attempt != s.attempt) continue;
    auto c = std::find(cores.begin(), cores.end(), rec.core);
    if (c == cores.end()) continue;
    const ResourcePool::Core& core = pool_.core(rec.core);
    if (core.kind != s.kind || core.lane != s.lane) continue;
    lanes[static_cast<size_t>(c - cores.begin())].named = true;
    blamed.emplace_back(s.job, s.run);
  }
  // 2. Lanes that named none: the run each was next to start.
  for (const auto& [job_id, job] : jobs_) {
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

std::string Scheduler::ChargeDeath(JobRun& job, uint32_t run, DeviceId id, bool* retryable) {
  std::vector<DeviceId>& died = job.worker_deaths[run];
  died.push_back(id);
  const TaskRecord& rec = job.runs[run];
  const uint32_t group = job.graph->task(run % job.graph->size()).group;
  const uint32_t used =
      group == kNoGroup ? AttemptsUsed(rec) : std::max(AttemptsUsed(rec), job.gang_retries[group]);
  // Only where it would run again (else out of attempts says it).
  if (options_.max_worker_deaths == 0 || died.size() < options_.max_worker_deaths ||
      used + 1 >= options_.max_attempts) {
    return "its worker (" + pool_.device(id).desc.name + ") died";
  }
  // Likely its own doing (a kernel that aborts its process): running it
  // again would take down worker after worker.
  *retryable = false;
  std::string names;
  for (DeviceId d : died) names += (names.empty() ? "" : ", ") + pool_.device(d).desc.name;
  return "it killed " + std::to_string(died.size()) + " workers (" + names +
         "): each died while running it, so it is not run again (max_worker_deaths " +
         std::to_string(options_.max_worker_deaths) + ")";
}

void Scheduler::RemoveDevice(DeviceId id, TimeUs now, bool died) {
  if (!pool_.device(id).alive) return;
  // Who is to blame, before the runs are taken off its cores.
  std::vector<std::pair<JobId, uint32_t>> blamed;
  if (died) blamed = RunsThatDiedWith(id);
  if (id < started_.size()) started_[id].clear();
  const std::vector<CoreId>& cores = pool_.device(id).cores;
  pool_.RemoveDevice(id);
  for (CoreId c : cores) parked_.erase(c);  // their runs are recalled below
  policy_->OnDeviceRemoved(id, pool_);
  // The runs charged first: failing another run may recall one (a run sent
  // ahead of its input goes back when that input's run does), and a run
  // recalled that way would escape its charge.
  for (const auto& [job_id, r] : blamed) {
    JobRun& job = jobs_.at(job_id);
    if (IsTerminal(job.state) || job.runs[r].state != TaskState::kRunning) continue;
    bool retryable = true;
    const std::string error = ChargeDeath(job, r, id, &retryable);
    OnTaskFailed(job_id, r, job.runs[r].attempt, error, retryable, now);
  }
  const std::string error =
      "its worker (" + pool_.device(id).desc.name + ") " + (died ? "died" : "left");
  for (auto& [job_id, job] : jobs_) {
    if (IsTerminal(job.state)) continue;
    for (uint32_t r = 0; r < job.runs.size() && job.running > 0; ++r) {
      TaskRecord& rec = job.runs[r];
      if (rec.state != TaskState::kRunning) continue;
      if (std::find(cores.begin(), cores.end(), rec.core) == cores.end()) continue;
      OnTaskFailed(job_id, r, rec.attempt, error, true, now);
      if (IsTerminal(job.state)) break;
    }
    if (IsTerminal(job.state)) continue;
    // Lineage: outputs of the current step that lived only on the dead
    // device and are still to be read are rebuilt by running their
    // producers again.
    const uint32_t n = job.graph->size(), base = job.step * n;
    for (uint32_t r = base; r < base + n; ++r) {
      TaskRecord& rec = job.runs[r];
      if (rec.state == TaskState::kDone && rec.held && rec.output_device == id &&
          rec.reads_left > 0) {
        Revive(job, r, now);
      }
    }
  }
  UpdateWaiting();
}

}  // namespace hmpmd
