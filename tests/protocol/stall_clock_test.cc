#include "hmpmd/protocol/stall_clock.h"

#include <gtest/gtest.h>

namespace hmpmd {
namespace {

TEST(StallClockTest, TheFirstObservationOnlyStartsTheClock) {
  StallClock c(100);
  EXPECT_EQ(c.Observe(1'000'000'000, 0), 0);
  EXPECT_EQ(c.stalled_us(), 0);
}

TEST(StallClockTest, AWaitWithinItsTimeoutAndTheSlackIsNoStall) {
  StallClock c(100);
  (void)c.Observe(0, 0);
  EXPECT_EQ(c.Observe(500, 500), 0);        // exactly the timeout
  EXPECT_EQ(c.Observe(1'100, 500), 0);      // 100 us late: the slack
  EXPECT_EQ(c.Observe(1'150, 500'000), 0);  // woken early by a message
  EXPECT_EQ(c.stalled_us(), 0);
}

TEST(StallClockTest, TimeBeyondTheTimeoutAndTheSlackIsAStall) {
  StallClock c(100);
  (void)c.Observe(0, 0);
  // Asked to wait 500 us, back after 8.5 ms: stopped for 7.9 ms.
  EXPECT_EQ(c.Observe(8'500, 500), 7'900);
  EXPECT_EQ(c.Observe(9'000, 500), 0);
  EXPECT_EQ(c.Observe(10'000, 0), 900);  // the loop's own work ran long
  EXPECT_EQ(c.stalled_us(), 8'800);
}

TEST(StallClockTest, CreditMovesAStampForwardButNeverPastNow) {
  EXPECT_EQ(StallClock::Credit(1'000, 7'000, 10'000), 8'000);
  EXPECT_EQ(StallClock::Credit(5'000, 7'000, 10'000), 10'000);
  EXPECT_EQ(StallClock::Credit(5'000, 0, 10'000), 5'000);
}

}  // namespace
}  // namespace hmpmd
