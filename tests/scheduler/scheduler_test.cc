// Tests for the Scheduler engine: readiness, steps, results, retries,
// cancellation and device loss (scheduler/scheduler.{h,cc}; admission in
// admission_check_test.cc).
// Driven by test::VirtualLoop: no threads, no clock.
#include "hmpmd/scheduler/scheduler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "hmpmd/scheduler/hmpmd_policy.h"
#include "scheduler_fixture.h"
#include "test_builders.h"

namespace hmpmd {
namespace {

using test::Device;
using test::SchedulerTest;
using test::SpecBuilder;
using test::TaskBuilder;
using test::VirtualLoop;

// A policy that refuses every task as impossible: exercises the engine's
// handling of Placement::kInfeasible, which the built-in policies never give.
class RefusingPolicy final : public Policy {
 public:
  std::string_view Name() const override { return "refusing"; }
  double Priority(const TaskView&) const override { return 0; }
  Placement Place(const TaskView&, const ResourcePool&, TimeUs) override {
    return Placement::Infeasible("no device has enough memory");
  }
};

TEST_F(SchedulerTest, ChainRunsInOrder) {
  Make();
  sched_->AddDevice(Device("d0", 2));
  JobId job = Add(SpecBuilder().Chain({"a", "b", "c"}, 10));
  EXPECT_EQ(Job(job).state, JobState::kQueued);
  VirtualLoop loop(sched_.get());
  EXPECT_EQ(loop.Schedule(), 1u) << "only the chain's head is ready";
  loop.RunToIdle();
  ASSERT_EQ(loop.log().size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(TaskOf(job, loop.log()[i].d.run), std::string(1, static_cast<char>('a' + i)));
    if (i > 0) {
      EXPECT_GE(loop.log()[i].dispatched, loop.log()[i - 1].end);
    }
  }
  const JobRun& j = Job(job);
  EXPECT_EQ(j.state, JobState::kSucceeded);
  EXPECT_EQ(j.done, 3u);
  EXPECT_EQ(j.running, 0u);
  EXPECT_EQ(j.started, 0);
  EXPECT_EQ(j.finished, 30);
  for (const TaskRecord& r : j.runs) EXPECT_EQ(r.state, TaskState::kDone);
  EXPECT_EQ(j.runs[1].start, 10);
  EXPECT_EQ(j.runs[1].end, 20);
  EXPECT_EQ(sched_->active_jobs(), 0u);
}

TEST_F(SchedulerTest, FanOutRunsInParallelAndFanInWaitsForAll) {
  Make();
  sched_->AddDevice(Device("d0", 3));
  JobId job = Add(SpecBuilder()
                      .Add(TaskBuilder("root").Us(10))
                      .Add(TaskBuilder("a").Us(50).Inputs({"root"}))
                      .Add(TaskBuilder("b").Us(30).Inputs({"root"}))
                      .Add(TaskBuilder("c").Us(40).Inputs({"root"}))
                      .Add(TaskBuilder("join").Us(10).Inputs({"a", "b", "c"})));
  VirtualLoop loop(sched_.get());
  loop.RunToIdle();
  ASSERT_EQ(loop.log().size(), 5u);
  std::set<CoreId> cores;
  for (int i = 1; i <= 3; ++i) {
    EXPECT_EQ(loop.log()[i].dispatched, 10) << "fan-out starts together";
    cores.insert(loop.log()[i].d.core);
  }
  EXPECT_EQ(cores.size(), 3u) << "on three distinct cores";
  EXPECT_EQ(TaskOf(job, loop.log()[4].d.run), "join");
  EXPECT_EQ(loop.log()[4].dispatched, 60) << "join waits for the slowest branch";
  EXPECT_EQ(loop.log()[4].finished_before, 4u);
  EXPECT_EQ(Job(job).finished, 70);
}

TEST_F(SchedulerTest, StepKPlusOneStartsOnlyAfterStepKIsDone) {
  Make();
  sched_->AddDevice(Device("d0", 2));
  // c is short and independent: without the barrier, step 1's c would start
  // while step 0's b is still running.
  JobId job = Add(SpecBuilder()
                      .Add(TaskBuilder("a").Us(10))
                      .Add(TaskBuilder("b").Us(30).Inputs({"a"}))
                      .Add(TaskBuilder("c").Us(5))
                      .Repeat(3));
  VirtualLoop loop(sched_.get());
  loop.RunToIdle();
  const JobRun& j = Job(job);
  ASSERT_EQ(j.state, JobState::kSucceeded);
  ASSERT_EQ(loop.log().size(), 9u);
  const uint32_t n = j.graph->size();
  std::set<uint32_t> runs;
  for (const auto& st : loop.log()) {
    runs.insert(st.d.run);
    uint32_t step = st.d.run / n;
    if (step == 0) continue;
    for (uint32_t prev = (step - 1) * n; prev < step * n; ++prev) {
      auto prev_runs = loop.RunsOf(job, prev);
      ASSERT_EQ(prev_runs.size(), 1u);
      EXPECT_TRUE(prev_runs[0]->finished);
      EXPECT_LT(prev_runs[0]->finish_seq, st.finished_before)
          << TaskOf(job, st.d.run) << " of step " << step << " dispatched before "
          << TaskOf(job, prev) << " of step " << step - 1 << " finished";
      EXPECT_LE(prev_runs[0]->end, st.dispatched);
    }
  }
  EXPECT_EQ(runs.size(), 9u) << "every run of every step ran once";
  EXPECT_EQ(*runs.rbegin(), 8u);
  EXPECT_EQ(j.finished, 3 * 40);
}

TEST_F(SchedulerTest, RankIsEstimatePlusLongestPathToASink) {
  Make();
  JobId job = Add(SpecBuilder()
                      .Add(TaskBuilder("a").Us(10))
                      .Add(TaskBuilder("b").Us(1000).Inputs({"a"}))
                      .Add(TaskBuilder("c").Us(20).Inputs({"a"}))
                      .Add(TaskBuilder("d").Us(7)));
  const JobRun& j = Job(job);
  EXPECT_DOUBLE_EQ(j.rank_us[0], 1010);
  EXPECT_DOUBLE_EQ(j.rank_us[1], 1000);
  EXPECT_DOUBLE_EQ(j.rank_us[2], 20);
  EXPECT_DOUBLE_EQ(j.rank_us[3], 7);
}

TEST_F(SchedulerTest, PlacesTasksOnlyOnDevicesThatRunTheKernel) {
  Make();
  DeviceId spin_only = sched_->AddDevice(Device("spin-only", 1, 0, {"spin"}));
  DeviceId both = sched_->AddDevice(Device("both", 1, 0, {"spin", "gemm"}));
  // The gemm task comes first and ranks higher; the spin-only device is the
  // earliest free (lowest core id), so a kernel-blind placement would pick it.
  JobId job =
      Add(SpecBuilder().Add(TaskBuilder("g", "gemm").Flops(2e7)).Add(TaskBuilder("s").Us(5)));
  std::vector<Dispatch> out = ScheduleAt(0);
  ASSERT_EQ(out.size(), 2u);
  for (const Dispatch& d : out) {
    std::string id = TaskOf(job, d.run);
    EXPECT_EQ(d.device, id == "g" ? both : spin_only) << id;
    EXPECT_EQ(sched_->pool().core(d.core).device, d.device);
  }
}

TEST_F(SchedulerTest, TaskWaitingForItsKernelDoesNotBlockOthers) {
  Make();
  sched_->AddDevice(Device("gemm-dev", 1, 0, {"gemm"}));
  sched_->AddDevice(Device("spin-dev", 1, 0, {"spin"}));
  // g1 and g2 outrank s; g2 can only wait for gemm-dev, s must not wait too.
  JobId job = Add(SpecBuilder()
                      .Add(TaskBuilder("g1", "gemm").Flops(2e9))
                      .Add(TaskBuilder("g2", "gemm").Flops(2e9))
                      .Add(TaskBuilder("s").Us(1)));
  std::vector<Dispatch> out = ScheduleAt(0);
  std::set<std::string> ids;
  for (const Dispatch& d : out) ids.insert(TaskOf(job, d.run));
  EXPECT_EQ(ids, (std::set<std::string>{"g1", "s"}));
  EXPECT_EQ(Job(job).runs[1].state, TaskState::kReady);
  EXPECT_EQ(sched_->ready_count(), 1u) << "the deferred gemm stays queued";
  // Once gemm-dev frees up, g2 runs there.
  uint32_t g1_run = TaskOf(job, out[0].run) == "g1" ? out[0].run : out[1].run;
  ASSERT_TRUE(sched_->OnTaskDone(job, g1_run, 0, 0, 100, 100));
  std::vector<Dispatch> next = ScheduleAt(100);
  ASSERT_EQ(next.size(), 1u);
  EXPECT_EQ(TaskOf(job, next[0].run), "g2");
  EXPECT_EQ(next[0].device, 0u);
}

TEST_F(SchedulerTest, DeeperQueuesPutSeveralTasksOnOneCore) {
  opts_.pool.max_queue_per_core = 3;
  opts_.pool.lookahead_us = 1e6;
  Make();
  sched_->AddDevice(Device("d", 1));
  Add(SpecBuilder()
          .Add(TaskBuilder("a").Us(10))
          .Add(TaskBuilder("b").Us(10))
          .Add(TaskBuilder("c").Us(10)));
  std::vector<Dispatch> out = ScheduleAt(0);
  ASSERT_EQ(out.size(), 3u);
  for (const Dispatch& d : out) EXPECT_EQ(d.core, out[0].core);
  EXPECT_EQ(sched_->pool().core(out[0].core).queued, 3u);
}

TEST_F(SchedulerTest, WaitingOnlyLookaheadQueuesTheNextTaskBehindALongOne) {
  opts_.pool.max_queue_per_core = 64;
  opts_.pool.lookahead_us = 200;
  opts_.pool.lookahead_waiting_only = true;
  Make();
  sched_->AddDevice(Device("d", 1, 0));
  JobId job = Add(SpecBuilder()
                      .Add(TaskBuilder("long").Us(3000))
                      .Add(TaskBuilder("next").Us(1000))
                      .Add(TaskBuilder("third").Us(1000)));
  std::vector<Dispatch> out = ScheduleAt(0);
  ASSERT_EQ(out.size(), 2u) << "one task runs, one waits behind it; the third waits here";
  EXPECT_EQ(TaskOf(job, out[0].run), "long");
  EXPECT_EQ(sched_->pool().core(out[0].core).busy_until, 4000);
  // The long one ends: the queued one runs, and the third queues behind it.
  ASSERT_TRUE(sched_->OnTaskDone(job, out[0].run, 0, 0, 3000, 3000));
  std::vector<Dispatch> next = ScheduleAt(3000);
  ASSERT_EQ(next.size(), 1u);
  EXPECT_EQ(sched_->pool().core(next[0].core).queued, 2u);
}

TEST_F(SchedulerTest, AGangMemberDoesNotQueueBehindALongTask) {
  opts_.pool.max_queue_per_core = 64;
  opts_.pool.lookahead_us = 200;
  opts_.pool.lookahead_waiting_only = true;
  Make();
  sched_->AddDevice(Device("d0", 0, 1));
  sched_->AddDevice(Device("d1", 0, 1));
  JobId job = Add(SpecBuilder()
                      .Add(TaskBuilder("long").Vector().Us(5000))
                      .Add(TaskBuilder("m0", "allreduce").Vector().Collective("g", "allreduce"))
                      .Add(TaskBuilder("m1", "allreduce").Vector().Collective("g", "allreduce")));
  std::vector<Dispatch> out = ScheduleAt(0);
  // Either the long task or the gang goes first; never a member queued
  // behind the long task while its peer waits in the collective.
  for (const Dispatch& d : out) {
    if (TaskOf(job, d.run) == "long") continue;
    EXPECT_EQ(sched_->pool().core(d.core).queued, 1u) << TaskOf(job, d.run) << " queued behind";
  }
  std::set<std::string> ids;
  for (const Dispatch& d : out) ids.insert(TaskOf(job, d.run));
  EXPECT_TRUE(ids == (std::set<std::string>{"long"}) ||
              ids == (std::set<std::string>{"m0", "m1"}) ||
              ids == (std::set<std::string>{"m0", "m1", "long"}))
      << ids.size();
}

TEST_F(SchedulerTest, LearnsEachDevicesSpeedFromTheDurationsItSees) {
  Make();
  sched_->AddDevice(Device("fast", 1, 0));
  sched_->AddDevice(Device("slow", 1, 0));
  SpecBuilder b;
  for (int i = 0; i < 40; ++i) b.Add(TaskBuilder("g" + std::to_string(i), "gemm").Flops(2e7));
  JobId job = Add(b);
  // The slow device takes 2.5x as long as the fast one for the same gemm.
  VirtualLoop loop(sched_.get(), [&](JobId j, uint32_t run) -> TimeUs {
    DeviceId d = sched_->pool().core(Job(j).runs[run].core).device;
    return d == 0 ? 1000 : 2500;
  });
  loop.RunToIdle();
  ASSERT_EQ(Job(job).state, JobState::kSucceeded);
  const CostModel& cost = sched_->cost_model();
  EXPECT_NEAR(cost.DeviceFactor(1) / cost.DeviceFactor(0), 2.5, 0.1);
  // The next placement on the slow device carries the longer estimate, so
  // the pool sees it drain later.
  JobId next = Add(SpecBuilder()
                       .Add(TaskBuilder("x", "gemm").Flops(2e7))
                       .Add(TaskBuilder("y", "gemm").Flops(2e7)));
  std::vector<Dispatch> out = ScheduleAt(loop.now());
  ASSERT_EQ(out.size(), 2u);
  for (const Dispatch& d : out) {
    double est = Job(next).runs[d.run].est_us;
    EXPECT_NEAR(est, d.device == 0 ? 1000 : 2500, d.device == 0 ? 60 : 150)
        << "device " << d.device;
  }
}

TEST_F(SchedulerTest, StaleResultsAreIgnored) {
  Make();
  sched_->AddDevice(Device("d", 1));
  JobId job = Add(SpecBuilder().Chain({"a", "b"}, 10));
  std::vector<Dispatch> out = ScheduleAt(0);
  ASSERT_EQ(out.size(), 1u);
  const Dispatch& d = out[0];
  EXPECT_FALSE(sched_->OnTaskDone(job, d.run, d.attempt + 1, 0, 10, 10)) << "wrong attempt";
  EXPECT_FALSE(sched_->OnTaskDone(job + 100, d.run, d.attempt, 0, 10, 10)) << "unknown job";
  EXPECT_FALSE(sched_->OnTaskDone(job, 99, d.attempt, 0, 10, 10)) << "run out of range";
  EXPECT_FALSE(sched_->OnTaskDone(job, 1, 0, 0, 10, 10)) << "run not running (blocked)";
  EXPECT_FALSE(sched_->OnTaskFailed(job, d.run, d.attempt + 1, "x", false, 10));
  EXPECT_EQ(Job(job).runs[d.run].state, TaskState::kRunning) << "stale results change nothing";
  EXPECT_EQ(Job(job).done, 0u);

  EXPECT_TRUE(sched_->OnTaskDone(job, d.run, d.attempt, 0, 10, 10));
  EXPECT_FALSE(sched_->OnTaskDone(job, d.run, d.attempt, 0, 10, 11)) << "duplicate result";
  EXPECT_EQ(Job(job).done, 1u);

  std::vector<Dispatch> next = ScheduleAt(10);
  ASSERT_EQ(next.size(), 1u);
  ASSERT_TRUE(sched_->CancelJob(job, "user asked", 12).ok());
  EXPECT_FALSE(sched_->OnTaskDone(job, next[0].run, next[0].attempt, 10, 20, 20)) << "ended job";
  EXPECT_FALSE(sched_->OnTaskFailed(job, next[0].run, next[0].attempt, "x", true, 20));
  EXPECT_EQ(Job(job).state, JobState::kCancelled);
}

TEST_F(SchedulerTest, ResultEndBeforeStartIsClampedToStart) {
  Make();
  sched_->AddDevice(Device("d", 1));
  JobId job = Add(SpecBuilder().Chain({"a"}, 10));
  std::vector<Dispatch> out = ScheduleAt(0);
  ASSERT_TRUE(sched_->OnTaskDone(job, out[0].run, out[0].attempt, 50, 40, 60));
  EXPECT_EQ(Job(job).runs[0].start, 50);
  EXPECT_EQ(Job(job).runs[0].end, 50);
}

TEST_F(SchedulerTest, RemoveDeviceRequeuesItsRunningTasksWithANewAttempt) {
  Make();
  DeviceId d0 = sched_->AddDevice(Device("w0", 1));
  DeviceId d1 = sched_->AddDevice(Device("w1", 1));
  JobId job = Add(SpecBuilder().Add(TaskBuilder("a").Us(100)).Add(TaskBuilder("b").Us(100)));
  VirtualLoop loop(sched_.get());
  ASSERT_EQ(loop.Schedule(), 2u);
  uint32_t run_on_d0 = loop.log()[0].d.device == d0 ? loop.log()[0].d.run : loop.log()[1].d.run;
  uint32_t old_attempt = Job(job).runs[run_on_d0].attempt;

  loop.AdvanceTo(50);
  sched_->RemoveDevice(d0, loop.now());
  loop.DropPendingOn(d0);
  const TaskRecord& rec = Job(job).runs[run_on_d0];
  EXPECT_EQ(rec.state, TaskState::kReady);
  EXPECT_EQ(rec.attempt, old_attempt + 1);
  EXPECT_EQ(Job(job).running, 1u);
  EXPECT_EQ(Job(job).state, JobState::kRunning);
  EXPECT_EQ(sched_->pool().alive_device_count(), 1u);
  EXPECT_EQ(loop.Schedule(), 0u) << "w1 is still busy";

  ASSERT_TRUE(loop.DeliverNext());  // the other task ends on w1 at 100
  ASSERT_EQ(loop.Schedule(), 1u);
  const auto& again = loop.log().back();
  EXPECT_EQ(again.d.run, run_on_d0);
  EXPECT_EQ(again.d.attempt, old_attempt + 1);
  EXPECT_EQ(again.d.device, d1) << "only the live device is used";
  EXPECT_EQ(again.dispatched, 100);
  EXPECT_FALSE(sched_->OnTaskDone(job, run_on_d0, old_attempt, 0, 100, 100))
      << "the dead worker's late result is stale";
  EXPECT_EQ(rec.state, TaskState::kRunning);

  loop.RunToIdle();
  EXPECT_EQ(Job(job).state, JobState::kSucceeded);
  EXPECT_EQ(Job(job).finished, 200);
}

TEST_F(SchedulerTest, RemoveDeviceLeavesOtherDevicesTasksAlone) {
  Make();
  DeviceId d0 = sched_->AddDevice(Device("w0", 1));
  sched_->AddDevice(Device("w1", 1));
  DeviceId idle = sched_->AddDevice(Device("idle", 1));
  JobId job = Add(SpecBuilder().Add(TaskBuilder("a").Us(100)).Add(TaskBuilder("b").Us(100)));
  std::vector<Dispatch> out = ScheduleAt(0);
  ASSERT_EQ(out.size(), 2u);
  sched_->RemoveDevice(idle, 10);
  for (const Dispatch& d : out) {
    EXPECT_EQ(Job(job).runs[d.run].state, TaskState::kRunning);
    EXPECT_EQ(Job(job).runs[d.run].attempt, 0u);
  }
  sched_->RemoveDevice(d0, 20);
  sched_->RemoveDevice(d0, 30);  // twice: a no-op
  int requeued = 0;
  for (const Dispatch& d : out) requeued += Job(job).runs[d.run].attempt;
  EXPECT_EQ(requeued, 1);
}

TEST_F(SchedulerTest, JobFailsAfterMaxAttemptsNamingTheTask) {
  opts_.max_attempts = 2;
  Make();
  JobId job = Add(SpecBuilder().Chain({"stubborn"}, 10));
  for (int i = 0; i < 2; ++i) {
    DeviceId d = sched_->AddDevice(Device("w" + std::to_string(i), 1));
    std::vector<Dispatch> out = ScheduleAt(10 * i);
    ASSERT_EQ(out.size(), 1u) << "attempt " << i;
    EXPECT_EQ(out[0].attempt, static_cast<uint32_t>(i));
    sched_->RemoveDevice(d, 10 * i + 5);
  }
  const JobRun& j = Job(job);
  EXPECT_EQ(j.state, JobState::kFailed);
  EXPECT_EQ(j.runs[0].state, TaskState::kFailed);
  EXPECT_EQ(j.finished, 15);
  ExpectHas(j.error, {"task 'stubborn'", "after 2 attempts", "w1", "died"});
  EXPECT_EQ(sched_->active_jobs(), 0u);
}

TEST_F(SchedulerTest, FailureInALaterStepNamesTheStep) {
  opts_.max_attempts = 1;
  Make();
  sched_->AddDevice(Device("w", 1));
  JobId job = Add(SpecBuilder().Chain({"a"}, 10).Repeat(3));
  VirtualLoop loop(sched_.get());
  loop.Schedule();
  loop.DeliverNext();  // step 0 done
  std::vector<Dispatch> out;
  sched_->Schedule(loop.now(), &out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].run, 1u);
  ASSERT_TRUE(sched_->OnTaskFailed(job, out[0].run, out[0].attempt, "lost", true, 20));
  ExpectHas(Job(job).error, {"task 'a' (step 1)", "after 1 attempts", "lost"});
}

TEST_F(SchedulerTest, RetryableFailureRunsTheTaskAgain) {
  Make();
  sched_->AddDevice(Device("w", 1));
  JobId job = Add(SpecBuilder().Chain({"a"}, 10));
  std::vector<Dispatch> first = ScheduleAt(0);
  ASSERT_TRUE(sched_->OnTaskFailed(job, 0, first[0].attempt, "worker lost", true, 5));
  EXPECT_EQ(Job(job).state, JobState::kRunning);
  EXPECT_EQ(Job(job).running, 0u);
  EXPECT_EQ(Job(job).runs[0].state, TaskState::kReady);
  std::vector<Dispatch> second = ScheduleAt(5);
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(second[0].attempt, first[0].attempt + 1);
  EXPECT_TRUE(sched_->OnTaskDone(job, 0, second[0].attempt, 5, 15, 15));
  EXPECT_EQ(Job(job).state, JobState::kSucceeded);
}

TEST_F(SchedulerTest, KernelFailureFailsTheJobWithItsMessage) {
  Make();
  sched_->AddDevice(Device("w", 2));
  JobId job = Add(SpecBuilder()
                      .Add(TaskBuilder("a").Us(100))
                      .Add(TaskBuilder("b", "gemm"))
                      .Add(TaskBuilder("c").Inputs({"a"})));
  std::vector<Dispatch> out = ScheduleAt(0);
  ASSERT_EQ(out.size(), 2u);
  uint32_t b_run = TaskOf(job, out[0].run) == "b" ? out[0].run : out[1].run;
  ASSERT_TRUE(sched_->OnTaskFailed(job, b_run, 0, "gemm: m must be > 0", false, 10));
  const JobRun& j = Job(job);
  EXPECT_EQ(j.state, JobState::kFailed);
  EXPECT_EQ(j.error, "task 'b' failed: gemm: m must be > 0");
  EXPECT_EQ(j.runs[b_run].state, TaskState::kFailed);
  EXPECT_EQ(j.running, 0u) << "the other running task was released";
  for (const Dispatch& d : out) EXPECT_EQ(sched_->pool().core(d.core).queued, 0u);
  EXPECT_TRUE(ScheduleAt(10).empty()) << "nothing of a failed job is dispatched";
}

TEST_F(SchedulerTest, CancelJobFreesItsCores) {
  Make();
  DeviceId d = sched_->AddDevice(Device("w", 2));
  JobId job = Add(SpecBuilder()
                      .Add(TaskBuilder("a").Us(100))
                      .Add(TaskBuilder("b").Us(100))
                      .Add(TaskBuilder("c").Us(100)));
  ASSERT_EQ(ScheduleAt(0).size(), 2u);
  EXPECT_FALSE(sched_->pool().HasCapacity(CoreKind::kCube));
  ASSERT_TRUE(sched_->CancelJob(job, "user asked", 7).ok());
  const JobRun& j = Job(job);
  EXPECT_EQ(j.state, JobState::kCancelled);
  EXPECT_EQ(j.error, "user asked");
  EXPECT_EQ(j.finished, 7);
  EXPECT_EQ(j.running, 0u);
  for (const TaskRecord& r : j.runs) EXPECT_EQ(r.state, TaskState::kCancelled);
  for (CoreId c : sched_->pool().device(d).cores) {
    EXPECT_EQ(sched_->pool().core(c).queued, 0u);
    EXPECT_TRUE(sched_->pool().HasCapacity(c));
  }
  EXPECT_EQ(sched_->active_jobs(), 0u);

  // The freed cores go to the next job at once; the cancelled job's ready
  // task (c) is never dispatched.
  JobId next = Add(SpecBuilder().Add(TaskBuilder("x").Us(1)).Add(TaskBuilder("y").Us(1)));
  std::vector<Dispatch> out = ScheduleAt(8);
  ASSERT_EQ(out.size(), 2u);
  for (const Dispatch& dd : out) EXPECT_EQ(dd.job, next);
}

TEST_F(SchedulerTest, CancelJobOfUnknownOrEndedJobIsAnError) {
  Make();
  sched_->AddDevice(Device("w", 1));
  EXPECT_EQ(sched_->CancelJob(42, "x", 0).code(), StatusCode::kNotFound);
  JobId job = Add(SpecBuilder().Chain({"a"}, 1));
  ASSERT_TRUE(sched_->CancelJob(job, "x", 0).ok());
  Status again = sched_->CancelJob(job, "y", 1);
  EXPECT_EQ(again.code(), StatusCode::kInvalidArgument);
  ExpectHas(again.message(), {"already cancelled"});
  EXPECT_EQ(Job(job).error, "x");
}

TEST_F(SchedulerTest, AHeldJobRunsNothingUntilStarted) {
  Make();
  sched_->AddDevice(Device("w", 2));
  auto held = sched_->AddJob(test::BuildGraph(SpecBuilder().Chain({"a", "b"}, 10)), 0, true);
  ASSERT_TRUE(held.ok()) << held.status().ToString();
  EXPECT_TRUE(ScheduleAt(1).empty()) << "held: its record is not stored yet";
  EXPECT_EQ(Job(*held).state, JobState::kQueued);
  sched_->StartHeldJob(*held, 2);
  std::vector<Dispatch> out = ScheduleAt(3);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(TaskOf(*held, out[0].run), "a");
  sched_->StartHeldJob(*held, 4);  // started once only
  EXPECT_TRUE(ScheduleAt(5).empty());

  // One withdrawn while held never runs, even if started after.
  auto withdrawn = sched_->AddJob(test::BuildGraph(SpecBuilder().Chain({"x"}, 1)), 6, true);
  ASSERT_TRUE(withdrawn.ok());
  ASSERT_TRUE(sched_->CancelJob(*withdrawn, "not stored", 7).ok());
  sched_->StartHeldJob(*withdrawn, 8);
  EXPECT_TRUE(ScheduleAt(9).empty());
  EXPECT_EQ(Job(*withdrawn).state, JobState::kCancelled);
  EXPECT_EQ(Job(*withdrawn).started, -1);
}

TEST_F(SchedulerTest, EraseJobForgetsOnlyEndedJobs) {
  Make();
  sched_->AddDevice(Device("w", 1));
  JobId live = Add(SpecBuilder().Chain({"a"}, 1));
  JobId ended = Add(SpecBuilder().Chain({"b"}, 1));
  ASSERT_TRUE(sched_->CancelJob(ended, "x", 0).ok());
  sched_->EraseJob(live);
  sched_->EraseJob(ended);
  EXPECT_NE(sched_->job(live), nullptr);
  EXPECT_EQ(sched_->job(ended), nullptr);
  EXPECT_NE(live, ended);
}

TEST_F(SchedulerTest, InfeasiblePlacementFailsTheJob) {
  Make(std::make_unique<RefusingPolicy>());
  sched_->AddDevice(Device("w", 1));
  JobId job = Add(SpecBuilder().Chain({"a"}, 1).Add(TaskBuilder("b")));
  EXPECT_TRUE(ScheduleAt(0).empty());
  EXPECT_EQ(Job(job).state, JobState::kFailed);
  ExpectHas(Job(job).error, {"tasks[0] 'a'", "cannot be placed", "no device has enough memory"});
}

TEST_F(SchedulerTest, ResultsCalibrateTheCostModel) {
  Make();
  sched_->AddDevice(Device("w", 1));
  TaskSpec a = TaskBuilder("a").Us(100);
  Add(SpecBuilder().Add(a).Repeat(2));
  // The machine is four times slower than the spec says.
  VirtualLoop loop(sched_.get(), [](JobId, uint32_t) { return TimeUs{400}; });
  loop.RunToIdle();
  EXPECT_EQ(sched_->cost_model().Samples(a), 2u);
  EXPECT_DOUBLE_EQ(sched_->cost_model().Estimate(a, CoreKind::kCube), 400);
}

TEST_F(SchedulerTest, JobsShareThePool) {
  Make();
  sched_->AddDevice(Device("w", 2));
  JobId j1 = Add(SpecBuilder().Chain({"a", "b"}, 10));
  JobId j2 = Add(SpecBuilder().Chain({"x", "y"}, 10));
  VirtualLoop loop(sched_.get());
  EXPECT_EQ(loop.Schedule(), 2u) << "one head of each job";
  loop.RunToIdle();
  EXPECT_EQ(Job(j1).state, JobState::kSucceeded);
  EXPECT_EQ(Job(j2).state, JobState::kSucceeded);
  EXPECT_EQ(Job(j1).finished, 20);
  EXPECT_EQ(Job(j2).finished, 20);
}

TEST_F(SchedulerTest, StateNamesAreStable) {
  EXPECT_EQ(TaskStateName(TaskState::kBlocked), "blocked");
  EXPECT_EQ(TaskStateName(TaskState::kReady), "ready");
  EXPECT_EQ(TaskStateName(TaskState::kRunning), "running");
  EXPECT_EQ(TaskStateName(TaskState::kDone), "done");
  EXPECT_EQ(TaskStateName(TaskState::kFailed), "failed");
  EXPECT_EQ(TaskStateName(TaskState::kCancelled), "cancelled");
  EXPECT_EQ(JobStateName(JobState::kQueued), "queued");
  EXPECT_EQ(JobStateName(JobState::kRunning), "running");
  EXPECT_EQ(JobStateName(JobState::kSucceeded), "succeeded");
  EXPECT_EQ(JobStateName(JobState::kFailed), "failed");
  EXPECT_EQ(JobStateName(JobState::kCancelled), "cancelled");
  EXPECT_FALSE(IsTerminal(JobState::kRunning));
  EXPECT_TRUE(IsTerminal(JobState::kCancelled));
}

}  // namespace
}  // namespace hmpmd
