// A collective gang whose member must run again (its worker died, or it
// could not read an input) starts over as a whole: the members still
// running are stopped (TakeAborted) without losing an attempt, members
// already done run again, and the gang is dispatched together again on
// distinct devices, never one member alone.
#include <gtest/gtest.h>

#include <set>

#include "engine_steps.h"
#include "hmpmd/scheduler/scheduler.h"
#include "test_builders.h"

namespace hmpmd::test {
namespace {

JobSpec GangOfThree() {
  return SpecBuilder()
      .Add(TaskBuilder("ar0", "allreduce").Vector().Collective("g", "allreduce"))
      .Add(TaskBuilder("ar1", "allreduce").Vector().Collective("g", "allreduce"))
      .Add(TaskBuilder("ar2", "allreduce").Vector().Collective("g", "allreduce"))
      .Build();
}

std::set<DeviceId> DevicesOf(const std::vector<Dispatch>& out) {
  std::set<DeviceId> d;
  for (const Dispatch& x : out) d.insert(x.device);
  return d;
}

TEST(GangRestartTest, AMemberWhoseWorkerDiedRestartsTheWholeGangTogether) {
  auto s = MakeFifoScheduler();
  for (int i = 0; i < 4; ++i) s->AddDevice(Device("d" + std::to_string(i), 1, 1));
  auto id = s->AddJob(BuildGraph(GangOfThree()), 0);
  ASSERT_TRUE(id.ok());
  auto out = Step(*s, 0);
  ASSERT_EQ(out.size(), 3u);
  ASSERT_EQ(DevicesOf(out).size(), 3u);
  // The worker of ar1 dies mid-collective.
  const Dispatch dead = out[1];
  s->RemoveDevice(dead.device, 100);
  // Its two peers wait for it in the collective: they are stopped there.
  std::vector<RunEnded> aborted = s->TakeAborted();
  ASSERT_EQ(aborted.size(), 2u);
  for (const RunEnded& a : aborted) {
    EXPECT_EQ(a.job, *id);
    EXPECT_NE(a.run, dead.run);
    EXPECT_NE(a.device, dead.device);
  }
  EXPECT_TRUE(s->TakeAborted().empty()) << "taken once";
  // The whole gang goes again, together, on three distinct live devices.
  out = Step(*s, 200);
  ASSERT_EQ(out.size(), 3u) << "never one member alone";
  EXPECT_EQ(DevicesOf(out).size(), 3u);
  EXPECT_EQ(DevicesOf(out).count(dead.device), 0u);
  for (const Dispatch& d : out) {
    EXPECT_EQ(d.attempt, 1u);
    ASSERT_TRUE(s->OnTaskDone(d.job, d.run, d.attempt, 210, 300, 300));
  }
  EXPECT_EQ(s->job(*id)->state, JobState::kSucceeded);
  // The stopped peers did not lose an attempt; the dead one's did count.
  EXPECT_EQ(s->job(*id)->runs[dead.run].recalled, 0u);
  for (const RunEnded& a : aborted) EXPECT_EQ(s->job(*id)->runs[a.run].recalled, 1u);
}

TEST(GangRestartTest, TooFewDevicesLeftHoldsTheGangBackInsteadOfSplittingIt) {
  auto s = MakeFifoScheduler();
  for (int i = 0; i < 3; ++i) s->AddDevice(Device("d" + std::to_string(i), 1, 1));
  auto id = s->AddJob(BuildGraph(GangOfThree()), 0);
  ASSERT_TRUE(id.ok());
  auto out = Step(*s, 0);
  ASSERT_EQ(out.size(), 3u);
  s->RemoveDevice(out[0].device, 100);
  EXPECT_EQ(s->TakeAborted().size(), 2u);
  EXPECT_TRUE(Step(*s, 200).empty()) << "two devices cannot hold a gang of three";
  s->AddDevice(Device("d3", 1, 1));
  out = Step(*s, 300);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(DevicesOf(out).size(), 3u);
}

TEST(GangRestartTest, AMemberThatLostAnInputRestartsItsPeersToo) {
  auto s = MakeFifoScheduler();
  for (int i = 0; i < 2; ++i) s->AddDevice(Device("d" + std::to_string(i), 1, 1));
  auto id = s->AddJob(BuildGraph(SpecBuilder()
                                     .Add(TaskBuilder("pre").Us(10))
                                     .Add(TaskBuilder("m0", "allreduce")
                                              .Vector()
                                              .Inputs({"pre"})
                                              .Collective("g", "allreduce"))
                                     .Add(TaskBuilder("m1", "allreduce")
                                              .Vector()
                                              .Inputs({"pre"})
                                              .Collective("g", "allreduce"))
                                     .Build()),
                      0);
  ASSERT_TRUE(id.ok());
  auto out = Step(*s, 0);
  ASSERT_EQ(out.size(), 1u);
  ASSERT_TRUE(s->OnTaskDone(*id, 0, 0, 0, 10, 10));
  s->RecordOutput(*id, 0, out[0].device, 64);
  out = Step(*s, 20);
  ASSERT_EQ(out.size(), 2u);
  // m0 could not read pre's output: pre runs again, and m1, waiting for m0
  // in the collective, is stopped.
  ASSERT_TRUE(s->OnInputsLost(*id, 1, 0, {0}, "gone", 30));
  std::vector<RunEnded> aborted = s->TakeAborted();
  ASSERT_EQ(aborted.size(), 1u);
  EXPECT_EQ(aborted[0].run, 2u);
  out = Step(*s, 40);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].run, 0u) << "the lost input first";
  ASSERT_TRUE(s->OnTaskDone(*id, 0, out[0].attempt, 40, 50, 50));
  s->RecordOutput(*id, 0, out[0].device, 64);
  out = Step(*s, 60);
  ASSERT_EQ(out.size(), 2u) << "then the gang, together";
  EXPECT_EQ(DevicesOf(out).size(), 2u);
}

}  // namespace
}  // namespace hmpmd::test
