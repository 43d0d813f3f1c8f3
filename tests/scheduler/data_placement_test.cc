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
    s->RecordOutput(*id, d.run, d.device, d.run == 1 ? 64 << 20 : 1024, 1);
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
  s->RecordOutput(*id, 0, d0, 2 << 20, 1);  // p's 2 MiB fill d0's 1 MiB store
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

// The controller's setting: outputs a task will store count against its
// worker's cap from placement on (PoolOptions::count_store).
std::unique_ptr<Scheduler> MakeCounting() {
  SchedulerOptions o;
  o.pool.count_store = true;
  return std::make_unique<Scheduler>(o, std::move(MakePolicy("hmpmd")).value());
}

DeviceDesc Capped(const char* name, uint32_t cube, uint64_t memory_mb) {
  DeviceDesc d = Device(name, cube);
  d.memory_mb = memory_mb;
  return d;
}

// A root `scale` of n floats: it stores 4n bytes.
TaskBuilder Scale(const char* id, double n) {
  return std::move(TaskBuilder(id, "scale").Arg("n", n).Arg("factor", 2.0));
}

constexpr double k40MiB = 10 * 1024 * 1024;  // floats

// Two independent 40 MiB outputs: x and y.
std::shared_ptr<const JobGraph> TwoScales() {
  return BuildGraph(SpecBuilder().Add(Scale("x", k40MiB)).Add(Scale("y", k40MiB)).Build());
}

TEST(MemoryCapTest, OutputsThatTogetherPassACapGoToDifferentDevices) {
  for (bool counting : {false, true}) {
    auto s = counting ? MakeCounting() : Make();
    const DeviceId d0 = s->AddDevice(Capped("a", 2, 64));
    s->AddDevice(Capped("b", 2, 64));
    auto id = s->AddJob(TwoScales(), 0);
    ASSERT_TRUE(id.ok());
    std::vector<Dispatch> out;
    s->Schedule(0, &out);
    ASSERT_EQ(out.size(), 2u);
    if (!counting) {
      // The earliest-draining cores are both d0's: 80 MiB on a 64 MiB store.
      EXPECT_EQ(out[0].device, d0);
      EXPECT_EQ(out[1].device, d0);
      continue;
    }
    EXPECT_NE(out[0].device, out[1].device) << "80 MiB of outputs placed on one 64 MiB store";
    EXPECT_EQ(s->pool().device(out[0].device).reserved_bytes, 40u << 20);
    ASSERT_TRUE(s->OnTaskDone(*id, out[0].run, 0, 0, 100, 100));
    EXPECT_EQ(s->pool().device(out[0].device).reserved_bytes, 0u) << "released when it ends";
  }
}

TEST(MemoryCapTest, AnOutputThatFitsNowhereWaitsWhileQueuedWorkMayMakeRoom) {
  auto s = MakeCounting();
  const DeviceId d0 = s->AddDevice(Capped("a", 2, 64));
  JobSpec spec = SpecBuilder()
                     .Add(Scale("x", k40MiB))
                     .Add(Scale("y", k40MiB))
                     .Add(TaskBuilder("z", "noop").Inputs({"x"}))
                     .Build();
  auto id = s->AddJob(BuildGraph(spec), 0);
  ASSERT_TRUE(id.ok());
  std::vector<Dispatch> out;
  s->Schedule(0, &out);
  ASSERT_EQ(out.size(), 1u) << "y fits beside x on no store";
  ASSERT_EQ(out[0].run, 0u) << "x goes first (z waits for it)";
  ASSERT_TRUE(s->OnTaskDone(*id, 0, 0, 0, 100, 100));
  s->RecordOutput(*id, 0, d0, 40u << 20, 1);
  out.clear();
  s->Schedule(100, &out);
  // z reads x (the last read frees it); the other scale still waits for it.
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].run, 2u);
  ASSERT_TRUE(s->OnTaskDone(*id, 2, 0, 100, 200, 200));
  out.clear();
  s->Schedule(200, &out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].run, 1u);
}

TEST(MemoryCapTest, WithNothingQueuedThatMayMakeRoomAnOutputIsPlacedAnyway) {
  // Its worker then fails it naming the cap, rather than the job hanging.
  auto s = MakeCounting();
  const DeviceId d0 = s->AddDevice(Capped("a", 1, 64));
  auto id = s->AddJob(TwoScales(), 0);
  ASSERT_TRUE(id.ok());
  std::vector<Dispatch> out;
  s->Schedule(0, &out);
  ASSERT_EQ(out.size(), 1u);
  ASSERT_TRUE(s->OnTaskDone(*id, out[0].run, 0, 0, 100, 100));
  s->RecordOutput(*id, out[0].run, d0, 40u << 20, 1);  // a final output: kept
  out.clear();
  s->Schedule(100, &out);
  ASSERT_EQ(out.size(), 1u) << "waited for work that can never make room";
  // Larger than the whole store: placed at once, to fail naming the cap.
  auto big = s->AddJob(BuildGraph(SpecBuilder().Add(Scale("huge", 8 * k40MiB)).Build()), 100);
  ASSERT_TRUE(big.ok());
  ASSERT_TRUE(s->OnTaskDone(*id, out[0].run, 0, 100, 200, 200));
  out.clear();
  s->Schedule(200, &out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].job, *big);
}

TEST(MemoryCapTest, AStoreExactlyFullWithNothingToFreeItTakesTheOutputAnyway) {
  // Kept final outputs fill the 4 MiB store to the byte: nothing will make
  // room, so the next output goes there (to fail naming the cap), for a
  // size known ahead (scale) or not (a worker's own kernel).
  for (const char* kernel : {"scale", "mine"}) {
    auto s = MakeCounting();
    const DeviceId d0 = s->AddDevice(Capped("a", 1, 4));
    const double n = 1024 * 1024;  // floats: 4 MiB
    JobSpec spec = SpecBuilder()
                       .Add(Scale("x", n))
                       .Add(std::move(TaskBuilder("y", kernel).Arg("n", n).Arg("factor", 2.0)))
                       .Build();
    auto id = s->AddJob(BuildGraph(spec), 0);
    ASSERT_TRUE(id.ok());
    std::vector<Dispatch> out;
    s->Schedule(0, &out);
    ASSERT_EQ(out.size(), 1u) << kernel;
    ASSERT_TRUE(s->OnTaskDone(*id, out[0].run, 0, 0, 100, 100));
    s->RecordOutput(*id, out[0].run, d0, 4u << 20, 1);
    ASSERT_TRUE(s->pool().MemoryFull(d0));
    out.clear();
    s->Schedule(100, &out);
    EXPECT_EQ(out.size(), 1u) << kernel << ": waits forever for room nothing will make";
  }
}

TEST(MemoryCapTest, AnOutputLargerThanAStoreWaitsForOneThatHoldsIt) {
  // 2 MiB of outputs, a free 1 MiB worker and a busy 1 GiB one: placed on
  // the small one (empty, so "not full") it failed naming the cap, and the
  // job with it.
  auto s = MakeCounting();
  const DeviceId roomy = s->AddDevice(Capped("roomy", 1, 1024));
  auto busy =
      s->AddJob(BuildGraph(SpecBuilder().Add(TaskBuilder("busy").Us(1'000'000)).Build()), 0);
  ASSERT_TRUE(busy.ok());
  std::vector<Dispatch> out;
  s->Schedule(0, &out);
  ASSERT_EQ(out.size(), 1u);
  s->AddDevice(Capped("tiny", 1, 1));
  auto id = s->AddJob(BuildGraph(SpecBuilder().Add(Scale("x", 512 * 1024)).Build()), 10);
  ASSERT_TRUE(id.ok());
  out.clear();
  s->Schedule(10, &out);
  EXPECT_TRUE(out.empty()) << "2 MiB placed on a 1 MiB store";
  ASSERT_TRUE(s->OnTaskDone(*busy, 0, 0, 0, 100, 100));
  out.clear();
  s->Schedule(100, &out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].job, *id);
  EXPECT_EQ(out[0].device, roomy);
}

TEST(MemoryCapTest, TasksThatStoreNothingGoToAFullDevice) {
  auto s = MakeCounting();
  const DeviceId d0 = s->AddDevice(Capped("a", 1, 1));
  auto id = s->AddJob(BuildGraph(SpecBuilder().Add(Scale("x", k40MiB / 40)).Build()), 0);
  ASSERT_TRUE(id.ok());
  std::vector<Dispatch> out;
  s->Schedule(0, &out);
  ASSERT_EQ(out.size(), 1u);
  ASSERT_TRUE(s->OnTaskDone(*id, 0, 0, 0, 100, 100));
  s->RecordOutput(*id, 0, d0, 1u << 20, 1);
  ASSERT_TRUE(s->pool().MemoryFull(d0));
  auto spin = s->AddJob(BuildGraph(SpecBuilder().Add(TaskBuilder("s").Us(100)).Build()), 100);
  auto own = s->AddJob(BuildGraph(SpecBuilder().Add(TaskBuilder("o", "mine")).Build()), 100);
  ASSERT_TRUE(spin.ok() && own.ok());
  out.clear();
  s->Schedule(100, &out);
  // A spin adds nothing; a worker's own kernel may add anything.
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].job, *spin);
}

TEST(MemoryCapTest, AWorkersOwnKernelCountsWhatItsEarlierRunsStored) {
  // Only a run tells what a worker's own kernel stores. Its first run said
  // 40 MiB; the next placement counts that: a 64 MiB store holding 40 MiB
  // takes no second one (placed there, it failed naming the cap).
  auto s = MakeCounting();
  const DeviceId d0 = s->AddDevice(Capped("a", 2, 64));
  const DeviceId d1 = s->AddDevice(Capped("b", 2, 64));
  auto first = s->AddJob(BuildGraph(SpecBuilder().Add(TaskBuilder("o", "mine")).Build()), 0);
  ASSERT_TRUE(first.ok());
  std::vector<Dispatch> out;
  s->Schedule(0, &out);
  ASSERT_EQ(out.size(), 1u);
  const DeviceId full = out[0].device;
  ASSERT_TRUE(s->OnTaskDone(*first, 0, 0, 0, 100, 100));
  s->RecordOutput(*first, 0, full, 40u << 20, 1);  // a final output: kept
  auto second = s->AddJob(BuildGraph(SpecBuilder().Add(TaskBuilder("o", "mine")).Build()), 100);
  ASSERT_TRUE(second.ok());
  out.clear();
  s->Schedule(100, &out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].device, full == d0 ? d1 : d0) << "40 MiB more placed beside 40 MiB";
  EXPECT_EQ(s->pool().device(out[0].device).reserved_bytes, 40u << 20);
}

}  // namespace
}  // namespace hmpmd::test
