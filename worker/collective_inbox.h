// CollectiveInbox: collective traffic that the data server received, by
// (gang tag, sender rank), until the lane running that collective takes it.
//
// Frames from one sender arrive in the order it sent them (one DEALER ->
// ROUTER connection), so a FIFO per (tag, sender) is all the matching a
// collective needs. The controller gives every dispatch of a gang a new
// tag, so frames of an attempt that was stopped never mix into the next
// one; those arriving after their collective ended here (Drop) are
// discarded instead of kept forever. Frames of a collective this worker
// never joins (its member was placed elsewhere, or stopped before the lane
// saw it) are never Dropped: they expire once nobody has claimed any frame
// of their tag for CollectiveInboxOptions::expire_us.
//
// Thread-safety: thread-safe; the data server delivers, lanes take.
#pragma once

#include <spdlog/logger.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <utility>
#include <zmq.hpp>

#include "clock.h"
#include "mutex.h"

namespace hmpmd::worker {

struct CollectiveInboxOptions {
  // A tag whose frames nobody has claimed (taken) for this long is dropped
  // and closed, as by Drop(). Long enough that its collective has given up
  // by then: the data plane uses 4x the peer time-out, after which every
  // peer waiting on this worker has failed. A member that starts even later
  // finds nothing and times out (retryable). 0: never. Default: 0.
  int64_t expire_us = 0;
  // Most payload bytes queued over every tag; a frame that would pass it is
  // dropped and counted (overflowed()): its collective then times out and
  // its gang is run again, where queuing it could run the worker out of
  // memory (frames are not counted in the object store). The data plane
  // uses the worker's --memory-mb. 0: no cap. Default: 0.
  uint64_t cap_bytes = 0;
  // The clock (monotonic microseconds). Default: NowUs.
  std::function<int64_t()> now = NowUs;
  // Where an expiry (debug, one line per sweep) and overflows (warn, at the
  // 1st, 2nd, 4th, 8th... drop) are logged; may be null.
  spdlog::logger* log = nullptr;
};

class CollectiveInbox {
 public:
  explicit CollectiveInbox(CollectiveInboxOptions options = {});

  // Queues `payload`; first drops the tags that expired, at most once per
  // quarter of expire_us.
  void Deliver(uint64_t tag, uint32_t src, zmq::message_t payload) EXCLUDES(mu_);
  // The oldest payload from `src` for `tag`, waiting up to `timeout_us`;
  // nullopt on time-out, and at once for a closed tag (Closed()).
  std::optional<zmq::message_t> Take(uint64_t tag, uint32_t src, int64_t timeout_us) EXCLUDES(mu_);
  // Ends `tag` here (its collective ended, or its task was cancelled before
  // it started): what is queued for it is dropped, and so is what arrives
  // for it later (the last kClosedKept tags are remembered).
  void Drop(uint64_t tag) EXCLUDES(mu_);
  // Whether `tag` was dropped, or closed because a frame of it did not fit
  // under cap_bytes (its stream has a hole: the collective must fail).
  bool Closed(uint64_t tag) const EXCLUDES(mu_);
  // Payloads queued, over every tag (for tests and logs).
  size_t queued() const EXCLUDES(mu_);
  // Their bytes (held under cap_bytes).
  uint64_t queued_bytes() const EXCLUDES(mu_);
  // Frames dropped because they would have passed cap_bytes.
  uint64_t overflowed() const EXCLUDES(mu_);
  // Tags dropped because nobody claimed them in time.
  uint64_t expired() const EXCLUDES(mu_);

  static constexpr size_t kClosedKept = 4096;

 private:
  // Frames from one sender, and when one of them was last claimed (or,
  // before any was, when the first arrived).
  struct Queue {
    std::deque<zmq::message_t> frames;
    int64_t since = 0;
  };
  void CloseLocked(uint64_t tag) REQUIRES(mu_);
  // Drops and closes every tag none of whose queues was claimed within
  // expire_us of `now`.
  void ExpireLocked(int64_t now) REQUIRES(mu_);

  const CollectiveInboxOptions options_;
  mutable Mutex mu_;
  CondVar cv_;
  std::map<std::pair<uint64_t, uint32_t>, Queue> queues_ GUARDED_BY(mu_);
  std::set<uint64_t> closed_ GUARDED_BY(mu_);
  std::deque<uint64_t> closed_order_ GUARDED_BY(mu_);  // oldest first, to bound closed_
  int64_t next_sweep_us_ GUARDED_BY(mu_) = 0;
  uint64_t expired_ GUARDED_BY(mu_) = 0;
  uint64_t queued_bytes_ GUARDED_BY(mu_) = 0;
  uint64_t overflowed_ GUARDED_BY(mu_) = 0;
};

}  // namespace hmpmd::worker
