// Tests for HmpmdPolicy (critical path first, earliest core that runs the
// kernel), against the FifoPolicy baseline, and for MakePolicy
// (scheduler/hmpmd_policy.{h,cc}, fifo_policy.{h,cc}, policy.{h,cc}).
#include "hmpmd/scheduler/hmpmd_policy.h"

#include <gtest/gtest.h>

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "hmpmd/scheduler/fifo_policy.h"
#include "hmpmd/scheduler/scheduler.h"
#include "test_builders.h"

namespace hmpmd {
namespace {

using test::Device;
using test::SpecBuilder;
using test::TaskBuilder;
using test::VirtualLoop;

class HmpmdPolicyTest : public ::testing::Test {
 protected:
  // A view of task `index` of `graph` as the engine would hand it over.
  TaskView View(const JobGraph& graph, uint32_t index, ResourcePool* pool) {
    TaskView v;
    v.graph = &graph;
    v.index = index;
    v.spec = &graph.spec_task(index);
    v.task = &graph.task(index);
    v.kernel_id = pool->InternKernel(v.spec->kernel);
    return v;
  }

  // Runs `spec` under `policy` on `devices` and returns the dispatch log.
  std::vector<VirtualLoop::Started> Run(std::string_view policy, const JobSpec& spec,
                                        const std::vector<DeviceDesc>& devices,
                                        TimeUs* makespan = nullptr) {
    auto p = MakePolicy(policy);
    EXPECT_TRUE(p.ok()) << p.status().ToString();
    Scheduler s(SchedulerOptions{}, std::move(*p));
    for (const DeviceDesc& d : devices) s.AddDevice(d);
    auto g = test::BuildGraph(spec);
    Result<JobId> job = s.AddJob(g, 0);
    EXPECT_TRUE(job.ok()) << job.status().ToString();
    VirtualLoop loop(&s);
    loop.RunToIdle();
    EXPECT_EQ(s.job(*job)->state, JobState::kSucceeded);
    if (makespan) *makespan = s.job(*job)->finished;
    ids_.clear();
    for (const auto& st : loop.log()) ids_.push_back(g->spec_task(st.d.run % g->size()).id);
    return loop.log();
  }

  std::vector<std::string> ids_;  // task ids of the last Run, in dispatch order
};

TEST_F(HmpmdPolicyTest, MakePolicyKnowsTheBuiltInPolicies) {
  EXPECT_EQ(PolicyNames(), (std::vector<std::string>{"hmpmd", "fifo", "spmd-1f1b", "spmd-zb-h1",
                                                     "spmd-search", "spmd-eplb"}));
  for (const std::string& name : PolicyNames()) {
    auto p = MakePolicy(name);
    ASSERT_TRUE(p.ok()) << name;
    EXPECT_EQ((*p)->Name(), name);
  }
  auto bad = MakePolicy("random");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kNotFound);
  EXPECT_NE(bad.status().message().find("unknown policy 'random'"), std::string::npos);
  EXPECT_NE(bad.status().message().find("hmpmd, fifo"), std::string::npos);
}

TEST_F(HmpmdPolicyTest, PriorityIsTheUpwardRankWhateverTheArrival) {
  HmpmdPolicy hmpmd;
  FifoPolicy fifo;
  TaskView early, late;
  early.rank_us = 10;
  early.ready_seq = 1;
  late.rank_us = 1000;
  late.ready_seq = 2;
  EXPECT_GT(hmpmd.Priority(late), hmpmd.Priority(early));
  EXPECT_DOUBLE_EQ(hmpmd.Priority(late), 1000);
  EXPECT_GT(fifo.Priority(early), fifo.Priority(late)) << "fifo: earlier arrival first";
}

// A known DAG is ordered by rank alone: work ready since long but off the
// critical path does not go before critical work that became ready later
// (RL: the next rollouts before the rewards an update waits for). In a
// driver session ranks see only the tasks sent so far, so waiting counts.
TEST_F(HmpmdPolicyTest, AKnownDagIsOrderedByRankAloneASessionAlsoByWaiting) {
  JobSpec spec = SpecBuilder().Add(TaskBuilder("x").Us(10)).Add(TaskBuilder("y").Us(10));
  auto closed = test::BuildGraph(spec);
  JobSpec empty;
  auto open = JobGraph::BuildOpen(empty);
  ASSERT_TRUE(open.ok()) << open.status().ToString();
  HmpmdPolicy hmpmd;
  for (const JobGraph* g : {closed.get(), static_cast<const JobGraph*>(open->get())}) {
    TaskView early, late;
    early.graph = late.graph = g;
    early.rank_us = 100;
    early.ready_at = 0;
    late.rank_us = 150;
    late.ready_at = 100;
    if (g->open()) {
      EXPECT_GT(hmpmd.Priority(early), hmpmd.Priority(late)) << "ready 100 us longer";
    } else {
      EXPECT_GT(hmpmd.Priority(late), hmpmd.Priority(early)) << "rank alone";
    }
  }
}

TEST_F(HmpmdPolicyTest, PlaceTakesTheEarliestDrainingCoreOfTheTasksKind) {
  PoolOptions deep;
  deep.max_queue_per_core = 4;
  deep.lookahead_us = 1e9;
  ResourcePool pool(deep);
  pool.AddDevice(Device("a", 2, 1));  // cores 0, 1 cube; 2 vector
  pool.AddDevice(Device("b", 1, 1));  // core 3 cube; 4 vector
  pool.Assign(0, 500, 0);
  pool.Assign(1, 300, 0);
  pool.Assign(3, 400, 0);
  pool.Assign(2, 50, 0);
  auto g = test::BuildGraph(
      SpecBuilder().Add(TaskBuilder("c").Us(10)).Add(TaskBuilder("v", "send").Vector()));
  HmpmdPolicy policy;
  Placement cube = policy.Place(View(*g, 0, &pool), pool, 0);
  ASSERT_EQ(cube.kind, Placement::Kind::kPlaced);
  EXPECT_EQ(cube.core, 1u) << "core 1 drains at 300, before 3 (400) and 0 (500)";
  Placement vec = policy.Place(View(*g, 1, &pool), pool, 0);
  ASSERT_EQ(vec.kind, Placement::Kind::kPlaced);
  EXPECT_EQ(vec.core, 4u) << "idle vector core of b beats busy vector core of a";
}

// Communication goes to the vector core unless its spec names a core: a
// kernel that needs the cube core for fused compute keeps it (QA: a send
// declared "core": "cube" ran on vector0 while /tasks said cube).
TEST_F(HmpmdPolicyTest, CommunicationThatNamesItsCoreKeepsIt) {
  ResourcePool pool;
  pool.AddDevice(Device("a", 1, 1));  // core 0 cube, 1 vector
  auto g = test::BuildGraph(SpecBuilder()
                                .Add(TaskBuilder("moved", "send"))
                                .Add(TaskBuilder("kept", "send").GivenCore(CoreKind::kCube))
                                .Add(TaskBuilder("gang", "allreduce")
                                         .GivenCore(CoreKind::kCube)
                                         .Collective("g", "allreduce")));
  HmpmdPolicy policy;
  for (uint32_t i = 0; i < 3; ++i) {
    Placement p = policy.Place(View(*g, i, &pool), pool, 0);
    ASSERT_EQ(p.kind, Placement::Kind::kPlaced) << i;
    EXPECT_EQ(pool.core(p.core).kind, i == 0 ? CoreKind::kVector : CoreKind::kCube)
        << g->spec_task(i).id;
  }
}

// A gang needs a core per member at once: on a pool with one vector core,
// a 2-member all-reduce gang stays on the cube cores, and a gang of compute
// kernels (spin with `collective`) computes on cube in any case (both hung,
// or ran on vector, before).
TEST_F(HmpmdPolicyTest, AGangTooLargeForTheVectorCoresAndComputeGangsRunOnCube) {
  const std::vector<DeviceDesc> mixed = {Device("a", 1, 0), Device("b", 1, 1)};
  for (const char* kernel : {"allreduce", "spin"}) {
    TaskBuilder m0("m0", kernel), m1("m1", kernel);
    if (std::string(kernel) == "spin") {
      m0.Us(100);
      m1.Us(100);
    }
    auto log = Run("hmpmd",
                   SpecBuilder()
                       .Add(m0.Collective("g", "allreduce", 64))
                       .Add(m1.Collective("g", "allreduce", 64))
                       .Build(),
                   mixed);
    ASSERT_EQ(log.size(), 2u) << kernel;
    // Cores: a's cube 0, b's cube 1 and vector 2.
    for (const auto& st : log) EXPECT_NE(st.d.core, 2u) << kernel << " ran on b's vector core";
  }
}

TEST_F(HmpmdPolicyTest, PlaceSkipsDevicesThatDoNotRunTheKernel) {
  ResourcePool pool;
  pool.AddDevice(Device("spin-only", 1, 0, {"spin"}));
  pool.AddDevice(Device("gemm-too", 1, 0, {"spin", "gemm"}));
  auto g = test::BuildGraph(SpecBuilder().Add(TaskBuilder("g", "gemm")));
  for (std::string_view name : PolicyNames()) {
    auto policy = MakePolicy(name);
    Placement p = (*policy)->Place(View(*g, 0, &pool), pool, 0);
    ASSERT_EQ(p.kind, Placement::Kind::kPlaced) << name;
    EXPECT_EQ(pool.core(p.core).device, 1u) << name;
  }
}

TEST_F(HmpmdPolicyTest, PlaceSaysRetryLaterWhenNoSuitableCoreIsFree) {
  ResourcePool pool;
  pool.AddDevice(Device("gemm", 1, 0, {"gemm"}));
  pool.AddDevice(Device("spin", 1, 0, {"spin"}));
  pool.Assign(0, 100, 0);  // the only gemm core is full
  auto g =
      test::BuildGraph(SpecBuilder().Add(TaskBuilder("g", "gemm")).Add(TaskBuilder("v").Vector()));
  HmpmdPolicy policy;
  EXPECT_EQ(policy.Place(View(*g, 0, &pool), pool, 0).kind, Placement::Kind::kRetryLater);
  EXPECT_EQ(policy.Place(View(*g, 1, &pool), pool, 0).kind, Placement::Kind::kRetryLater)
      << "no vector core at all";
}

TEST_F(HmpmdPolicyTest, LongChainGoesFirstOnASingleCore) {
  // "short" arrives first; "head" leads a 1000 us chain.
  JobSpec spec = SpecBuilder()
                     .Add(TaskBuilder("short").Us(10))
                     .Add(TaskBuilder("head").Us(10))
                     .Add(TaskBuilder("tail").Us(1000).Inputs({"head"}));
  Run("hmpmd", spec, {Device("one", 1)});
  EXPECT_EQ(ids_, (std::vector<std::string>{"head", "tail", "short"}));
  Run("fifo", spec, {Device("one", 1)});
  EXPECT_EQ(ids_, (std::vector<std::string>{"short", "head", "tail"}));
}

TEST_F(HmpmdPolicyTest, CriticalPathFirstShortensTheMakespan) {
  JobSpec spec = SpecBuilder()
                     .Add(TaskBuilder("s1").Us(100))
                     .Add(TaskBuilder("s2").Us(100))
                     .Add(TaskBuilder("head").Us(10))
                     .Add(TaskBuilder("tail").Us(1000).Inputs({"head"}));
  TimeUs hmpmd = 0, fifo = 0;
  Run("hmpmd", spec, {Device("d", 2)}, &hmpmd);
  Run("fifo", spec, {Device("d", 2)}, &fifo);
  EXPECT_EQ(hmpmd, 1010) << "head at 0, tail at 10";
  EXPECT_EQ(fifo, 1110) << "s1 and s2 first, head at 100, tail at 110";
}

TEST_F(HmpmdPolicyTest, ProducersOfOneGangGoTogetherWhateverTheListingOrder) {
  // Two all-reduce gangs of 2 (timed stand-ins: spin members), each fed by
  // 2 shards of equal rank; the spec lists the shards interleaved. Running one gang's shards first
  // lets that gang start while the other's shards compute.
  JobSpec spec =
      SpecBuilder()
          .Add(TaskBuilder("a0").Us(100))
          .Add(TaskBuilder("b0").Us(100))
          .Add(TaskBuilder("a1").Us(100))
          .Add(TaskBuilder("b1").Us(100))
          .Add(TaskBuilder("ar_a0").Vector().Us(80).Inputs({"a0"}).Collective("ga", "allreduce"))
          .Add(TaskBuilder("ar_a1").Vector().Us(80).Inputs({"a1"}).Collective("ga", "allreduce"))
          .Add(TaskBuilder("ar_b0").Vector().Us(80).Inputs({"b0"}).Collective("gb", "allreduce"))
          .Add(TaskBuilder("ar_b1").Vector().Us(80).Inputs({"b1"}).Collective("gb", "allreduce"));
  const std::vector<DeviceDesc> pool = {Device("d0", 1, 1), Device("d1", 1, 1)};
  TimeUs hmpmd = 0, fifo = 0;
  Run("hmpmd", spec, pool, &hmpmd);
  ASSERT_GE(ids_.size(), 2u);
  EXPECT_EQ(std::set<std::string>(ids_.begin(), ids_.begin() + 2),
            (std::set<std::string>{"a0", "a1"}));
  Run("fifo", spec, pool, &fifo);
  EXPECT_EQ(hmpmd, 280) << "ga runs 100-180 under b0 and b1, gb 200-280";
  EXPECT_EQ(fifo, 360) << "both gangs wait for the second pair of shards";
}

TEST_F(HmpmdPolicyTest, GangMembersShareTheLongestTail) {
  // m0 feeds a 1000 us task, m1 a 10 us one (spin members of one all-reduce
  // gang); the gang ends together, so
  // both members (and their producers) carry the longer tail.
  Scheduler s(SchedulerOptions{}, std::make_unique<HmpmdPolicy>());
  s.AddDevice(Device("d0", 1, 1));
  s.AddDevice(Device("d1", 1, 1));
  auto g = test::BuildGraph(
      SpecBuilder()
          .Add(TaskBuilder("p0").Us(10))
          .Add(TaskBuilder("p1").Us(10))
          .Add(TaskBuilder("m0").Vector().Us(5).Inputs({"p0"}).Collective("g", "allreduce"))
          .Add(TaskBuilder("m1").Vector().Us(5).Inputs({"p1"}).Collective("g", "allreduce"))
          .Add(TaskBuilder("long").Us(1000).Inputs({"m0"}))
          .Add(TaskBuilder("short").Us(10).Inputs({"m1"})));
  JobId id = *s.AddJob(g, 0);
  const JobRun& job = *s.job(id);
  EXPECT_DOUBLE_EQ(job.rank_us[2], job.rank_us[3]);
  EXPECT_DOUBLE_EQ(job.rank_us[0], job.rank_us[1]);
  EXPECT_DOUBLE_EQ(job.rank_us[0], 10 + job.est_us[2] + 1000);
}

TEST_F(HmpmdPolicyTest, ComputeGoesBesideRunningCommunication) {
  // The send runs on d1's vector core; the compute task, free to go
  // anywhere, takes d1's cube core so the two overlap there, not d0's.
  Scheduler s(SchedulerOptions{}, std::make_unique<HmpmdPolicy>());
  s.AddDevice(Device("d0", 1, 0));
  s.AddDevice(Device("d1", 1, 1));
  auto comm =
      test::BuildGraph(SpecBuilder().Add(TaskBuilder("send", "send").Vector().Bytes(8 << 20)));
  auto compute = test::BuildGraph(SpecBuilder().Add(TaskBuilder("x").Us(100)));
  ASSERT_TRUE(s.AddJob(comm, 0).ok());
  std::vector<Dispatch> out;
  s.Schedule(0, &out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].device, 1u);
  ASSERT_TRUE(s.AddJob(compute, 10).ok());
  out.clear();
  s.Schedule(10, &out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].device, 1u) << "beside the send, though d0's cube core is free too";
}

TEST_F(HmpmdPolicyTest, HigherRankAcrossJobsGoesFirst) {
  Scheduler s(SchedulerOptions{}, std::make_unique<HmpmdPolicy>());
  s.AddDevice(Device("one", 1));
  auto small = test::BuildGraph(SpecBuilder().Chain({"small"}, 5));
  auto big = test::BuildGraph(SpecBuilder().Chain({"big0", "big1"}, 500));
  JobId js = *s.AddJob(small, 0);
  JobId jb = *s.AddJob(big, 0);
  std::vector<Dispatch> out;
  s.Schedule(0, &out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].job, jb);
  EXPECT_NE(js, jb);
}

}  // namespace
}  // namespace hmpmd
