// WorkerClock: how to put a worker's timestamps on the controller's clock.
//
// Each message a worker sends (register, heartbeat) carries its send time
// on its own monotonic clock; our receive time minus that is the offset
// plus the message's delay. The smallest seen is the best estimate: a
// message that sat in a queue (a controller stopped for seconds, a slow
// link) shows a larger one, and taking it would shift every later task
// time by that delay. Workers on this host share our clock: within
// kSameClockUs the offset is 0.
// Thread-safety: none; the controller loop owns it.
#pragma once

#include <cstdint>
#include <limits>

namespace hmpmd {

class WorkerClock {
 public:
  static constexpr int64_t kSameClockUs = 1'000'000;

  void Observe(int64_t sent_us, int64_t received_us) {
    const int64_t seen = received_us - sent_us;
    if (seen >= smallest_) return;
    smallest_ = seen;
    offset_us_ = (seen > kSameClockUs || seen < -kSameClockUs) ? seen : 0;
  }
  // Added to the worker's timestamps; 0 before any message.
  int64_t offset_us() const { return offset_us_; }

 private:
  int64_t smallest_ = std::numeric_limits<int64_t>::max();
  int64_t offset_us_ = 0;
};

}  // namespace hmpmd
