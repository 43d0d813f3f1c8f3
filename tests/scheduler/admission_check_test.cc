// Tests for the admission checks (scheduler/admission_check.{h,cc}), on a
// pool directly and through the engine: what the pool that is up cannot run
// is refused at AddJob (or AppendTasks) with one line; an empty pool accepts
// anything and waits for workers; a job that the devices still up can no
// longer run says why it waits (JobRun::waiting, scheduler_devices.cc).
#include "hmpmd/scheduler/admission_check.h"

#include <gtest/gtest.h>

#include <vector>

#include "scheduler_fixture.h"
#include "test_builders.h"

namespace hmpmd {
namespace {

using test::Device;
using test::SchedulerTest;
using test::SpecBuilder;
using test::TaskBuilder;

// The pool's kernel ids of `tasks`.
std::vector<uint32_t> KernelIds(ResourcePool& pool, const std::vector<TaskSpec>& tasks) {
  std::vector<uint32_t> ids;
  for (const TaskSpec& t : tasks) ids.push_back(pool.InternKernel(t.kernel));
  return ids;
}

TEST(AdmissionCheckTest, EachTaskNeedsALiveCoreOfItsKindRunningItsKernel) {
  ResourcePool pool{PoolOptions{}};
  pool.AddDevice(Device("cube", 1, 0, {"spin"}));
  const DeviceId vec = pool.AddDevice(Device("vec", 0, 1, {"send"}));
  const std::vector<TaskSpec> tasks = {TaskBuilder("a"), TaskBuilder("s", "send").Vector(),
                                       TaskBuilder("g", "gemm")};
  const std::vector<uint32_t> ids = KernelIds(pool, tasks);
  const AdmissionCheck check(pool);
  EXPECT_EQ(check.Tasks(tasks, 4, ids).message(),
            "tasks[6] 'g': kernel: no worker runs 'gemm' on a cube core");
  const uint8_t all_but_g[] = {1, 1, 0};
  EXPECT_TRUE(check.Tasks(tasks, 4, ids, all_but_g).ok()) << "only the tasks still needed count";
  pool.RemoveDevice(vec);
  EXPECT_EQ(check.Tasks(tasks, 4, ids, all_but_g).message(),
            "tasks[5] 's': core: no worker has a 'vector' core");
}

TEST(AdmissionCheckTest, AGangNeedsADistinctLiveDevicePerMember) {
  ResourcePool pool{PoolOptions{}};
  pool.AddDevice(Device("d0", 1));
  const DeviceId d1 = pool.AddDevice(Device("d1", 1));
  const std::vector<TaskSpec> tasks = {TaskBuilder("m0", "allreduce").Collective("g", "allreduce"),
                                       TaskBuilder("m1", "allreduce").Collective("g", "allreduce")};
  const std::vector<uint32_t> ids = KernelIds(pool, tasks);
  const AdmissionCheck check(pool);
  EXPECT_TRUE(check.Tasks(tasks, 0, ids).ok());
  pool.RemoveDevice(d1);
  EXPECT_EQ(check.Tasks(tasks, 0, ids).message(),
            "tasks[0] 'm0': collective.group: group 'g' has 2 members, which need distinct "
            "devices; devices that run 'allreduce' on a cube core: 1");
  const uint8_t only_m1[] = {0, 1};
  EXPECT_FALSE(check.Tasks(tasks, 0, ids, only_m1).ok()) << "a gang runs whole";
}

TEST(AdmissionCheckTest, SetsAskNoMoreDevicesThanAreUpAndAnEmptyPoolPassesAll) {
  ResourcePool pool{PoolOptions{}};
  const std::vector<SubmodelSpec> submodels = {{"a", SubmodelKind::kActor, 1},
                                               {"b", SubmodelKind::kActor, 2}};
  const std::vector<TaskSpec> tasks = {TaskBuilder("v", "mystery").Vector()};
  const std::vector<uint32_t> ids = KernelIds(pool, tasks);
  const AdmissionCheck check(pool);
  EXPECT_TRUE(check.SetSizes(submodels, 0).ok()) << "no device up: the job waits";
  EXPECT_TRUE(check.Tasks(tasks, 0, ids).ok());
  pool.AddDevice(Device("d0", 1));
  EXPECT_EQ(check.SetSizes(submodels, 3).message(),
            "submodels[4] 'b': devices: asks for 2, the pool has 1");
}

TEST_F(SchedulerTest, AddJobRejectsACoreKindNoDeviceHas) {
  Make();
  sched_->AddDevice(Device("cube-only", 2, 0));
  Status s = AddStatus(SpecBuilder().Chain({"a"}, 1).Add(TaskBuilder("v", "send").Vector()));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  ExpectHas(s.message(), {"tasks[1] 'v'", "core", "'vector'"});
  EXPECT_TRUE(sched_->jobs().empty()) << "a rejected job leaves no trace";
}

TEST_F(SchedulerTest, AddJobRejectsAKernelNoDeviceRuns) {
  Make();
  sched_->AddDevice(Device("cube", 1, 0, {"spin"}));
  sched_->AddDevice(Device("vec", 0, 1, {"send"}));
  Status s = AddStatus(SpecBuilder().Chain({"a"}, 1).Add(TaskBuilder("g", "gemm")));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  ExpectHas(s.message(), {"tasks[1] 'g'", "kernel", "no worker runs 'gemm'"});
  // A kernel the pool runs, but only on the other core kind.
  Status k = AddStatus(SpecBuilder().Add(TaskBuilder("x", "send")));  // send on cube
  EXPECT_EQ(k.code(), StatusCode::kInvalidArgument);
  ExpectHas(k.message(), {"tasks[0] 'x'", "kernel", "'send' on a cube core"});
  EXPECT_TRUE(AddStatus(SpecBuilder().Add(TaskBuilder("x", "send").Vector())).ok());
}

TEST_F(SchedulerTest, AddJobRejectsMoreDevicesThanThePoolHas) {
  Make();
  sched_->AddDevice(Device("d0", 1));
  sched_->AddDevice(Device("d1", 1));
  Status s = AddStatus(SpecBuilder()
                           .Submodel("vision", SubmodelKind::kEncoder, 3)
                           .Add(TaskBuilder("a").Submodel("vision")));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  ExpectHas(s.message(), {"submodels[0] 'vision'", "devices", "asks for 3", "has 2"});
  EXPECT_TRUE(AddStatus(SpecBuilder()
                            .Submodel("vision", SubmodelKind::kEncoder, 2)
                            .Add(TaskBuilder("a").Submodel("vision")))
                  .ok());
}

// Rule 4: a sub-model whose state part fits no live device is refused,
// naming it and the figures; a part that fits the largest device passes
// though smaller devices could not hold it.
TEST_F(SchedulerTest, AddJobRejectsAStatePartThatFitsNoLiveDevice) {
  Make();
  DeviceDesc small = Device("small", 1), big = Device("big", 1);
  small.memory_mb = 1024;
  big.memory_mb = 4096;
  sched_->AddDevice(small);
  sched_->AddDevice(big);
  auto spec = [](double bytes, uint32_t shards) {
    JobSpec s = SpecBuilder()
                    .Submodel("llm0", SubmodelKind::kPipelineStage)
                    .Add(TaskBuilder("a").Submodel("llm0"))
                    .Build();
    s.submodels[0].state_bytes = bytes;
    s.submodels[0].state_shards = shards;
    return s;
  };
  const double gib = 1 << 30;
  Status whole = AddStatus(spec(5 * gib, 1));
  EXPECT_EQ(whole.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(whole.message(),
            "submodels[0] 'llm0': state_bytes: 5368709120 bytes, more than any live device holds "
            "(the largest, 'big', has memory_mb 4096)");
  Status split = AddStatus(spec(20 * gib, 4));
  ExpectHas(split.message(), {"submodels[0] 'llm0'", "21474836480 over 4 state_shards",
                              "5368709120 bytes per device", "'big', has memory_mb 4096"});
  EXPECT_TRUE(AddStatus(spec(20 * gib, 8)).ok()) << "2.5 GiB a device fits 'big'";
  EXPECT_TRUE(AddStatus(spec(3 * gib, 1)).ok()) << "fits 'big', not 'small'";
  EXPECT_EQ(sched_->jobs().size(), 2u) << "refused jobs leave no trace";
}

TEST_F(SchedulerTest, AddJobAcceptsAnythingWhileThePoolIsEmpty) {
  Make();
  JobId job = Add(SpecBuilder().Add(TaskBuilder("v", "mystery").Vector()));
  ASSERT_NE(job, 0u);
  EXPECT_TRUE(ScheduleAt(0).empty()) << "nothing to run on yet";
  sched_->AddDevice(Device("late", 0, 1));
  std::vector<Dispatch> out = ScheduleAt(5);
  ASSERT_EQ(out.size(), 1u) << "runs once a worker arrives";
  EXPECT_EQ(Job(job).state, JobState::kRunning);
  EXPECT_EQ(Job(job).started, 5);
}

TEST_F(SchedulerTest, AddJobTreatsAPoolOfDeadDevicesAsEmpty) {
  Make();
  DeviceId d = sched_->AddDevice(Device("d", 1, 0, {"spin"}));
  sched_->RemoveDevice(d, 0);
  EXPECT_TRUE(AddStatus(SpecBuilder().Add(TaskBuilder("g", "gemm"))).ok());
}

TEST_F(SchedulerTest, AJobSaysWhyItWaitsWhileItsGangDoesNotFitTheLiveDevices) {
  Make();
  std::vector<DeviceId> d;
  for (int i = 0; i < 3; ++i) d.push_back(sched_->AddDevice(Device("d" + std::to_string(i), 1, 1)));
  SpecBuilder spec;
  for (int i = 0; i < 3; ++i) {
    spec.Add(
        TaskBuilder("m" + std::to_string(i), "allreduce").Vector().Collective("g", "allreduce"));
  }
  spec.Add(TaskBuilder("tail").Inputs({"m0", "m1", "m2"}));
  JobId job = Add(spec);
  ASSERT_NE(job, 0u);
  EXPECT_EQ(Job(job).waiting, "");

  sched_->RemoveDevice(d[2], 0);
  ExpectHas(Job(job).waiting, {"tasks[0] 'm0'", "group 'g' has 3 members",
                               "devices that run 'allreduce' on a vector core: 2"});
  EXPECT_TRUE(ScheduleAt(1).empty()) << "the gang cannot start on two devices";
  d.push_back(sched_->AddDevice(Device("d3", 1, 1)));
  EXPECT_EQ(Job(job).waiting, "") << "a worker came back";

  std::vector<Dispatch> members = ScheduleAt(2);
  ASSERT_EQ(members.size(), 3u);
  for (const Dispatch& m : members) {
    ASSERT_TRUE(sched_->OnTaskDone(job, m.run, m.attempt, 2, 3, 3));
  }
  sched_->RemoveDevice(d[0], 4);
  EXPECT_EQ(Job(job).waiting, "") << "the gang has run: what is left fits two devices";
  sched_->RemoveDevice(d[1], 4);
  sched_->RemoveDevice(d[3], 4);
  EXPECT_EQ(Job(job).waiting, "no live worker");
}

TEST_F(SchedulerTest, AJobWhoseSetLostADeviceRunsShortWithoutSayingItWaits) {
  Make();
  std::vector<DeviceId> d;
  for (int i = 0; i < 2; ++i) d.push_back(sched_->AddDevice(Device("d" + std::to_string(i), 1)));
  JobId job = Add(SpecBuilder()
                      .Submodel("a", SubmodelKind::kActor, 2)
                      .Add(TaskBuilder("x").Submodel("a"))
                      .Add(TaskBuilder("y").Submodel("a")));
  ASSERT_NE(job, 0u);
  sched_->RemoveDevice(d[1], 0);
  // `hmpmd status` printed "waiting  submodels[0] 'a': devices: asks for 2,
  // the pool has 1" while the job ran on, and `hmpmd run` took it for a job
  // the workers left cannot run.
  EXPECT_EQ(Job(job).waiting, "");
  EXPECT_FALSE(ScheduleAt(1).empty()) << "the set runs on the device left";
}

}  // namespace
}  // namespace hmpmd
