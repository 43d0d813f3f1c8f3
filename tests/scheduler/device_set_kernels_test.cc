// Tests for DeviceShare's sets on a pool whose workers ship different
// kernels (scheduler/include/hmpmd/scheduler/device_share.h, rule 6): a set
// is laid out on devices that run its tasks' kernels, and a set left on a
// device without them (the one that had them died) moves to a new device
// that has them. Before, a set laid out on the worker that joined first,
// without the kernel, waited for ever with its cores idle. Also: a set
// takes idle devices before queueing behind a busy core.
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

class DeviceSetKernelsTest : public test::SchedulerTest {
 protected:
  void SetUp() override { Make(); }
  const DeviceShare& share() const {
    return dynamic_cast<const HmpmdPolicy&>(sched_->policy()).share();
  }
  // An actor of one device with one task of a worker's own kernel.
  static JobSpec ActorOf(const std::string& kernel, bool elastic) {
    SpecBuilder b;
    b.Submodel("actor", SubmodelKind::kActor, 1);
    b.Add(std::move(TaskBuilder("init", kernel).Submodel("actor")));
    JobSpec spec = b;
    spec.submodels[0].elastic = elastic;
    return spec;
  }
};

TEST_F(DeviceSetKernelsTest, LayoutTakesADeviceThatRunsTheSetsKernels) {
  for (bool elastic : {true, false}) {
    Make();
    sched_->AddDevice(Device("plain", 1, 0, {"noop"}));  // first: the layout took it
    const DeviceId rl = sched_->AddDevice(Device("rl", 1, 0, {"noop", "rl.init"}));
    const JobId job = Add(ActorOf("rl.init", elastic));
    EXPECT_EQ(share().DeviceSet(job, 0), std::vector<DeviceId>{rl}) << "elastic " << elastic;
    std::vector<Dispatch> out = ScheduleAt(0);
    ASSERT_EQ(out.size(), 1u) << "init waited for ever on 'plain'; elastic " << elastic;
    EXPECT_EQ(out[0].device, rl);
  }
}

TEST_F(DeviceSetKernelsTest, ASetLeftWithoutItsKernelsMovesToANewDeviceThatHasThem) {
  sched_->AddDevice(Device("plain", 1, 0, {"noop"}));
  const DeviceId rl = sched_->AddDevice(Device("rl", 1, 0, {"noop", "rl.init"}));
  // Two tasks in a chain: the second is still to run when `rl` dies.
  SpecBuilder b;
  b.Submodel("actor", SubmodelKind::kActor, 1);
  b.Add(std::move(TaskBuilder("a", "rl.init").Submodel("actor")));
  b.Add(std::move(TaskBuilder("b", "rl.init").Submodel("actor").Inputs({"a"})));
  JobSpec spec = b;
  spec.submodels[0].elastic = false;
  const JobId job = Add(spec);
  std::vector<Dispatch> out = ScheduleAt(0);
  ASSERT_FALSE(out.empty());
  ASSERT_EQ(TaskOf(job, out[0].run), "a");
  ASSERT_TRUE(sched_->OnTaskDone(job, out[0].run, out[0].attempt, 0, 100, 100));
  ScheduleAt(100);  // b may go to rl now; it dies with rl
  sched_->RemoveDevice(rl, 200);
  // Only 'plain' is alive: the set is refilled there, where b cannot run.
  EXPECT_TRUE(ScheduleAt(300).empty());
  const DeviceId rl2 = sched_->AddDevice(Device("rl2", 1, 0, {"noop", "rl.init"}));
  EXPECT_EQ(share().DeviceSet(job, 0), std::vector<DeviceId>{rl2});
  out = ScheduleAt(400);
  ASSERT_EQ(out.size(), 1u) << "b waited for ever on 'plain'";
  EXPECT_EQ(TaskOf(job, out[0].run), "b");
  EXPECT_EQ(out[0].device, rl2);
}

// With queues of more than one run per core (the controller's setting), a
// set's second independent task went behind the first on the same core
// while the set's other device idled: 0.6 s for two 0.3 s sleeps live.
TEST_F(DeviceSetKernelsTest, ASetPutsIndependentTasksOnIdleDevicesBeforeQueueing) {
  opts_.pool.max_queue_per_core = 2;
  opts_.pool.lookahead_us = 1e12;
  opts_.pool.lookahead_waiting_only = true;
  Make();
  sched_->AddDevice(Device("w0", 1));
  sched_->AddDevice(Device("w1", 1));
  SpecBuilder b;
  b.Submodel("actor", SubmodelKind::kActor, 2);
  b.Add(std::move(TaskBuilder("s0", "sleep").Arg("us", 300000.0).Submodel("actor")));
  b.Add(std::move(TaskBuilder("s1", "sleep").Arg("us", 300000.0).Submodel("actor")));
  Add(b);
  std::vector<Dispatch> out = ScheduleAt(0);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_NE(out[0].device, out[1].device) << "both on device " << out[0].device;
}

}  // namespace
}  // namespace hmpmd
