#include "hmpmd/controller/wall_clock.h"

#include <chrono>
#include <cstdio>
#include <ctime>

#include "hmpmd/controller/controller.h"

namespace hmpmd {

int64_t UnixNowUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

WallClock WallClock::Now() {
  WallClock c;
  c.mono_us = Controller::NowUs();
  c.unix_us = UnixNowUs();
  return c;
}

std::string Rfc3339(int64_t unix_us) {
  if (unix_us <= 0) return {};
  const std::time_t secs = static_cast<std::time_t>(unix_us / 1'000'000);
  std::tm tm = {};
  if (gmtime_r(&secs, &tm) == nullptr) return {};
  char buf[96];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%06dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                static_cast<int>(unix_us % 1'000'000));
  return buf;
}

}  // namespace hmpmd
