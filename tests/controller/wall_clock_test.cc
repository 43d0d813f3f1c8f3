// WallClock and Rfc3339: monotonic controller times put on the wall clock.
#include "hmpmd/controller/wall_clock.h"

#include <gtest/gtest.h>

#include "hmpmd/controller/controller.h"

namespace hmpmd {
namespace {

TEST(WallClockTest, Rfc3339IsUtcWithMicroseconds) {
  EXPECT_EQ(Rfc3339(1), "1970-01-01T00:00:00.000001Z");
  EXPECT_EQ(Rfc3339(1'700'000'000'123'456), "2023-11-14T22:13:20.123456Z");
  EXPECT_EQ(Rfc3339(951'782'400'000'000), "2000-02-29T00:00:00.000000Z");
  EXPECT_EQ(Rfc3339(0), "") << "0 means not known";
  EXPECT_EQ(Rfc3339(-5), "");
}

TEST(WallClockTest, ThePairIsReadBetweenBoundsAndLaterTimesMapByAsMuch) {
  const int64_t before = UnixNowUs();
  const WallClock c = WallClock::Now();
  const int64_t after = UnixNowUs();
  EXPECT_GE(c.unix_us, before);
  EXPECT_LE(c.unix_us, after);
  EXPECT_EQ(c.ToUnixUs(c.mono_us), c.unix_us);
  EXPECT_EQ(c.ToUnixUs(c.mono_us + 2'500'000), c.unix_us + 2'500'000);
  // Later monotonic times are later wall-clock times, by as much.
  const TimeUs t = Controller::NowUs();
  EXPECT_GE(c.ToUnixUs(t), c.unix_us);
  EXPECT_EQ(c.ToUnixUs(t) - c.ToUnixUs(c.mono_us), t - c.mono_us);
}

}  // namespace
}  // namespace hmpmd
