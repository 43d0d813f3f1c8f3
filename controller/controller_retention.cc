// Controller: job retention. Ended jobs are forgotten by count
// (--keep-jobs), by age (--keep-hours) or on request (hmpmd forget): the
// workers free what they hold for them and their records leave the store.
// The rest of the class is in controller.cc.
#include <spdlog/spdlog.h>

#include <algorithm>

#include "hmpmd/controller/controller.h"

namespace hmpmd {

void Controller::ForgetOldJobs() {
  if (finished_order_.size() <= options_.keep_finished_jobs) return;
  const size_t over = finished_order_.size() - options_.keep_finished_jobs;
  // finished_order_ is in order of ending, so the jobs still in their grace
  // are at its end: forget the oldest up to the first of them. (A waiter
  // that polls the job every few hundred ms reads its end meanwhile.)
  const TimeUs cutoff = NowUs() - options_.keep_ended_grace_ms * 1000;
  size_t n = 0;
  for (; n < over; ++n) {
    auto it = ended_at_us_.find(finished_order_[n]);
    if (it != ended_at_us_.end() && it->second > cutoff) break;
  }
  ForgetOldest(n);
}

void Controller::ForgetOldest(size_t n) {
  n = std::min(n, finished_order_.size());
  for (size_t i = 0; i < n; ++i) DropEndedJob(finished_order_[i]);
  finished_order_.erase(finished_order_.begin(), finished_order_.begin() + n);
}

Result<uint64_t> Controller::Forget(JobId id) {
  const std::string job = "job " + std::to_string(id);
  const JobRun* run = scheduler_->job(id);
  if (run == nullptr) return Status::NotFound(job + ": no such job");
  // Ended once NotifyEndedJobs() has recorded it (and told its watchers).
  auto it = std::find(finished_order_.begin(), finished_order_.end(), id);
  if (it == finished_order_.end()) {
    // Ended in this loop iteration, not yet recorded: a moment later it is.
    if (IsTerminal(run->state)) return Status::Unavailable(job + " is ending; try again");
    return Status::InvalidArgument(job + " not forgotten: it has not ended (" +
                                   std::string(JobStateName(run->state)) + "); cancel it first");
  }
  // Forgotten in memory but not in the file, it would come back listed
  // after a restart, its outputs gone.
  if (writer_) {
    if (Status w = writer_->last_write(); !w.ok()) return Unstored(job + " not forgotten", w);
  }
  finished_order_.erase(it);
  return DropEndedJob(id);
}

uint64_t Controller::DropEndedJob(JobId gone) {
  SendToLiveWorkers(FreeJob{gone});
  ends_unstored_.erase(gone);
  // What the workers hold now: outputs not yet freed after their last
  // read (the final ones, those still to be read), on live workers.
  uint64_t bytes = 0;
  const JobRun* job = scheduler_->job(gone);
  auto [first, last] = JobOutputs(gone);
  for (auto o = first; o != last; ++o) {
    const uint32_t run = o->first.second;
    if (job != nullptr && run < job->runs.size() && job->runs[run].held &&
        workers_[o->second.worker].alive) {
      bytes += o->second.bytes;
    }
  }
  outputs_.erase(first, last);
  state_holders_.ForgetJob(gone);
  task_logs_.Forget(gone);
  scheduler_->EraseJob(gone);
  finished_unix_ms_.erase(gone);
  stored_metrics_.erase(gone);
  history_.erase(gone);
  ended_at_us_.erase(gone);
  // Built in place: GCC 12 at -O2 took a moved-in record's variant for
  // maybe uninitialized here (a false positive that -Werror turns fatal).
  if (writer_) store_pending_.emplace_back(std::in_place_type<JobForgottenRecord>, gone);
  return bytes;
}

uint64_t Controller::HeldRuns() const { return scheduler_->held_runs(); }

Status Controller::RoomForRuns(uint64_t runs, const std::string& what) {
  const uint64_t cap = options_.max_held_runs;
  if (runs > cap) {
    return Status::ResourceExhausted(what + ": " + std::to_string(runs) +
                                     " task runs, over the controller's --max-held-runs of " +
                                     std::to_string(cap));
  }
  // Ended jobs go first, oldest first, as --keep-jobs would forget them.
  uint64_t held = HeldRuns();
  size_t forget = 0;
  for (uint64_t freed = 0; held - freed > cap - runs && forget < finished_order_.size(); ++forget) {
    const JobRun* job = scheduler_->job(finished_order_[forget]);
    if (job != nullptr) freed += job->runs.size();
  }
  if (forget > 0) {
    // Forgotten in memory but not in the file, they would come back.
    if (writer_) {
      if (Status w = writer_->last_write(); !w.ok()) return Unstored(what + " refused", w);
    }
    spdlog::info("{}: forgetting the {} oldest ended jobs to stay under --max-held-runs ({})", what,
                 forget, cap);
    ForgetOldest(forget);
    held = HeldRuns();
  }
  if (held > cap - runs) {
    return Status::Unavailable(what + ": the controller holds " + std::to_string(held) +
                               " task runs of jobs not ended; with " + std::to_string(runs) +
                               " more it would go over --max-held-runs (" + std::to_string(cap) +
                               "); try again once some end");
  }
  return Status::Ok();
}

void Controller::ForgetExpiredJobs() {
  if (options_.keep_finished_hours <= 0 || finished_order_.empty()) return;
  const int64_t cutoff = WallMsNow() - static_cast<int64_t>(options_.keep_finished_hours * 3.6e6);
  // Oldest first: move the expired ones to the front and forget them there.
  auto expired = [&](JobId id) {
    auto it = finished_unix_ms_.find(id);
    return it != finished_unix_ms_.end() && it->second < cutoff;
  };
  auto keep = std::stable_partition(finished_order_.begin(), finished_order_.end(), expired);
  ForgetOldest(static_cast<size_t>(keep - finished_order_.begin()));
}

}  // namespace hmpmd
