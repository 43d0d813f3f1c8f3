// spmd-1f1b on pools and specs nobody tuned it for: small pools where the
// device sets must overlap, gangs whose shards collide, repeated steps,
// program orders that cannot be followed.
#include "hmpmd/scheduler/spmd_policy.h"

#include <gtest/gtest.h>

#include <set>

#include "hmpmd/sim/simulator.h"
#include "hmpmd/sim/workloads.h"
#include "test_builders.h"

namespace hmpmd {
namespace {

using test::BuildGraph;
using test::SpecBuilder;
using test::TaskBuilder;

struct Outcome {
  Status status;
  JobState state = JobState::kQueued;
  std::string error;
  std::vector<TaskRecord> runs;
  bool split = false;
  TimeUs end = 0;
};

Outcome RunSpmd(const JobSpec& spec, const PoolSpec& pool) {
  SimOptions o;
  o.policy = "spmd-1f1b";
  o.pool = pool;
  auto sim = Simulator::Create(o);
  EXPECT_TRUE(sim.ok()) << sim.status().message();
  auto id = (*sim)->Submit(BuildGraph(spec));
  EXPECT_TRUE(id.ok()) << id.status().message();
  Outcome out;
  // The plan as admission made it (the policy forgets it when the job ends).
  const auto& policy = dynamic_cast<const SpmdPolicy&>((*sim)->scheduler().policy());
  out.split = policy.SplitLanes(*id);
  out.status = (*sim)->Run();
  const JobRun& job = *(*sim)->scheduler().job(*id);
  out.state = job.state;
  out.error = job.error;
  out.runs = job.runs;
  out.end = (*sim)->now();
  return out;
}

// Regression: the sets of multimodal's 6 sub-models overlap on 3 to 15
// devices (and rl's on 1 or 2), and one sub-model's slot order on a shared
// device waited on another's: "simulation stuck".
TEST(SpmdPolicy, SmallPoolsRunToCompletion) {
  for (const char* workload : {"multimodal", "rl", "moe", "pipeline"}) {
    for (uint32_t devices = 1; devices <= 16; ++devices) {
      auto spec = MakeWorkload(workload, devices, 1);
      ASSERT_TRUE(spec.ok());
      SimOptions o;
      o.policy = "spmd-1f1b";
      o.pool = MakePoolSpec(devices);
      auto sim = Simulator::Create(o);
      ASSERT_TRUE(sim.ok());
      auto id = (*sim)->Submit(BuildGraph(*spec));
      if (!id.ok()) {  // a gang larger than the pool: refused at admission
        EXPECT_NE(id.status().message().find("collective.group"), std::string::npos);
        continue;
      }
      Status st = (*sim)->Run();
      ASSERT_TRUE(st.ok()) << workload << " on " << devices << ": " << st.message();
      EXPECT_EQ((*sim)->scheduler().job(*id)->state, JobState::kSucceeded)
          << workload << " on " << devices;
    }
  }
}

// A job admitted before any device is up (submitted before the first
// worker joins, or reloaded with nothing done after a restart) is laid
// out when devices come, not failed for an empty pool.
TEST(SpmdPolicy, AJobAdmittedOnAnEmptyPoolRunsOnceDevicesJoin) {
  auto p = MakePolicy("spmd-1f1b");
  ASSERT_TRUE(p.ok());
  Scheduler s(SchedulerOptions{}, std::move(*p));
  auto g = BuildGraph(SpecBuilder()
                          .Submodel("enc", SubmodelKind::kEncoder, 1)
                          .Add(TaskBuilder("a").Submodel("enc").Us(10))
                          .Add(TaskBuilder("b").Submodel("enc").Us(10).Inputs({"a"}))
                          .Build());
  Result<JobId> job = s.AddJob(g, 0);
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  test::VirtualLoop loop(&s);
  loop.RunToIdle();
  EXPECT_EQ(s.job(*job)->state, JobState::kQueued) << s.job(*job)->error;
  s.AddDevice(test::Device("d0", 1, 1));
  loop.RunToIdle();
  EXPECT_EQ(s.job(*job)->state, JobState::kSucceeded) << s.job(*job)->error;

  // Reloaded after a restart with its first task done: laid out when a
  // device joins, with that task's turn in the program order taken.
  auto r = MakePolicy("spmd-1f1b");
  ASSERT_TRUE(r.ok());
  Scheduler again(SchedulerOptions{}, std::move(*r));
  ASSERT_TRUE(again.RestoreJob(3, g, {{0, 0, 10, 20}}, JobState::kRunning, "", 1, -1, 100).ok());
  test::VirtualLoop resumed(&again);
  resumed.AdvanceTo(100);
  resumed.RunToIdle();
  again.AddDevice(test::Device("d0", 1, 1));
  resumed.RunToIdle();
  EXPECT_EQ(again.job(3)->state, JobState::kSucceeded) << again.job(3)->error;
  ASSERT_EQ(resumed.log().size(), 1u) << "a is not run again";
}

// A device of the plan dies between two tasks, and another joins: the job
// is laid out again on the devices up, where it goes on (before, the next
// task waited for the dead device for ever).
TEST(SpmdPolicy, AJobWhoseDeviceDiesIsLaidOutAgainOnTheDevicesUp) {
  auto p = MakePolicy("spmd-1f1b");
  ASSERT_TRUE(p.ok());
  Scheduler s(SchedulerOptions{}, std::move(*p));
  const DeviceId d0 = s.AddDevice(test::Device("d0", 1, 1));
  Result<JobId> job =
      s.AddJob(BuildGraph(SpecBuilder()
                              .Submodel("enc", SubmodelKind::kEncoder, 1)
                              .Add(TaskBuilder("a").Submodel("enc").Us(10))
                              .Add(TaskBuilder("b").Submodel("enc").Us(10).Inputs({"a"}))
                              .Build()),
               0);
  ASSERT_TRUE(job.ok());
  test::VirtualLoop loop(&s);
  ASSERT_EQ(loop.Schedule(), 1u);
  ASSERT_TRUE(loop.DeliverNext());  // a is done on d0
  s.RemoveDevice(d0, loop.now());
  const DeviceId d1 = s.AddDevice(test::Device("d1", 1, 1));
  loop.RunToIdle();
  EXPECT_EQ(s.job(*job)->state, JobState::kSucceeded) << s.job(*job)->error;
  ASSERT_EQ(loop.log().size(), 2u);
  EXPECT_EQ(loop.log()[1].d.device, d1);
}

TEST(SpmdPolicy, OverlappingSetsGetALaneEachOnlyWhenTheyMust) {
  // rl on 2 devices: the learner's set wraps onto the actor's device, and
  // the learner's first chunk (order 0) waits on rollouts (orders 1-4).
  auto small = MakeWorkload("rl", 2, 1);
  ASSERT_TRUE(small.ok());
  Outcome o = RunSpmd(*small, MakePoolSpec(2));
  EXPECT_TRUE(o.status.ok()) << o.status.message();
  EXPECT_TRUE(o.split);
  // The built-ins on their own pool size keep one program per device
  // (moe's experts share the dense layers' order).
  for (const char* workload : {"multimodal", "moe"}) {
    auto spec = MakeWorkload(workload, 64, 1);
    ASSERT_TRUE(spec.ok());
    Outcome big = RunSpmd(*spec, MakePoolSpec(64));
    EXPECT_TRUE(big.status.ok()) << big.status.message();
    EXPECT_FALSE(big.split) << workload;
  }
}

// Regression: members of one gang whose shards are equal modulo their set's
// size were pinned to one device and could never start together.
TEST(SpmdPolicy, GangMembersWithCollidingShardsGetDistinctDevices) {
  SpecBuilder b;
  b.Submodel("tp", SubmodelKind::kGeneric, 2);
  for (int i = 0; i < 3; ++i) {
    const std::string c = "c" + std::to_string(i);
    b.Add(TaskBuilder(c).Us(10).Submodel("tp").Arg("shard", int64_t{2 * i}));
    b.Add(TaskBuilder("ar" + std::to_string(i), "allreduce")
              .Vector()
              .Submodel("tp")
              .Inputs({c})
              .Bytes(1024)
              .Collective("g", "allreduce", 1024)
              .Arg("shard", int64_t{2 * i}));
  }
  Outcome o = RunSpmd(b.Build(), MakePoolSpec(4));
  ASSERT_TRUE(o.status.ok()) << o.status.message();
  ASSERT_EQ(o.state, JobState::kSucceeded);
  JobSpec spec = b.Build();
  std::set<CoreId> cores;
  TimeUs start = -1;
  for (size_t i = 0; i < spec.tasks.size(); ++i) {
    if (!spec.tasks[i].collective) continue;
    cores.insert(o.runs[i].core);
    if (start < 0) start = o.runs[i].start;
    EXPECT_EQ(o.runs[i].start, start);
  }
  EXPECT_EQ(cores.size(), 3u);  // three devices (one cube core each hosts comm)
}

// Regression: a lane's order ran once, so the second step (repeat) of a
// job with `order` args waited forever.
TEST(SpmdPolicy, ProgramOrderRunsAgainEachStep) {
  SpecBuilder b;
  b.Repeat(3).Submodel("m", SubmodelKind::kGeneric, 1);
  b.Add(TaskBuilder("a").Us(10).Submodel("m").Arg("shard", int64_t{0}).Arg("order", int64_t{0}));
  b.Add(TaskBuilder("b").Us(10).Submodel("m").Arg("shard", int64_t{0}).Arg("order", int64_t{1}));
  Outcome o = RunSpmd(b.Build(), MakePoolSpec(2));
  ASSERT_TRUE(o.status.ok()) << o.status.message();
  EXPECT_EQ(o.state, JobState::kSucceeded);
  EXPECT_EQ(o.end, 60);
}

// A program order against the inputs fails at once, naming a task.
// Adds a, and b, which needs a, both pinned to sub-model m's one device,
// with program orders that put b first: a plan no device can follow.
// `a_input` (may be null): a's own input.
void AddContradictoryOrders(SpecBuilder& b, const char* a_input = nullptr) {
  b.Submodel("m", SubmodelKind::kGeneric, 1);
  auto pinned = [](const char* id, int64_t order) {
    return std::move(
        TaskBuilder(id).Us(10).Submodel("m").Arg("shard", int64_t{0}).Arg("order", order));
  };
  TaskBuilder a = pinned("a", 1);
  if (a_input != nullptr) a.Inputs({a_input});
  b.Add(std::move(a));
  b.Add(pinned("b", 0).Inputs({"a"}));
}

TEST(SpmdPolicy, ContradictoryOrderFailsAtTimeZero) {
  SpecBuilder b;
  AddContradictoryOrders(b);
  Outcome o = RunSpmd(b.Build(), MakePoolSpec(2));
  EXPECT_TRUE(o.status.ok()) << o.status.message();  // the job failed; the simulation did not
  EXPECT_EQ(o.state, JobState::kFailed);
  EXPECT_EQ(o.end, 0);
  EXPECT_NE(o.error.find("program order"), std::string::npos) << o.error;
  EXPECT_NE(o.error.find("'a'"), std::string::npos) << o.error;
}

TEST(SpmdPolicy, APlanErrorFoundByAGangNamesOnlyTheTaskAtFault) {
  // The same contradiction, found when a gang is placed first: the error
  // began with the gang's member ("tasks[0] 'g0': cannot be placed:
  // spmd-1f1b cannot run this job: tasks[3] 'a' ...").
  SpecBuilder b;
  b.Add(TaskBuilder("g0", "allreduce").Vector().Collective("g", "allreduce", 64));
  b.Add(TaskBuilder("g1", "allreduce").Vector().Collective("g", "allreduce", 64));
  AddContradictoryOrders(b, "g0");
  Outcome o = RunSpmd(b.Build(), MakePoolSpec(2));
  EXPECT_EQ(o.state, JobState::kFailed);
  EXPECT_EQ(o.error.rfind("spmd-1f1b cannot run this job: ", 0), 0u) << o.error;
  EXPECT_EQ(o.error.find("'g0'"), std::string::npos) << o.error;
}

// A pool whose devices cannot run a pinned task (communication goes to the
// cube core, which a vector-only pool lacks, and the task's kind is there)
// still runs; a cube task on a vector-only pool is refused at admission.
TEST(SpmdPolicy, VectorOnlyPoolRunsCommunicationOnTheVectorCore) {
  SpecBuilder b;
  b.Submodel("m", SubmodelKind::kGeneric, 2);
  b.Add(TaskBuilder("s", "send").Vector().Submodel("m").Bytes(1 << 20).Arg("shard", int64_t{1}));
  PoolSpec pool = MakePoolSpec(2);
  pool.cores = {0, 1};
  Outcome o = RunSpmd(b.Build(), pool);
  ASSERT_TRUE(o.status.ok()) << o.status.message();
  EXPECT_EQ(o.state, JobState::kSucceeded);
}

}  // namespace
}  // namespace hmpmd
