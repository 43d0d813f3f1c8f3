// ActorStates: every ActorState of a worker, keyed by (job, sub-model).
//
// Lanes look up (and create) the state of the task they run; the I/O thread
// frees a job's states when the controller frees or cancels the job. A lane
// holds a shared_ptr while its kernel runs, so freeing a job under a
// running kernel is safe (the kernel's writes go to a state nobody sees).
//
// Thread-safety: thread-safe (one mutex).
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "hmpmd/protocol/types.h"
#include "hmpmd/worker/actor_state.h"
#include "mutex.h"

namespace hmpmd::worker {

class ActorStates {
 public:
  // The state of (job, submodel), made empty on first use. Never null.
  std::shared_ptr<ActorState> For(JobId job, std::string_view submodel) EXCLUDES(mu_);

  // Drops every state of `job`; returns how many there were.
  size_t FreeJob(JobId job) EXCLUDES(mu_);
  // Drops every state of every job; returns how many there were.
  size_t FreeAll() EXCLUDES(mu_);

  // Number of states held.
  size_t size() const EXCLUDES(mu_);

 private:
  mutable Mutex mu_;
  using BySubmodel = std::map<std::string, std::shared_ptr<ActorState>, std::less<>>;
  std::map<JobId, BySubmodel> states_ GUARDED_BY(mu_);
};

}  // namespace hmpmd::worker
