#include "hmpmd/store/in_memory_job_store.h"

#include <algorithm>

namespace hmpmd {

Status InMemoryJobStore::Write(std::span<const StoreRecord> batch) {
  if (fail_writes_) return Status::Unavailable("in-memory store: writes fail (test)");
  for (const StoreRecord& record : batch) {
    std::visit(
        [this](const auto& r) {
          using T = std::decay_t<decltype(r)>;
          if constexpr (std::is_same_v<T, JobSubmittedRecord>) {
            StoredJob& j = jobs_[r.job];
            j.id = r.job;
            j.name = r.name;
            j.spec_json = r.spec_json;
            j.submitted = r.submitted;
            j.submitted_unix_us = r.submitted_unix_us;
            j.tenant = r.tenant;
            j.tenant_share = r.tenant_share;
            max_job_ = std::max(max_job_, r.job);
          } else if constexpr (std::is_same_v<T, TaskDoneRecord>) {
            auto it = jobs_.find(r.job);
            if (it == jobs_.end()) return;
            auto& done = it->second.done;
            auto pos =
                std::lower_bound(done.begin(), done.end(), r.run,
                                 [](const TaskDoneRecord& d, uint32_t run) { return d.run < run; });
            if (pos != done.end() && pos->run == r.run) {
              *pos = r;
            } else {
              done.insert(pos, r);
            }
          } else if constexpr (std::is_same_v<T, JobEndedRecord>) {
            auto it = jobs_.find(r.job);
            if (it == jobs_.end()) return;
            it->second.state = r.state;
            it->second.error = r.error;
            it->second.finished = r.finished;
            it->second.finished_unix_ms = r.finished_unix_ms;
            it->second.started = r.started;
            it->second.metrics = r.metrics;
            it->second.started_unix_us = r.started_unix_us;
            it->second.finished_unix_us = r.finished_unix_us;
          } else if constexpr (std::is_same_v<T, WorkerRecord>) {
            if (r.alive) {
              live_workers_.insert(r.key);
            } else {
              live_workers_.erase(r.key);
            }
          } else if constexpr (std::is_same_v<T, SessionGroupRecord>) {
            auto it = jobs_.find(r.job);
            if (it == jobs_.end()) return;
            auto& groups = it->second.groups;
            std::erase_if(groups, [&](const SessionGroupRecord& g) { return g.index == r.index; });
            groups.insert(std::lower_bound(groups.begin(), groups.end(), r.index,
                                           [](const SessionGroupRecord& g, uint32_t index) {
                                             return g.index < index;
                                           }),
                          r);
          } else if constexpr (std::is_same_v<T, RunEndedRecord>) {
            auto it = jobs_.find(r.job);
            if (it == jobs_.end()) return;
            auto& ended = it->second.ended;
            std::erase_if(ended, [&](const RunEndedRecord& e) { return e.run == r.run; });
            ended.insert(
                std::lower_bound(ended.begin(), ended.end(), r.run,
                                 [](const RunEndedRecord& e, uint32_t run) { return e.run < run; }),
                r);
          } else {
            static_assert(std::is_same_v<T, JobForgottenRecord>);
            jobs_.erase(r.job);
          }
        },
        record);
  }
  ++batches_;
  records_ += batch.size();
  return Status::Ok();
}

Result<std::vector<StoredJob>> InMemoryJobStore::Load() {
  std::vector<StoredJob> out;
  out.reserve(jobs_.size());
  for (const auto& [id, job] : jobs_) out.push_back(job);
  return out;
}

}  // namespace hmpmd

namespace hmpmd {

Result<std::optional<std::vector<std::string>>> InMemoryJobStore::LoadLiveWorkers() {
  return std::optional<std::vector<std::string>>(
      std::vector<std::string>(live_workers_.begin(), live_workers_.end()));
}

}  // namespace hmpmd
