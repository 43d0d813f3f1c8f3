// StateHolders: which workers hold a sub-model's state, which one a worker
// without it loads it from, and the loads a job's report shows.
#include "hmpmd/controller/state_holders.h"

#include <gtest/gtest.h>

namespace hmpmd {
namespace {

TEST(StateHoldersTest, AWorkerLoadsFromTheLatestHolderAndNotFromItself) {
  StateHolders h;
  EXPECT_EQ(h.SourceFor(1, 0, 7), StateHolders::kNone);  // nobody: the kernel makes it
  h.Held(1, 0, 3);
  h.Held(1, 0, 4);
  EXPECT_EQ(h.SourceFor(1, 0, 7), 4u);
  h.Held(1, 0, 3);  // ran it again: the latest now
  EXPECT_EQ(h.SourceFor(1, 0, 7), 3u);
  EXPECT_EQ(h.SourceFor(1, 0, 4), StateHolders::kNone);  // holds it
  EXPECT_TRUE(h.Holds(1, 0, 4));
  // Keyed by job and sub-model.
  EXPECT_EQ(h.SourceFor(1, 1, 7), StateHolders::kNone);
  EXPECT_EQ(h.SourceFor(2, 0, 7), StateHolders::kNone);
}

TEST(StateHoldersTest, AGoneWorkerHoldsNothingAndAFreedJobIsForgotten) {
  StateHolders h;
  h.Held(1, 0, 3);
  h.Held(1, 0, 4);
  h.Held(2, 1, 4);
  h.ForgetWorker(4);
  EXPECT_EQ(h.SourceFor(1, 0, 7), 3u);
  EXPECT_EQ(h.SourceFor(2, 1, 7), StateHolders::kNone);
  h.ForgetWorker(3);
  EXPECT_EQ(h.SourceFor(1, 0, 7), StateHolders::kNone);
  h.Held(1, 0, 5);
  h.Loaded(1, 0, 2, 100, 150, 9, 64, 0);
  h.ForgetJob(1);
  EXPECT_EQ(h.SourceFor(1, 0, 7), StateHolders::kNone);
  EXPECT_EQ(h.LoadsOf(1), nullptr);
}

TEST(StateHoldersTest, ASnapshotOfTheLoadsDoesNotChangeUnderLaterOnes) {
  StateHolders h;
  EXPECT_EQ(h.LoadsOf(1), nullptr);
  h.Loaded(1, 2, 5, 100, 180, 9, 64, 30);
  std::shared_ptr<const StateLoadTimes> first = h.LoadsOf(1);
  ASSERT_NE(first, nullptr);
  ASSERT_EQ(first->slices.size(), 1u);
  EXPECT_EQ(first->slices[0].device, 5u);
  EXPECT_EQ(first->slices[0].start, 100);
  EXPECT_EQ(first->slices[0].end, 180);
  EXPECT_EQ(first->slices[0].submodel, 2u);
  EXPECT_EQ(first->slices[0].run, 9u);
  EXPECT_EQ(first->slices[0].bytes, 64u);
  EXPECT_FALSE(first->slices[0].prefetch);
  EXPECT_EQ(first->slices[0].waited, 30);
  // An end before its start (clock skew): empty; a wait past the load: the load.
  h.Loaded(1, 2, 6, 200, 190, 10, 8, 50);
  EXPECT_EQ(first->slices.size(), 1u);
  ASSERT_EQ(h.LoadsOf(1)->slices.size(), 2u);
  EXPECT_EQ(h.LoadsOf(1)->slices[1].end, 200);
  EXPECT_EQ(h.LoadsOf(1)->slices[1].waited, 0);
  h.Loaded(1, 2, 6, 300, 400, 11, 8, -20);  // ended before its run began: all hidden
  EXPECT_EQ(h.LoadsOf(1)->slices[2].waited, 0);
}

}  // namespace
}  // namespace hmpmd
