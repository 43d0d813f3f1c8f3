#include "hmpmd/controller/worker_registry.h"

#include <string_view>
#include <unordered_set>

namespace hmpmd {

WorkerInfo* WorkerRegistry::FindByIdentity(const std::string& identity) {
  auto it = by_identity_.find(identity);
  return it == by_identity_.end() ? nullptr : &workers_[it->second];
}

WorkerInfo* WorkerRegistry::FindByKey(const std::string& key) {
  auto it = by_key_.find(key);
  return it == by_key_.end() ? nullptr : &workers_[it->second];
}

WorkerInfo* WorkerRegistry::FindLiveInstance(const RegisterMsg& m) {
  if (m.instance == 0) return nullptr;
  auto it = by_name_.find(m.name);
  if (it == by_name_.end()) return nullptr;
  WorkerInfo& w = workers_[it->second];
  return w.alive && w.instance == m.instance ? &w : nullptr;
}

const WorkerInfo* WorkerRegistry::OfDevice(DeviceId d) const {
  return d < device_worker_.size() ? &workers_[device_worker_[d]] : nullptr;
}

WorkerInfo* WorkerRegistry::OfDevice(DeviceId d) {
  return d < device_worker_.size() ? &workers_[device_worker_[d]] : nullptr;
}

std::vector<bool> WorkerRegistry::ListedDevices(size_t device_count) const {
  std::vector<bool> listed(device_count, true);  // devices of no worker too
  // Newest registration first: a dead device whose name registered again
  // later is that worker's past row (each controller stall added one).
  std::unordered_set<std::string_view> seen;
  size_t dead = 0;
  for (auto w = workers_.rbegin(); w != workers_.rend(); ++w) {
    const bool again = !seen.insert(w->name).second;
    if (w->device >= listed.size() || w->alive) continue;
    listed[w->device] = !again && dead < kDeadDevicesListed;
    dead += listed[w->device] ? 1 : 0;
  }
  return listed;
}

WorkerRegistry::InstanceCheck WorkerRegistry::CheckInstance(const RegisterMsg& m) {
  if (m.instance == 0) return {};
  if (retired_.count(m.instance) > 0) return {.retired = true};
  auto known = by_name_.find(m.name);
  if (known == by_name_.end()) return {};
  WorkerInfo& old = workers_[known->second];
  if (old.instance == m.instance) return {};  // the same process reconnecting
  // A new process under this name: it holds none of the old one's tasks or
  // outputs, so the old one is lost whatever it says later.
  if (retired_.insert(old.instance).second) {
    retired_order_.push_back(old.instance);
    if (retired_order_.size() > kRetiredKept) {
      retired_.erase(retired_order_.front());
      retired_order_.pop_front();
    }
  }
  return {.replaced = &old};
}

WorkerInfo& WorkerRegistry::Add(WorkerInfo w) {
  const WorkerId id = w.id;
  if (device_worker_.size() <= w.device) device_worker_.resize(w.device + 1);
  device_worker_[w.device] = id;
  by_identity_[w.identity] = id;
  if (!w.data_endpoint.empty()) by_key_[w.key] = id;
  if (w.instance != 0) by_name_[w.name] = id;
  w.alive = true;
  workers_.push_back(std::move(w));
  ++alive_;
  ++pool_changes_;
  return workers_.back();
}

void WorkerRegistry::Rebind(WorkerInfo& w, const std::string& identity) {
  if (!w.alive || w.identity == identity) return;
  by_identity_.erase(w.identity);
  by_identity_[identity] = w.id;
  w.identity = identity;
}

void WorkerRegistry::MarkGone(WorkerInfo& w, std::string why) {
  if (!w.alive) return;
  w.alive = false;
  w.left_reason = std::move(why);
  --alive_;
  ++pool_changes_;
  by_identity_.erase(w.identity);
  // Only its own entry: a worker of the same key may have replaced it.
  if (auto k = by_key_.find(w.key); k != by_key_.end() && k->second == w.id) by_key_.erase(k);
}

void WorkerRegistry::SetStoreBytes(WorkerInfo& w, uint64_t bytes, uint64_t state_bytes) {
  if (w.store_bytes != bytes || w.state_bytes != state_bytes) ++pool_changes_;
  w.store_bytes = bytes;
  w.state_bytes = state_bytes;
}

void WorkerRegistry::WhenAlive(size_t n, std::function<void()> cb) {
  if (alive_ >= n) {
    cb();
    return;
  }
  waiters_.emplace_back(n, std::move(cb));
}

void WorkerRegistry::WakeWaiters() {
  for (auto it = waiters_.begin(); it != waiters_.end();) {
    if (alive_ >= it->first) {
      auto cb = std::move(it->second);
      it = waiters_.erase(it);
      cb();
    } else {
      ++it;
    }
  }
}

}  // namespace hmpmd
