// The data plane's part of the engine: gang start for collectives,
// locality, and the object-store memory cap.
#include <gtest/gtest.h>

#include <set>

#include "hmpmd/scheduler/scheduler.h"
#include "test_builders.h"

namespace hmpmd::test {
namespace {

std::unique_ptr<Scheduler> Make() {
  return std::make_unique<Scheduler>(SchedulerOptions{}, std::move(MakePolicy("hmpmd")).value());
}

TEST(GangStartTest, MembersArePlacedTogetherOnDistinctDevicesOnceAllAreReady) {
  auto s = Make();
  for (int i = 0; i < 3; ++i) s->AddDevice(Device("d" + std::to_string(i), 1, 1));
  JobSpec spec =
      SpecBuilder()
          .Add(TaskBuilder("pre").Us(100))
          .Add(TaskBuilder("m0", "allreduce").Vector().Collective("g", "allreduce"))
          .Add(TaskBuilder("m1", "allreduce").Vector().Collective("g", "allreduce"))
          .Add(TaskBuilder("m2", "allreduce").Vector().Inputs({"pre"}).Collective("g", "allreduce"))
          .Build();
  auto id = s->AddJob(BuildGraph(spec), 0);
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  std::vector<Dispatch> out;
  s->Schedule(0, &out);
  ASSERT_EQ(out.size(), 1u) << "only 'pre': m0 and m1 wait for m2";
  EXPECT_EQ(out[0].run, 0u);
  ASSERT_TRUE(s->OnTaskDone(*id, 0, 0, 0, 100, 100));
  out.clear();
  s->Schedule(100, &out);
  ASSERT_EQ(out.size(), 3u);
  std::set<DeviceId> devices;
  for (const Dispatch& d : out) devices.insert(d.device);
  EXPECT_EQ(devices.size(), 3u);
}

TEST(GangStartTest, AGangWaitsWhileThereAreFewerDevicesThanMembers) {
  auto s = Make();
  s->AddDevice(Device("d0", 1, 2));
  s->AddDevice(Device("d1", 1, 2));
  SpecBuilder b;
  for (int i = 0; i < 3; ++i) {
    b.Add(TaskBuilder("m" + std::to_string(i), "allreduce").Vector().Collective("g", "allreduce"));
  }
  auto graph = BuildGraph(b.Build());
  EXPECT_FALSE(s->AddJob(graph, 0).ok()) << "refused while it cannot fit";
  // Accepted while it fits; then a device dies before the gang starts.
  DeviceId d2 = s->AddDevice(Device("d2", 1, 1));
  ASSERT_TRUE(s->AddJob(graph, 0).ok());
  s->RemoveDevice(d2, 0);
  std::vector<Dispatch> out;
  s->Schedule(0, &out);
  EXPECT_TRUE(out.empty()) << "no member may start alone";
  s->AddDevice(Device("d3", 1, 1));
  s->Schedule(1, &out);
  EXPECT_EQ(out.size(), 3u);
}

TEST(LocalityTest, AConsumerGoesWhereItsLargestInputIs) {
  auto s = Make();
  s->AddDevice(Device("d0", 1));
  s->AddDevice(Device("d1", 1));
  JobSpec spec = SpecBuilder()
                     .Add(TaskBuilder("a").Us(100))
                     .Add(TaskBuilder("b").Us(100))
                     .Add(TaskBuilder("c").Us(100).Inputs({"a", "b"}))
                     .Build();
  auto id = s->AddJob(BuildGraph(spec), 0);
  ASSERT_TRUE(id.ok());
  std::vector<Dispatch> out;
  s->Schedule(0, &out);
  ASSERT_EQ(out.size(), 2u);
  for (const Dispatch& d : out) {
    ASSERT_TRUE(s->OnTaskDone(*id, d.run, 0, 0, 100, 100));
    // b's output is the big one.
    s->RecordOutput(*id, d.run, d.device, d.run == 1 ? 64 << 20 : 1024);
  }
  const DeviceId b_device = out[0].run == 1 ? out[0].device : out[1].device;
  out.clear();
  s->Schedule(100, &out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].device, b_device);
}

TEST(MemoryCapTest, AFullDeviceTakesNoNewOutputsUntilTheyAreRead) {
  auto s = Make();
  for (const char* name : {"a", "b"}) {
    DeviceDesc small = Device(name, 1);
    small.memory_mb = 1;
    s->AddDevice(small);
  }
  JobSpec spec = SpecBuilder()
                     .Add(TaskBuilder("p").Us(100))
                     .Add(TaskBuilder("hog").Us(1'000'000))
                     .Add(TaskBuilder("c").Us(100).Inputs({"p"}))
                     .Build();
  auto id = s->AddJob(BuildGraph(spec), 0);
  ASSERT_TRUE(id.ok());
  std::vector<Dispatch> out;
  s->Schedule(0, &out);
  ASSERT_EQ(out.size(), 2u);
  // p's device; the other one runs hog for a long time.
  const DeviceId d0 = out[0].run == 0 ? out[0].device : out[1].device;
  ASSERT_TRUE(s->OnTaskDone(*id, 0, 0, 0, 100, 100));
  s->RecordOutput(*id, 0, d0, 2 << 20);  // p's 2 MiB fill d0's 1 MiB store
  EXPECT_TRUE(s->pool().MemoryFull(d0));
  // d0 is the only free core, but a root would only add to its store.
  auto other = s->AddJob(BuildGraph(SpecBuilder().Add(TaskBuilder("r").Us(100)).Build()), 100);
  ASSERT_TRUE(other.ok());
  out.clear();
  s->Schedule(100, &out);
  // The consumer reads p, which frees memory: it may use d0; the root not.
  for (const Dispatch& d : out) EXPECT_NE(d.job, *other) << "root placed on a full device";
  ASSERT_EQ(out.size(), 1u);
  ASSERT_TRUE(s->OnTaskDone(*id, out[0].run, 0, 100, 200, 200));
  EXPECT_FALSE(s->pool().MemoryFull(d0)) << "the last read frees the output";
  out.clear();
  s->Schedule(200, &out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].job, *other);
  EXPECT_EQ(out[0].device, d0);
}

}  // namespace
}  // namespace hmpmd::test
