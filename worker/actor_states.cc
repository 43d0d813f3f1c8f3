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

std::shared_ptr<ActorState> ActorStates::Find(JobId job, std::string_view submodel) const {
  MutexLock lock(&mu_);
  auto of_job = states_.find(job);
  if (of_job == states_.end()) return nullptr;
  auto it = of_job->second.find(submodel);
  return it == of_job->second.end() ? nullptr : it->second;
}

std::shared_ptr<ActorState> ActorStates::FindByKey(JobId job, uint64_t key) const {
  MutexLock lock(&mu_);
  auto of_job = states_.find(job);
  if (of_job == states_.end()) return nullptr;
  // A job's sub-models with state here are few: a scan, not an index.
  for (const auto& [name, state] : of_job->second) {
    if (StateKey(name) == key) return state;
  }
  return nullptr;
}

Status ActorStates::Install(JobId job, std::string_view submodel, std::vector<Buffer> exported) {
  auto state = std::make_shared<ActorState>();
  RETURN_IF_ERROR(state->Install(std::move(exported)));
  MutexLock lock(&mu_);
  BySubmodel& of_job = states_[job];
  if (of_job.find(submodel) == of_job.end())
    of_job.emplace(std::string(submodel), std::move(state));
  return Status::Ok();
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

std::vector<HeldState> ActorStates::List(size_t max) const {
  MutexLock lock(&mu_);
  std::vector<HeldState> out;
  for (const auto& [job, of_job] : states_) {
    for (const auto& [submodel, state] : of_job) {
      if (out.size() == max) return out;
      out.push_back({job, submodel});
    }
  }
  return out;
}

uint64_t ActorStates::bytes() const {
  MutexLock lock(&mu_);
  uint64_t n = 0;
  for (const auto& [job, of_job] : states_) {
    for (const auto& [submodel, state] : of_job) n += state->bytes();
  }
  return n;
}

size_t ActorStates::size() const {
  MutexLock lock(&mu_);
  size_t n = 0;
  for (const auto& [job, of_job] : states_) n += of_job.size();
  return n;
}

}  // namespace hmpmd::worker
