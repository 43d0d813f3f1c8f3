// Controller: what a restart needs beyond reloading the store (see
// RestoreFromStore in controller.cc): adopting what re-registering workers
// report (runs of a later step deferred until it starts), and ending the
// recovery window. Retention is in controller_retention.cc.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <set>

#include "hmpmd/controller/controller.h"

// See controller.cc: GCC 12's false -Wmaybe-uninitialized when a vector of
// StoreRecord grows.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace hmpmd {

int64_t Controller::UnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void Controller::AdoptReported(const WorkerInfo& w, const RegisterMsg& m, TimeUs now) {
  // A held attempt that is not adopted is stale (the run went elsewhere,
  // e.g. while this worker was stopped, or its job ended): stopped there,
  // so it does not hold a lane (a collective would wait a minute for
  // peers that moved on). A run recorded done is not there to stop.
  std::map<JobId, CancelRuns> stale;
  for (const HeldTask& h : m.held) {
    if (scheduler_->AdoptRun(h.job, h.task, h.attempt, w.device, h.core, h.lane, now)) {
      ++counters_.adopted_runs;
    } else if (RunIsAhead(h.job, h.task)) {
      deferred_[{h.job, h.task}] = DeferredRun{w.id, h, std::nullopt};
    } else {
      stale[h.job].job = h.job;
      stale[h.job].runs.push_back(h.task);
    }
  }
  for (auto& [job, c] : stale) transport_.Send(w.identity, c);
  // Outputs of done runs: consumers fetch them from this worker. Outputs no
  // one can read any more are freed: of jobs nobody knows, and of jobs
  // whose end frees them live (a cancel, a session's end), which ended
  // while this worker was away (a cancel in the recovery wait, a session
  // the restart failed). A succeeded or failed job's outputs stay until it
  // is forgotten, as they do live.
  std::set<JobId> to_free;
  for (const HeldOutput& o : m.outputs) {
    const JobRun* job = scheduler_->job(o.job);
    if (job == nullptr ||
        (IsTerminal(job->state) && (job->open || job->state == JobState::kCancelled))) {
      to_free.insert(o.job);
      continue;
    }
    if (o.run >= job->runs.size() || job->runs[o.run].state != TaskState::kDone) continue;
    outputs_[{o.job, o.run}] = OutputLocation{w.id, o.bytes, o.buffers};
    scheduler_->RecordOutput(o.job, o.run, w.device, o.bytes, o.buffers);
    ++counters_.adopted_outputs;
  }
  for (JobId job : to_free) transport_.Send(w.identity, FreeJob{job});
  if (!m.held.empty() || !m.outputs.empty()) {
    spdlog::info("worker '{}' holds {} task(s) and {} output(s)", m.name, m.held.size(),
                 m.outputs.size());
  }
}

bool Controller::RunIsAhead(JobId job_id, uint32_t run) const {
  const JobRun* job = scheduler_->job(job_id);
  return job != nullptr && !job->open && !IsTerminal(job->state) && run < job->runs.size() &&
         run / job->graph->size() > job->step;
}

void Controller::AdoptDeferred(TimeUs now) {
  for (auto it = deferred_.begin(); it != deferred_.end();) {
    const auto [job, run] = it->first;
    if (RunIsAhead(job, run)) {
      ++it;
      continue;
    }
    DeferredRun d = std::move(it->second);
    it = deferred_.erase(it);
    WorkerInfo& w = workers_[d.worker];
    if (!w.alive) continue;  // gone: the run is dispatched as any other
    const HeldTask& h = d.held;
    if (!scheduler_->AdoptRun(job, run, h.attempt, w.device, h.core, h.lane, now)) {
      // The job ended, or the run went elsewhere meanwhile: stop it there.
      if (!d.result) transport_.Send(w.identity, CancelRuns{job, {run}});
      continue;
    }
    ++counters_.adopted_runs;
    if (d.result) OnDone(w, DoneBatch{w.id, {std::move(*d.result)}, 0}, now);
  }
}

bool Controller::RecoveryHoldsDispatch(TimeUs now) {
  if (!recovery_.open()) return false;
  if (!recovery_.Close(now)) return true;
  // Outputs that waiting runs need and no worker reported are rebuilt now,
  // before anything reads them.
  size_t rebuilt = 0;
  for (JobId id : live_jobs_) rebuilt += scheduler_->RebuildUnheldOutputs(id, now);
  counters_.rebuilt_runs += rebuilt;
  if (writer_) {
    for (const std::string& key : recovery_.missing()) {
      store_pending_.push_back(WorkerRecord{key, false});
    }
  }
  const bool back = recovery_.how() == RecoveryWindow::End::kWorkersBack;
  spdlog::info(
      "recovery: dispatch resumes after {} ms: {} ({} of {} expected workers back); {} task "
      "run(s) rebuilt for outputs no worker holds",
      (now - started_at_) / 1000, back ? "all workers back" : "grace expired",
      recovery_.returned_count(), recovery_.expected_count(), rebuilt);
  return false;
}

}  // namespace hmpmd
