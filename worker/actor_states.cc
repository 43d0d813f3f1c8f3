#include "actor_states.h"

namespace hmpmd::worker {

std::shared_ptr<ActorState> ActorStates::For(JobId job, std::string_view submodel) {
  MutexLock lock(&mu_);
  BySubmodel& of_job = states_[job];
  auto it = of_job.find(submodel);
  if (it != of_job.end()) return it->second;
  auto state = std::make_shared<ActorState>();
  of_job.emplace(std::string(submodel), state);
  return state;
}

size_t ActorStates::FreeJob(JobId job) {
  MutexLock lock(&mu_);
  auto it = states_.find(job);
  if (it == states_.end()) return 0;
  const size_t n = it->second.size();
  states_.erase(it);
  return n;
}

size_t ActorStates::FreeAll() {
  MutexLock lock(&mu_);
  size_t n = 0;
  for (const auto& [job, by_submodel] : states_) n += by_submodel.size();
  states_.clear();
  return n;
}

size_t ActorStates::size() const {
  MutexLock lock(&mu_);
  size_t n = 0;
  for (const auto& [job, of_job] : states_) n += of_job.size();
  return n;
}

}  // namespace hmpmd::worker
