// Scheduler: devices that join and leave the pool (a worker that died or
// reconnected), what their workers say their lanes have started, which the
// death ledger (death_ledger.h) turns into the runs a death is blamed on,
// and why a job waits while the devices up cannot run what is left of it
// (admission_check.h). The rest of the class is in scheduler.cc.
#include <algorithm>

#include "hmpmd/scheduler/admission_check.h"
#include "hmpmd/scheduler/scheduler.h"

namespace hmpmd {

DeviceId Scheduler::AddDevice(DeviceDesc desc) {
  DeviceId id = pool_.AddDevice(std::move(desc));
  policy_->OnDeviceAdded(id, pool_);
  UpdateWaiting();
  return id;
}

void Scheduler::ReportStarted(DeviceId id, std::span<const StartedRun> runs) {
  if (id >= pool_.device_count() || !pool_.device(id).alive) return;
  deaths_.Report(id, runs, pool_.device(id).cores.size());
}

size_t Scheduler::RecallUnheld(DeviceId id, std::span<const StartedRun> held, TimeUs now) {
  if (id >= pool_.device_count() || !pool_.device(id).alive) return 0;
  const std::vector<CoreId>& cores = pool_.device(id).cores;
  auto holds = [&](JobId job, uint32_t run, uint32_t attempt) {
    return std::any_of(held.begin(), held.end(), [&](const StartedRun& h) {
      return h.job == job && h.run == run && h.attempt == attempt;
    });
  };
  std::vector<std::pair<JobId, uint32_t>> lost;
  for (const auto& [job_id, job] : jobs_) {
    if (IsTerminal(job.state) || job.running == 0) continue;
    for (uint32_t r = 0; r < job.runs.size(); ++r) {
      const TaskRecord& rec = job.runs[r];
      if (rec.state == TaskState::kRunning &&
          std::find(cores.begin(), cores.end(), rec.core) != cores.end() &&
          !holds(job_id, r, rec.attempt)) {
        lost.emplace_back(job_id, r);
      }
    }
  }
  size_t recalled = 0;
  for (const auto& [job_id, r] : lost) {
    JobRun& job = jobs_.at(job_id);
    TaskRecord& rec = job.runs[r];
    // Sent back meanwhile by another's recall (a gang restart, an early
    // consumer of a run recalled here).
    if (IsTerminal(job.state) || rec.state != TaskState::kRunning) continue;
    // It never ran: the attempt OnTaskFailed adds does not count (one
    // dispatched ahead of its input is recalled that way already).
    if (rec.pending == 0 && rec.recalled < UINT16_MAX) ++rec.recalled;
    OnTaskFailed(
        job_id, r, rec.attempt,
        "its assignment to " + pool_.device(id).desc.name + " was lost when it reconnected", true,
        now);
    ++recalled;
  }
  return recalled;
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
    // producers again; so are the last step's final outputs (held with no
    // reads left), which the job's caller fetches once it ends. A session's
    // outputs are its driver's to ask for again.
    const uint32_t n = job.graph->size(), base = job.step * n;
    const bool finals = !job.open && job.step + 1 == job.graph->steps();
    for (uint32_t r = base; r < base + n; ++r) {
      TaskRecord& rec = job.runs[r];
      if (rec.state == TaskState::kDone && rec.held && rec.output_device == id &&
          (rec.reads_left > 0 || finals)) {
        Revive(job, r, now);
      }
    }
    RestartSplitGangs(job, now);  // a member revived alone would wait for ever
  }
  UpdateWaiting();
}

void Scheduler::UpdateWaiting() {
  std::vector<uint8_t> needed;
  for (auto& [id, job] : jobs_) {
    if (IsTerminal(job.state)) continue;
    job.short_sets = policy_->ShortSets(id);
    if (pool_.alive_device_count() == 0) {
      job.waiting = "no live worker";
      continue;
    }
    // A task is still needed while its run of the last step is not done.
    const JobGraph& g = *job.graph;
    const size_t last = size_t{g.steps() - 1} * g.size();
    needed.assign(g.size(), 1);
    for (uint32_t i = 0; i < g.size() && last + i < job.runs.size(); ++i) {
      needed[i] = job.runs[last + i].state != TaskState::kDone;
    }
    // A set larger than the devices left runs short (JobRun::short_sets
    // says so); the job does not wait for it.
    Status st = AdmissionCheck(pool_).Tasks(g.spec().tasks, 0, job.kernel_ids, needed);
    job.waiting = st.ok() ? "" : st.message();
  }
}

}  // namespace hmpmd
