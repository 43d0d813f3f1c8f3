// RunBatches: runs the controller must tell workers about (to cancel, to
// abort, to free), gathered into one message per (worker, job). CancelRuns
// and FreeRuns name a single job, so runs of two jobs on one worker are two
// messages; gathering by worker alone would file one job's runs under the
// other's id.
// Thread-safety: not thread-safe; used on the controller's loop.
#pragma once

#include <map>
#include <utility>

#include "hmpmd/controller/worker_registry.h"
#include "hmpmd/protocol/messages.h"

namespace hmpmd {

template <typename Msg>  // CancelRuns or FreeRuns
class RunBatches {
 public:
  void Add(WorkerId worker, JobId job, uint32_t run) {
    Msg& m = batches_[{worker, job}];
    m.job = job;
    m.runs.push_back(run);
  }
  bool empty() const { return batches_.empty(); }
  // Calls send(worker, message) once per (worker, job), in that order.
  template <typename Send>
  void ForEach(Send&& send) const {
    for (const auto& [key, m] : batches_) send(key.first, m);
  }

 private:
  std::map<std::pair<WorkerId, JobId>, Msg> batches_;
};

}  // namespace hmpmd
