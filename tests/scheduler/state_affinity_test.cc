// Tests for StateAffinity (scheduler/state_affinity.{h,cc}): under hmpmd
// the elastic stateful sub-models of a known DAG float, each run going
// where its state is unless another device starts it sooner by more than
// the load, over no more devices than the sub-model can use at once.
#include "hmpmd/scheduler/state_affinity.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "hmpmd/scheduler/hmpmd_policy.h"
#include "hmpmd/scheduler/scheduler.h"
#include "sim_run.h"
#include "test_builders.h"

namespace hmpmd {
namespace {

using test::Device;
using test::IndexOf;
using test::SimRun;
using test::Simulate;
using test::SpecBuilder;
using test::TaskBuilder;
using test::VirtualLoop;

constexpr double kUs = 2.5e8;  // cube flops per us (PoolSpec's default)

TaskBuilder Gemm(std::string id, std::string submodel, double us) {
  return std::move(
      TaskBuilder(std::move(id), "gemm").Submodel(std::move(submodel)).Flops(us * kUs));
}

// Devices the runs of `submodel` ran on.
std::set<DeviceId> DevicesOf(const JobSpec& spec, const SimRun& r, const std::string& submodel) {
  std::set<DeviceId> out;
  for (size_t i = 0; i < spec.tasks.size(); ++i) {
    if (spec.tasks[i].submodel == submodel) out.insert(r.device[i]);
  }
  return out;
}

// Two learner chains of six runs; run k of a chain also waits for a
// generic run, so a chain's next run often finds its device busy with
// generic work. The learner's state still goes to two devices only (its
// width), loaded twice: its runs wait for a holder. (Its old elastic set
// of four spread it over all four.)
TEST(StateAffinity, TheStateSpreadsToNoMoreDevicesThanRunsThatCanRunAtOnce) {
  SpecBuilder b;
  b.Submodel("learner", SubmodelKind::kLearner, 4).Submodel("free");
  auto id = [](const char* p, int c, int k) {
    return p + std::to_string(c) + "_" + std::to_string(k);
  };
  for (int c = 0; c < 2; ++c) {
    for (int k = 0; k < 6; ++k) {
      b.Add(Gemm(id("g", c, k), "free", 1500));
      TaskBuilder t = Gemm(id("l", c, k), "learner", 1000);
      if (k > 0) {
        t.Inputs({id("l", c, k - 1), id("g", c, k)});
      } else {
        t.Inputs({id("g", c, k)});
      }
      b.Add(t);
    }
  }
  JobSpec spec = b;
  spec.submodels[0].state_bytes = 1e6;
  SimRun r = Simulate(spec, "hmpmd", MakePoolSpec(4));
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  ASSERT_EQ(r.state, JobState::kSucceeded);
  EXPECT_EQ(DevicesOf(spec, r, "learner").size(), 2u);
  EXPECT_EQ(r.loads, 2u);
}

// a0 then a1 and a2 side by side on two devices, one core each: a2 does
// not wait for a0's device (queues hold one run), whatever the state's
// size, while the spread is below its width (2): waiting there would
// leave the sub-model on the devices it started on.
TEST(StateAffinity, AFreeDeviceTakesARunWhileTheSpreadIsBelowItsWidth) {
  for (double bytes : {1e6, 64e6}) {
    JobSpec spec = SpecBuilder()
                       .Submodel("actor", SubmodelKind::kActor, 1)
                       .Add(Gemm("a0", "actor", 1000))
                       .Add(Gemm("a1", "actor", 1000).Inputs({"a0"}))
                       .Add(Gemm("a2", "actor", 1000).Inputs({"a0"}));
    spec.submodels[0].state_bytes = bytes;
    SimRun r = Simulate(spec, "hmpmd", MakePoolSpec(2));
    ASSERT_TRUE(r.status.ok()) << r.status.message();
    EXPECT_EQ(DevicesOf(spec, r, "actor").size(), 2u) << bytes;
    EXPECT_EQ(r.loads, 2u) << bytes;
  }
}

// A pinned sub-model keeps its set under hmpmd: its one device runs all.
TEST(StateAffinity, APinnedSubModelKeepsItsDeviceSet) {
  JobSpec spec = SpecBuilder()
                     .Submodel("actor", SubmodelKind::kActor, 1)
                     .Add(Gemm("a0", "actor", 1000))
                     .Add(Gemm("a1", "actor", 1000))
                     .Add(Gemm("a2", "actor", 1000));
  spec.submodels[0].elastic = false;
  SimRun r = Simulate(spec, "hmpmd", MakePoolSpec(4));
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(DevicesOf(spec, r, "actor").size(), 1u);
}

class StateAffinityUnitTest : public ::testing::Test {
 protected:
  void SetUp() override {
    JobSpec spec = SpecBuilder()
                       .Submodel("actor", SubmodelKind::kActor, 2)
                       .Submodel("reward", SubmodelKind::kReward, 2)
                       .Submodel("free")
                       .Add(Gemm("a0", "actor", 100))
                       .Add(Gemm("a1", "actor", 100).Inputs({"a0"}))
                       .Add(Gemm("r0", "reward", 100))
                       .Add(Gemm("r1", "reward", 100))
                       .Add(Gemm("g0", "free", 100));
    for (SubmodelSpec& sm : spec.submodels) sm.state_bytes = 28 << 20;
    spec.submodels[2].state_bytes = 0;
    job_.id = 7;
    job_.graph = test::BuildGraph(spec);
    job_.state_load_us = {100, 100, 0};
    job_.est_us.assign(5, 1000);  // work that pays for the loads (rule 3)
    for (int i = 0; i < 2; ++i) {
      DeviceDesc d = Device("d" + std::to_string(i), 1, 1);
      d.memory_mb = 40;  // one state at a time
      pool_.AddDevice(d);
    }
    affinity_.AddJob(job_);
  }
  TaskView View(const std::string& id) {
    const JobGraph& g = *job_.graph;
    const uint32_t i = static_cast<uint32_t>(IndexOf(g.spec(), id));
    TaskView v;
    v.job = job_.id;
    v.graph = &g;
    v.index = i;
    v.run = i;
    v.spec = &g.spec_task(i);
    v.task = &g.task(i);
    v.kernel_id = pool_.InternKernel(v.spec->kernel);
    return v;
  }

  JobRun job_;
  ResourcePool pool_;
  StateAffinity affinity_;
};

// Queues deeper than one run: a holder busy until 500 us still takes r1
// unless a free device starts it sooner by more than the state load.
TEST_F(StateAffinityUnitTest, AHolderWithRoomWinsUnlessAFreeDeviceSavesMoreThanTheLoad) {
  for (double load_us : {100.0, 1000.0}) {
    PoolOptions deep;
    deep.max_queue_per_core = 4;
    deep.lookahead_us = 1e9;
    ResourcePool pool(deep);
    pool.AddDevice(Device("d0", 1, 1));  // cores 0 cube, 1 vector
    pool.AddDevice(Device("d1", 1, 1));  // cores 2 cube, 3 vector
    job_.state_load_us = {load_us, load_us, 0};
    StateAffinity affinity;
    affinity.AddJob(job_);
    affinity.OnPlaced(View("r0"), 0, pool);
    pool.Assign(0, 500, 0);
    Placement p = affinity.Place(View("r1"), CoreKind::kCube, pool, 0);
    ASSERT_EQ(p.kind, Placement::Kind::kPlaced) << load_us;
    EXPECT_EQ(pool.core(p.core).device, load_us < 500 ? 1u : 0u) << load_us;
  }
}

TEST_F(StateAffinityUnitTest, WidthIsTheMostComputeRunsAtOneDepth) {
  EXPECT_EQ(affinity_.Width(7, 0), 1u) << "a0 -> a1 is a chain";
  EXPECT_EQ(affinity_.Width(7, 1), 2u) << "r0 and r1 can run at once";
  EXPECT_EQ(affinity_.Width(7, 2), 0u) << "a generic sub-model does not float here";
  EXPECT_FALSE(affinity_.Handles(View("g0")));
  EXPECT_TRUE(affinity_.Handles(View("a0")));
}

// x0, x1 and x2 share no path but sit at depths 0, 1 and 2 (behind short
// generic runs): by depth alone the width would be 1 and the three would
// queue on one device; they overlap in time, so it is 3.
TEST(StateAffinityWidth, RunsAtDifferentDepthsThatOverlapInTimeCount) {
  JobSpec spec = SpecBuilder()
                     .Submodel("x", SubmodelKind::kActor, 1)
                     .Submodel("free")
                     .Add(Gemm("g0", "free", 10))
                     .Add(Gemm("g1", "free", 10).Inputs({"g0"}))
                     .Add(Gemm("x0", "x", 1000))
                     .Add(Gemm("x1", "x", 1000).Inputs({"g0"}))
                     .Add(Gemm("x2", "x", 1000).Inputs({"g1"}));
  spec.submodels[0].state_bytes = 1e6;
  JobRun job;
  job.id = 1;
  job.graph = test::BuildGraph(spec);
  job.state_load_us = {40, 0};
  job.est_us = {10, 10, 1000, 1000, 1000};
  StateAffinity affinity;
  affinity.AddJob(job);
  EXPECT_EQ(affinity.Width(1, 0), 3u);
  SimRun r = Simulate(spec, "hmpmd", MakePoolSpec(4));
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(DevicesOf(spec, r, "x").size(), 3u);
}

// The same shape live, where the estimates are wrong: x0..x3 claim 100 us
// and take 1 ms, and the runs before them claim 100 us and take 1 us, so
// by depth and by the estimated schedule none overlaps (width 1). Runs
// ready or running at once raise the width, up to what their estimated
// work pays loads for (rule 3: 400 us of work, loads of 50 us): the
// four run side by side, not one after another on one device.
TEST(StateAffinityWidth, RunsInFlightAtOnceRaiseTheWidth) {
  SpecBuilder b;
  b.Submodel("x", SubmodelKind::kActor, 1).Submodel("free");
  b.Add(TaskBuilder("g0").Submodel("free").Us(100));
  b.Add(TaskBuilder("g1").Submodel("free").Us(100).Inputs({"g0"}));
  b.Add(TaskBuilder("g2").Submodel("free").Us(100).Inputs({"g1"}));
  b.Add(TaskBuilder("x0").Submodel("x").Us(100));
  b.Add(TaskBuilder("x1").Submodel("x").Us(100).Inputs({"g0"}));
  b.Add(TaskBuilder("x2").Submodel("x").Us(100).Inputs({"g1"}));
  b.Add(TaskBuilder("x3").Submodel("x").Us(100).Inputs({"g2"}));
  JobSpec spec = b;
  spec.submodels[0].state_bytes = 1e5;  // a 50 us load at the cost model's 2 GB/s
  auto policy = MakePolicy("hmpmd");
  ASSERT_TRUE(policy.ok());
  Scheduler s(SchedulerOptions{}, std::move(*policy));
  for (int i = 0; i < 6; ++i) s.AddDevice(Device("d" + std::to_string(i), 1, 1));
  auto graph = test::BuildGraph(spec);
  Result<JobId> job = s.AddJob(graph, 0);
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  VirtualLoop loop(&s, [&](JobId, uint32_t run) -> TimeUs {
    return graph->spec_task(run % graph->size()).submodel == "x" ? 1000 : 1;
  });
  loop.RunToIdle();
  ASSERT_EQ(s.job(*job)->state, JobState::kSucceeded);
  std::set<DeviceId> x;
  for (const VirtualLoop::Started& st : loop.log()) {
    if (graph->spec_task(st.d.run % graph->size()).submodel == "x") x.insert(st.d.device);
  }
  EXPECT_EQ(x.size(), 4u);
  EXPECT_LT(s.job(*job)->finished, 2000);
}

// Rule 3: four runs of 100 us that can all run at once spread over four
// devices while a load costs less than a run, and stay on one when a load
// costs more than all four together, unless the pool would be idle.
TEST(StateAffinityWidth, ASpreadIsCappedAtTheLoadsItsWorkPaysFor) {
  JobSpec spec = SpecBuilder()
                     .Submodel("e", SubmodelKind::kExpert)
                     .Add(Gemm("x0", "e", 100))
                     .Add(Gemm("x1", "e", 100))
                     .Add(Gemm("x2", "e", 100))
                     .Add(Gemm("x3", "e", 100));
  spec.submodels[0].state_bytes = 1e6;
  JobRun job;
  job.id = 1;
  job.graph = test::BuildGraph(spec);
  job.est_us = {100, 100, 100, 100};
  for (const auto& [load_us, width] : {std::pair{50.0, 4u}, {150.0, 2u}, {1000.0, 1u}}) {
    job.state_load_us = {load_us};
    StateAffinity affinity;
    affinity.AddJob(job);
    EXPECT_EQ(affinity.Width(1, 0), width) << load_us;
  }
  // Caps that leave devices of the pool idle grow in proportion: a load
  // there displaces no work. Never past the width (4 runs at once).
  job.state_load_us = {150};  // worth 2
  // On a pool its cap fills, a cap set by the load splits the pool by
  // work: the one part gets it all.
  for (const auto& [devices, width] : {std::pair{3u, 3u}, {8u, 4u}, {2u, 2u}, {1u, 1u}}) {
    StateAffinity affinity;
    affinity.AddJob(job, devices);
    EXPECT_EQ(affinity.Width(1, 0), width) << devices << " devices";
  }
}

// Caps set by their loads that fill the pool split it by work (rule 3):
// every part is prefetched at once (rule 5), so a large load no longer
// decides how few devices a part with much work gets. Where one part's
// cap is its width instead, the caps stay as the loads set them.
// Job 1: experts "a" and "b" of 1 MB state, with `a` and `b` independent
// runs of 100 us each; a's run i with arg shard i when `a_shards`.
JobRun TwoExperts(int a, int b, bool a_shards = false) {
  SpecBuilder sb;
  sb.Submodel("a", SubmodelKind::kExpert).Submodel("b", SubmodelKind::kExpert);
  for (int i = 0; i < a; ++i) {
    TaskBuilder t = Gemm("a" + std::to_string(i), "a", 100);
    if (a_shards) t.Arg("shard", int64_t{i});
    sb.Add(t);
  }
  for (int i = 0; i < b; ++i) sb.Add(Gemm("b" + std::to_string(i), "b", 100));
  JobSpec spec = sb.Build();
  spec.submodels[0].state_bytes = 1e6;
  spec.submodels[1].state_bytes = 1e6;
  JobRun job;
  job.id = 1;
  job.graph = test::BuildGraph(spec);
  job.est_us.assign(static_cast<size_t>(a + b), 100);
  return job;
}

TEST(StateAffinityWidth, CapsSetByLoadsThatFillThePoolSplitItByWork) {
  JobRun job = TwoExperts(6, 2);
  job.state_load_us = {150, 150};  // worth 4 of width 6, and 1 of width 2
  StateAffinity split;
  split.AddJob(job, 4);  // caps 4 + 1 fill 4 devices
  EXPECT_EQ(split.Width(1, 0), 3u) << "600 of 800 us of work";
  EXPECT_EQ(split.Width(1, 1), 1u);
  job.state_load_us = {150, 50};  // b's cap is its width (2), not its load
  StateAffinity kept;
  kept.AddJob(job, 4);
  EXPECT_EQ(kept.Width(1, 0), 4u);
  EXPECT_EQ(kept.Width(1, 1), 2u);
}

// The split by work fills the pool (state_split.h): rounded down in
// proportion, it left 1 of these 5 devices without state (multimodal on
// 384 devices: 32, 4 replicas of a stage short).
TEST(StateAffinityWidth, ASplitByWorkFillsThePool) {
  JobRun job = TwoExperts(5, 3);
  job.state_load_us = {150, 150};  // worth 3 of width 5, and 2 of width 3
  StateAffinity split;
  split.AddJob(job, 5);  // by work: 3.125 and 1.875 devices
  EXPECT_EQ(split.Width(1, 0), 3u);
  EXPECT_EQ(split.Width(1, 1), 2u) << "not 1.875 rounded down";
}

// Job 1 of `spec`, whose sub-model 0 holds 2 MB in 2 parts; every run
// estimated at `est_us`, a load at `load_us`.
JobRun TwoPartJob(JobSpec spec, double est_us, double load_us) {
  spec.submodels[0].state_bytes = 2e6;
  spec.submodels[0].state_shards = 2;
  JobRun job;
  job.id = 1;
  job.est_us.assign(spec.tasks.size(), est_us);
  job.graph = test::BuildGraph(std::move(spec));
  job.state_load_us = {load_us};
  return job;
}

// Devices 0 and 1 on node 0, 2 and 3 on node 1, a cube core each.
void AddTwoNodesOfTwo(ResourcePool* pool) {
  for (uint32_t d = 0; d < 4; ++d) {
    DeviceDesc desc = Device("d" + std::to_string(d), 1);
    desc.node = d / 2;
    pool->AddDevice(desc);
  }
}

// Caps set by loads that leave the pool idle are split by work too: a
// sub-model whose 8 shards run side by side (MoE attention on every
// device) gets all 8 devices, not the 6 that growing its cap of 2 in
// proportion gave (two rounds, worth 4). MoE at 64 devices: attention on
// 12 of 64 devices, 0.6583 s; split by work, 0.5346 s.
TEST(StateAffinityWidth, CapsSetByLoadsThatLeaveThePoolIdleAreSplitByWorkToo) {
  JobRun job = TwoExperts(8, 2, /*a_shards=*/true);
  job.state_load_us = {400, 200};  // worth 2 of width 8, and 1 of width 2
  StateAffinity affinity;
  affinity.AddJob(job, 10);
  EXPECT_EQ(affinity.Width(1, 0), 8u);
  EXPECT_EQ(affinity.Width(1, 1), 2u);
}

// A tensor-parallel group all-reduces over one replica's parts, so the
// prefetch at admission lays holders out replica by replica: parts 0 and 1
// of a replica on one node, not part 0 on every device of node 0.
TEST(StateAffinityWidth, AReplicasPartsArePrefetchedOntoOneNode) {
  SpecBuilder b;
  b.Submodel("s", SubmodelKind::kPipelineStage);
  for (int i = 0; i < 4; ++i) {
    b.Add(Gemm("p" + std::to_string(i), "s", 1000).Arg("shard", int64_t{i}));
  }
  const JobRun job = TwoPartJob(b.Build(), 1000, 10);
  ResourcePool pool{PoolOptions{}};
  AddTwoNodesOfTwo(&pool);
  StateAffinity affinity;
  affinity.AddJob(job, 4);
  affinity.PlaceInitial(job, pool);
  EXPECT_EQ(affinity.Holders(1, 0, 0), (std::vector<DeviceId>{0, 2}));
  EXPECT_EQ(affinity.Holders(1, 0, 1), (std::vector<DeviceId>{1, 3}));
}

// Rule 6: c0 went to node 0, so c1 (the other producer of their
// all-reduce) takes the part-1 holder on node 0, busy for 50 us, over the
// free one on node 1; busy past its own time (100 us), the free one wins.
// A member with two producers (r1 waiting for x1 too) is no shard's, so
// there the free holder wins.
TEST(StateAffinityWidth, AGangsProducersFollowTheFirstOntoItsNode) {
  struct Case {
    bool two_producers;
    int busy_us;
    uint32_t node;
  };
  for (const Case& c : {Case{false, 50, 0}, Case{false, 150, 1}, Case{true, 50, 1}}) {
    JobSpec spec = SpecBuilder()
                       .Submodel("s", SubmodelKind::kPipelineStage)
                       .Add(Gemm("c0", "s", 100).Arg("shard", int64_t{0}))
                       .Add(Gemm("c1", "s", 100).Arg("shard", int64_t{1}))
                       .Add(Gemm("x1", "s", 100).Arg("shard", int64_t{1}))
                       .Add(TaskBuilder("r0", "allreduce")
                                .Submodel("s")
                                .Vector()
                                .Inputs({"c0"})
                                .Collective("tp", "allreduce", 1e6))
                       .Add(TaskBuilder("r1", "allreduce")
                                .Submodel("s")
                                .Vector()
                                .Inputs({"c1"})
                                .Collective("tp", "allreduce", 1e6));
    if (c.two_producers) spec.tasks.back().inputs.push_back("x1");  // r1
    const JobRun job = TwoPartJob(spec, 100, 1);
    const int busy_us = c.busy_us;
    const uint32_t node = c.node;
    PoolOptions deep;  // a busy core may take a run behind its current one
    deep.max_queue_per_core = 4;
    deep.lookahead_us = 1e9;
    ResourcePool pool(deep);
    AddTwoNodesOfTwo(&pool);
    StateAffinity affinity;
    affinity.AddJob(job);
    auto view = [&](const std::string& id) {
      const JobGraph& g = *job.graph;
      TaskView v;
      v.job = 1;
      v.graph = &g;
      v.index = v.run = static_cast<uint32_t>(IndexOf(g.spec(), id));
      v.spec = &g.spec_task(v.index);
      v.task = &g.task(v.index);
      v.kernel_id = pool.InternKernel(v.spec->kernel);
      v.est_us = 100;
      return v;
    };
    affinity.OnPlaced(view("x1"), 1, pool);  // part 1 on node 0 ...
    affinity.OnPlaced(view("x1"), 3, pool);  // ... and on node 1
    affinity.OnPlaced(view("c0"), 0, pool);
    pool.Assign(1, busy_us, 0);  // device 1's cube core
    Placement p = affinity.Place(view("c1"), CoreKind::kCube, pool, 0);
    ASSERT_EQ(p.kind, Placement::Kind::kPlaced) << busy_us;
    EXPECT_EQ(pool.device(pool.core(p.core).device).desc.node, node) << busy_us;
  }
}

// Parts of a sharded state are held apart: a device holding part 0 is no
// holder of part 1.
TEST(StateAffinityWidth, EachPartOfAShardedStateHasItsOwnHolders) {
  JobSpec spec = SpecBuilder()
                     .Submodel("s", SubmodelKind::kPipelineStage)
                     .Add(Gemm("p0", "s", 1000).Arg("shard", int64_t{0}))
                     .Add(Gemm("p1", "s", 1000).Arg("shard", int64_t{1}));
  spec.submodels[0].state_bytes = 2e6;
  spec.submodels[0].state_shards = 2;
  JobRun job;
  job.id = 1;
  job.graph = test::BuildGraph(spec);
  job.est_us = {1000, 1000};
  job.state_load_us = {10};
  ResourcePool pool{PoolOptions{}};
  pool.AddDevice(Device("d0", 1));
  StateAffinity affinity;
  affinity.AddJob(job);
  TaskView v;
  v.job = 1;
  v.graph = job.graph.get();
  v.index = v.run = 0;
  v.spec = &job.graph->spec_task(0);
  v.task = &job.graph->task(0);
  affinity.OnPlaced(v, 0, pool);
  EXPECT_EQ(affinity.Holders(1, 0, 0), std::vector<DeviceId>{0});
  EXPECT_TRUE(affinity.Holders(1, 0, 1).empty());
  EXPECT_TRUE(affinity.Holders(1, 0, 2).empty()) << "no part 2";
}

TEST_F(StateAffinityUnitTest, AFullSpreadWaitsForItsHolderAndForgetsItWhenItDies) {
  affinity_.OnPlaced(View("a0"), 0, pool_);
  EXPECT_EQ(affinity_.Holders(7, 0), std::vector<DeviceId>{0});
  EXPECT_FALSE(affinity_.Allows(View("a1"), 1)) << "width 1, held on device 0";
  EXPECT_TRUE(affinity_.Allows(View("a1"), 0));
  pool_.Assign(0, 500, 0);  // device 0's cube core is busy
  Placement p = affinity_.Place(View("a1"), CoreKind::kCube, pool_, 0);
  EXPECT_EQ(p.kind, Placement::Kind::kRetryLater) << "device 1 is free but holds no state";
  pool_.RemoveDevice(0);
  affinity_.OnDeviceRemoved(0);
  EXPECT_TRUE(affinity_.Holders(7, 0).empty());
  p = affinity_.Place(View("a1"), CoreKind::kCube, pool_, 0);
  ASSERT_EQ(p.kind, Placement::Kind::kPlaced);
  EXPECT_EQ(pool_.core(p.core).device, 1u);
}

TEST_F(StateAffinityUnitTest, ADeviceWhoseMemoryIsFullDropsTheLeastRecentlyUsedState) {
  affinity_.OnPlaced(View("a0"), 0, pool_);
  affinity_.OnPlaced(View("r0"), 0, pool_);  // 56 MB > 40: the actor's goes
  EXPECT_TRUE(affinity_.Holders(7, 0).empty());
  EXPECT_EQ(affinity_.Holders(7, 1), std::vector<DeviceId>{0});
  affinity_.RemoveJob(7);
  EXPECT_TRUE(affinity_.Holders(7, 1).empty());
  EXPECT_FALSE(affinity_.Handles(View("r0")));
}

// Live: the one holder of a chain's state dies after its first run; the
// chain goes on on the other device.
TEST(StateAffinityLive, AChainWhoseHolderDiesMovesToAnotherDevice) {
  JobSpec spec = SpecBuilder()
                     .Submodel("actor", SubmodelKind::kActor, 1)
                     .Add(TaskBuilder("a0").Submodel("actor").Us(100))
                     .Add(TaskBuilder("a1").Submodel("actor").Us(100).Inputs({"a0"}))
                     .Add(TaskBuilder("a2").Submodel("actor").Us(100).Inputs({"a1"}));
  auto policy = MakePolicy("hmpmd");
  ASSERT_TRUE(policy.ok());
  Scheduler s(SchedulerOptions{}, std::move(*policy));
  s.AddDevice(Device("d0", 1, 1));
  s.AddDevice(Device("d1", 1, 1));
  Result<JobId> job = s.AddJob(test::BuildGraph(spec), 0);
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  VirtualLoop loop(&s);
  ASSERT_EQ(loop.Schedule(), 1u);
  ASSERT_TRUE(loop.DeliverNext());
  const DeviceId first = loop.log()[0].d.device;
  s.RemoveDevice(first, loop.now());
  loop.DropPendingOn(first);
  loop.RunToIdle();
  EXPECT_EQ(s.job(*job)->state, JobState::kSucceeded);
  ASSERT_EQ(loop.log().size(), 3u);
  EXPECT_NE(loop.log()[1].d.device, first);
  EXPECT_EQ(loop.log()[2].d.device, loop.log()[1].d.device) << "the state is now there";
}

}  // namespace
}  // namespace hmpmd
