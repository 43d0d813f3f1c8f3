// Tests for DeviceShare's sets on a pool of devices with different store
// caps (memory_mb; scheduler/include/hmpmd/scheduler/device_share.h, rule
// 5), with stores counted as the controller counts them
// (PoolOptions::count_store): a set is laid out on devices whose store holds
// the outputs its tasks are known to produce; an elastic set whose task's
// outputs fit no store of its own grows by a device whose store does; a
// pinned one fails the job naming the store cap. Before, such a task waited
// forever ("case (d)" of the mixed-pool report). Also: a run refused for
// room in the stores is marked as waiting for "store".
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "hmpmd/scheduler/device_share.h"
#include "hmpmd/scheduler/hmpmd_policy.h"
#include "scheduler_fixture.h"

namespace hmpmd {
namespace {

using test::Device;
using test::SpecBuilder;
using test::TaskBuilder;

constexpr double k4MiB = 1024 * 1024;  // floats of a `scale`: 4 MiB

class DeviceSetStoresTest : public test::SchedulerTest {
 protected:
  void SetUp() override {
    opts_.pool.count_store = true;  // the controller's setting
    Make();
  }
  const DeviceShare& share() const {
    return dynamic_cast<const HmpmdPolicy&>(sched_->policy()).share();
  }
  // A device of one cube core with a store of `memory_mb`.
  DeviceId AddDevice(const std::string& name, uint64_t memory_mb) {
    DeviceDesc d = Device(name, 1);
    d.memory_mb = memory_mb;
    return sched_->AddDevice(d);
  }
  // A `scale` of n floats, without an input: it stores 4n bytes.
  static TaskBuilder Scale(const std::string& id, double n) {
    return std::move(TaskBuilder(id, "scale").Arg("n", n).Arg("factor", 2.0));
  }
  // An actor of one device whose task `post` scales the 4 MiB output of
  // `src` (a task outside any set): its size is known only once src ran.
  static JobSpec ActorAfterSource(bool elastic) {
    SpecBuilder b;
    b.Submodel("actor", SubmodelKind::kActor, 1);
    b.Add(Scale("src", k4MiB));
    b.Add(std::move(
        TaskBuilder("post", "scale").Arg("factor", 2.0).Submodel("actor").Inputs({"src"})));
    JobSpec spec = b;
    spec.submodels[0].elastic = elastic;
    return spec;
  }
  // Runs `src` (on the large store) and reports its 4 MiB output there.
  void RunSource(JobId job, DeviceId large) {
    std::vector<Dispatch> out = ScheduleAt(0);
    ASSERT_EQ(out.size(), 1u);
    ASSERT_EQ(TaskOf(job, out[0].run), "src");
    ASSERT_EQ(out[0].device, large) << "4 MiB go only to the store that holds them";
    ASSERT_TRUE(sched_->OnTaskDone(job, out[0].run, out[0].attempt, 0, 100, 100));
    sched_->RecordOutput(job, out[0].run, large, 4u << 20, 1);
  }
};

TEST_F(DeviceSetStoresTest, LayoutPrefersADeviceWhoseStoreHoldsTheSetsOutputs) {
  AddDevice("small", 1);  // first: the layout took it before
  const DeviceId large = AddDevice("large", 64);
  SpecBuilder b;
  b.Submodel("actor", SubmodelKind::kActor, 1);
  b.Add(std::move(Scale("gen", k4MiB).Submodel("actor")));
  JobId job = Add(b);
  EXPECT_EQ(share().DeviceSet(job, 0), std::vector<DeviceId>{large});
  std::vector<Dispatch> out = ScheduleAt(0);
  ASSERT_EQ(out.size(), 1u) << "gen waits for ever on the 1 MiB store";
  EXPECT_EQ(out[0].device, large);
}

TEST_F(DeviceSetStoresTest, ElasticSetGrowsByADeviceWhoseStoreHoldsTheOutputs) {
  const DeviceId small = AddDevice("small", 1);
  const DeviceId large = AddDevice("large", 64);
  JobId job = Add(ActorAfterSource(/*elastic=*/true));
  // post's size is not known at admission: the set is laid out as before.
  ASSERT_EQ(share().DeviceSet(job, 0), std::vector<DeviceId>{small});
  RunSource(job, large);
  std::vector<Dispatch> out = ScheduleAt(100);
  ASSERT_EQ(out.size(), 1u) << "post waits for ever on its set's 1 MiB store";
  EXPECT_EQ(TaskOf(job, out[0].run), "post");
  EXPECT_EQ(out[0].device, large);
  const std::vector<DeviceId>& set = share().DeviceSet(job, 0);
  EXPECT_EQ(set.size(), 2u) << "it grew; none of its own devices left";
  ASSERT_TRUE(sched_->OnTaskDone(job, out[0].run, out[0].attempt, 100, 200, 200));
  EXPECT_EQ(Job(job).state, JobState::kSucceeded);
}

TEST_F(DeviceSetStoresTest, PinnedSetThatNoStoreOfItsOwnHoldsFailsTheJobNamingTheCap) {
  const DeviceId small = AddDevice("small", 1);
  const DeviceId large = AddDevice("large", 64);
  JobId job = Add(ActorAfterSource(/*elastic=*/false));
  ASSERT_EQ(share().DeviceSet(job, 0), std::vector<DeviceId>{small});
  RunSource(job, large);
  EXPECT_TRUE(ScheduleAt(100).empty());
  const JobRun& j = Job(job);
  EXPECT_EQ(j.state, JobState::kFailed) << "it waited for ever";
  ExpectHas(j.error, {"tasks[1] 'post'", "store cap", "1 MiB", "pinned", "--memory-mb"});
}

TEST_F(DeviceSetStoresTest, OutputsNoStoreHoldsArePlacedInTheSetAsBefore) {
  // No device of the pool holds 4 MiB: the task goes to its set's device
  // (its worker fails it naming the cap), pinned or not.
  for (bool elastic : {true, false}) {
    Make();
    const DeviceId a = AddDevice("a", 1);
    const DeviceId b = AddDevice("b", 2);
    JobId job = Add(ActorAfterSource(elastic));
    std::vector<Dispatch> out = ScheduleAt(0);
    ASSERT_EQ(out.size(), 1u);
    ASSERT_TRUE(sched_->OnTaskDone(job, out[0].run, out[0].attempt, 0, 100, 100));
    sched_->RecordOutput(job, out[0].run, out[0].device, 4u << 20, 1);
    const std::vector<DeviceId> before = share().DeviceSet(job, 0);
    out = ScheduleAt(100);
    ASSERT_EQ(out.size(), 1u) << elastic;
    EXPECT_TRUE(out[0].device == a || out[0].device == b);
    EXPECT_EQ(share().DeviceSet(job, 0), before) << elastic;
    EXPECT_EQ(Job(job).state, JobState::kRunning) << elastic;
  }
}

TEST_F(DeviceSetStoresTest, PoolsWithoutStoreCapsLayOutAsBefore) {
  AddDevice("a", 0);
  AddDevice("b", 0);
  SpecBuilder b;
  b.Submodel("actor", SubmodelKind::kActor, 1);
  b.Add(std::move(Scale("gen", k4MiB).Submodel("actor")));
  JobId job = Add(b);
  EXPECT_EQ(share().DeviceSet(job, 0), std::vector<DeviceId>{0});
}

TEST_F(DeviceSetStoresTest, ARunRefusedForRoomInTheStoresWaitsForStore) {
  // x fills the 64 MiB store until z reads it; y (40 MiB) fits beside it on
  // no store, so it waits for room: "store", not "core".
  DeviceDesc two = Device("a", 2);
  two.memory_mb = 64;
  sched_->AddDevice(two);
  JobId job = Add(SpecBuilder()
                      .Add(Scale("x", 10 * k4MiB))
                      .Add(Scale("y", 10 * k4MiB))
                      .Add(TaskBuilder("z", "noop").Inputs({"x"})));
  std::vector<Dispatch> out = ScheduleAt(0);
  ASSERT_EQ(out.size(), 1u);
  ASSERT_EQ(TaskOf(job, out[0].run), "x") << "x goes first (z waits for it)";
  const uint32_t x = out[0].run, y = 1;
  EXPECT_FALSE(Job(job).runs[x].store_wait);
  EXPECT_EQ(Job(job).runs[y].state, TaskState::kReady);
  EXPECT_TRUE(Job(job).runs[y].store_wait);
}

}  // namespace
}  // namespace hmpmd
