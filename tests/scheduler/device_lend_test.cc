// Tests for DeviceShare's moves along the critical path (rules 2b and 2c of
// scheduler/include/hmpmd/scheduler/device_share.h): a set whose ready work
// has slack lends a device to the set whose ready work is critical and gets
// it back; it lends nothing when its own queue would not drain within its
// slack; a set is not grown when the communication a new device would leave
// exposed outweighs the compute it saves; an idle set lends devices below
// its largest gang and takes them back first when its work is ready (2d).
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "hmpmd/scheduler/device_share.h"
#include "hmpmd/scheduler/hmpmd_policy.h"
#include "hmpmd/scheduler/scheduler.h"
#include "test_builders.h"

namespace hmpmd {
namespace {

using test::Device;
using test::SpecBuilder;
using test::TaskBuilder;
using test::VirtualLoop;

constexpr uint32_t kGen = 0, kTrain = 1;  // sub-model indices below

// "gen" (an actor set of 3 devices) and "train" (a learner set of 1). They
// declare no state_bytes: under hmpmd, elastic sub-models that do float by
// state affinity instead of keeping sets (state_affinity.h).
SpecBuilder Sets() {
  SpecBuilder s;
  s.Submodel("gen", SubmodelKind::kActor, 3).Submodel("train", SubmodelKind::kLearner, 1);
  return s;
}

class DeviceLendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto p = MakePolicy("hmpmd");
    ASSERT_TRUE(p.ok());
    sched_ = std::make_unique<Scheduler>(SchedulerOptions{}, std::move(*p));
    // Four devices of one cube and one vector core on one node.
    for (int i = 0; i < 4; ++i) sched_->AddDevice(Device("d" + std::to_string(i), 1, 1));
  }
  const DeviceShare& share() const {
    return dynamic_cast<const HmpmdPolicy&>(sched_->policy()).share();
  }
  JobId Run(JobSpec spec) {
    auto graph = test::BuildGraph(std::move(spec));
    auto id = sched_->AddJob(graph, 0);
    EXPECT_TRUE(id.ok()) << id.status().ToString();
    VirtualLoop loop(sched_.get());
    loop.RunToIdle();
    EXPECT_EQ(sched_->job(*id)->state, JobState::kSucceeded);
    return *id;
  }
  std::vector<DeviceMove> Moves(int32_t from, int32_t to) const {
    std::vector<DeviceMove> out;
    for (const DeviceMove& m : share().moves()) {
      if (m.from == from && m.to == to) out.push_back(m);
    }
    return out;
  }
  std::unique_ptr<Scheduler> sched_;
};

// train: a and b (5 ms each, both ready at once) then c (5 ms), on the
// critical path (13 ms with the gen task after c), and train has one
// device. gen: `gen_tasks` ready tasks of `gen_us` with nothing after them
// (lots of slack), and six 3 ms tasks that become ready when c ends.
JobSpec CriticalTrain(int gen_tasks, int64_t gen_us) {
  SpecBuilder s = Sets();
  s.Add(TaskBuilder("a").Us(5000).Submodel("train"));
  s.Add(TaskBuilder("b").Us(5000).Submodel("train"));
  s.Add(TaskBuilder("c").Us(5000).Submodel("train").Inputs({"a", "b"}));
  for (int i = 0; i < gen_tasks; ++i) {
    s.Add(TaskBuilder("g" + std::to_string(i)).Us(gen_us).Submodel("gen"));
  }
  for (int i = 0; i < 6; ++i) {
    s.Add(TaskBuilder("h" + std::to_string(i)).Us(3000).Submodel("gen").Inputs({"c"}));
  }
  return s;
}

TEST_F(DeviceLendTest, ADeviceLentToTheCriticalSetComesBack) {
  Run(CriticalTrain(/*gen_tasks=*/4, /*gen_us=*/200));
  // gen's work has slack and drains on two devices: it lends one to train
  // at once, so a and b run side by side...
  std::vector<DeviceMove> lent = Moves(kGen, kTrain);
  ASSERT_FALSE(lent.empty()) << "gen lent no device to the critical set";
  EXPECT_EQ(lent.front().at, 0);
  // ...and gets that same device back (not train's own, also free) once
  // train has nothing left and gen's later tasks wait.
  std::vector<DeviceMove> back = Moves(kTrain, kGen);
  ASSERT_FALSE(back.empty()) << "the lent device never came back";
  EXPECT_EQ(back.front().device, lent.front().device);
  EXPECT_GT(back.front().at, lent.front().at);
}

TEST_F(DeviceLendTest, NoLoanWhenTheLendersQueueWouldNotDrainWithinItsSlack) {
  // Twenty 3 ms tasks on gen's two remaining devices would take 30 ms,
  // more than their slack (the 13 ms critical path minus 3 ms).
  Run(CriticalTrain(/*gen_tasks=*/20, /*gen_us=*/3000));
  for (const DeviceMove& m : Moves(kGen, kTrain)) {
    EXPECT_GT(m.at, 0) << "gen lent device " << m.device << " while its own queue was long";
  }
}

// train has one device and two ready 100 us compute tasks, each followed by
// a send of `send_bytes` (its communication); gen has no work at all.
JobSpec TrainWithComm(double send_bytes) {
  SpecBuilder s = Sets();
  for (int i = 0; i < 2; ++i) {
    std::string c = "c" + std::to_string(i);
    s.Add(TaskBuilder(c).Us(100).Submodel("train"));
    s.Add(TaskBuilder("s" + std::to_string(i), "send")
              .Vector()
              .Bytes(send_bytes)
              .Submodel("train")
              .Inputs({c}));
  }
  return s;
}

TEST_F(DeviceLendTest, ASetIsNotGrownWhenExposedCommunicationOutweighsTheComputeSaved) {
  // Each send takes ~530 us (1 MB at the default 2 GB/s): a second device
  // saves 100 us of compute but leaves one more send with no compute of
  // train behind it.
  Run(TrainWithComm(1e6));
  EXPECT_TRUE(Moves(kGen, kTrain).empty()) << "train grew although a send costs more than it saves";
}

TEST_F(DeviceLendTest, ASetGrowsWhenItsCommunicationIsCheap) {
  // The same job with 100-byte sends (~30 us): the idle gen set gives
  // train a device, so the test above can tell the two apart.
  Run(TrainWithComm(100));
  EXPECT_FALSE(Moves(kGen, kTrain).empty()) << "train did not grow although its sends are cheap";
}

// gen (2 devices) has six 3 ms tasks ready at once and twenty more with
// nothing after them; train (2 devices, its all-reduce gang needs both) has
// two 2 ms tasks that wait for the first six, then the gang, then a 20 ms
// task (the critical path).
JobSpec IdleGang() {
  SpecBuilder s;
  s.Submodel("gen", SubmodelKind::kActor, 2).Submodel("train", SubmodelKind::kLearner, 2);
  for (int i = 0; i < 6; ++i) {
    s.Add(TaskBuilder("g" + std::to_string(i)).Us(3000).Submodel("gen"));
  }
  for (int i = 0; i < 2; ++i) {
    std::string t = "t" + std::to_string(i);
    s.Add(TaskBuilder(t).Us(2000).Submodel("train").Inputs({"g0", "g1", "g2", "g3", "g4", "g5"}));
    s.Add(TaskBuilder("ar" + std::to_string(i), "allreduce")
              .Vector()
              .Collective("ar", "allreduce")
              .Submodel("train")
              .Inputs({t}));
  }
  for (int i = 0; i < 20; ++i) {
    s.Add(TaskBuilder("h" + std::to_string(i)).Us(3000).Submodel("gen"));
  }
  s.Add(TaskBuilder("u").Us(20000).Submodel("train").Inputs({"ar0", "ar1"}));
  return s;
}

TEST_F(DeviceLendTest, AnIdleGangLendsBelowItsFloorAndTakesItsDeviceBackFirst) {
  JobId id = Run(IdleGang());
  // Nothing of train is ready or running at 0: one of its two devices
  // (all but one) runs gen's tasks meanwhile...
  std::vector<DeviceMove> lent = Moves(kTrain, kGen);
  ASSERT_FALSE(lent.empty()) << "train kept its gang's devices idle";
  EXPECT_EQ(lent.front().at, 0);
  EXPECT_TRUE(lent.size() == 1 || lent[1].at > 0) << "train gave both devices at 0";
  // ...so gen's six tasks take 6 ms on three devices, not 9 ms on two...
  const JobRun& job = *sched_->job(id);
  TimeUs gen_end = 0;
  for (uint32_t r = 0; r < job.runs.size(); ++r) {
    if (job.graph->spec_task(r).id.front() == 'g') gen_end = std::max(gen_end, job.runs[r].end);
  }
  EXPECT_EQ(gen_end, 6000);
  // ...and train, below its gang once its tasks are ready, gets that very
  // device back at once, although gen still has twenty tasks ready (too
  // many to lend a device by 2b, and gen is no idle donor).
  std::vector<DeviceMove> back = Moves(kGen, kTrain);
  ASSERT_FALSE(back.empty()) << "the lent device never came back";
  EXPECT_EQ(back.front().device, lent.front().device);
  EXPECT_EQ(back.front().at, gen_end);
}

// gen (2 devices) has six 3 ms tasks ready at once and `more` tasks after
// them; train (2 devices) has only an all-reduce gang of two, fed by gen's
// tasks, and nothing after it: once lent (2d), train's second device must
// come back for the gang whatever rule 2c says about growing (a gang with
// no compute behind it has no chain to justify growth).
JobSpec GangOnly(int more) {
  SpecBuilder s;
  s.Submodel("gen", SubmodelKind::kActor, 2).Submodel("train", SubmodelKind::kLearner, 2);
  for (int i = 0; i < 6; ++i) {
    s.Add(TaskBuilder("g" + std::to_string(i)).Us(3000).Submodel("gen"));
  }
  for (int i = 0; i < 2; ++i) {
    s.Add(TaskBuilder("ar" + std::to_string(i), "allreduce")
              .Vector()
              .Collective("ar", "allreduce")
              .Submodel("train")
              .Inputs({"g" + std::to_string(i * 3 + 2)}));
  }
  for (int i = 0; i < more; ++i) {
    s.Add(TaskBuilder("h" + std::to_string(i)).Us(3000).Submodel("gen"));
  }
  return s;
}

TEST_F(DeviceLendTest, AGangBelowItsFloorGetsItsDevicesBack) {
  for (int more : {0, 20}) {
    SetUp();
    JobId id = Run(GangOnly(more));
    EXPECT_EQ(sched_->job(id)->state, JobState::kSucceeded) << "more=" << more;
  }
}

}  // namespace
}  // namespace hmpmd
