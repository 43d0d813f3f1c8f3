// Backoff: the growing wait between registration attempts.
//
// Thread-safety: not thread-safe; the I/O thread owns it.
#pragma once

#include <algorithm>
#include <cstdint>

namespace hmpmd::worker {

// Next() gives min, 2*min, 4*min, ... capped at max; Reset() starts over.
class Backoff {
 public:
  // REQUIRES: 0 < min_us <= max_us.
  Backoff(int64_t min_us, int64_t max_us) : min_us_(min_us), max_us_(max_us), next_us_(min_us) {}

  int64_t Next() {
    const int64_t d = next_us_;
    next_us_ = std::min(next_us_ * 2, max_us_);
    return d;
  }
  void Reset() { next_us_ = min_us_; }

 private:
  const int64_t min_us_;
  const int64_t max_us_;
  int64_t next_us_;
};

}  // namespace hmpmd::worker
