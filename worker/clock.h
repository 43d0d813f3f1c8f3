// The worker's clock: microseconds on CLOCK_MONOTONIC (std::steady_clock on
// Linux), the clock every time in the protocol is read on.
//
// Thread-safety: safe from any thread.
#pragma once

#include <chrono>
#include <cstdint>

namespace hmpmd::worker {

inline int64_t NowUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace hmpmd::worker
