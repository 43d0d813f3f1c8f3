// Early (asynchronous) dispatch in the engine (scheduler/scheduler_early.cc):
// a run whose unfinished inputs all run on one core is placed there ahead of
// them, exactly then; never for collectives; and a run dispatched ahead is
// recalled without losing an attempt when its producer does not finish.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "hmpmd/scheduler/hmpmd_policy.h"
#include "hmpmd/scheduler/scheduler.h"
#include "test_builders.h"

namespace hmpmd::test {
namespace {

class EarlyDispatchTest : public ::testing::Test {
 protected:
  // The controller's live pool options, early dispatch on unless `early`.
  void Make(bool early = true, uint32_t max_attempts = 3) {
    SchedulerOptions o;
    o.pool.max_queue_per_core = 64;
    o.pool.lookahead_us = 200;
    o.pool.lookahead_waiting_only = true;
    o.early_dispatch = early;
    o.max_attempts = max_attempts;
    s_ = std::make_unique<Scheduler>(o, std::make_unique<HmpmdPolicy>());
  }
  JobId Add(const JobSpec& spec) {
    spec_ = spec;
    auto id = s_->AddJob(BuildGraph(spec), 0);
    EXPECT_TRUE(id.ok()) << id.status().ToString();
    job_ = id.ok() ? *id : 0;
    return job_;
  }
  std::vector<Dispatch> Step(TimeUs now) {
    std::vector<Dispatch> out;
    s_->Schedule(now, &out);
    return out;
  }
  uint32_t Run(const std::string& id) const { return static_cast<uint32_t>(IndexOf(spec_, id)); }
  const TaskRecord& Rec(const std::string& id) const { return s_->job(job_)->runs[Run(id)]; }
  std::vector<std::string> Names(const std::vector<Dispatch>& out) const {
    std::vector<std::string> ids;
    for (const Dispatch& d : out) ids.push_back(spec_.tasks[d.run % spec_.tasks.size()].id);
    return ids;
  }
  bool Done(const std::string& id, TimeUs start, TimeUs end) {
    return s_->OnTaskDone(job_, Run(id), Rec(id).attempt, start, end, end);
  }

  std::unique_ptr<Scheduler> s_;
  JobSpec spec_;
  JobId job_ = 0;
};

using Ids = std::vector<std::string>;

TEST_F(EarlyDispatchTest, AChainQueuesItsNextTaskBehindTheRunningOne) {
  Make();
  s_->AddDevice(Device("d0", 1));
  s_->AddDevice(Device("d1", 1));
  Add(SpecBuilder().Chain({"a", "b", "c"}, 1000));
  std::vector<Dispatch> out = Step(0);
  ASSERT_EQ(Names(out), (Ids{"a", "b"})) << "b goes behind a; c would wait behind b";
  EXPECT_EQ(out[1].core, out[0].core);
  EXPECT_EQ(Rec("b").state, TaskState::kRunning);
  EXPECT_EQ(Rec("b").pending, 1u) << "dispatched ahead of its input";
  EXPECT_EQ(Rec("c").state, TaskState::kReady) << "ready early, parked on the core";
  EXPECT_TRUE(Rec("c").early);
  EXPECT_TRUE(Step(10).empty()) << "the core has no room: c stays parked";
  // a ends: b runs, and c goes behind it at once.
  ASSERT_TRUE(Done("a", 0, 1000));
  EXPECT_EQ(Rec("b").pending, 0u);
  out = Step(1000);
  ASSERT_EQ(Names(out), (Ids{"c"}));
  EXPECT_EQ(out[0].core, Rec("b").core);
  ASSERT_TRUE(Done("b", 1000, 2000));
  ASSERT_TRUE(Done("c", 2000, 3000));
  EXPECT_EQ(s_->job(job_)->state, JobState::kSucceeded);
}

TEST_F(EarlyDispatchTest, OffItWaitsForTheResult) {
  Make(/*early=*/false);
  s_->AddDevice(Device("d0", 1));
  Add(SpecBuilder().Chain({"a", "b"}, 1000));
  EXPECT_EQ(Names(Step(0)), (Ids{"a"}));
  EXPECT_EQ(Rec("b").state, TaskState::kBlocked);
}

TEST_F(EarlyDispatchTest, AFanInGoesAheadOnlyWhenAllItsProducersShareACore) {
  Make();
  s_->AddDevice(Device("d0", 1));
  s_->AddDevice(Device("d1", 1));
  Add(SpecBuilder()
          .Add(TaskBuilder("a").Us(1000))
          .Add(TaskBuilder("b").Us(1000))
          .Add(TaskBuilder("join").Us(10).Inputs({"a", "b"})));
  std::vector<Dispatch> out = Step(0);
  ASSERT_EQ(Names(out), (Ids{"a", "b"}));
  ASSERT_NE(out[0].core, out[1].core);
  EXPECT_EQ(Rec("join").state, TaskState::kBlocked) << "its inputs run on two cores";
  // One producer is done: the other runs on one core, so join goes there.
  ASSERT_TRUE(Done("a", 0, 1000));
  out = Step(1000);
  ASSERT_EQ(Names(out), (Ids{"join"}));
  EXPECT_EQ(out[0].core, Rec("b").core);
  EXPECT_EQ(Rec("join").pending, 1u);
}

TEST_F(EarlyDispatchTest, AFanInOnOneCoreGoesBehindAllItsProducers) {
  Make();
  s_->AddDevice(Device("d0", 1));
  Add(SpecBuilder()
          .Add(TaskBuilder("a").Us(50))
          .Add(TaskBuilder("b").Us(50))
          .Add(TaskBuilder("join").Us(50).Inputs({"a", "b"})));
  std::vector<Dispatch> out = Step(0);
  ASSERT_EQ(out.size(), 3u) << "tiny tasks: all three fit the lookahead";
  EXPECT_EQ(Names(out).back(), "join");
  EXPECT_EQ(Rec("join").pending, 2u);
}

TEST_F(EarlyDispatchTest, NotForCollectiveMembersNorTheirConsumers) {
  Make();
  s_->AddDevice(Device("d0", 0, 1));
  s_->AddDevice(Device("d1", 0, 1));
  Add(SpecBuilder()
          .Add(TaskBuilder("p").Vector().Us(1000))
          .Add(TaskBuilder("q").Vector().Us(1000))
          .Add(TaskBuilder("m0", "allreduce").Vector().Collective("g", "allreduce").Inputs({"p"}))
          .Add(TaskBuilder("m1", "allreduce").Vector().Collective("g", "allreduce").Inputs({"q"}))
          .Add(TaskBuilder("after").Vector().Us(10).Inputs({"m0"})));
  EXPECT_EQ(Names(Step(0)), (Ids{"p", "q"}));
  EXPECT_EQ(Rec("m0").state, TaskState::kBlocked) << "a gang member waits for its inputs";
  EXPECT_EQ(Rec("m1").state, TaskState::kBlocked);
  ASSERT_TRUE(Done("p", 0, 1000));
  ASSERT_TRUE(Done("q", 0, 1000));
  std::vector<Dispatch> out = Step(1000);
  ASSERT_EQ(Names(out), (Ids{"m0", "m1"}));
  EXPECT_EQ(Rec("after").state, TaskState::kBlocked) << "a collective's consumer waits too";
}

TEST_F(EarlyDispatchTest, NotOnACoreOfAnotherKind) {
  Make();
  s_->AddDevice(Device("d0", 1, 1));
  Add(SpecBuilder()
          .Add(TaskBuilder("a").Us(1000))
          .Add(TaskBuilder("v").Vector().Us(1000).Inputs({"a"})));
  EXPECT_EQ(Names(Step(0)), (Ids{"a"}));
  EXPECT_EQ(Rec("v").state, TaskState::kBlocked);
}

// Earliest-core placement that keeps tasks whose id starts with "far" off
// device 0 (as a sub-model's device set would).
class KeepOffDevice0 final : public Policy {
 public:
  std::string_view Name() const override { return "keep-off-0"; }
  double Priority(const TaskView& t) const override { return -static_cast<double>(t.ready_seq); }
  Placement Place(const TaskView& t, const ResourcePool& pool, TimeUs) override {
    return EarliestCore(t, t.spec->core, pool, [&](DeviceId d) { return Allows(t, d); });
  }
  bool Allows(const TaskView& t, DeviceId d) const override {
    return d != 0 || t.spec->id.rfind("far", 0) != 0;
  }
};

TEST_F(EarlyDispatchTest, NotOnADeviceThePolicyDoesNotAllow) {
  SchedulerOptions o;
  o.pool.max_queue_per_core = 64;
  o.pool.lookahead_us = 1e6;
  o.early_dispatch = true;
  s_ = std::make_unique<Scheduler>(o, std::make_unique<KeepOffDevice0>());
  s_->AddDevice(Device("d0", 1));
  s_->AddDevice(Device("d1", 1));
  Add(SpecBuilder()
          .Add(TaskBuilder("a").Us(1000))
          .Add(TaskBuilder("near").Us(1000).Inputs({"a"}))
          .Add(TaskBuilder("far").Us(1000).Inputs({"a"})));
  std::vector<Dispatch> out = Step(0);
  ASSERT_EQ(Names(out), (Ids{"a", "near"}));
  EXPECT_EQ(out[0].device, 0u);
  EXPECT_EQ(Rec("far").state, TaskState::kBlocked) << "a runs on device 0, which far may not use";
}

TEST_F(EarlyDispatchTest, AParkedRunGoesAnywhereOnceItsProducerIsDone) {
  Make();
  s_->AddDevice(Device("d0", 1));
  s_->AddDevice(Device("d1", 1));
  Add(SpecBuilder()
          .Add(TaskBuilder("x").Us(1000))
          .Add(TaskBuilder("y").Us(1000))
          .Add(TaskBuilder("a").Us(1000).Inputs({"x"}))
          .Add(TaskBuilder("b").Us(1000).Inputs({"a"})));
  std::vector<Dispatch> out = Step(0);
  // x and y start; a goes behind x; b is parked behind a (no room).
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(Rec("a").core, Rec("x").core);
  EXPECT_NE(Rec("y").core, Rec("x").core);
  EXPECT_TRUE(Rec("b").early);
  ASSERT_TRUE(Done("y", 0, 500));  // d1 is free now
  ASSERT_TRUE(Done("x", 0, 1000));
  ASSERT_TRUE(Done("a", 1000, 2000));
  EXPECT_FALSE(Rec("b").early) << "its input is done: an ordinary ready run";
  out = Step(2000);
  ASSERT_EQ(Names(out), (Ids{"b"}));
  EXPECT_EQ(Rec("b").pending, 0u);
}

TEST_F(EarlyDispatchTest, AFailedProducerFailsTheJobAndEndsItsEarlyConsumer) {
  Make();
  s_->AddDevice(Device("d0", 1));
  Add(SpecBuilder().Chain({"a", "b"}, 1000));
  ASSERT_EQ(Step(0).size(), 2u);
  ASSERT_TRUE(s_->OnTaskFailed(job_, Run("a"), 0, "boom", /*retryable=*/false, 500));
  EXPECT_EQ(s_->job(job_)->state, JobState::kFailed);
  EXPECT_EQ(Rec("b").state, TaskState::kCancelled);
  EXPECT_EQ(s_->pool().core(0).queued, 0u) << "the core is free again";
  // The worker's report for b (its input failed there) is stale.
  EXPECT_FALSE(s_->OnInputsLost(job_, Run("b"), 0, {Run("a")}, "lost", 600));
}

TEST_F(EarlyDispatchTest, InAnOpenJobAFailedProducerEndsItsEarlyConsumerOnItsWorker) {
  Make();
  s_->AddDevice(Device("d0", 1));
  JobSpec empty;
  empty.name = "session";
  auto g = JobGraph::BuildOpen(empty);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  auto id = s_->AddJob(*g, 0);
  ASSERT_TRUE(id.ok());
  job_ = *id;
  spec_ = SpecBuilder().Chain({"a", "b"}, 1000);
  ASSERT_TRUE(s_->AppendTasks(job_, {}, {spec_.tasks[0]}, 0).ok());
  ASSERT_EQ(Step(0).size(), 1u);
  // Appended while its input runs: it goes behind it at once.
  ASSERT_TRUE(s_->AppendTasks(job_, {}, {spec_.tasks[1]}, 10).ok());
  ASSERT_EQ(Names(Step(10)), (Ids{"b"}));
  EXPECT_EQ(Rec("b").pending, 1u);
  ASSERT_TRUE(s_->OnTaskFailed(job_, Run("a"), 0, "boom", false, 500));
  std::vector<RunEnded> ended = s_->TakeEnded();
  ASSERT_EQ(ended.size(), 2u);
  const auto b = std::find_if(ended.begin(), ended.end(),
                              [&](const RunEnded& e) { return e.run == Run("b"); });
  ASSERT_NE(b, ended.end());
  EXPECT_EQ(b->state, TaskState::kFailed);
  EXPECT_EQ(b->device, 0u) << "dispatched: the controller stops it on its worker";
}

TEST_F(EarlyDispatchTest, CancellingTheJobEndsTheRunsQueuedAheadAndFreesTheCore) {
  Make();
  s_->AddDevice(Device("d0", 1));
  Add(SpecBuilder().Chain({"a", "b", "c"}, 1000));
  ASSERT_EQ(Step(0).size(), 2u);
  ASSERT_TRUE(Rec("c").early);
  ASSERT_TRUE(s_->CancelJob(job_, "by the user", 10).ok());
  for (const char* id : {"a", "b", "c"}) EXPECT_EQ(Rec(id).state, TaskState::kCancelled) << id;
  EXPECT_EQ(s_->pool().core(0).queued, 0u);
  EXPECT_TRUE(Step(20).empty()) << "the parked entry is stale";
  EXPECT_FALSE(Done("a", 0, 1000)) << "a late result is ignored";
}

TEST_F(EarlyDispatchTest, WorkerDeathRequeuesBothAndTheEarlyRunKeepsItsAttempts) {
  Make(/*early=*/true, /*max_attempts=*/2);
  const DeviceId d0 = s_->AddDevice(Device("d0", 1));
  Add(SpecBuilder().Chain({"a", "b"}, 1000));
  ASSERT_EQ(Step(0).size(), 2u);
  s_->RemoveDevice(d0, 100);
  EXPECT_EQ(Rec("a").state, TaskState::kReady);
  EXPECT_EQ(Rec("a").attempt, 1u);
  EXPECT_EQ(Rec("b").state, TaskState::kBlocked) << "it waits for a again";
  EXPECT_EQ(Rec("b").attempt, 1u);
  EXPECT_EQ(Rec("b").recalled, 1u);
  EXPECT_EQ(s_->job(job_)->running, 0u);
  // A new worker: both go again, b ahead of a once more, at its new attempt.
  s_->AddDevice(Device("d1", 1));
  std::vector<Dispatch> out = Step(200);
  ASSERT_EQ(Names(out), (Ids{"a", "b"}));
  EXPECT_EQ(out[1].attempt, 1u);
  ASSERT_TRUE(Done("a", 200, 1200));
  // b dies once more while it runs: with 2 attempts it still gets another,
  // as the recall did not count.
  s_->RemoveDevice(1, 1300);
  EXPECT_EQ(s_->job(job_)->state, JobState::kRunning);
  EXPECT_EQ(Rec("b").state, TaskState::kReady);
  EXPECT_EQ(Rec("b").attempt, 2u);
  s_->AddDevice(Device("d2", 1));
  out = Step(1400);
  ASSERT_EQ(Names(out), (Ids{"b"}));
  ASSERT_TRUE(Done("b", 1400, 2400));
  EXPECT_EQ(s_->job(job_)->state, JobState::kSucceeded);
}

TEST_F(EarlyDispatchTest, ALostInputItRanAheadOfRequeuesItWithoutAnAttempt) {
  Make(/*early=*/true, /*max_attempts=*/1);
  s_->AddDevice(Device("d0", 1));
  Add(SpecBuilder().Chain({"a", "b"}, 1000));
  ASSERT_EQ(Step(0).size(), 2u);
  // The worker could not find a's outputs for b (a had not run there).
  ASSERT_TRUE(s_->OnInputsLost(job_, Run("b"), 0, {Run("a")}, "did not succeed there", 100));
  EXPECT_EQ(s_->job(job_)->state, JobState::kRunning) << "one attempt, and none was used";
  EXPECT_EQ(Rec("b").state, TaskState::kBlocked);
  EXPECT_EQ(Rec("a").state, TaskState::kRunning) << "a is left alone";
  ASSERT_TRUE(Done("a", 0, 1000));
  std::vector<Dispatch> out = Step(1000);
  ASSERT_EQ(Names(out), (Ids{"b"}));
  EXPECT_EQ(out[0].attempt, 1u);
  ASSERT_TRUE(Done("b", 1000, 2000));
  EXPECT_EQ(s_->job(job_)->state, JobState::kSucceeded);
}

TEST_F(EarlyDispatchTest, AProducerWaitingForARebuiltInputRecallsItsEarlyConsumers) {
  Make();
  s_->AddDevice(Device("d0", 1));
  Add(SpecBuilder().Chain({"x", "a", "b", "c"}, 1000));
  ASSERT_EQ(Names(Step(0)), (Ids{"x", "a"}));
  ASSERT_TRUE(Done("x", 0, 1000));
  s_->RecordOutput(job_, Run("x"), 0, 4096, 1);
  ASSERT_EQ(Names(Step(1000)), (Ids{"b"})) << "b goes behind a";
  // a could not read x's output: x is rebuilt, a waits, b is recalled.
  ASSERT_TRUE(s_->OnInputsLost(job_, Run("a"), 0, {Run("x")}, "gone", 1100));
  EXPECT_EQ(Rec("x").state, TaskState::kReady);
  EXPECT_EQ(Rec("a").state, TaskState::kBlocked);
  EXPECT_EQ(Rec("b").state, TaskState::kBlocked);
  EXPECT_EQ(Rec("b").attempt, 1u);
  EXPECT_EQ(Rec("b").recalled, 1u);
  EXPECT_EQ(Rec("c").state, TaskState::kBlocked) << "c was parked: its entry is stale";
  EXPECT_EQ(s_->job(job_)->running, 0u);
  // The stale attempt of b reports nothing that counts.
  EXPECT_FALSE(s_->OnTaskDone(job_, Run("b"), 0, 1100, 1200, 1200));
  VirtualLoop loop(s_.get());
  loop.AdvanceTo(1200);
  loop.RunToIdle();
  EXPECT_EQ(s_->job(job_)->state, JobState::kSucceeded);
}

// Random DAGs on a few cores, early dispatch on: every job succeeds, and no
// run starts (in the lane model of VirtualLoop) before its inputs ended.
TEST_F(EarlyDispatchTest, RandomDagsNeverStartBeforeTheirInputs) {
  const uint64_t seed = 20261121;
  LogSeed("early_dispatch_dags", seed);
  std::mt19937_64 rng(seed);
  for (int trial = 0; trial < 20; ++trial) {
    Make();
    const int devices = 1 + static_cast<int>(rng() % 3);
    for (int d = 0; d < devices; ++d) s_->AddDevice(Device("d" + std::to_string(d), 1 + rng() % 2));
    SpecBuilder b;
    const int n = 5 + static_cast<int>(rng() % 30);
    for (int i = 0; i < n; ++i) {
      TaskBuilder t("t" + std::to_string(i));
      t.Us(1 + static_cast<int64_t>(rng() % 3) * 150);
      std::vector<std::string> in;
      for (int k = 0; k < 3 && i > 0; ++k) {
        if (rng() % 2) in.push_back("t" + std::to_string(rng() % i));
      }
      std::sort(in.begin(), in.end());
      in.erase(std::unique(in.begin(), in.end()), in.end());
      TaskSpec spec = t;
      spec.inputs = in;
      b.Add(spec);
    }
    Add(b);
    VirtualLoop loop(s_.get());
    loop.RunToIdle();
    ASSERT_EQ(s_->job(job_)->state, JobState::kSucceeded) << "trial " << trial;
    std::map<uint32_t, TimeUs> end;
    for (const auto& st : loop.log()) end[st.d.run] = st.end;
    for (const auto& st : loop.log()) {
      for (const std::string& in : spec_.tasks[st.d.run].inputs) {
        EXPECT_GE(st.start, end[Run(in)]) << "trial " << trial << " run " << st.d.run;
      }
    }
  }
}

}  // namespace
}  // namespace hmpmd::test
