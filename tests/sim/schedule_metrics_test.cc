// Tests for ComputeMetrics on hand-built runs with known intervals
// (sim/schedule_metrics.{h,cc}).
#include "hmpmd/sim/schedule_metrics.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "hmpmd/scheduler/hmpmd_policy.h"
#include "test_builders.h"

namespace hmpmd {
namespace {

using test::Device;
using test::SpecBuilder;
using test::TaskBuilder;

constexpr double kUs = 1e-6;  // seconds per microsecond

class ScheduleMetricsTest : public ::testing::Test {
 protected:
  // Starts a job record for `spec`; runs start blocked.
  JobRun& NewJob(const JobSpec& spec) {
    job_.graph = test::BuildGraph(spec);
    job_.runs.assign(job_.graph->total_runs(), TaskRecord{});
    return job_;
  }
  // Marks run `run` done on `core` over [start, end).
  void Done(uint32_t run, CoreId core, TimeUs start, TimeUs end) {
    TaskRecord& r = job_.runs.at(run);
    r.state = TaskState::kDone;
    r.core = core;
    r.start = start;
    r.end = end;
  }
  static std::vector<std::string> Ids(const ScheduleMetrics& m) {
    std::vector<std::string> out;
    for (const auto& e : m.critical_path) out.push_back(e.task);
    return out;
  }

  ResourcePool pool_;
  JobRun job_;
};

// Two devices, each one cube and one vector core:
//   d0: core 0 cube, core 1 vector;  d1: core 2 cube, core 3 vector.
//   a  (cube,   d0) [0, 100)
//   x  (send,   d0 vector) [100, 150), input a
//   b  (cube,   d0) [120, 200)
//   c  (cube,   d1) [150, 300), input x
class TwoDeviceMetricsTest : public ScheduleMetricsTest {
 protected:
  void SetUp() override {
    pool_.AddDevice(Device("d0", 1, 1));
    pool_.AddDevice(Device("d1", 1, 1));
    NewJob(SpecBuilder()
               .Add(TaskBuilder("a"))
               .Add(TaskBuilder("x", "send").Vector().Inputs({"a"}))
               .Add(TaskBuilder("b"))
               .Add(TaskBuilder("c").Inputs({"x"})));
    Done(0, 0, 0, 100);
    Done(1, 1, 100, 150);
    Done(2, 0, 120, 200);
    Done(3, 2, 150, 300);
    m_ = ComputeMetrics(job_, pool_);
  }
  ScheduleMetrics m_;
};

TEST_F(TwoDeviceMetricsTest, MakespanIsFirstStartToLastEnd) {
  EXPECT_EQ(m_.tasks, 4u);
  EXPECT_DOUBLE_EQ(m_.makespan_s, 300 * kUs);
}

TEST_F(TwoDeviceMetricsTest, UtilisationIsBusyCoreTimeOverCoresTimesMakespan) {
  // Busy: d0 100 + 50 + 80 = 230, d1 150; 4 cores over 300 us.
  EXPECT_DOUBLE_EQ(m_.utilisation, 380.0 / 1200);
  EXPECT_DOUBLE_EQ(m_.utilisation_by_kind[0], 330.0 / 600);  // cube: a, b, c on 2 cores
  EXPECT_DOUBLE_EQ(m_.utilisation_by_kind[1], 50.0 / 600);   // vector: x on 2 cores
  ASSERT_EQ(m_.utilisation_by_device.size(), 2u);
  EXPECT_EQ(m_.utilisation_by_device[0].device, 0u);
  EXPECT_EQ(m_.utilisation_by_device[0].name, "d0");
  EXPECT_DOUBLE_EQ(m_.utilisation_by_device[0].utilisation, 230.0 / 600);
  EXPECT_EQ(m_.utilisation_by_device[1].name, "d1");
  EXPECT_DOUBLE_EQ(m_.utilisation_by_device[1].utilisation, 150.0 / 600);
}

TEST_F(TwoDeviceMetricsTest, MaskingRatioIsCommOverlappedByComputeOnTheSameDevice) {
  // x [100,150) overlaps b [120,200) on d0 for 30 us; c on d1 does not count.
  EXPECT_DOUBLE_EQ(m_.comm_s, 50 * kUs);
  EXPECT_DOUBLE_EQ(m_.masking_ratio, 30.0 / 50);
}

TEST_F(TwoDeviceMetricsTest, BubbleRatioIsIdleDeviceTimeInsideTheStep) {
  // Step span [0, 300). d0 busy [0, 200): idle 100. d1 busy [150, 300): idle 150.
  EXPECT_DOUBLE_EQ(m_.bubble_ratio, 250.0 / 600);
}

TEST_F(TwoDeviceMetricsTest, LowerBoundIsTheCriticalPathWhenItDominates) {
  // a -> x -> c: 100 + 50 + 150. Work bound: cube 330 / 2 = 165.
  EXPECT_DOUBLE_EQ(m_.critical_path_s, 300 * kUs);
  EXPECT_DOUBLE_EQ(m_.lower_bound_s, 300 * kUs);
}

TEST_F(TwoDeviceMetricsTest, CriticalPathIsTheLongestChainOfMeasuredDurations) {
  ASSERT_EQ(Ids(m_), (std::vector<std::string>{"a", "x", "c"}));
  const auto& cp = m_.critical_path;
  EXPECT_EQ(cp[0].device, 0u);
  EXPECT_EQ(cp[0].kind, CoreKind::kCube);
  EXPECT_DOUBLE_EQ(cp[0].duration_us, 100);
  EXPECT_EQ(cp[1].device, 0u);
  EXPECT_EQ(cp[1].kind, CoreKind::kVector);
  EXPECT_DOUBLE_EQ(cp[1].duration_us, 50);
  EXPECT_EQ(cp[2].device, 1u);
  EXPECT_DOUBLE_EQ(cp[2].duration_us, 150);
  for (const auto& e : cp) EXPECT_EQ(e.step, 0u);
}

TEST_F(ScheduleMetricsTest, LowerBoundIsTheWorkBoundWhenItDominates) {
  pool_.AddDevice(Device("d", 2, 0));
  NewJob(SpecBuilder()
             .Add(TaskBuilder("a"))
             .Add(TaskBuilder("b"))
             .Add(TaskBuilder("c"))
             .Add(TaskBuilder("d")));
  Done(0, 0, 0, 100);
  Done(1, 1, 0, 100);
  Done(2, 0, 100, 200);
  Done(3, 1, 100, 250);
  ScheduleMetrics m = ComputeMetrics(job_, pool_);
  EXPECT_DOUBLE_EQ(m.critical_path_s, 150 * kUs) << "longest single task";
  EXPECT_DOUBLE_EQ(m.lower_bound_s, 225 * kUs) << "450 us of cube work on 2 cores";
  EXPECT_DOUBLE_EQ(m.makespan_s, 250 * kUs);
  EXPECT_DOUBLE_EQ(m.masking_ratio, 0) << "no communication";
  EXPECT_DOUBLE_EQ(m.comm_s, 0);
}

TEST_F(ScheduleMetricsTest, StepsAddTheirCriticalPathsAndBubblesStayInsideSteps) {
  pool_.AddDevice(Device("d", 1, 0));
  NewJob(SpecBuilder().Chain({"a", "b"}, 1).Repeat(2));
  Done(0, 0, 0, 10);   // a, step 0
  Done(1, 0, 10, 30);  // b, step 0
  Done(2, 0, 40, 50);  // a, step 1 (the gap [30, 40) is between steps)
  Done(3, 0, 60, 80);  // b, step 1 (the gap [50, 60) is inside step 1)
  ScheduleMetrics m = ComputeMetrics(job_, pool_);
  EXPECT_EQ(m.tasks, 4u);
  EXPECT_DOUBLE_EQ(m.makespan_s, 80 * kUs);
  EXPECT_DOUBLE_EQ(m.critical_path_s, 60 * kUs) << "(10 + 20) per step";
  EXPECT_DOUBLE_EQ(m.lower_bound_s, 60 * kUs);
  EXPECT_DOUBLE_EQ(m.utilisation, 60.0 / 80);
  EXPECT_DOUBLE_EQ(m.bubble_ratio, 10.0 / (30 + 40)) << "only [50, 60) is a bubble";
  ASSERT_EQ(Ids(m), (std::vector<std::string>{"a", "b", "a", "b"}));
  EXPECT_EQ(m.critical_path[0].step, 0u);
  EXPECT_EQ(m.critical_path[1].step, 0u);
  EXPECT_EQ(m.critical_path[2].step, 1u);
  EXPECT_EQ(m.critical_path[3].step, 1u);
}

TEST_F(ScheduleMetricsTest, CriticalPathPicksTheInputThatEndedLast) {
  pool_.AddDevice(Device("d", 3, 0));
  NewJob(SpecBuilder()
             .Add(TaskBuilder("early"))
             .Add(TaskBuilder("late"))
             .Add(TaskBuilder("join").Inputs({"early", "late"})));
  Done(0, 0, 0, 50);
  Done(1, 1, 0, 90);
  Done(2, 2, 90, 100);
  ScheduleMetrics m = ComputeMetrics(job_, pool_);
  EXPECT_EQ(Ids(m), (std::vector<std::string>{"late", "join"}));
  EXPECT_DOUBLE_EQ(m.critical_path_s, 100 * kUs);
}

TEST_F(ScheduleMetricsTest, CriticalPathAddsUpToItsDurationNotToWhatEndedLast) {
  // A long chain a -> b ends early; a short root c ends last (it waited for
  // a core). The list is the chain critical_path_s measures.
  pool_.AddDevice(Device("d", 2, 0));
  NewJob(SpecBuilder().Chain({"a", "b"}, 1).Add(TaskBuilder("c")).Repeat(2));
  Done(0, 0, 0, 400);
  Done(1, 0, 400, 900);
  Done(2, 1, 950, 960);
  Done(3, 0, 1000, 1400);
  Done(4, 0, 1400, 1900);
  Done(5, 1, 1950, 1960);
  ScheduleMetrics m = ComputeMetrics(job_, pool_);
  ASSERT_EQ(Ids(m), (std::vector<std::string>{"a", "b", "a", "b"}));
  double sum_us = 0;
  for (const auto& e : m.critical_path) sum_us += e.duration_us;
  EXPECT_DOUBLE_EQ(sum_us * kUs, m.critical_path_s);
  EXPECT_DOUBLE_EQ(m.critical_path_s, 1800 * kUs);
}

TEST_F(ScheduleMetricsTest, CommOnAnotherDeviceThanTheComputeIsNotMasked) {
  pool_.AddDevice(Device("compute", 1, 0));
  pool_.AddDevice(Device("comm", 0, 1));
  NewJob(SpecBuilder().Add(TaskBuilder("g")).Add(TaskBuilder("x", "send").Vector()));
  Done(0, 0, 0, 100);
  Done(1, 1, 0, 100);
  ScheduleMetrics m = ComputeMetrics(job_, pool_);
  EXPECT_DOUBLE_EQ(m.comm_s, 100 * kUs);
  EXPECT_DOUBLE_EQ(m.masking_ratio, 0);
}

TEST_F(ScheduleMetricsTest, FullyHiddenCommunicationHasMaskingOne) {
  pool_.AddDevice(Device("d", 2, 2));  // cores 0, 1 cube; 2, 3 vector
  NewJob(SpecBuilder()
             .Add(TaskBuilder("g0"))
             .Add(TaskBuilder("g1"))
             .Add(TaskBuilder("r0", "allreduce").Vector().Collective("g", "allreduce", 1024))
             .Add(TaskBuilder("r1", "allreduce").Vector().Collective("g", "allreduce", 1024)));
  Done(0, 0, 0, 100);
  Done(1, 1, 100, 200);  // merged compute covers [0, 200)
  Done(2, 2, 80, 120);   // spans the seam between g0 and g1
  Done(3, 3, 150, 190);
  ScheduleMetrics m = ComputeMetrics(job_, pool_);
  EXPECT_DOUBLE_EQ(m.comm_s, 80 * kUs);
  EXPECT_DOUBLE_EQ(m.masking_ratio, 1.0);
}

TEST_F(ScheduleMetricsTest, UnfinishedRunsAreLeftOut) {
  pool_.AddDevice(Device("d", 1, 0));
  NewJob(SpecBuilder().Chain({"a", "b"}, 1));
  Done(0, 0, 10, 20);
  job_.runs[1].state = TaskState::kRunning;
  job_.runs[1].core = 0;
  job_.runs[1].start = 20;
  ScheduleMetrics m = ComputeMetrics(job_, pool_);
  EXPECT_EQ(m.tasks, 1u);
  EXPECT_DOUBLE_EQ(m.makespan_s, 10 * kUs);
  EXPECT_EQ(Ids(m), std::vector<std::string>{"a"});
}

TEST_F(ScheduleMetricsTest, AStepSoFarCountsWhatRunsNowAsBusy) {
  // One device, two cube cores, one step of four 100 us runs: a done on
  // core 0 [0, 100); b running on core 0 since a ended (dispatched at 50,
  // queued behind a); c running on core 1 since 20; d queued on core 1
  // behind c (dispatched at 30: not executing yet).
  pool_.AddDevice(Device("d", 2, 0));
  NewJob(SpecBuilder()
             .Add(TaskBuilder("a"))
             .Add(TaskBuilder("b"))
             .Add(TaskBuilder("c"))
             .Add(TaskBuilder("d")));
  Done(0, 0, 0, 100);
  auto running = [&](uint32_t run, CoreId core, TimeUs dispatched) {
    job_.runs[run].state = TaskState::kRunning;
    job_.runs[run].core = core;
    job_.runs[run].dispatched = dispatched;
  };
  running(1, 0, 50);
  running(2, 1, 20);
  running(3, 1, 30);
  JobRun so_far = job_;
  StepSoFar(&so_far, 200);
  ScheduleMetrics m = ComputeMetrics(so_far, pool_);
  EXPECT_EQ(m.tasks, 3u) << "a, and b and c executing; d waits on its core";
  EXPECT_DOUBLE_EQ(m.makespan_s, 200 * kUs);
  // Busy: core 0 [0, 200), core 1 [20, 200): 380 of 400 core-us.
  EXPECT_DOUBLE_EQ(m.utilisation, 380.0 / 400.0);
  EXPECT_DOUBLE_EQ(m.bubble_ratio, 0) << "the device was never idle";
  // Without them, the pool read half idle (ComputeMetrics on the job as is).
  EXPECT_DOUBLE_EQ(ComputeMetrics(job_, pool_).utilisation, 0.5);

  // Nothing started yet: nothing to score (the live figures stay NaN).
  NewJob(SpecBuilder().Add(TaskBuilder("a")));
  so_far = job_;
  StepSoFar(&so_far, 10);
  EXPECT_EQ(ComputeMetrics(so_far, pool_).tasks, 0u);
}

TEST_F(ScheduleMetricsTest, NoFinishedRunsGivesZeros) {
  pool_.AddDevice(Device("d", 1, 0));
  NewJob(SpecBuilder().Chain({"a"}, 1));
  ScheduleMetrics m = ComputeMetrics(job_, pool_);
  EXPECT_EQ(m.tasks, 0u);
  EXPECT_DOUBLE_EQ(m.makespan_s, 0);
  EXPECT_DOUBLE_EQ(m.utilisation, 0);
  EXPECT_TRUE(m.critical_path.empty());
}

TEST_F(ScheduleMetricsTest, DeadDevicesCountOnlyIfTheyRanTheJob) {
  pool_.AddDevice(Device("ran", 1, 0));
  pool_.AddDevice(Device("idle-dead", 1, 0));
  pool_.AddDevice(Device("alive", 1, 0));
  NewJob(SpecBuilder().Chain({"a"}, 1));
  Done(0, 0, 0, 100);
  pool_.RemoveDevice(0);
  pool_.RemoveDevice(1);
  ScheduleMetrics m = ComputeMetrics(job_, pool_);
  ASSERT_EQ(m.utilisation_by_device.size(), 2u);
  EXPECT_EQ(m.utilisation_by_device[0].name, "ran");
  EXPECT_DOUBLE_EQ(m.utilisation_by_device[0].utilisation, 1.0);
  EXPECT_EQ(m.utilisation_by_device[1].name, "alive");
  EXPECT_DOUBLE_EQ(m.utilisation, 0.5);
  EXPECT_DOUBLE_EQ(m.bubble_ratio, 0.5) << "the alive device idled through the step";
}

TEST_F(ScheduleMetricsTest, MetricsOfAScheduledRunMatchItsTimeline) {
  // End to end: the engine's own records feed the metrics.
  Scheduler s(SchedulerOptions{}, std::make_unique<HmpmdPolicy>());
  s.AddDevice(Device("d", 1, 1));
  auto g = test::BuildGraph(SpecBuilder()
                                .Add(TaskBuilder("c0").Us(100))
                                .Add(TaskBuilder("x0", "send").Vector().Inputs({"c0"}))
                                .Add(TaskBuilder("c1").Us(100).Inputs({"c0"})));
  JobId job = *s.AddJob(g, 0);
  // The spins last their `us`; the send (run 1) 60 us.
  test::VirtualLoop loop(&s, [&](JobId, uint32_t run) -> TimeUs {
    return run == 1 ? 60 : static_cast<TimeUs>(ArgNumber(g->spec_task(run).args, "us", 1));
  });
  loop.RunToIdle();
  ScheduleMetrics m = ComputeMetrics(*s.job(job), s.pool());
  EXPECT_DOUBLE_EQ(m.makespan_s, 200 * kUs);
  EXPECT_DOUBLE_EQ(m.masking_ratio, 1.0) << "x0 runs under c1";
  EXPECT_DOUBLE_EQ(m.critical_path_s, 200 * kUs);
  EXPECT_EQ(Ids(m), (std::vector<std::string>{"c0", "c1"}));
}

}  // namespace
}  // namespace hmpmd
