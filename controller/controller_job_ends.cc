// The controller's side of a job's end: its record for the store, its log
// line, its session and watchers told, and when its end is stored
// (EndDurable, which GET /api/v1/jobs/{id} waits for).
#include <spdlog/spdlog.h>

#include "hmpmd/controller/controller.h"
#include "hmpmd/controller/job_report.h"

namespace hmpmd {

void Controller::WatchEndsStored() {
  if (ends_queued_.empty()) return;
  writer_->AfterWritten([this, ids = std::move(ends_queued_)](const Status& st) {
    Post([this, ids, ok = st.ok()] {
      for (JobId id : ids) {
        if (!ends_unstored_.contains(id)) continue;  // forgotten meanwhile
        if (ok) {
          ends_unstored_.erase(id);
        } else {
          ends_failed_.push_back(id);
        }
      }
    });
  });
  ends_queued_.clear();
}

void Controller::NotifyEndedJobs() {
  for (auto it = live_jobs_.begin(); it != live_jobs_.end();) {
    const JobRun* job = scheduler_->job(*it);
    if (job == nullptr || !IsTerminal(job->state)) {
      ++it;
      continue;
    }
    JobId id = *it;
    it = live_jobs_.erase(it);
    finished_order_.push_back(id);
    const int64_t ended_ms = finished_unix_ms_[id] = WallMsNow();
    ended_at_us_[id] = NowUs();
    if (writer_) {
      // Its figures go with it: after a restart its runs have no cores.
      JobEndedRecord rec{id,
                         job->state,
                         job->error,
                         job->finished,
                         ended_ms,
                         job->started,
                         StoredMetricsText(*job, scheduler_->pool())};
      // A job reloaded as started keeps the wall clock its store gave.
      auto h = history_.find(id);
      const int64_t kept = h == history_.end() ? 0 : h->second->started_unix_us;
      rec.started_unix_us = job->started < 0 ? 0 : kept > 0 ? kept : wall_.ToUnixUs(job->started);
      rec.finished_unix_us = wall_.ToUnixUs(job->finished);
      store_pending_.push_back(std::move(rec));
      ends_unstored_.insert(id);
      ends_queued_.push_back(id);
    }
    if (job->state == JobState::kSucceeded) {
      // A session that ran no task never started: from its submission.
      const TimeUs began = job->started >= 0 ? job->started : job->submitted;
      spdlog::info("job {} '{}' succeeded in {:.3f} s", id, job->graph->spec().name,
                   (job->finished - began) / 1e6);
    } else {
      // A cancel is what someone asked for, not a fault: info, so that
      // `hmpmd run` stopped by a signal says so in its one error line only.
      spdlog::log(job->state == JobState::kCancelled ? spdlog::level::info : spdlog::level::warn,
                  "job {} '{}' {}: {}", id, job->graph->spec().name, JobStateName(job->state),
                  job->error);
    }
    if (sessions_.End(id, *job)) {
      auto [first, last] = JobOutputs(id);
      outputs_.erase(first, last);
    }
    auto w = job_watchers_.find(id);
    if (w != job_watchers_.end()) {
      auto callbacks = std::move(w->second);
      job_watchers_.erase(w);
      for (auto& cb : callbacks) cb(*job);
    }
  }
  ForgetOldJobs();
}

}  // namespace hmpmd
