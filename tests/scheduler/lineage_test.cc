// Lineage in the engine: outputs that a reader could not read, or that no
// worker reported after a restart, are rebuilt by running their producers
// again; readers wait for them; attempts stay bounded.
#include <gtest/gtest.h>

#include "engine_steps.h"
#include "hmpmd/scheduler/scheduler.h"
#include "test_builders.h"

namespace hmpmd::test {
namespace {

// The state of run `run` of `job`.
TaskState StateOf(const Scheduler& s, JobId job, uint32_t run) {
  return s.job(job)->runs[run].state;
}

// In the chain p -> c: runs p, then c, which reports p's output lost
// (`gone`: its worker answered that it holds no such outputs), until the
// job ends, at most 40 times; `*losses` counts the reports.
void LoseTheInputUntilTheJobEnds(Scheduler& s, JobId id, const std::string& error, bool gone,
                                 uint32_t* losses) {
  TimeUs now = 0;
  for (uint32_t attempt = 0; attempt < 40 && !IsTerminal(s.job(id)->state); ++attempt) {
    auto out = Step(s, now += 100);
    ASSERT_EQ(out.size(), 1u);
    ASSERT_EQ(out[0].run, 0u);
    FinishRun(s, out[0], now += 100, 64);
    out = Step(s, now += 100);
    ASSERT_EQ(out.size(), 1u);
    ASSERT_EQ(out[0].attempt, attempt);
    ASSERT_TRUE(s.OnInputsLost(id, 1, attempt, {0}, error, now += 100, gone));
    ++*losses;
  }
}

TEST(LineageTest, ALostInputIsRebuiltAndItsReaderRunsAgain) {
  auto s = MakeFifoScheduler();
  s->AddDevice(Device("d0", 2));
  auto id = s->AddJob(BuildGraph(SpecBuilder().Chain({"p", "c"}, 100)), 0);
  ASSERT_TRUE(id.ok());
  auto out = Step(*s, 0);
  ASSERT_EQ(out.size(), 1u);
  FinishRun(*s, out[0], 100, 4096);
  out = Step(*s, 100);
  ASSERT_EQ(out.size(), 1u);
  ASSERT_EQ(out[0].run, 1u);
  // The worker running c found p's output gone.
  ASSERT_TRUE(s->OnInputsLost(*id, 1, 0, {0}, "input: no outputs of job 1 run 0", 200));
  EXPECT_EQ(StateOf(*s, *id, 0), TaskState::kReady);
  EXPECT_EQ(StateOf(*s, *id, 1), TaskState::kBlocked);
  EXPECT_EQ(s->job(*id)->runs[1].attempt, 1u);
  EXPECT_EQ(s->job(*id)->done, 0u);
  // A second report of the same attempt is stale.
  EXPECT_FALSE(s->OnInputsLost(*id, 1, 0, {0}, "again", 200));
  out = Step(*s, 200);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].run, 0u) << "the producer runs again first";
  FinishRun(*s, out[0], 300, 4096);
  out = Step(*s, 300);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].run, 1u);
  EXPECT_EQ(out[0].attempt, 1u);
  FinishRun(*s, out[0], 400, 0);
  EXPECT_EQ(s->job(*id)->state, JobState::kSucceeded);
}

TEST(LineageTest, InputsLostOutOfAttemptsFailTheJobNamingTheInput) {
  auto s = MakeFifoScheduler();
  s->AddDevice(Device("d0", 1));
  auto id = s->AddJob(BuildGraph(SpecBuilder().Chain({"p", "c"}, 100)), 0);
  ASSERT_TRUE(id.ok());
  uint32_t losses = 0;
  LoseTheInputUntilTheJobEnds(*s, *id, "fetch timed out", /*gone=*/false, &losses);
  if (HasFatalFailure()) return;
  EXPECT_LT(losses, 5u) << "attempts must be bounded";
  EXPECT_EQ(s->job(*id)->state, JobState::kFailed);
  EXPECT_NE(s->job(*id)->error.find("task 'c'"), std::string::npos) << s->job(*id)->error;
  EXPECT_NE(s->job(*id)->error.find("input tasks[0] 'p' lost: fetch timed out"), std::string::npos)
      << s->job(*id)->error;
}

// A worker whose store let an input go early (a reader that ran again took
// the read meant for another) answers "no such outputs" while the
// scheduler counts them held on a live device: the reader is not to blame
// and loses no attempt, a bounded number of times.
TEST(LineageTest, InputsFreedEarlyOnALiveWorkerCostNoAttempt) {
  auto s = MakeFifoScheduler();
  s->AddDevice(Device("d0", 1));
  auto id = s->AddJob(BuildGraph(SpecBuilder().Chain({"p", "c"}, 100)), 0);
  ASSERT_TRUE(id.ok());
  uint32_t rounds = 0;
  LoseTheInputUntilTheJobEnds(*s, *id, "no outputs", /*gone=*/true, &rounds);
  if (HasFatalFailure()) return;
  EXPECT_EQ(s->job(*id)->state, JobState::kFailed) << "bounded all the same";
  EXPECT_EQ(rounds, TaskRecord::kMaxSlips + 3u) << "then attempts count again (3)";
}

TEST(LineageTest, ALostRunThatIsNotAnInputFailsTheTaskAsItIs) {
  auto s = MakeFifoScheduler();
  s->AddDevice(Device("d0", 2));
  JobSpec spec = SpecBuilder()
                     .Add(TaskBuilder("p").Us(100))
                     .Add(TaskBuilder("q").Us(100))
                     .Add(TaskBuilder("c").Us(100).Inputs({"p"}))
                     .Build();
  auto id = s->AddJob(BuildGraph(spec), 0);
  ASSERT_TRUE(id.ok());
  auto out = Step(*s, 0);
  ASSERT_EQ(out.size(), 2u);
  for (const Dispatch& d : out) FinishRun(*s, d, 100, 64);
  out = Step(*s, 100);
  ASSERT_EQ(out.size(), 1u);
  ASSERT_TRUE(s->OnInputsLost(*id, 2, 0, {1}, "bogus", 200));
  EXPECT_EQ(s->job(*id)->state, JobState::kFailed);
  EXPECT_EQ(StateOf(*s, *id, 1), TaskState::kDone) << "q is not rebuilt for c";
}

// p -> f, where f's output is final (the caller fetches it once the job
// ends), beside a slow s that keeps the job running.
JobSpec FinalBesideASlowTask() {
  return SpecBuilder()
      .Add(TaskBuilder("p").Us(100))
      .Add(TaskBuilder("f").Us(100).Inputs({"p"}))
      .Add(TaskBuilder("s").Us(100000))
      .Build();
}

TEST(LineageTest, AFinalOutputOnADeviceThatDiesBeforeTheJobEndsIsRebuilt) {
  auto s = MakeFifoScheduler();
  for (const char* d : {"d0", "d1", "d2"}) s->AddDevice(Device(d, 1));
  auto id = s->AddJob(BuildGraph(FinalBesideASlowTask()), 0);
  ASSERT_TRUE(id.ok());
  Dispatch slow;
  for (const Dispatch& d : Step(*s, 0)) {
    if (d.run == 2) slow = d;
    if (d.run == 0) FinishRun(*s, d, 100, 64);
  }
  ASSERT_EQ(slow.run, 2u) << "s was not dispatched";
  auto out = Step(*s, 100);
  ASSERT_EQ(out.size(), 1u);
  ASSERT_EQ(out[0].run, 1u);
  ASSERT_NE(out[0].device, slow.device);
  FinishRun(*s, out[0], 200, 64);
  const DeviceId lost = out[0].device;
  s->RemoveDevice(lost, 300);
  EXPECT_EQ(StateOf(*s, *id, 1), TaskState::kBlocked) << "f is rebuilt";
  EXPECT_EQ(StateOf(*s, *id, 0), TaskState::kReady) << "with p, whose output f had read";
  TimeUs now = 300;
  for (uint32_t want : {0u, 1u}) {
    out = Step(*s, now += 100);
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].run, want);
    FinishRun(*s, out[0], now += 100, 64);
  }
  ASSERT_TRUE(s->OnTaskDone(*id, 2, slow.attempt, 0, now, now));
  EXPECT_EQ(s->job(*id)->state, JobState::kSucceeded);
  EXPECT_NE(s->job(*id)->runs[1].output_device, lost);
}

TEST(LineageTest, AFinalOutputNoWorkerReportedAfterARestartIsRebuilt) {
  auto s = MakeFifoScheduler();
  std::vector<Scheduler::RestoredRun> done = {{0, 0, 10, 20, 64}, {1, 0, 20, 30, 64}};
  ASSERT_TRUE(s->RestoreJob(3, BuildGraph(FinalBesideASlowTask()), done, JobState::kRunning, "", 0,
                            -1, 1000)
                  .ok());
  s->AddDevice(Device("d0", 2));
  EXPECT_EQ(s->RebuildUnheldOutputs(3, 1000), 2u) << "f, and p, which f reads";
  EXPECT_EQ(StateOf(*s, 3, 1), TaskState::kBlocked);
}

// After a restart: p and q are done (from the store); no worker reported
// p's output, a worker reported q's. c reads both.
class RestoredLineageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    s_ = MakeFifoScheduler();
    JobSpec spec = SpecBuilder()
                       .Add(TaskBuilder("a").Us(100))
                       .Add(TaskBuilder("p").Us(100).Inputs({"a"}))
                       .Add(TaskBuilder("q").Us(100))
                       .Add(TaskBuilder("c").Us(100).Inputs({"p", "q"}))
                       .Build();
    std::vector<Scheduler::RestoredRun> done = {
        {0, 0, 10, 20, 512}, {1, 0, 20, 30, 1024}, {2, 0, 20, 30, 2048}};
    ASSERT_TRUE(
        s_->RestoreJob(kJob, BuildGraph(spec), done, JobState::kQueued, "", 0, -1, 1000).ok());
    dev_ = s_->AddDevice(Device("d0", 2));
  }
  static constexpr JobId kJob = 7;
  std::unique_ptr<Scheduler> s_;
  DeviceId dev_ = 0;
};

TEST_F(RestoredLineageTest, OutputsNoWorkerReportedAreRebuiltWithTheirLostInputs) {
  s_->RecordOutput(kJob, 2, dev_, 2048, 1);  // q's is on d0
  // a's output was read by p before the restart and is gone too.
  EXPECT_EQ(s_->RebuildUnheldOutputs(kJob, 1000), 2u);
  EXPECT_EQ(StateOf(*s_, kJob, 0), TaskState::kReady);
  EXPECT_EQ(StateOf(*s_, kJob, 1), TaskState::kBlocked);
  EXPECT_EQ(StateOf(*s_, kJob, 2), TaskState::kDone);
  EXPECT_EQ(StateOf(*s_, kJob, 3), TaskState::kBlocked);
  TimeUs now = 1000;
  for (uint32_t want : {0u, 1u, 3u}) {
    auto out = Step(*s_, now += 100);
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].run, want);
    FinishRun(*s_, out[0], now += 100, want == 3 ? 0 : 64);
  }
  EXPECT_EQ(s_->job(kJob)->state, JobState::kSucceeded);
  EXPECT_EQ(s_->pool().device(dev_).held_bytes, 0u) << "every read released its output";
}

TEST_F(RestoredLineageTest, ReportedOutputsAreNotRebuilt) {
  s_->RecordOutput(kJob, 1, dev_, 1024, 1);
  s_->RecordOutput(kJob, 2, dev_, 2048, 1);
  // a's output is needed by nobody (p is done): no rebuild.
  EXPECT_EQ(s_->RebuildUnheldOutputs(kJob, 1000), 0u);
  auto out = Step(*s_, 1100);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].run, 3u);
  EXPECT_EQ(s_->job(kJob)->runs[1].reads_left, 1u);
}

TEST_F(RestoredLineageTest, ARunningReaderIsLeftAlone) {
  // A worker still runs c (it had read its inputs before the restart).
  ASSERT_TRUE(s_->AdoptRun(kJob, 3, 0, dev_, CoreKind::kCube, 0, 1000));
  EXPECT_EQ(s_->RebuildUnheldOutputs(kJob, 1000), 0u);
  EXPECT_TRUE(Step(*s_, 1100).empty());
  ASSERT_TRUE(s_->OnTaskDone(kJob, 3, 0, 1000, 1200, 1200));
  EXPECT_EQ(s_->job(kJob)->state, JobState::kSucceeded);
}

// A previous controller sent c behind an attempt of p on c's worker, then
// cancelled that attempt; c, adopted after the restart on its last attempt,
// reports p's outputs not there. p is done in the store but held on no
// device known yet: p is rebuilt and c runs again, without losing an
// attempt (fault seed 21 failed its job here).
TEST_F(RestoredLineageTest, AnAdoptedReaderOfAnInputThatDidNotSucceedAheadOfItLosesNoAttempt) {
  s_->RecordOutput(kJob, 2, dev_, 2048, 1);
  const uint32_t last = 2;  // of 3
  ASSERT_TRUE(s_->AdoptRun(kJob, 3, last, dev_, CoreKind::kCube, 0, 1000));
  ASSERT_TRUE(s_->OnInputsLost(kJob, 3, last, {1},
                               "run 1, queued ahead of this task on cube0, did not succeed there",
                               1100, /*gone=*/true));
  EXPECT_EQ(s_->job(kJob)->state, JobState::kRunning);
  EXPECT_EQ(StateOf(*s_, kJob, 3), TaskState::kBlocked);
  EXPECT_EQ(s_->job(kJob)->runs[3].slips, 1u);
  TimeUs now = 1100;
  for (int i = 0; i < 5 && !IsTerminal(s_->job(kJob)->state); ++i) {
    for (const Dispatch& d : Step(*s_, now += 100)) FinishRun(*s_, d, now += 100, 64);
  }
  EXPECT_EQ(s_->job(kJob)->state, JobState::kSucceeded);
}

TEST(RestoredStepsTest, ARunOfTheNextStepIsNotAdoptedAndTheJobEnds) {
  // The store lost the end of step 0 (t) with the controller; the workers
  // report t of step 0 and s of step 1, both finished. Adopting s of step 1
  // counted its end against step 0 and t of step 1 waited for ever.
  auto s = MakeFifoScheduler();
  JobSpec spec = SpecBuilder().Chain({"s", "t"}, 100).Repeat(3);
  std::vector<Scheduler::RestoredRun> done = {{0, 0, 10, 20, 0}};
  ASSERT_TRUE(s->RestoreJob(4, BuildGraph(spec), done, JobState::kRunning, "", 0, -1, 1000).ok());
  DeviceId d = s->AddDevice(Device("d0", 2));
  ASSERT_TRUE(s->AdoptRun(4, 1, 0, d, CoreKind::kCube, 0, 1000)) << "t of step 0";
  EXPECT_FALSE(s->AdoptRun(4, 2, 0, d, CoreKind::kCube, 1, 1000)) << "s of step 1";
  EXPECT_FALSE(s->OnTaskDone(4, 2, 0, 1000, 1100, 1100)) << "its result is stale";
  ASSERT_TRUE(s->OnTaskDone(4, 1, 0, 1000, 1100, 1100));
  TimeUs now = 1200;
  for (int i = 0; i < 10 && s->job(4)->state != JobState::kSucceeded; ++i, now += 100) {
    for (const Dispatch& x : Step(*s, now))
      ASSERT_TRUE(s->OnTaskDone(4, x.run, x.attempt, now, now + 50, now + 50));
  }
  EXPECT_EQ(s->job(4)->state, JobState::kSucceeded);
  EXPECT_EQ(s->job(4)->done, 6u);
}

TEST(RestoredOutputsTest, RunsWithoutOutputsNeedNoWorker) {
  auto s = MakeFifoScheduler();
  std::vector<Scheduler::RestoredRun> done = {{0, 0, 10, 20, 0}};
  ASSERT_TRUE(s->RestoreJob(3, BuildGraph(SpecBuilder().Chain({"p", "c"}, 100)), done,
                            JobState::kQueued, "", 0, -1, 1000)
                  .ok());
  s->AddDevice(Device("d0", 1));
  EXPECT_EQ(s->RebuildUnheldOutputs(3, 1000), 0u);
  auto out = Step(*s, 1100);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].run, 1u);
}

// A job restored while no worker is back says why it waits, as a job
// submitted then does (it said nothing before a worker joined and left).
TEST(RestoredOutputsTest, AJobRestoredWithoutWorkersWaitsForOne) {
  auto s = MakeFifoScheduler();
  ASSERT_TRUE(s->RestoreJob(3, BuildGraph(SpecBuilder().Chain({"p", "c"}, 100)), {},
                            JobState::kQueued, "", 0, -1, 1000)
                  .ok());
  EXPECT_EQ(s->job(3)->waiting, "no live worker");
  s->AddDevice(Device("d0", 1));
  EXPECT_EQ(s->job(3)->waiting, "");
}

TEST(RecordOutputTest, CountsOnlyReadersNotDoneAndIgnoresRunsNotDone) {
  auto s = MakeFifoScheduler();
  DeviceId d = s->AddDevice(Device("d0", 2));
  JobSpec spec = SpecBuilder()
                     .Add(TaskBuilder("p").Us(100))
                     .Add(TaskBuilder("b").Us(100).Inputs({"p"}))
                     .Add(TaskBuilder("c").Us(100).Inputs({"p"}))
                     .Build();
  std::vector<Scheduler::RestoredRun> done = {{0, 0, 10, 20, 100}, {1, 0, 20, 30, 0}};
  ASSERT_TRUE(s->RestoreJob(4, BuildGraph(spec), done, JobState::kQueued, "", 0, -1, 1000).ok());
  s->RecordOutput(4, 2, d, 999, 1);  // c is not done: ignored
  EXPECT_EQ(s->pool().device(d).held_bytes, 0u);
  s->RecordOutput(4, 0, d, 100, 1);
  EXPECT_EQ(s->job(4)->runs[0].reads_left, 1u) << "b read it before the restart";
  EXPECT_EQ(s->pool().device(d).held_bytes, 100u);
  s->RecordOutput(4, 0, d, 100, 1);  // reported twice: counted once
  EXPECT_EQ(s->pool().device(d).held_bytes, 100u);
}

}  // namespace
}  // namespace hmpmd::test
