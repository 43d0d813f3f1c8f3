// CollectiveInbox: collective traffic that the data server received, by
// (gang tag, sender rank), until the lane running that collective takes it.
//
// Frames from one sender arrive in the order it sent them (one DEALER ->
// ROUTER connection), so a FIFO per (tag, sender) is all the matching a
// collective needs. The controller gives every dispatch of a gang a new
// tag, so frames of an attempt that was stopped never mix into the next
// one; those arriving after their collective ended here (Drop) are
// discarded instead of kept forever.
//
// Thread-safety: thread-safe; the data server delivers, lanes take.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <utility>
#include <zmq.hpp>

#include "mutex.h"

namespace hmpmd::worker {

class CollectiveInbox {
 public:
  void Deliver(uint64_t tag, uint32_t src, zmq::message_t payload) EXCLUDES(mu_);
  // The oldest payload from `src` for `tag`, waiting up to `timeout_us`;
  // nullopt on time-out.
  std::optional<zmq::message_t> Take(uint64_t tag, uint32_t src, int64_t timeout_us) EXCLUDES(mu_);
  // Ends `tag` here (its collective ended, or its task was cancelled before
  // it started): what is queued for it is dropped, and so is what arrives
  // for it later (the last kClosedKept tags are remembered).
  void Drop(uint64_t tag) EXCLUDES(mu_);
  // Payloads queued, over every tag (for tests and logs).
  size_t queued() const EXCLUDES(mu_);

  static constexpr size_t kClosedKept = 4096;

 private:
  mutable Mutex mu_;
  CondVar cv_;
  std::map<std::pair<uint64_t, uint32_t>, std::deque<zmq::message_t>> queues_ GUARDED_BY(mu_);
  std::set<uint64_t> closed_ GUARDED_BY(mu_);
  std::deque<uint64_t> closed_order_ GUARDED_BY(mu_);  // oldest first, to bound closed_
};

}  // namespace hmpmd::worker
