// StateLoader: loads sub-model states ahead of the tasks that need them
// (docs/scheduling.md#live-state), so a load hides under the tasks its
// lane runs first, as input prefetch does for inputs.
//
// The I/O thread calls Begin() when it pushes a task whose sub-model's
// state this worker lacks (TaskAssign::state_from). The load runs on the
// loader's own thread, one at a time, in push order. The lane that runs
// the task then takes the outcome with Take(), waiting while the load is
// in flight; when none was begun (a second task of the same sub-model, or
// a load already taken), Take() says so and the lane loads by itself if it
// still lacks the state. A job freed or cancelled drops its loads
// (ForgetJob): queued ones never start, a finished one's outcome goes, and
// what a running one installs is dropped when it ends.
//
// Thread-safety: thread-safe (one mutex).
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include "hmpmd/protocol/status.h"
#include "hmpmd/protocol/types.h"
#include "mutex.h"

namespace hmpmd::worker {

class StateLoader {
 public:
  // Loads the state of (job, submodel) from the worker at `from` unless
  // this worker has it: the bytes it brought (DataPlane::LoadState).
  using LoadFn = std::function<Result<uint64_t>(JobId job, const std::string& submodel,
                                                const std::string& from)>;
  // Frees what a load installed for a job forgotten while it ran.
  using DropFn = std::function<void(JobId job)>;
  struct Outcome {
    Status status;
    uint64_t bytes = 0;    // 0: it was here already
    int64_t start_us = 0;  // NowUs() when the load began and ended
    int64_t end_us = 0;
  };

  StateLoader(LoadFn load, DropFn drop);
  ~StateLoader();
  StateLoader(const StateLoader&) = delete;
  StateLoader& operator=(const StateLoader&) = delete;

  // Queues the load of (job, submodel) from `from`, unless one is queued,
  // running, or finished well and not yet taken (a failed one not taken is
  // replaced). The I/O thread.
  void Begin(JobId job, const std::string& submodel, const std::string& from) EXCLUDES(mu_);
  // The outcome of the load begun for (job, submodel), removed here;
  // waits while it is queued or running, until `*cancelled` (may be null)
  // rises (then Cancelled). nullopt when none was begun.
  std::optional<Outcome> Take(JobId job, const std::string& submodel,
                              const std::atomic<bool>* cancelled) EXCLUDES(mu_);
  // Loads on the calling thread (a lane whose task had no load begun),
  // timed as the loader's own thread times its loads.
  Outcome LoadNow(JobId job, const std::string& submodel, const std::string& from) const;
  // Drops `job`'s loads: queued ones never run; a running one's outcome
  // is dropped when it ends.
  void ForgetJob(JobId job) EXCLUDES(mu_);
  // Fails what is queued, then joins the thread (a running load ends
  // within its fetch timeout). Idempotent.
  void Stop() EXCLUDES(mu_);

  // Loads begun here, and those that ended (for tests and logs).
  uint64_t begun() const EXCLUDES(mu_);
  uint64_t ended() const EXCLUDES(mu_);

 private:
  using Key = std::pair<JobId, std::string>;
  struct Entry {
    std::string from;
    bool running = false;
    bool done = false;
    bool forgotten = false;  // its job went while it ran: erased when it ends
    Outcome outcome;
  };
  void Loop() EXCLUDES(mu_);

  const LoadFn load_;
  const DropFn drop_;
  mutable Mutex mu_;
  CondVar work_cv_;  // the thread: a load queued, or stop
  CondVar done_cv_;  // lanes: a load ended
  std::map<Key, Entry> entries_ GUARDED_BY(mu_);
  std::deque<Key> queue_ GUARDED_BY(mu_);
  uint64_t begun_ GUARDED_BY(mu_) = 0;
  uint64_t ended_ GUARDED_BY(mu_) = 0;
  bool stop_ GUARDED_BY(mu_) = false;
  std::thread thread_;  // started on the first Begin()
};

}  // namespace hmpmd::worker
