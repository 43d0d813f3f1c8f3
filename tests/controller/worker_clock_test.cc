// WorkerClock: the offset of a worker's timestamps from its messages.
#include "hmpmd/controller/worker_clock.h"

#include <gtest/gtest.h>

namespace hmpmd {
namespace {

TEST(WorkerClockTest, SameHostIsZeroAnotherHostIsShifted) {
  WorkerClock same;
  same.Observe(/*sent_us=*/1'000'000, /*received_us=*/1'000'200);
  EXPECT_EQ(same.offset_us(), 0) << "a 200 us delay on a shared clock";
  WorkerClock other;
  other.Observe(5'000'000, 905'000'300);
  EXPECT_EQ(other.offset_us(), 900'000'300);
}

TEST(WorkerClockTest, AMessageThatWaitedInAQueueIsCorrectedByTheNext) {
  // The register sat 8 s in the queue of a stopped controller: taken alone
  // it shifted every task time of that worker by 8 s.
  WorkerClock c;
  c.Observe(1'000'000, 9'000'000);
  EXPECT_EQ(c.offset_us(), 8'000'000);
  c.Observe(9'100'000, 9'100'150);  // the next heartbeat, not queued
  EXPECT_EQ(c.offset_us(), 0);
  c.Observe(9'200'000, 12'000'000);  // a later stall does not undo it
  EXPECT_EQ(c.offset_us(), 0);
}

TEST(WorkerClockTest, AnotherHostsOffsetIsTheSmallestSeen) {
  WorkerClock c;
  c.Observe(0, 50'004'000);
  c.Observe(1'000'000, 51'000'500);
  c.Observe(2'000'000, 52'000'900);
  EXPECT_EQ(c.offset_us(), 50'000'500);
}

}  // namespace
}  // namespace hmpmd
