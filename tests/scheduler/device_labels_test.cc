// Tests for labels (docs/scheduling.md, "Labels"): a task runs only on a
// device that has every label it requires, its own and its sub-model's;
// the pool (ResourcePool::Supports) answers for every policy, the
// admission check refuses a job no live device can run naming the label,
// and a driver session's append is checked the same way.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "hmpmd/scheduler/admission_check.h"
#include "hmpmd/scheduler/job_graph.h"
#include "hmpmd/scheduler/policy.h"
#include "hmpmd/sim/pool_spec.h"
#include "scheduler_fixture.h"
#include "sim_run.h"

namespace hmpmd {
namespace {

using test::SchedulerTest;
using test::SpecBuilder;
using test::TaskBuilder;

const Labels k910b = {{"accel", "910b"}};
const Labels k910c = {{"accel", "910c"}};

DeviceDesc Labelled(std::string name, Labels labels, uint32_t cube = 1, uint32_t vector = 0,
                    std::vector<std::string> kernels = {}) {
  DeviceDesc d = test::Device(std::move(name), cube, vector, std::move(kernels));
  d.labels = std::move(labels);
  return d;
}

TaskSpec Requiring(TaskSpec t, Labels labels) {
  t.required = std::move(labels);
  return t;
}

TEST(DeviceLabelsTest, PoolSupportsAKernelOnlyWhereEveryRequiredLabelIs) {
  ResourcePool pool{PoolOptions{}};
  const uint32_t plain = pool.InternKernel("spin");
  const uint32_t on_c = pool.InternKernel("spin", k910c);  // before the devices join
  const DeviceId b = pool.AddDevice(Labelled("b", k910b));
  const DeviceId c = pool.AddDevice(Labelled("c", {{"accel", "910c"}, {"zone", "a"}}));
  const uint32_t both = pool.InternKernel("spin", {{"accel", "910c"}, {"zone", "a"}});  // after
  EXPECT_NE(plain, on_c);
  EXPECT_EQ(pool.InternKernel("spin", k910c), on_c) << "the pair is interned once";
  EXPECT_TRUE(pool.Supports(b, plain));
  EXPECT_TRUE(pool.Supports(c, plain));
  EXPECT_FALSE(pool.Supports(b, on_c));
  EXPECT_TRUE(pool.Supports(c, on_c));
  EXPECT_FALSE(pool.Supports(b, both));
  EXPECT_TRUE(pool.Supports(c, both));
  EXPECT_EQ(pool.RequiredLabels(on_c), k910c);
  // A device that runs only some kernels needs the kernel as well.
  const DeviceId c2 = pool.AddDevice(Labelled("c2", k910c, 1, 0, {"noop"}));
  EXPECT_FALSE(pool.Supports(c2, on_c));
  EXPECT_TRUE(pool.Supports(c2, pool.InternKernel("noop", k910c)));
}

TEST(DeviceLabelsTest, AdmissionNamesTheTaskAndTheLabelNoWorkerHas) {
  ResourcePool pool{PoolOptions{}};
  pool.AddDevice(Labelled("b", k910b, 1, 0));
  pool.AddDevice(Labelled("z", {{"zone", "a"}}, 1, 0));
  pool.AddDevice(Labelled("r", {{"rack", "r1"}}, 0, 1));
  const std::vector<TaskSpec> tasks = {
      TaskBuilder("ok"), Requiring(TaskBuilder("enc"), k910c),
      Requiring(TaskBuilder("zv"), {{"rack", "r1"}}),
      Requiring(TaskBuilder("both"), {{"accel", "910b"}, {"zone", "a"}})};
  std::vector<uint32_t> ids;
  for (const TaskSpec& t : tasks) ids.push_back(pool.InternKernel(t.kernel, t.required));
  const AdmissionCheck check(pool);
  auto one = [&](size_t i) {
    return check.Tasks(std::span(tasks).subspan(i, 1), static_cast<uint32_t>(i),
                       std::span(ids).subspan(i, 1));
  };
  EXPECT_TRUE(one(0).ok());
  EXPECT_EQ(one(1).message(), "tasks[1] 'enc': requires accel=910c: no worker has it");
  EXPECT_EQ(one(2).message(), "tasks[2] 'zv': requires rack=r1: no worker with a cube core has it");
  EXPECT_EQ(one(3).message(),
            "tasks[3] 'both': requires accel=910b, zone=a: no worker with a cube core has them "
            "all");
  EXPECT_EQ(check.Tasks(tasks, 0, ids).message(),
            "tasks[1] 'enc': requires accel=910c: no worker has it");
}

TEST(DeviceLabelsTest, ATaskRequiresItsOwnLabelsAndItsSubmodels) {
  JobSpec spec = SpecBuilder()
                     .Submodel("encoder", SubmodelKind::kEncoder)
                     .Add(Requiring(TaskBuilder("enc").Submodel("encoder"), {{"zone", "a"}}))
                     .Add(Requiring(TaskBuilder("same").Submodel("encoder"), k910c));
  spec.submodels[0].required = k910c;
  auto g = JobGraph::Build(spec);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ((*g)->spec_task(0).required, (Labels{{"accel", "910c"}, {"zone", "a"}}));
  EXPECT_EQ((*g)->spec_task(1).required, k910c);

  spec.tasks[1].required = k910b;
  auto bad = JobGraph::Build(spec);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "tasks[1] 'same': requires: accel=910b conflicts with accel=910c, which its "
            "submodel 'encoder' requires");
}

TEST_F(SchedulerTest, ATaskThatRequiresALabelGoesOnlyWhereItIs) {
  Make();
  sched_->AddDevice(Labelled("b0", k910b));
  sched_->AddDevice(Labelled("b1", k910b));
  const DeviceId c = sched_->AddDevice(Labelled("c", k910c));
  SpecBuilder b;
  b.Submodel("encoder", SubmodelKind::kEncoder);
  for (int i = 0; i < 3; ++i)
    b.Add(TaskBuilder("e" + std::to_string(i)).Us(100).Submodel("encoder"));
  JobSpec spec = b;
  spec.submodels[0].required = k910c;
  const JobId job = Add(spec);
  std::vector<uint32_t> placed;
  for (TimeUs now = 0; placed.size() < 3 && now < 1000; now += 100) {
    for (const Dispatch& d : ScheduleAt(now)) {
      EXPECT_EQ(d.device, c) << TaskOf(job, d.run) << " left the 910c device";
      placed.push_back(d.run);
      ASSERT_TRUE(sched_->OnTaskDone(job, d.run, d.attempt, now, now + 100, now + 100));
    }
  }
  EXPECT_EQ(placed.size(), 3u);
}

TEST_F(SchedulerTest, AddJobRefusesALabelNoLiveDeviceHas) {
  Make();
  sched_->AddDevice(Labelled("b", k910b));
  const DeviceId c = sched_->AddDevice(Labelled("c", k910c));
  JobSpec spec = SpecBuilder().Chain({"a"}, 1).Add(Requiring(TaskBuilder("enc"), k910c));
  EXPECT_TRUE(AddStatus(spec).ok());
  sched_->RemoveDevice(c, 0);
  Status s = AddStatus(spec);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "tasks[1] 'enc': requires accel=910c: no worker has it");
}

TEST_F(SchedulerTest, AnAppendIsCheckedWithItsSubmodelsLabels) {
  Make();
  sched_->AddDevice(Labelled("b", k910b));
  auto g = JobGraph::BuildOpen(JobSpec{});
  ASSERT_TRUE(g.ok());
  auto id = sched_->AddJob(*g, 0);
  ASSERT_TRUE(id.ok());
  SubmodelSpec encoder{"encoder", SubmodelKind::kEncoder};
  encoder.required = k910c;
  Status s = sched_->AppendTasks(*id, {encoder}, {TaskBuilder("enc").Submodel("encoder")}, 0);
  EXPECT_EQ(s.message(), "tasks[0] 'enc': requires accel=910c: no worker has it");
  encoder.required = k910b;
  EXPECT_TRUE(
      sched_->AppendTasks(*id, {encoder}, {TaskBuilder("enc").Submodel("encoder")}, 0).ok());
  // The sub-model is in the graph now: a later task of it inherits 910b.
  s = sched_->AppendTasks(*id, {}, {Requiring(TaskBuilder("x").Submodel("encoder"), k910c)}, 0);
  EXPECT_EQ(s.message(),
            "tasks[1] 'x': requires: accel=910c conflicts with accel=910b, which its submodel "
            "'encoder' requires");
}

// A heterogeneous pool as the simulator's pool file gives it: devices 0-3
// are 910b, 4-7 are 910c. An encoder that requires 910c and a head task
// that requires 910b run where they must under every policy.
TEST(DeviceLabelsSimTest, EveryPolicyKeepsLabelledTasksOnTheirDevices) {
  PoolSpec pool = MakePoolSpec(8);
  pool.device_labels = {{0, 3, k910b}, {4, 7, k910c}};
  ASSERT_TRUE(ValidatePoolSpec(pool).ok());
  SpecBuilder b;
  b.Submodel("encoder", SubmodelKind::kEncoder).Submodel("decoder");
  for (int i = 0; i < 8; ++i) {
    const std::string n = std::to_string(i);
    b.Add(TaskBuilder("enc" + n, "gemm").Flops(1e9).Submodel("encoder"));
    b.Add(TaskBuilder("dec" + n, "gemm").Flops(1e9).Submodel("decoder").Inputs({"enc" + n}));
  }
  b.Add(Requiring(TaskBuilder("head", "gemm").Flops(1e9).Submodel("decoder").Inputs({"dec0"}),
                  k910b));
  JobSpec spec = b;
  spec.submodels[0].required = k910c;
  for (const std::string& policy : PolicyNames()) {
    test::SimRun r = test::Simulate(spec, policy, pool);
    ASSERT_TRUE(r.status.ok()) << policy << ": " << r.status.message();
    ASSERT_EQ(r.state, JobState::kSucceeded) << policy << ": " << r.error;
    for (size_t i = 0; i < spec.tasks.size(); ++i) {
      const std::string& id = spec.tasks[i].id;
      if (id.starts_with("enc")) {
        EXPECT_GE(r.device[i], 4u) << policy << ": " << id;
      } else if (id == "head") {
        EXPECT_LT(r.device[i], 4u) << policy << ": " << id;
      }
    }
  }
}

TEST(DeviceLabelsSimTest, PoolSpecRefusesARangeOutsideThePoolAndAConflict) {
  PoolSpec pool = MakePoolSpec(8);
  pool.device_labels = {{4, 8, k910c}};
  EXPECT_EQ(ValidatePoolSpec(pool).message(),
            "device_labels[0].devices: [4, 8] is not a range of the 8 devices");
  pool.device_labels = {{0, 4, k910b}, {4, 7, k910c}};
  EXPECT_EQ(ValidatePoolSpec(pool).message(),
            "device_labels[1].labels: accel=910c conflicts with accel=910b");
  pool.device_labels = {{0, 7, k910c}, {4, 7, {{"zone", "a"}}}};
  ASSERT_TRUE(ValidatePoolSpec(pool).ok());
  std::vector<DeviceDesc> devices = PoolDevices(pool);
  EXPECT_EQ(devices[3].labels, k910c);
  EXPECT_EQ(devices[5].labels, (Labels{{"accel", "910c"}, {"zone", "a"}}));
}

}  // namespace
}  // namespace hmpmd
