#include "collective_inbox.h"

#include "clock.h"

namespace hmpmd::worker {

void CollectiveInbox::Deliver(uint64_t tag, uint32_t src, zmq::message_t payload) {
  {
    MutexLock lock(&mu_);
    if (closed_.count(tag) > 0) return;  // late traffic of an ended collective
    queues_[{tag, src}].push_back(std::move(payload));
  }
  cv_.SignalAll();
}

std::optional<zmq::message_t> CollectiveInbox::Take(uint64_t tag, uint32_t src,
                                                    int64_t timeout_us) {
  const int64_t deadline = NowUs() + timeout_us;
  MutexLock lock(&mu_);
  for (;;) {
    auto it = queues_.find({tag, src});
    if (it != queues_.end() && !it->second.empty()) {
      zmq::message_t m = std::move(it->second.front());
      it->second.pop_front();
      if (it->second.empty()) queues_.erase(it);
      return m;
    }
    const int64_t left = deadline - NowUs();
    if (left <= 0) return std::nullopt;
    cv_.WaitForUs(&mu_, left);
  }
}

void CollectiveInbox::Drop(uint64_t tag) {
  MutexLock lock(&mu_);
  auto it = queues_.lower_bound({tag, 0});
  while (it != queues_.end() && it->first.first == tag) it = queues_.erase(it);
  if (!closed_.insert(tag).second) return;
  closed_order_.push_back(tag);
  if (closed_order_.size() > kClosedKept) {
    closed_.erase(closed_order_.front());
    closed_order_.pop_front();
  }
}

size_t CollectiveInbox::queued() const {
  MutexLock lock(&mu_);
  size_t n = 0;
  for (const auto& [key, q] : queues_) n += q.size();
  return n;
}

}  // namespace hmpmd::worker
