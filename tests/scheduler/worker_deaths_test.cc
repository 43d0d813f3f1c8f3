// Tests for SchedulerOptions::max_worker_deaths (scheduler/scheduler.cc,
// RemoveDevice): a run whose worker died while it ran there, on that many
// distinct workers, is not retried again (a kernel that aborts its process
// would otherwise take down the pool worker by worker); runs that were only
// queued behind it on the dead lane are not counted.
// Driven by hand: no threads, no clock.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "hmpmd/scheduler/scheduler.h"
#include "scheduler_fixture.h"
#include "test_builders.h"

namespace hmpmd {
namespace {

using test::Device;
using test::SchedulerTest;
using test::SpecBuilder;
using test::TaskBuilder;

class WorkerDeathsTest : public SchedulerTest {
 protected:
  // The device `out` put run `run` of `job` on; fails the test if none.
  static DeviceId DeviceOf(const std::vector<Dispatch>& out, JobId job, uint32_t run) {
    for (const Dispatch& d : out) {
      if (d.job == job && d.run == run) return d.device;
    }
    ADD_FAILURE() << "run " << run << " of job " << job << " was not dispatched";
    return UINT32_MAX;
  }
};

TEST_F(WorkerDeathsTest, TaskThatKillsTwoWorkersFailsTheJobAndSparesTheThird) {
  Make();  // max_attempts 3, max_worker_deaths 2 (defaults)
  ASSERT_EQ(opts_.max_worker_deaths, 2u);
  for (const char* w : {"w0", "w1", "w2"}) sched_->AddDevice(Device(w, 1));
  JobId job = Add(SpecBuilder().Add(TaskBuilder("boom").Us(100)));
  std::vector<std::string> dead;
  for (int i = 0; i < 2; ++i) {
    std::vector<Dispatch> out = ScheduleAt(10 * i);
    ASSERT_EQ(out.size(), 1u) << "death " << i;
    dead.push_back(sched_->pool().device(out[0].device).desc.name);
    sched_->RemoveDevice(out[0].device, 10 * i + 5);
  }
  const JobRun& j = Job(job);
  EXPECT_EQ(j.state, JobState::kFailed);
  EXPECT_EQ(j.runs[0].state, TaskState::kFailed);
  EXPECT_EQ(j.runs[0].attempt, 1u) << "two attempts, not three";
  ExpectHas(j.error, {"task 'boom'", "killed 2 workers", dead[0], dead[1], "max_worker_deaths"});
  EXPECT_EQ(sched_->pool().alive_device_count(), 1u) << "the third worker is spared";
  EXPECT_TRUE(ScheduleAt(30).empty());
}

TEST_F(WorkerDeathsTest, RunsQueuedBehindTheRunningOneAreNotCounted) {
  // One core queues two runs: the first dispatched runs, the other waits.
  opts_.pool.max_queue_per_core = 2;
  opts_.pool.lookahead_us = 1e9;
  Make();
  DeviceId w0 = sched_->AddDevice(Device("w0", 1));
  JobId killer = Add(SpecBuilder().Name("killer").Add(TaskBuilder("boom").Us(1000)));
  std::vector<Dispatch> first = ScheduleAt(0);
  JobId victim = Add(SpecBuilder().Name("victim").Add(TaskBuilder("quiet").Us(10)), 1);
  std::vector<Dispatch> second = ScheduleAt(1);
  ASSERT_EQ(first.size(), 1u);
  ASSERT_EQ(second.size(), 1u);
  ASSERT_EQ(second[0].core, first[0].core) << "queued behind boom on w0's lane";

  sched_->RemoveDevice(w0, 5);
  ASSERT_EQ(Job(killer).worker_deaths.count(0), 1u);
  EXPECT_EQ(Job(victim).worker_deaths.count(0), 0u) << "it only waited on the dead lane";
  EXPECT_EQ(Job(killer).state, JobState::kRunning);

  // Again on w1: boom is dispatched first (it was ready first), the quiet
  // run queues behind it, and w1 dies too.
  DeviceId w1 = sched_->AddDevice(Device("w1", 1));
  std::vector<Dispatch> out = ScheduleAt(10);
  ASSERT_EQ(out.size(), 2u);
  ASSERT_EQ(out[0].job, killer);
  EXPECT_EQ(DeviceOf(out, victim, 0), w1);
  sched_->RemoveDevice(w1, 15);
  EXPECT_EQ(Job(killer).state, JobState::kFailed);
  ExpectHas(Job(killer).error, {"task 'boom'", "killed 2 workers (w0, w1)"});
  EXPECT_EQ(Job(victim).state, JobState::kRunning);
  EXPECT_EQ(Job(victim).worker_deaths.count(0), 0u);

  // The victim runs to success on a third worker.
  sched_->AddDevice(Device("w2", 1));
  out = ScheduleAt(20);
  ASSERT_EQ(out.size(), 1u);
  ASSERT_TRUE(sched_->OnTaskDone(victim, 0, out[0].attempt, 20, 30, 30));
  EXPECT_EQ(Job(victim).state, JobState::kSucceeded);
}

// After a controller restart the worker lists what it holds in (job, task)
// order, not in its lanes' order: which adopted run was running is unknown,
// so a death then counts against none of them (before, the first listed
// was blamed, and twice failed an innocent task for good).
TEST_F(WorkerDeathsTest, RunsAdoptedAfterARestartAreNotBlamed) {
  Make();
  DeviceId w0 = sched_->AddDevice(Device("w0", 1));
  JobId job = Add(SpecBuilder().Add(TaskBuilder("a").Us(100)).Add(TaskBuilder("b").Us(100)));
  ASSERT_TRUE(sched_->AdoptRun(job, 1, 0, w0, CoreKind::kCube, 0, 1));
  ASSERT_TRUE(sched_->AdoptRun(job, 0, 0, w0, CoreKind::kCube, 0, 1));
  sched_->RemoveDevice(w0, 5);
  EXPECT_TRUE(Job(job).worker_deaths.empty());
  EXPECT_EQ(Job(job).state, JobState::kRunning);
}

TEST_F(WorkerDeathsTest, ZeroMeansOnlyMaxAttemptsBounds) {
  opts_.max_worker_deaths = 0;
  Make();
  for (const char* w : {"w0", "w1", "w2"}) sched_->AddDevice(Device(w, 1));
  JobId job = Add(SpecBuilder().Add(TaskBuilder("boom").Us(100)));
  for (int i = 0; i < 3; ++i) {
    std::vector<Dispatch> out = ScheduleAt(10 * i);
    ASSERT_EQ(out.size(), 1u) << "death " << i;
    sched_->RemoveDevice(out[0].device, 10 * i + 5);
  }
  EXPECT_EQ(Job(job).state, JobState::kFailed);
  ExpectHas(Job(job).error, {"task 'boom'", "after 3 attempts", "died"});
  EXPECT_EQ(sched_->pool().alive_device_count(), 0u);
}

TEST_F(WorkerDeathsTest, ALimitOfThreeRetriesAfterTwoDeaths) {
  opts_.max_worker_deaths = 3;
  opts_.max_attempts = 5;
  Make();
  for (const char* w : {"w0", "w1", "w2", "w3"}) sched_->AddDevice(Device(w, 1));
  JobId job = Add(SpecBuilder().Add(TaskBuilder("boom").Us(100)));
  for (int i = 0; i < 2; ++i) {
    std::vector<Dispatch> out = ScheduleAt(10 * i);
    ASSERT_EQ(out.size(), 1u) << "death " << i;
    sched_->RemoveDevice(out[0].device, 10 * i + 5);
    EXPECT_EQ(Job(job).state, JobState::kRunning) << "death " << i;
  }
  std::vector<Dispatch> out = ScheduleAt(30);
  ASSERT_EQ(out.size(), 1u);
  sched_->RemoveDevice(out[0].device, 35);
  EXPECT_EQ(Job(job).state, JobState::kFailed);
  ExpectHas(Job(job).error, {"killed 3 workers"});
  EXPECT_EQ(sched_->pool().alive_device_count(), 1u);
}

}  // namespace
}  // namespace hmpmd
