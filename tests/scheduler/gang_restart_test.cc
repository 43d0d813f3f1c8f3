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

// A member of allreduce group "g" reading `input`.
TaskBuilder Member(const char* id, const char* input) {
  return std::move(
      TaskBuilder(id, "allreduce").Vector().Inputs({input}).Collective("g", "allreduce"));
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
                                     .Add(Member("m0", "pre"))
                                     .Add(Member("m1", "pre"))
                                     .Build()),
                      0);
  ASSERT_TRUE(id.ok());
  auto out = Step(*s, 0);
  ASSERT_EQ(out.size(), 1u);
  ASSERT_TRUE(s->OnTaskDone(*id, 0, 0, 0, 10, 10));
  s->RecordOutput(*id, 0, out[0].device, 64, 1);
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
  s->RecordOutput(*id, 0, out[0].device, 64, 1);
  out = Step(*s, 60);
  ASSERT_EQ(out.size(), 2u) << "then the gang, together";
  EXPECT_EQ(DevicesOf(out).size(), 2u);
}

JobSpec GangReadingInputs() {
  return SpecBuilder()
      .Add(TaskBuilder("x0").Us(10))
      .Add(TaskBuilder("x1").Us(10))
      .Add(Member("m0", "x0"))
      .Add(Member("m1", "x1"))
      .Build();
}

// Runs each dispatch to its end, its outputs 64 bytes on its device.
void Finish(Scheduler& s, const std::vector<Dispatch>& out, TimeUs* now) {
  *now += 10;
  for (const Dispatch& d : out) FinishRun(s, d, *now, 64);
}

// A gang that starts over after a timeout: its members took the reads of
// their inputs as they started, which freed the inputs they were the last
// to read on their workers; those are rebuilt before the gang runs again.
// The gang used to run at once, find them gone, and spend its attempts on
// those losses until the job failed ("input tasks[1] 'x0' lost").
TEST(GangRestartTest, AGangThatStartsOverRebuildsTheInputsItsMembersRead) {
  auto s = MakeFifoScheduler();
  for (int i = 0; i < 2; ++i) s->AddDevice(Device("d" + std::to_string(i), 1, 1));
  auto id = s->AddJob(BuildGraph(GangReadingInputs()), 0);
  ASSERT_TRUE(id.ok());
  TimeUs now = 0;
  Finish(*s, Step(*s, now), &now);  // x0, x1
  auto gang = Step(*s, now += 10);
  ASSERT_EQ(gang.size(), 2u);
  ASSERT_TRUE(s->OnTaskFailed(*id, gang[0].run, gang[0].attempt, "collective: nothing from rank 1",
                              /*retryable=*/true, now += 10));
  EXPECT_EQ(s->TakeAborted().size(), 1u) << "its peer is stopped";
  auto inputs = Step(*s, now += 10);
  ASSERT_EQ(inputs.size(), 2u) << "the inputs first";
  for (const Dispatch& d : inputs) EXPECT_LT(d.run, 2u);
  Finish(*s, inputs, &now);
  gang = Step(*s, now += 10);
  ASSERT_EQ(gang.size(), 2u);
  Finish(*s, gang, &now);
  EXPECT_EQ(s->job(*id)->state, JobState::kSucceeded) << s->job(*id)->error;
  EXPECT_EQ(s->job(*id)->gang_retries[0], 1u);
}

// A gang queued (every member ready) whose member's input dies before it
// is placed waits for that input again, as a whole: its other member is
// not sent alone (after a restart, the rebuild of outputs no worker
// reported did that, and the job failed: "collective kernel ran without a
// gang").
TEST(GangRestartTest, AQueuedGangWhoseMemberLosesAnInputIsNotSentWithoutIt) {
  auto s = MakeFifoScheduler();
  for (int i = 0; i < 3; ++i) s->AddDevice(Device("d" + std::to_string(i), 1, 1));
  auto id = s->AddJob(BuildGraph(GangReadingInputs()), 0);
  ASSERT_TRUE(id.ok());
  TimeUs now = 0;
  std::vector<Dispatch> inputs = Step(*s, now);
  ASSERT_EQ(inputs.size(), 2u);
  Finish(*s, inputs, &now);  // x0, x1: the gang is queued, not yet placed
  const DeviceId x1_device = inputs[0].run == 1 ? inputs[0].device : inputs[1].device;
  s->RemoveDevice(x1_device, now += 10);
  std::vector<Dispatch> out = Step(*s, now += 10);
  for (const Dispatch& d : out)
    EXPECT_EQ(d.run, 1u) << "run " << d.run << " placed before x1 is back";
  ASSERT_EQ(out.size(), 1u);
  Finish(*s, out, &now);
  std::vector<Dispatch> gang = Step(*s, now += 10);
  ASSERT_EQ(gang.size(), 2u) << "the gang, together";
  EXPECT_EQ(DevicesOf(gang).size(), 2u);
  Finish(*s, gang, &now);
  EXPECT_EQ(s->job(*id)->state, JobState::kSucceeded) << s->job(*id)->error;
}

// A member done, then rebuilt when its output died with its worker, is
// reported finished again by that worker coming back (it was stopped, not
// dead): taking that report back would complete the member alone while
// its gang starts over, which then never gathers (the job hung, every
// core idle). The old attempt is stale.
TEST(GangRestartTest, ARebuiltMembersOldAttemptIsNotTakenBack) {
  auto s = MakeFifoScheduler();
  for (int i = 0; i < 3; ++i) s->AddDevice(Device("d" + std::to_string(i), 1, 1));
  JobSpec spec = GangReadingInputs();
  spec.tasks.push_back(TaskBuilder("y").Us(10).Inputs({"m0", "m1"}).spec());
  auto id = s->AddJob(BuildGraph(spec), 0);
  ASSERT_TRUE(id.ok());
  TimeUs now = 0;
  Finish(*s, Step(*s, now), &now);  // x0, x1
  std::vector<Dispatch> gang = Step(*s, now += 10);
  ASSERT_EQ(gang.size(), 2u);
  Finish(*s, gang, &now);  // m0, m1 done; y not yet placed
  const Dispatch& m0 = gang[0].run == 2 ? gang[0] : gang[1];
  s->RemoveDevice(m0.device, now += 10);  // declared dead: m0's output is gone
  const DeviceId back = s->AddDevice(Device("back", 1, 1));
  EXPECT_FALSE(s->AdoptRun(*id, m0.run, m0.attempt, back, CoreKind::kVector, 0, now += 10))
      << "a rebuilt gang member's old attempt taken back alone";
}

// A gang already done whose member's output died with its worker must run
// again whole: with too few devices left for it, the job says it waits
// (and `hmpmd run` ends) instead of hanging with no reason given.
TEST(GangRestartTest, ADoneGangThatMustRunAgainWaitsForDevicesForAllItsMembers) {
  auto s = MakeFifoScheduler();
  for (int i = 0; i < 2; ++i) s->AddDevice(Device("d" + std::to_string(i), 1, 1));
  auto id = s->AddJob(BuildGraph(SpecBuilder()
                                     .Add(TaskBuilder("w").Us(1'000'000))
                                     .Add(TaskBuilder("x0").Us(10).Vector())
                                     .Add(TaskBuilder("x1").Us(10).Vector())
                                     .Add(Member("m0", "x0"))
                                     .Add(Member("m1", "x1"))
                                     .Add(TaskBuilder("y0").Us(10).Inputs({"m0", "w"}))
                                     .Add(TaskBuilder("y1").Us(10).Inputs({"m1", "w"}))
                                     .Build()),
                      0);
  ASSERT_TRUE(id.ok());
  DeviceId w_device = 0;
  TimeUs now = 0;
  for (int round = 0; round < 2; ++round) {  // x0, x1 and w; then the gang
    auto out = Step(*s, now += 10);
    ASSERT_EQ(out.size(), round == 0 ? 3u : 2u);
    for (const Dispatch& d : out) {
      if (d.run == 0) {
        w_device = d.device;
        continue;
      }
      FinishRun(*s, d, now + 5, 64);
    }
  }
  EXPECT_TRUE(s->job(*id)->waiting.empty());
  // The other device dies with a member's output; that member waits for
  // its input, rebuilt, and then the whole gang runs again.
  s->RemoveDevice(1 - w_device, now += 10);
  EXPECT_NE(s->job(*id)->waiting.find("group 'g' has 2 members"), std::string::npos)
      << "waiting: '" << s->job(*id)->waiting << "'";
}

// A member whose collective timed out (the worker reports a retryable
// failure) restarts the whole gang like a dead worker does, and the gang's
// attempts are shared: whichever member fails, max_attempts (3) gang runs
// in all, then the job fails naming the task, the group and the cause, and
// the peers still running are stopped.
TEST(GangRestartTest, RetryableMemberFailuresCountAgainstTheGangThenFailTheJob) {
  auto s = MakeFifoScheduler();
  for (int i = 0; i < 3; ++i) s->AddDevice(Device("d" + std::to_string(i), 1, 1));
  auto id = s->AddJob(BuildGraph(GangOfThree()), 0);
  ASSERT_TRUE(id.ok());
  TimeUs now = 0;
  for (uint32_t gang_run = 0; gang_run < 3; ++gang_run) {
    auto out = Step(*s, now += 10);
    ASSERT_EQ(out.size(), 3u) << "gang run " << gang_run;
    EXPECT_EQ(DevicesOf(out).size(), 3u);
    // A different member times out each time: per member, none would have
    // used up its attempts.
    const Dispatch& failing = out[gang_run];
    ASSERT_TRUE(s->OnTaskFailed(failing.job, failing.run, failing.attempt,
                                "collective: nothing from rank 1 within 300 ms",
                                /*retryable=*/true, now += 10));
    std::vector<RunEnded> aborted = s->TakeAborted();
    ASSERT_EQ(aborted.size(), 2u) << "its peers are stopped";
    for (const RunEnded& a : aborted) EXPECT_NE(a.run, failing.run);
    // The peers' own time-outs arrive late: stale, ignored.
    for (const Dispatch& d : out) {
      if (d.run != failing.run) {
        EXPECT_FALSE(s->OnTaskFailed(d.job, d.run, d.attempt, "late", true, now));
      }
    }
    if (gang_run < 2) {
      EXPECT_EQ(s->job(*id)->state, JobState::kRunning);
      EXPECT_EQ(s->job(*id)->gang_retries[0], gang_run + 1);
    }
  }
  const JobRun& job = *s->job(*id);
  EXPECT_EQ(job.state, JobState::kFailed);
  EXPECT_NE(job.error.find("task 'ar2' failed after 3 attempts of its collective group 'g'"),
            std::string::npos)
      << job.error;
  EXPECT_NE(job.error.find("nothing from rank 1 within 300 ms"), std::string::npos) << job.error;
}

TEST(GangRestartTest, ANonRetryableMemberFailureFailsTheJobAndStopsItsPeers) {
  auto s = MakeFifoScheduler();
  for (int i = 0; i < 3; ++i) s->AddDevice(Device("d" + std::to_string(i), 1, 1));
  auto id = s->AddJob(BuildGraph(GangOfThree()), 0);
  ASSERT_TRUE(id.ok());
  auto out = Step(*s, 0);
  ASSERT_EQ(out.size(), 3u);
  ASSERT_TRUE(s->OnTaskFailed(*id, out[0].run, 0, "alltoall: bad size frame", false, 10));
  EXPECT_EQ(s->job(*id)->state, JobState::kFailed);
  // Its peers wait in the collective for it: stopped on their devices, not
  // left to time out while the scheduler places other work there.
  std::vector<RunEnded> aborted = s->TakeAborted();
  ASSERT_EQ(aborted.size(), 2u);
  for (const RunEnded& a : aborted) {
    EXPECT_NE(a.run, out[0].run);
    EXPECT_NE(a.device, UINT32_MAX);
  }
}

// A scheduler whose cores take work queued behind the running task, as
// the controller's do: a gang member may be dispatched to a worker and
// wait there, not started, behind other work.
std::unique_ptr<Scheduler> MakeQueueingScheduler() {
  SchedulerOptions o;
  o.pool.max_queue_per_core = 4;
  o.pool.lookahead_us = 1e12;
  return std::make_unique<Scheduler>(o, std::move(MakePolicy("fifo")).value());
}

// A long task, then a gang of two: with two devices of one vector core,
// one member queues behind the long task.
JobSpec LongThenGangOfTwo() {
  return SpecBuilder()
      .Add(TaskBuilder("long", "sleep").Vector().Us(1'000'000))
      .Add(TaskBuilder("ar0", "allreduce").Vector().Collective("g", "allreduce"))
      .Add(TaskBuilder("ar1", "allreduce").Vector().Collective("g", "allreduce"))
      .Build();
}

// Submits LongThenGangOfTwo() on two devices of one vector core and
// dispatches it: the member that shares the long task's core (queued
// behind it, not started) and the other one. Fails the test otherwise.
struct QueuedGang {
  JobId job = 0;
  Dispatch queued, other;
};
QueuedGang DispatchWithAQueuedMember(Scheduler& s) {
  QueuedGang q;
  for (int i = 0; i < 2; ++i) s.AddDevice(Device("d" + std::to_string(i), 0, 1));
  auto id = s.AddJob(BuildGraph(LongThenGangOfTwo()), 0);
  EXPECT_TRUE(id.ok());
  if (!id.ok()) return q;
  q.job = *id;
  const std::vector<Dispatch> out = Step(s, 0);
  EXPECT_EQ(out.size(), 3u);
  if (out.size() != 3u) return q;
  EXPECT_EQ(out[0].run, 0u);  // the long task
  int found = 0;
  for (size_t i = 1; i < out.size(); ++i) {
    if (out[i].core == out[0].core) {
      q.queued = out[i];
      ++found;
    } else {
      q.other = out[i];
    }
  }
  EXPECT_EQ(found, 1) << "no member queued behind the long task";
  return q;
}

TEST(GangRestartTest, AMemberQueuedBehindOtherWorkIsStoppedWhenAPeerDies) {
  auto s = MakeQueueingScheduler();
  const auto [id, queued, other] = DispatchWithAQueuedMember(*s);
  ASSERT_FALSE(HasFailure());
  s->RemoveDevice(other.device, 100);
  // The queued member never started, but its worker holds it: stopped there.
  std::vector<RunEnded> aborted = s->TakeAborted();
  ASSERT_EQ(aborted.size(), 1u);
  EXPECT_EQ(aborted[0].run, queued.run);
  EXPECT_EQ(aborted[0].device, queued.device);
  // With one device left the gang waits (it needs two) instead of running
  // one member alone; a new device lets it run again, together.
  EXPECT_TRUE(Step(*s, 200).empty());
  s->AddDevice(Device("d2", 0, 1));
  std::vector<Dispatch> again = Step(*s, 300);
  ASSERT_EQ(again.size(), 2u);
  EXPECT_NE(again[0].device, again[1].device);
  for (const Dispatch& d : again)
    ASSERT_TRUE(s->OnTaskDone(d.job, d.run, d.attempt, 310, 400, 400));
  ASSERT_TRUE(s->OnTaskDone(id, 0, 0, 0, 500, 500));
  EXPECT_EQ(s->job(id)->state, JobState::kSucceeded);
}

TEST(GangRestartTest, AMemberQueuedBehindOtherWorkIsStoppedWhenItsPeerFailsTheJob) {
  auto s = MakeQueueingScheduler();
  const auto [id, queued, other] = DispatchWithAQueuedMember(*s);
  ASSERT_FALSE(HasFailure());
  ASSERT_TRUE(s->OnTaskFailed(id, other.run, other.attempt, "allreduce: bad frame", false, 10));
  EXPECT_EQ(s->job(id)->state, JobState::kFailed);
  // The queued member and the long task are stopped on their worker.
  std::set<uint32_t> stopped;
  for (const RunEnded& a : s->TakeAborted()) {
    EXPECT_EQ(a.device, queued.device);
    stopped.insert(a.run);
  }
  EXPECT_EQ(stopped, (std::set<uint32_t>{0, queued.run}));
}

// Job `id` of `spec` restored as after a controller restart, its first
// `done` runs done, and `devices` devices joined: their ids (none if the
// restore failed).
std::vector<DeviceId> RestoreWithDone(Scheduler& s, JobId id, const JobSpec& spec, uint32_t done,
                                      int devices) {
  std::vector<Scheduler::RestoredRun> runs;
  for (uint32_t r = 0; r < done; ++r) runs.push_back({r, 0, 10, 20, 64, 1});
  std::vector<DeviceId> ids;
  if (!s.RestoreJob(id, BuildGraph(spec), runs, JobState::kRunning, "", 0, -1, 100).ok())
    return ids;
  for (int i = 0; i < devices; ++i)
    ids.push_back(s.AddDevice(Device("d" + std::to_string(i), 1, 1)));
  return ids;
}

// After a controller restart, a done gang whose members are final outputs,
// each held by its worker: one of those workers dies before the job ends,
// and lineage rebuilds that member's output. The member alone would wait
// for its mates (done) for ever, with every core idle: the whole gang runs
// again (fault_run.py seed 209; live, the gang's ready count still said
// "all ready" and MakeReady restarted it, but a restored job counts none).
TEST(GangRestartTest, AfterARestartAFinalOutputOfAGangLostWithItsWorkerRunsTheGangAgainWhole) {
  auto s = MakeFifoScheduler();
  JobSpec spec = GangOfThree();
  spec.tasks.push_back(TaskBuilder("later").Us(10).spec());  // keeps the job running
  const JobId id = 9;
  const std::vector<DeviceId> devices = RestoreWithDone(*s, id, spec, 3, 4);
  ASSERT_EQ(devices.size(), 4u);
  for (uint32_t r = 0; r < 3; ++r) s->RecordOutput(id, r, devices[r], 64, 1);
  EXPECT_EQ(s->RebuildUnheldOutputs(id, 200), 0u) << "every output came back";
  TimeUs now = 200;
  std::vector<Dispatch> later = Step(*s, now += 10);
  ASSERT_EQ(later.size(), 1u);
  ASSERT_EQ(later[0].run, 3u);
  // The worker holding ar0's output dies (not the one running "later").
  const DeviceId lost = later[0].device == devices[0] ? devices[1] : devices[0];
  s->RemoveDevice(lost, now += 10);
  std::vector<Dispatch> out = Step(*s, now += 10);
  std::set<uint32_t> again;
  for (const Dispatch& d : out) again.insert(d.run);
  EXPECT_EQ(again, (std::set<uint32_t>{0, 1, 2})) << "the gang runs again, whole";
  EXPECT_EQ(DevicesOf(out).count(lost), 0u);
  Finish(*s, out, &now);
  Finish(*s, later, &now);
  EXPECT_EQ(s->job(id)->state, JobState::kSucceeded);
}

// After a controller restart, a done gang one of whose members' outputs no
// worker brought back starts over whole: the rebuilt member alone would
// wait for its gang for ever (its mate stays done).
TEST(GangRestartTest, AfterARestartAGangWithOneOutputLostRunsAgainWhole) {
  auto s = MakeFifoScheduler();
  JobSpec spec = GangReadingInputs();
  spec.tasks.push_back(TaskBuilder("y").Us(10).Inputs({"m0", "m1"}).spec());
  const JobId id = 7;
  const std::vector<DeviceId> devices = RestoreWithDone(*s, id, spec, 4, 3);
  ASSERT_EQ(devices.size(), 3u);
  s->RecordOutput(id, 2, devices[0], 64, 1);  // m0's came back; m1's did not
  EXPECT_GT(s->RebuildUnheldOutputs(id, 200), 0u);
  TimeUs now = 200;
  std::set<uint32_t> ran;
  for (int round = 0; round < 4 && s->job(id)->state == JobState::kRunning; ++round) {
    std::vector<Dispatch> out = Step(*s, now += 10);
    std::set<uint32_t> members;
    for (const Dispatch& d : out) {
      ran.insert(d.run);
      if (d.run == 2 || d.run == 3) members.insert(d.run);
    }
    EXPECT_TRUE(members.empty() || members.size() == 2u) << "a gang member went alone";
    Finish(*s, out, &now);
  }
  EXPECT_EQ(s->job(id)->state, JobState::kSucceeded);
  EXPECT_TRUE(ran.count(2) && ran.count(3)) << "the whole gang ran again";
}

// After a restart a worker brought one member back running, its mate's
// worker did not: the gang starts over (the adopted member is stopped)
// rather than sending the mate alone.
TEST(GangRestartTest, AfterARestartAnAdoptedMemberWithoutItsMateStartsItsGangOver) {
  auto s = MakeFifoScheduler();
  std::vector<Scheduler::RestoredRun> done = {{0, 0, 10, 20, 64, 1}, {1, 0, 10, 20, 64, 1}};
  const JobId id = 8;
  ASSERT_TRUE(
      s->RestoreJob(id, BuildGraph(GangReadingInputs()), done, JobState::kRunning, "", 0, -1, 100)
          .ok());
  std::vector<DeviceId> devices;
  for (int i = 0; i < 2; ++i)
    devices.push_back(s->AddDevice(Device("d" + std::to_string(i), 1, 1)));
  s->RecordOutput(id, 0, devices[0], 64, 1);
  s->RecordOutput(id, 1, devices[1], 64, 1);
  ASSERT_TRUE(s->AdoptRun(id, 2, 0, devices[0], CoreKind::kVector, 0, 150));
  s->RebuildUnheldOutputs(id, 200);
  std::vector<RunEnded> aborted = s->TakeAborted();
  ASSERT_EQ(aborted.size(), 1u);
  EXPECT_EQ(aborted[0].run, 2u);
  // The stopped member had read x0 (its one read): x0 runs again first.
  TimeUs now = 200;
  std::vector<Dispatch> out = Step(*s, now += 10);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].run, 0u);
  Finish(*s, out, &now);
  out = Step(*s, now += 10);
  ASSERT_EQ(out.size(), 2u) << "the gang, together";
  EXPECT_EQ(DevicesOf(out).size(), 2u);
}

}  // namespace
}  // namespace hmpmd::test
