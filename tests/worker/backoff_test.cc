#include "backoff.h"

#include <gtest/gtest.h>

namespace hmpmd::worker {
namespace {

TEST(BackoffTest, DoublesUpToTheMaximumAndResets) {
  Backoff b(100, 1000);
  EXPECT_EQ(b.Next(), 100);
  EXPECT_EQ(b.Next(), 200);
  EXPECT_EQ(b.Next(), 400);
  EXPECT_EQ(b.Next(), 800);
  EXPECT_EQ(b.Next(), 1000);
  EXPECT_EQ(b.Next(), 1000);
  b.Reset();
  EXPECT_EQ(b.Next(), 100);
}

}  // namespace
}  // namespace hmpmd::worker
