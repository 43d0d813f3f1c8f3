#include "hmpmd/worker/actor_state.h"

#include <utility>

namespace hmpmd::worker {

void ActorState::Put(std::string name, Buffer value) {
  auto fresh = std::make_shared<const Buffer>(std::move(value));
  std::lock_guard<std::mutex> lock(mu_);
  auto [it, added] = values_.try_emplace(std::move(name));
  if (!added) bytes_ -= it->second->data.size();
  bytes_ += fresh->data.size();
  it->second = std::move(fresh);
}

std::shared_ptr<const Buffer> ActorState::Get(std::string_view name) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = values_.find(name);
  return it == values_.end() ? nullptr : it->second;
}

bool ActorState::Erase(std::string_view name) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = values_.find(name);
  if (it == values_.end()) return false;
  bytes_ -= it->second->data.size();
  values_.erase(it);
  return true;
}

void ActorState::Update(std::string name, const std::function<void(Buffer&)>& fn) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = values_.find(name);
  Buffer value = it == values_.end() ? Buffer{} : *it->second;
  fn(value);  // may throw: nothing changed yet
  auto fresh = std::make_shared<const Buffer>(std::move(value));
  if (it == values_.end()) {
    it = values_.emplace(std::move(name), nullptr).first;
  } else {
    bytes_ -= it->second->data.size();
  }
  bytes_ += fresh->data.size();
  it->second = std::move(fresh);
}

std::vector<std::string> ActorState::Names() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> names;
  names.reserve(values_.size());
  for (const auto& [name, value] : values_) names.push_back(name);
  return names;
}

uint64_t ActorState::bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return bytes_;
}

void ActorState::PutObject(std::string name, std::shared_ptr<void> object) {
  std::shared_ptr<void> old;  // dropped after the lock: its deleter may take time
  std::lock_guard<std::mutex> lock(mu_);
  std::shared_ptr<void>& slot = objects_[std::move(name)];
  old = std::move(slot);
  slot = std::move(object);
}

std::shared_ptr<void> ActorState::GetObject(std::string_view name) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = objects_.find(name);
  return it == objects_.end() ? nullptr : it->second;
}

}  // namespace hmpmd::worker
