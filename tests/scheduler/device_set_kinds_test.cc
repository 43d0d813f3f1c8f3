// Tests for DeviceShare's sets on a mixed pool (devices with different core
// kinds; scheduler/include/hmpmd/scheduler/device_share.h, rules 1 and 4):
// a set is laid out on devices whose cores cover its tasks' kinds (a gang's
// floor counted over devices with the gang's kind), and a set that holds no
// device with a core of a task's kind, or too few for a gang, grows by a
// pool device that has it, pinned or elastic, so no task waits forever
// while the pool could run it.
#include <gtest/gtest.h>

#include <memory>
#include <set>
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
using test::VirtualLoop;

class DeviceSetKindsTest : public test::SchedulerTest {
 protected:
  void SetUp() override { Make(); }
  const DeviceShare& share() const {
    return dynamic_cast<const HmpmdPolicy&>(sched_->policy()).share();
  }
  // A device of `cube` and `vector` cores on a node of its own (a worker).
  DeviceId AddDevice(uint32_t cube, uint32_t vector) {
    DeviceDesc d = Device("d" + std::to_string(next_), cube, vector);
    d.node = next_++;
    return sched_->AddDevice(d);
  }
  // The devices the runs of tasks whose id starts with `prefix` ran on.
  std::set<DeviceId> RanOn(const VirtualLoop& loop, const std::string& prefix) const {
    std::set<DeviceId> out;
    for (const auto& st : loop.log()) {
      if (TaskOf(st.d.job, st.d.run).rfind(prefix, 0) == 0) out.insert(st.d.device);
    }
    return out;
  }

  uint32_t next_ = 0;
};

// A learner of two devices: two gemm (cube) and an allreduce gang of two on
// vector cores.
void AddLearner(SpecBuilder& b) {
  b.Submodel("learner", SubmodelKind::kLearner, 2);
  for (const char* i : {"0", "1"}) {
    b.Add(TaskBuilder(std::string("g") + i).Us(100).Submodel("learner"));
    b.Add(TaskBuilder(std::string("ar") + i, "allreduce")
              .Vector()
              .Submodel("learner")
              .Inputs({std::string("g") + i})
              .Collective("grads", "allreduce", 1 << 20));
  }
}

// (a) Two pinned actors, each with a cube task and a vector task after it,
// on a cube+vector worker and a cube-only one: the actor laid out on the
// cube-only device takes the vector device too (pinned sets grow, they do
// not lend or borrow).
TEST_F(DeviceSetKindsTest, PinnedSetWithoutTheKindTakesAPoolDeviceThatHasIt) {
  const DeviceId both = AddDevice(1, 1);
  AddDevice(2, 0);
  SpecBuilder b;
  b.Submodel("actor0", SubmodelKind::kActor, 1).Submodel("actor1", SubmodelKind::kActor, 1);
  for (const char* i : {"0", "1"}) {
    const std::string sm = std::string("actor") + i;
    b.Add(TaskBuilder(std::string("gen") + i).Us(1000).Submodel(sm));
    b.Add(TaskBuilder(std::string("post") + i)
              .Us(100)
              .Vector()
              .Submodel(sm)
              .Inputs({std::string("gen") + i}));
  }
  JobSpec spec = b.Build();
  for (SubmodelSpec& sm : spec.submodels) sm.elastic = false;
  JobId job = Add(spec);
  VirtualLoop loop(sched_.get());
  loop.RunToIdle();
  ASSERT_EQ(sched_->job(job)->state, JobState::kSucceeded);
  EXPECT_EQ(RanOn(loop, "post"), std::set<DeviceId>{both});
  // No device left a set: a pinned set only grows.
  for (const DeviceMove& m : share().moves()) {
    EXPECT_EQ(m.from, kNoSubmodel) << "device " << m.device << " left sub-model " << m.from;
  }
}

// (b) Layout: an elastic learner of two on cube+vector, cube-only and
// cube+vector workers gets the two devices with vector cores, where its
// allreduce gang runs.
TEST_F(DeviceSetKindsTest, LayoutPrefersDevicesWithTheGangsKind) {
  const DeviceId a = AddDevice(1, 1);
  AddDevice(2, 0);
  const DeviceId c = AddDevice(1, 1);
  SpecBuilder b;
  AddLearner(b);
  JobId job = Add(b.Build());
  const std::vector<DeviceId>& set = share().DeviceSet(job, 0);
  EXPECT_EQ(std::set<DeviceId>(set.begin(), set.end()), (std::set<DeviceId>{a, c}));
  VirtualLoop loop(sched_.get());
  loop.RunToIdle();
  ASSERT_EQ(sched_->job(job)->state, JobState::kSucceeded);
  EXPECT_EQ(RanOn(loop, "ar"), (std::set<DeviceId>{a, c}));
}

// (b) Placement: a pinned actor of two takes both vector devices at
// admission; the learner's set gets the two cube-only ones, where its gang
// cannot run, and nothing can move to it from a pinned set: it grows by the
// pool's vector devices (shared with the actor) and its gang runs there.
TEST_F(DeviceSetKindsTest, GangSetWithoutItsKindGrowsByPoolDevicesThatHaveIt) {
  const DeviceId a = AddDevice(1, 1);
  const DeviceId b = AddDevice(1, 1);
  AddDevice(2, 0);
  AddDevice(2, 0);
  // The actor first: of two sets asking for as many devices, it lays out first.
  SpecBuilder spec;
  spec.Submodel("actor", SubmodelKind::kActor, 2);
  spec.Add(TaskBuilder("gen").Us(100).Submodel("actor"));
  spec.Add(TaskBuilder("post").Us(100).Vector().Submodel("actor").Inputs({"gen"}));
  AddLearner(spec);
  JobSpec s = spec.Build();
  s.submodels[0].elastic = false;
  JobId job = Add(s);
  const std::vector<DeviceId>& actor = share().DeviceSet(job, 0);
  ASSERT_EQ(std::set<DeviceId>(actor.begin(), actor.end()), (std::set<DeviceId>{a, b}));
  VirtualLoop loop(sched_.get());
  loop.RunToIdle();
  ASSERT_EQ(sched_->job(job)->state, JobState::kSucceeded);
  EXPECT_EQ(RanOn(loop, "ar"), (std::set<DeviceId>{a, b}));
}

// (c) One elastic actor of one device on a cube-only and a vector-only
// worker: no device runs both of its tasks, so the set grows by the other.
TEST_F(DeviceSetKindsTest, ElasticSetOfOneGrowsByTheDeviceWithTheOtherKind) {
  const DeviceId cube = AddDevice(1, 0);
  const DeviceId vector = AddDevice(0, 1);
  SpecBuilder b;
  b.Submodel("a", SubmodelKind::kActor, 1);
  b.Add(TaskBuilder("c").Us(100).Submodel("a"));
  b.Add(TaskBuilder("v").Us(100).Vector().Submodel("a").Inputs({"c"}));
  JobId job = Add(b.Build());
  VirtualLoop loop(sched_.get());
  loop.RunToIdle();
  ASSERT_EQ(sched_->job(job)->state, JobState::kSucceeded);
  EXPECT_EQ(RanOn(loop, "c"), std::set<DeviceId>{cube});
  EXPECT_EQ(RanOn(loop, "v"), std::set<DeviceId>{vector});
}

}  // namespace
}  // namespace hmpmd
