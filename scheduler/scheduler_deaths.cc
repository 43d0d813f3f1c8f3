// Scheduler: a device that leaves the pool (its worker died or
// reconnected). Which of its runs its death is blamed on is the
// DeathLedger's (death_ledger.h); the rest of the class is in scheduler.cc.
#include <algorithm>

#include "hmpmd/scheduler/scheduler.h"

namespace hmpmd {

void Scheduler::ReportStarted(DeviceId id, std::span<const StartedRun> runs) {
  if (id >= pool_.device_count() || !pool_.device(id).alive) return;
  deaths_.Report(id, runs, pool_.device(id).cores.size());
}

void Scheduler::RemoveDevice(DeviceId id, TimeUs now, bool died) {
  if (!pool_.device(id).alive) return;
  // Who is to blame, before the runs are taken off its cores.
  std::vector<std::pair<JobId, uint32_t>> blamed;
  if (died) blamed = deaths_.Blamed(id, pool_, jobs_);
  deaths_.Forget(id);
  const std::vector<CoreId>& cores = pool_.device(id).cores;
  pool_.RemoveDevice(id);
  for (CoreId c : cores) ready_.DropParked(c);  // their runs are recalled below
  policy_->OnDeviceRemoved(id, pool_);
  // The runs charged first: failing another run may recall one (a run sent
  // ahead of its input goes back when that input's run does), and a run
  // recalled that way would escape its charge.
  for (const auto& [job_id, r] : blamed) {
    JobRun& job = jobs_.at(job_id);
    if (IsTerminal(job.state) || job.runs[r].state != TaskState::kRunning) continue;
    bool retryable = true;
    const std::string error =
        DeathLedger::Charge(job, r, id, pool_, AttemptsUsed(job, r), options_.max_attempts,
                            options_.max_worker_deaths, &retryable);
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
