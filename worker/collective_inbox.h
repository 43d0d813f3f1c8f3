// CollectiveInbox: collective traffic that the data server received, by
// (gang tag, sender rank), until the lane running that collective takes it.
//
// Frames from one sender arrive in the order it sent them (one DEALER ->
// ROUTER connection), so a FIFO per (tag, sender) is all the matching a
// collective needs.
//
// Thread-safety: thread-safe; the data server delivers, lanes take.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
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
  // Drops whatever is still queued for `tag` (a failed collective).
  void Drop(uint64_t tag) EXCLUDES(mu_);

 private:
  Mutex mu_;
  CondVar cv_;
  std::map<std::pair<uint64_t, uint32_t>, std::deque<zmq::message_t>> queues_ GUARDED_BY(mu_);
};

}  // namespace hmpmd::worker
