// WallClock: puts the controller's monotonic times on the wall clock.
//
// Durations and ordering come from the monotonic clock (Controller::NowUs),
// which never steps; people and other programs need the wall clock (Unix
// time) to line a job up with logs, Prometheus or another host. A WallClock
// is one pair of readings of both clocks taken together; a monotonic time
// t is then `unix_us + (t - mono_us)` on the wall clock. A wall clock that
// steps after the pair was taken is not followed: times stay consistent
// with each other (and with the durations shown beside them).
// Thread-safety: a value; copy it freely.
#pragma once

#include <cstdint>
#include <string>

#include "hmpmd/protocol/types.h"

namespace hmpmd {

struct WallClock {
  TimeUs mono_us = 0;   // Controller::NowUs() then
  int64_t unix_us = 0;  // system_clock then, microseconds since 1970-01-01 UTC

  // Both clocks read now (one right after the other).
  static WallClock Now();
  // Unix microseconds of monotonic time `t`.
  int64_t ToUnixUs(TimeUs t) const { return unix_us + (t - mono_us); }
};

// Microseconds of the wall clock now (system_clock).
int64_t UnixNowUs();

// "2026-11-29T02:17:45.123456Z" (RFC 3339, UTC, microseconds); "" for
// `unix_us` <= 0 (not known).
std::string Rfc3339(int64_t unix_us);

}  // namespace hmpmd
