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
#include <vector>

#include "hmpmd/protocol/data_frames.h"
#include "hmpmd/protocol/messages.h"
#include "hmpmd/protocol/status.h"
#include "hmpmd/protocol/types.h"
#include "hmpmd/worker/actor_state.h"
#include "mutex.h"

namespace hmpmd::worker {

class ActorStates {
 public:
  // The state of (job, submodel), made empty on first use. Never null.
  std::shared_ptr<ActorState> For(JobId job, std::string_view submodel) EXCLUDES(mu_);

  // The state of (job, submodel) if there is one, else nullptr.
  std::shared_ptr<ActorState> Find(JobId job, std::string_view submodel) const EXCLUDES(mu_);
  // The state of `job` whose sub-model's StateKey is `key` (a state
  // load's request), else nullptr.
  std::shared_ptr<ActorState> FindByKey(JobId job, uint64_t key) const EXCLUDES(mu_);

  // Makes the state of (job, submodel) from what ActorState::Export wrote
  // on another worker, unless it has one by now (a lane loaded or made it
  // meanwhile: that one stays, and this is Ok too). Corruption when
  // `exported` is malformed.
  Status Install(JobId job, std::string_view submodel, std::vector<Buffer> exported) EXCLUDES(mu_);

  // Drops every state of `job`; returns how many there were.
  size_t FreeJob(JobId job) EXCLUDES(mu_);
  // Drops every state of every job; returns how many there were.
  size_t FreeAll() EXCLUDES(mu_);

  // The states held, at most `max` of them, in (job, sub-model) order.
  std::vector<HeldState> List(size_t max) const EXCLUDES(mu_);

  // Bytes of data held in every state (ActorState::bytes(), summed).
  uint64_t bytes() const EXCLUDES(mu_);

  // Number of states held.
  size_t size() const EXCLUDES(mu_);

 private:
  mutable Mutex mu_;
  using BySubmodel = std::map<std::string, std::shared_ptr<ActorState>, std::less<>>;
  std::map<JobId, BySubmodel> states_ GUARDED_BY(mu_);
};

}  // namespace hmpmd::worker
