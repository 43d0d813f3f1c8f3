// Tests for SchedulerOptions::max_worker_deaths through the engine
// (RemoveDevice and ReportStarted, scheduler_devices.cc and death_ledger.cc):
// a run whose worker died while it ran there, on that many distinct
// workers, is not retried again (a kernel that aborts its process would
// otherwise take down the pool worker by worker); runs that were only
// queued behind it on the dead lane are not counted. The
// runs blamed are those the worker last reported started and not finished;
// where it reported none, the run each lane was next to start.
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
  // What device `d`'s worker says its lanes run: run 0 of each job in
  // `jobs` at its current attempt, on the lane it was placed on.
  void Report(DeviceId d, std::initializer_list<JobId> jobs) {
    std::vector<StartedRun> runs;
    for (JobId j : jobs) {
      const TaskRecord& rec = Job(j).runs[0];
      const ResourcePool::Core& core = sched_->pool().core(rec.core);
      runs.push_back({j, 0, rec.attempt, core.kind, core.lane});
    }
    sched_->ReportStarted(d, runs);
  }
  bool Blamed(JobId job) const { return Job(job).worker_deaths.count(0) > 0; }
  // One device, one cube lane that queues two runs: `first` is dispatched,
  // then `second` behind it on the same lane.
  void TwoOnOneLane(DeviceId* w0, JobId* first, JobId* second) {
    opts_.pool.max_queue_per_core = 2;
    opts_.pool.lookahead_us = 1e9;
    Make();
    *w0 = sched_->AddDevice(Device("w0", 1));
    *first = Add(SpecBuilder().Name("first").Add(TaskBuilder("a").Us(1000)));
    ASSERT_EQ(ScheduleAt(0).size(), 1u);
    *second = Add(SpecBuilder().Name("second").Add(TaskBuilder("b").Us(1000)), 1);
    std::vector<Dispatch> out = ScheduleAt(1);
    ASSERT_EQ(out.size(), 1u);
    ASSERT_EQ(out[0].core, Job(*first).runs[0].core) << "queued behind a on w0's lane";
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
// so a death then counts against none of them (blaming the first listed
// would fail an innocent task for good after two deaths).
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

// `a` finished, but its result was still in transit when the worker died
// (lost with it); the worker had said its lane went on to `b`. `b` died
// running, `a` did not, though `a` was dispatched first.
TEST_F(WorkerDeathsTest, RunWhoseResultWasInTransitIsNotBlamedButTheOneItsLaneStarted) {
  DeviceId w0;
  JobId first, second;
  ASSERT_NO_FATAL_FAILURE(TwoOnOneLane(&w0, &first, &second));
  Report(w0, {first});
  Report(w0, {second});  // a later heartbeat: a is done there, b runs
  sched_->RemoveDevice(w0, 5);
  EXPECT_TRUE(Blamed(second)) << "it was running";
  EXPECT_FALSE(Blamed(first)) << "it had finished";
}

// The same lane order, with a's result arrived: its lane's next run, b,
// is what ran, whether the worker said so or died before it could.
TEST_F(WorkerDeathsTest, AfterAResultTheLanesNextRunIsBlamedReportedOrNot) {
  for (bool reported : {true, false}) {
    SCOPED_TRACE(reported ? "b reported started" : "b started after the last report");
    DeviceId w0;
    JobId first, second;
    ASSERT_NO_FATAL_FAILURE(TwoOnOneLane(&w0, &first, &second));
    Report(w0, {first});
    ASSERT_TRUE(sched_->OnTaskDone(first, 0, 0, 2, 3, 3));
    if (reported) Report(w0, {second});  // the DoneBatch with a's result
    sched_->RemoveDevice(w0, 5);
    EXPECT_TRUE(Blamed(second));
  }
}

// The same on a busy worker: its cube lane was reported on from `a`
// (finished, result lost) to `b`, its vector lane runs `v`. Both lanes'
// running runs died with it: b and v are charged, a is not.
TEST_F(WorkerDeathsTest, EveryLanesReportedRunIsBlamedAndNoRunBeforeIt) {
  opts_.pool.max_queue_per_core = 2;
  opts_.pool.lookahead_us = 1e9;
  Make();
  DeviceId w0 = sched_->AddDevice(Device("w0", 1, 1));
  JobId a = Add(SpecBuilder().Name("a").Add(TaskBuilder("a").Us(1000)));
  JobId v = Add(SpecBuilder().Name("v").Add(TaskBuilder("v").Vector().Us(1000)));
  ASSERT_EQ(ScheduleAt(0).size(), 2u);
  JobId b = Add(SpecBuilder().Name("b").Add(TaskBuilder("b").Us(1000)), 1);
  ASSERT_EQ(ScheduleAt(1).size(), 1u);
  ASSERT_EQ(Job(b).runs[0].core, Job(a).runs[0].core) << "b queued behind a";
  Report(w0, {b, v});
  sched_->RemoveDevice(w0, 5);
  EXPECT_TRUE(Blamed(b));
  EXPECT_TRUE(Blamed(v)) << "it died with the worker too";
  EXPECT_FALSE(Blamed(a)) << "its lane had gone on to b";
}

// A lane the last report names nothing still running on: the run it was
// next to start may have started since and killed the worker at once (a
// kernel that aborts before the next report can leave): it is charged,
// and on another busy lane the run the report named is too.
TEST_F(WorkerDeathsTest, ALaneThatNamedNoRunChargesTheRunItWasNextToStart) {
  Make();
  DeviceId w0 = sched_->AddDevice(Device("w0", 1, 1));
  JobId busy = Add(SpecBuilder().Name("busy").Add(TaskBuilder("long").Us(1000)));
  ASSERT_EQ(ScheduleAt(0).size(), 1u);
  Report(w0, {busy});
  JobId boom = Add(SpecBuilder().Name("boom").Add(TaskBuilder("boom").Vector().Us(10)), 1);
  ASSERT_EQ(ScheduleAt(1).size(), 1u);
  sched_->RemoveDevice(w0, 5);
  EXPECT_TRUE(Blamed(boom));
  EXPECT_TRUE(Blamed(busy));
}

// Runs adopted after a controller restart have no dispatch order
// here, but the re-registration says which one its lane runs: that one is
// charged, the one queued behind it is not; and a second death fails it.
TEST_F(WorkerDeathsTest, AdoptedRunTheWorkerReportedStartedIsBlamed) {
  Make();
  DeviceId w0 = sched_->AddDevice(Device("w0", 1));
  JobId job = Add(SpecBuilder().Add(TaskBuilder("a").Us(100)).Add(TaskBuilder("b").Us(100)));
  ASSERT_TRUE(sched_->AdoptRun(job, 1, 0, w0, CoreKind::kCube, 0, 1));
  ASSERT_TRUE(sched_->AdoptRun(job, 0, 0, w0, CoreKind::kCube, 0, 1));
  const StartedRun running[] = {{job, 0, 0, CoreKind::kCube, 0}};  // a runs, b waits
  sched_->ReportStarted(w0, running);
  sched_->RemoveDevice(w0, 5);
  ASSERT_EQ(Job(job).worker_deaths.count(0), 1u);
  EXPECT_EQ(Job(job).worker_deaths.count(1), 0u) << "b was queued behind a";

  DeviceId w1 = sched_->AddDevice(Device("w1", 1));
  std::vector<Dispatch> out = ScheduleAt(10);
  ASSERT_EQ(out.size(), 1u);
  ASSERT_EQ(TaskOf(job, out[0].run), "a") << "a first (it was ready first)";
  sched_->RemoveDevice(w1, 15);
  EXPECT_EQ(Job(job).state, JobState::kFailed);
  ExpectHas(Job(job).error, {"task 'a'", "killed 2 workers (w0, w1)"});
}

// A worker that reconnects (the same process on a new connection) did not
// die: the runs it runs are not charged.
TEST_F(WorkerDeathsTest, AWorkerThatReconnectedBlamesNoRun) {
  Make();
  DeviceId w0 = sched_->AddDevice(Device("w0", 1));
  JobId job = Add(SpecBuilder().Add(TaskBuilder("a").Us(100)));
  ASSERT_EQ(ScheduleAt(0).size(), 1u);
  Report(w0, {job});
  sched_->RemoveDevice(w0, 5, /*died=*/false);
  EXPECT_FALSE(Blamed(job));
  EXPECT_EQ(Job(job).state, JobState::kRunning);
}

// A worker back on a new connection (RecallUnheld) holds what reached it:
// the runs sent on the connection it had closed go back, without costing
// an attempt (more reconnects than max_attempts fail nothing), and the
// runs it holds stay where they are.
TEST_F(WorkerDeathsTest, RunsAReconnectedWorkerDoesNotHoldGoBackWithoutCostingAnAttempt) {
  Make();
  ASSERT_EQ(opts_.max_attempts, 3u);
  DeviceId w0 = sched_->AddDevice(Device("w0", 2));
  JobId job = Add(SpecBuilder().Add(TaskBuilder("a").Us(100)).Add(TaskBuilder("b").Us(100)));
  ASSERT_EQ(ScheduleAt(0).size(), 2u);
  ASSERT_EQ(TaskOf(job, 0), "a");
  auto held_a = [&] {
    const TaskRecord& a = Job(job).runs[0];
    const ResourcePool::Core& core = sched_->pool().core(a.core);
    return StartedRun{job, 0, a.attempt, core.kind, core.lane};
  };
  const StartedRun a = held_a();
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(sched_->RecallUnheld(w0, {&a, 1}, 10 + 10 * i), 1u) << "reconnect " << i;
    EXPECT_EQ(Job(job).runs[0].state, TaskState::kRunning);
    EXPECT_EQ(Job(job).runs[0].attempt, a.attempt) << "a stays as it was";
    ASSERT_EQ(Job(job).state, JobState::kRunning) << Job(job).error;
    std::vector<Dispatch> out = ScheduleAt(15 + 10 * i);
    ASSERT_EQ(out.size(), 1u) << "b again, reconnect " << i;
    EXPECT_EQ(TaskOf(job, out[0].run), "b");
  }
  EXPECT_FALSE(Blamed(job));
  // Holding both, nothing goes back.
  const TaskRecord& b = Job(job).runs[1];
  const StartedRun both[] = {
      a, {job, 1, b.attempt, sched_->pool().core(b.core).kind, sched_->pool().core(b.core).lane}};
  EXPECT_EQ(sched_->RecallUnheld(w0, both, 70), 0u);
  EXPECT_TRUE(sched_->OnTaskDone(job, 0, a.attempt, 70, 80, 80));
  EXPECT_TRUE(sched_->OnTaskDone(job, 1, b.attempt, 70, 80, 80));
  EXPECT_EQ(Job(job).state, JobState::kSucceeded);
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
