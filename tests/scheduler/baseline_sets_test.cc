// The baselines fifo and spmd-1f1b keep a stateful sub-model's tasks on its
// device set (fifo_policy.h, spmd_policy.h rule 5): a job spec's actor, and
// a driver session's actor added after admission. Before, fifo placed them
// on any device, and spmd-1f1b a session's actors too, so a stateful kernel
// found no state on the device it got.
#include <gtest/gtest.h>

#include <set>

#include "hmpmd/scheduler/policy.h"
#include "hmpmd/scheduler/scheduler.h"
#include "test_builders.h"

namespace hmpmd {
namespace {

class BaselineSetsTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    auto policy = MakePolicy(GetParam());
    ASSERT_TRUE(policy.ok());
    sched_ = std::make_unique<Scheduler>(SchedulerOptions{}, std::move(policy).value());
    for (const char* name : {"d0", "d1", "d2"}) sched_->AddDevice(test::Device(name, 1));
  }
  // Runs what is ready until the job ends (bounded); returns the devices
  // each run of sub-model `sm` went to.
  std::set<DeviceId> RunAll(JobId job, uint32_t sm) {
    std::set<DeviceId> devices;
    for (int round = 0; round < 100; ++round) {
      std::vector<Dispatch> out;
      sched_->Schedule(now_, &out);
      if (out.empty()) break;
      for (const Dispatch& d : out) {
        const JobRun& run = *sched_->job(d.job);
        if (run.graph->task(d.run % run.graph->size()).submodel == sm) devices.insert(d.device);
        EXPECT_TRUE(sched_->OnTaskDone(d.job, d.run, d.attempt, now_, now_ + 1000, now_ + 1000));
      }
      now_ += 1000;
    }
    EXPECT_NE(sched_->job(job), nullptr);
    return devices;
  }

  std::unique_ptr<Scheduler> sched_;
  TimeUs now_ = 10;
};

std::vector<TaskSpec> Sleeps(const std::string& submodel, int n) {
  std::vector<TaskSpec> tasks;
  for (int i = 0; i < n; ++i) {
    tasks.push_back(test::TaskBuilder("t" + std::to_string(i)).Us(1000).Submodel(submodel));
  }
  return tasks;
}

TEST_P(BaselineSetsTest, APinnedActorsRunsStayOnOneDevice) {
  JobSpec spec = test::SpecBuilder().Submodel("actor", SubmodelKind::kActor, 1);
  spec.submodels[0].elastic = false;
  spec.tasks = Sleeps("actor", 6);
  auto g = test::BuildGraph(spec);
  ASSERT_NE(g, nullptr);
  auto id = sched_->AddJob(g, now_);
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  const std::set<DeviceId> devices = RunAll(*id, 0);
  EXPECT_EQ(devices.size(), 1u) << GetParam() << ": 6 independent runs of a 1-device actor";
  EXPECT_EQ(sched_->job(*id)->state, JobState::kSucceeded);
}

TEST_P(BaselineSetsTest, ASessionsActorAddedLaterStaysOnItsSet) {
  JobSpec open;
  open.name = "session";
  auto g = JobGraph::BuildOpen(open);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  auto id = sched_->AddJob(*g, now_);
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  SubmodelSpec actor;
  actor.name = "actor";
  actor.kind = SubmodelKind::kActor;
  actor.devices = 1;
  ASSERT_TRUE(sched_->AppendTasks(*id, {actor}, Sleeps("actor", 6), now_).ok());
  const uint32_t sm = sched_->job(*id)->graph->spec().submodels.size() - 1;
  EXPECT_EQ(RunAll(*id, sm).size(), 1u) << GetParam() << ": 6 calls of a 1-device actor";
}

INSTANTIATE_TEST_SUITE_P(Baselines, BaselineSetsTest, ::testing::Values("fifo", "spmd-1f1b"),
                         [](const auto& p) {
                           return p.param == "fifo" ? std::string("fifo") : std::string("spmd");
                         });

}  // namespace
}  // namespace hmpmd
