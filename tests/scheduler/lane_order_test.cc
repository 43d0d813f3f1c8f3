// LaneOrder, alone and through the engine: of the runs placed on one core,
// the first dispatched runs and the others are queued behind it; an
// adopted run (order unknown) counts as running.
#include "hmpmd/scheduler/lane_order.h"

#include <gtest/gtest.h>

#include "hmpmd/scheduler/scheduler.h"
#include "scheduler_fixture.h"
#include "test_builders.h"

namespace hmpmd {
namespace {

TEST(LaneOrderTest, TheFirstDispatchedRunsAndTheRestWait) {
  LaneOrder lanes;
  lanes.Add(3, 10, 1);
  lanes.Add(3, 12, 2);
  lanes.Add(3, 11, 1);
  lanes.Add(4, 13, 1);
  EXPECT_FALSE(lanes.Behind(3, 10));
  EXPECT_TRUE(lanes.Behind(3, 11));
  EXPECT_TRUE(lanes.Behind(3, 12));
  EXPECT_FALSE(lanes.Behind(4, 13)) << "alone on its core";
  EXPECT_EQ(lanes.QueuedOf(1), 1u);
  EXPECT_EQ(lanes.QueuedOf(2), 1u);
  lanes.Remove(3, 10, 1);
  EXPECT_FALSE(lanes.Behind(3, 11)) << "next in line";
  EXPECT_TRUE(lanes.Behind(3, 12));
  EXPECT_EQ(lanes.QueuedOf(1), 0u);
  lanes.Remove(3, 11, 2);  // another job's seq: not there
  EXPECT_FALSE(lanes.Behind(3, 11));
}

TEST(LaneOrderTest, AnAdoptedRunCountsAsRunningAndTheRestWaitBehindIt) {
  LaneOrder lanes;
  lanes.Add(0, 0, 1);
  lanes.Add(0, 0, 2);
  lanes.Add(0, 5, 1);
  EXPECT_FALSE(lanes.Behind(0, 0));
  EXPECT_TRUE(lanes.Behind(0, 5));
  EXPECT_EQ(lanes.QueuedOf(1), 1u);
  EXPECT_EQ(lanes.QueuedOf(2), 0u);
}

using test::Device;
using test::SchedulerTest;
using test::SpecBuilder;
using test::TaskBuilder;

class LaneOrderEngineTest : public SchedulerTest {};

TEST_F(LaneOrderEngineTest, ASecondRunOnABusyLaneIsQueuedUntilTheFirstEnds) {
  opts_.pool.max_queue_per_core = 2;
  opts_.pool.lookahead_us = 1e9;
  Make();
  sched_->AddDevice(Device("w0", 1));
  JobId job = Add(SpecBuilder().Add(TaskBuilder("a").Us(1000)).Add(TaskBuilder("b").Us(1000)));
  std::vector<Dispatch> out = ScheduleAt(0);
  ASSERT_EQ(out.size(), 2u) << "both on the one lane";
  const TaskRecord& first = Job(job).runs[out[0].run];
  const TaskRecord& second = Job(job).runs[out[1].run];
  EXPECT_FALSE(sched_->Queued(first));
  EXPECT_TRUE(sched_->Queued(second));
  EXPECT_EQ(sched_->QueuedRuns(job), 1u);
  ASSERT_TRUE(sched_->OnTaskDone(job, out[0].run, out[0].attempt, 0, 1000, 1000));
  EXPECT_FALSE(sched_->Queued(second)) << "it runs now";
  EXPECT_EQ(sched_->QueuedRuns(job), 0u);
  ASSERT_TRUE(sched_->OnTaskFailed(job, out[1].run, out[1].attempt, "x", true, 1100));
  EXPECT_EQ(sched_->QueuedRuns(job), 0u);
}

}  // namespace
}  // namespace hmpmd
