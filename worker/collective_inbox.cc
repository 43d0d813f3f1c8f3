#include "collective_inbox.h"

#include <algorithm>
#include <vector>

namespace hmpmd::worker {

CollectiveInbox::CollectiveInbox(CollectiveInboxOptions options) : options_(std::move(options)) {}

void CollectiveInbox::Deliver(uint64_t tag, uint32_t src, zmq::message_t payload) {
  {
    MutexLock lock(&mu_);
    int64_t now = 0;
    if (options_.expire_us > 0) {
      now = options_.now();
      if (now >= next_sweep_us_) {
        ExpireLocked(now);
        next_sweep_us_ = now + std::max<int64_t>(1, options_.expire_us / 4);
      }
    }
    if (closed_.count(tag) > 0) return;  // late traffic of an ended collective
    if (options_.cap_bytes > 0 && payload.size() > options_.cap_bytes - queued_bytes_) {
      const uint64_t n = ++overflowed_;
      if (options_.log != nullptr && (n & (n - 1)) == 0) {
        options_.log->warn(
            "collective inbox: dropped a frame of {} bytes for tag {:#x}: {} bytes queued, the "
            "cap is {} ({} dropped so far); its collective fails",
            payload.size(), tag, queued_bytes_, options_.cap_bytes, n);
      }
      // A stream with a hole must not go on: its later frames would be read
      // in place of the missing one (a wrong result, silently). Closed, the
      // collective fails at its Take() (woken below) and is retried.
      CloseLocked(tag);
    } else {
      Queue& q = queues_[{tag, src}];
      if (q.frames.empty()) q.since = now;
      queued_bytes_ += payload.size();
      q.frames.push_back(std::move(payload));
    }
  }
  cv_.SignalAll();
}

std::optional<zmq::message_t> CollectiveInbox::Take(uint64_t tag, uint32_t src,
                                                    int64_t timeout_us) {
  const int64_t deadline = NowUs() + timeout_us;
  MutexLock lock(&mu_);
  for (;;) {
    if (closed_.count(tag) > 0) return std::nullopt;  // overflowed (Deliver) or dropped
    auto it = queues_.find({tag, src});
    if (it != queues_.end() && !it->second.frames.empty()) {
      zmq::message_t m = std::move(it->second.frames.front());
      it->second.frames.pop_front();
      queued_bytes_ -= m.size();
      if (it->second.frames.empty()) {
        queues_.erase(it);
      } else if (options_.expire_us > 0) {
        it->second.since = options_.now();  // its collective is at work
      }
      return m;
    }
    const int64_t left = deadline - NowUs();
    if (left <= 0) return std::nullopt;
    cv_.WaitForUs(&mu_, left);
  }
}

void CollectiveInbox::Drop(uint64_t tag) {
  MutexLock lock(&mu_);
  CloseLocked(tag);
}

bool CollectiveInbox::Closed(uint64_t tag) const {
  MutexLock lock(&mu_);
  return closed_.count(tag) > 0;
}

void CollectiveInbox::CloseLocked(uint64_t tag) {
  auto it = queues_.lower_bound({tag, 0});
  while (it != queues_.end() && it->first.first == tag) {
    for (const zmq::message_t& m : it->second.frames) queued_bytes_ -= m.size();
    it = queues_.erase(it);
  }
  if (!closed_.insert(tag).second) return;
  closed_order_.push_back(tag);
  if (closed_order_.size() > kClosedKept) {
    closed_.erase(closed_order_.front());
    closed_order_.pop_front();
  }
}

void CollectiveInbox::ExpireLocked(int64_t now) {
  // One pass over the queues, which are ordered by tag: a tag expires when
  // the latest claim over all its senders is too old.
  std::vector<uint64_t> stale;
  size_t frames = 0;
  for (auto it = queues_.begin(); it != queues_.end();) {
    const uint64_t tag = it->first.first;
    int64_t latest = INT64_MIN;
    size_t n = 0;
    for (; it != queues_.end() && it->first.first == tag; ++it) {
      latest = std::max(latest, it->second.since);
      n += it->second.frames.size();
    }
    if (now - latest > options_.expire_us) {
      stale.push_back(tag);
      frames += n;
    }
  }
  for (uint64_t tag : stale) CloseLocked(tag);
  expired_ += stale.size();
  if (!stale.empty() && options_.log != nullptr) {
    options_.log->debug(
        "collective inbox: dropped {} frame(s) of {} collective(s) nobody claimed for {} ms "
        "(first tag {:#x})",
        frames, stale.size(), options_.expire_us / 1000, stale.front());
  }
}

size_t CollectiveInbox::queued() const {
  MutexLock lock(&mu_);
  size_t n = 0;
  for (const auto& [key, q] : queues_) n += q.frames.size();
  return n;
}

uint64_t CollectiveInbox::queued_bytes() const {
  MutexLock lock(&mu_);
  return queued_bytes_;
}

uint64_t CollectiveInbox::overflowed() const {
  MutexLock lock(&mu_);
  return overflowed_;
}

uint64_t CollectiveInbox::expired() const {
  MutexLock lock(&mu_);
  return expired_;
}

}  // namespace hmpmd::worker
