// StallClock: how long a loop was not running when it meant to be (stopped
// by SIGSTOP, paused in a VM, starved of CPU, swapping), so that a peer's
// silence is judged only over time this process could have heard it.
//
// A controller stopped for 8 s, once resumed, may judge its workers before
// ZeroMQ's I/O thread has read the heartbeats that wait in the kernel: all
// of them look 8 s silent. The loop calls Observe() after each wait with
// the longest it meant to be away (its poll timeout); time beyond that and
// a slack is a stall, and the loop moves its last-heard stamps forward by
// it, so the peers get their whole timeout again from the resume.
//
// A loop whose own work takes longer than the slack counts the excess as a
// stall too: it did not read its socket then either. Liveness is still
// judged, later by at most that excess per iteration.
//
// Thread-safety: none; one loop owns it.
#pragma once

#include <algorithm>
#include <cstdint>

namespace hmpmd {

class StallClock {
 public:
  // Longer than any normal scheduling delay of a loop on a loaded machine.
  static constexpr int64_t kDefaultSlackUs = 250'000;

  explicit StallClock(int64_t slack_us = kDefaultSlackUs) : slack_us_(slack_us) {}

  // `now`: monotonic microseconds; `asked_us`: the longest the loop meant
  // to be away since the previous call. Returns the stall found (0: none).
  // The first call only starts the clock.
  int64_t Observe(int64_t now, int64_t asked_us) {
    int64_t stall = 0;
    if (last_us_ >= 0) stall = std::max<int64_t>(0, now - last_us_ - asked_us - slack_us_);
    last_us_ = now;
    stalled_us_ += stall;
    return stall;
  }

  // Every stall found so far, in microseconds.
  int64_t stalled_us() const { return stalled_us_; }

  // `stamp` moved forward by `stall`, never past `now`.
  static int64_t Credit(int64_t stamp, int64_t stall, int64_t now) {
    return std::min(now, stamp + stall);
  }

 private:
  int64_t slack_us_;
  int64_t last_us_ = -1;
  int64_t stalled_us_ = 0;
};

}  // namespace hmpmd
