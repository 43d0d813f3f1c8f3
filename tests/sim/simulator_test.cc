// The simulator against theory: 1F1B's analytic bubble, the lower bound no
// policy may beat, gangs that start together, the built-in workloads.
#include "hmpmd/sim/simulator.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "hmpmd/scheduler/spmd_policy.h"
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
  ScheduleMetrics metrics;
  std::vector<TaskRecord> runs;
};

Outcome Simulate(const JobSpec& spec, const std::string& policy, PoolSpec pool) {
  SimOptions o;
  o.policy = policy;
  o.pool = pool;
  auto sim = Simulator::Create(o);
  EXPECT_TRUE(sim.ok()) << sim.status().message();
  auto graph = BuildGraph(spec);
  auto id = (*sim)->Submit(graph);
  EXPECT_TRUE(id.ok()) << id.status().message();
  Outcome out;
  out.status = (*sim)->Run();
  const JobRun& job = *(*sim)->scheduler().job(*id);
  out.state = job.state;
  out.metrics = ComputeMetrics(job, (*sim)->scheduler().pool());
  out.runs = job.runs;
  return out;
}

PoolSpec ComputeOnly(uint32_t devices) {
  PoolSpec p = MakePoolSpec(devices);
  p.cores = {1, 0};
  return p;
}

TEST(OneFOneBSlot, WarmUpSteadyCoolDown) {
  // Stage 0 of 4 with 6 micro-batches: F0 F1 F2 F3 B0 F4 B1 F5 B2 B3 B4 B5.
  EXPECT_EQ(OneFOneBSlot(0, 4, 6, 0, true), 0);
  EXPECT_EQ(OneFOneBSlot(0, 4, 6, 2, true), 2);
  EXPECT_EQ(OneFOneBSlot(0, 4, 6, 3, true), 3);
  EXPECT_EQ(OneFOneBSlot(0, 4, 6, 0, false), 4);
  EXPECT_EQ(OneFOneBSlot(0, 4, 6, 4, true), 5);
  EXPECT_EQ(OneFOneBSlot(0, 4, 6, 5, true), 7);
  EXPECT_EQ(OneFOneBSlot(0, 4, 6, 2, false), 8);
  EXPECT_EQ(OneFOneBSlot(0, 4, 6, 5, false), 11);
  // The last stage alternates from the start.
  EXPECT_EQ(OneFOneBSlot(3, 4, 6, 0, true), 0);
  EXPECT_EQ(OneFOneBSlot(3, 4, 6, 0, false), 1);
  EXPECT_EQ(OneFOneBSlot(3, 4, 6, 1, true), 2);
}

// With uniform stages 1F1B idles (p-1)/(m+p-1) of the device time, with
// the backward as one task or as B and W (its W just before its B: the
// input gradient leaves the stage when the whole backward has run).
TEST(Simulator, SpmdReproducesAnalyticBubble) {
  for (auto [p, m] : {std::pair{4u, 8u}, {4u, 16u}, {8u, 32u}, {2u, 5u}}) {
    for (const JobSpec& spec :
         {PipelineWorkload(p, m, 1000, 2000), PipelineWorkload(p, m, 1000, 1000, 1000)}) {
      Outcome o = Simulate(spec, "spmd-1f1b", ComputeOnly(p));
      ASSERT_TRUE(o.status.ok()) << o.status.message();
      ASSERT_EQ(o.state, JobState::kSucceeded);
      ASSERT_EQ(o.metrics.tasks, spec.tasks.size());
      double analytic = (p - 1.0) / (m + p - 1.0);
      EXPECT_NEAR(o.metrics.bubble_ratio, analytic, 0.01)
          << "p=" << p << " m=" << m << " tasks=" << spec.tasks.size();
      EXPECT_NEAR(o.metrics.makespan_s, (m + p - 1) * 3000e-6, 1e-6)
          << "p=" << p << " m=" << m << " tasks=" << spec.tasks.size();
    }
  }
}

// Steps (arg `step`) reuse micro-batch numbers; each step is its own 1F1B
// schedule, after the step before. Step 1 waits for step 0's last
// backward (its optimizer), so two steps take twice one step's time.
TEST(Simulator, SpmdRunsEachTrainingStepAsItsOwnPipeline) {
  const uint32_t p = 4, m = 6;
  JobSpec spec = PipelineWorkload(p, m, 1000, 2000);
  const size_t one_step = spec.tasks.size();
  const std::string last = "b0_" + std::to_string(m - 1);
  for (size_t i = 0; i < one_step; ++i) {
    TaskSpec t = spec.tasks[i];
    t.id = "s1_" + t.id;
    for (std::string& in : t.inputs) in = "s1_" + in;
    if (t.inputs.empty()) t.inputs = {last};
    t.args.push_back({"step", int64_t{1}});
    spec.tasks[i].args.push_back({"step", int64_t{0}});
    spec.tasks.push_back(std::move(t));
  }
  Outcome o = Simulate(spec, "spmd-1f1b", ComputeOnly(p));
  ASSERT_TRUE(o.status.ok()) << o.status.message();
  ASSERT_EQ(o.state, JobState::kSucceeded);
  EXPECT_NEAR(o.metrics.makespan_s, 2 * (m + p - 1) * 3000e-6, 1e-6);
}

TEST(Simulator, SpmdRunsOneFOneBOnOneDeviceStagesWithoutShards) {
  // A stage with one device ran its passes in GPipe order (every forward,
  // then every backward) unless each task also named a shard.
  for (bool shards : {true, false}) {
    JobSpec spec = PipelineWorkload(2, 3, 100, 200);
    if (!shards) {
      for (TaskSpec& t : spec.tasks) {
        std::erase_if(t.args, [](const Arg& a) { return a.name == "shard"; });
      }
    }
    Outcome o = Simulate(spec, "spmd-1f1b", ComputeOnly(2));
    ASSERT_EQ(o.state, JobState::kSucceeded) << o.status.message();
    // Per micro-batch j: f(0,j), f(1,j), b(1,j), b(0,j). The last stage
    // alternates: b(1,0) before f(1,1).
    EXPECT_LT(o.runs[2].start, o.runs[5].start) << (shards ? "with" : "without") << " shards";
  }
}

TEST(Simulator, SpmdKeepsEachStageOnItsDevice) {
  Outcome o = Simulate(PipelineWorkload(4, 6, 100, 200), "spmd-1f1b", ComputeOnly(4));
  ASSERT_EQ(o.state, JobState::kSucceeded);
  JobSpec spec = PipelineWorkload(4, 6, 100, 200);
  std::vector<std::set<CoreId>> cores(4);
  for (size_t i = 0; i < spec.tasks.size(); ++i) {
    cores[spec.tasks[i].submodel.back() - '0'].insert(o.runs[i].core);
  }
  std::set<CoreId> all;
  for (const auto& c : cores) {
    EXPECT_EQ(c.size(), 1u);
    all.insert(c.begin(), c.end());
  }
  EXPECT_EQ(all.size(), 4u);
}

TEST(Simulator, NoPolicyBeatsTheLowerBound) {
  for (const char* workload : {"multimodal", "moe", "rl", "pipeline"}) {
    auto spec = MakeWorkload(workload, 32, 7);
    ASSERT_TRUE(spec.ok()) << spec.status().message();
    for (const std::string& policy : PolicyNames()) {
      Outcome o = Simulate(*spec, policy, MakePoolSpec(32));
      ASSERT_TRUE(o.status.ok()) << workload << "/" << policy << ": " << o.status.message();
      ASSERT_EQ(o.state, JobState::kSucceeded) << workload << "/" << policy;
      EXPECT_EQ(o.metrics.tasks, spec->tasks.size());
      EXPECT_GT(o.metrics.lower_bound_s, 0);
      EXPECT_GE(o.metrics.makespan_s, o.metrics.lower_bound_s * (1 - 1e-9))
          << workload << "/" << policy;
      EXPECT_LE(o.metrics.bubble_ratio, 1.0);
      EXPECT_LE(o.metrics.masking_ratio, 1.0);
    }
  }
}

TEST(Simulator, HmpmdOverlapsCommunicationSpmdDoesNot) {
  auto spec = MakeWorkload("multimodal", 32);
  ASSERT_TRUE(spec.ok());
  Outcome h = Simulate(*spec, "hmpmd", MakePoolSpec(32));
  Outcome s = Simulate(*spec, "spmd-1f1b", MakePoolSpec(32));
  ASSERT_EQ(h.state, JobState::kSucceeded);
  ASSERT_EQ(s.state, JobState::kSucceeded);
  EXPECT_EQ(s.metrics.masking_ratio, 0);  // communication on the compute core
  EXPECT_GT(h.metrics.masking_ratio, 0.5);
  EXPECT_LT(h.metrics.makespan_s, s.metrics.makespan_s);
}

TEST(Simulator, CommunicationRunsOnTheDeviceThatProducedItsData) {
  // c0 takes device 0's cube core, c1 device 1's; c1's send is ready first
  // and belongs on device 1's vector core (its data is there), not on the
  // lowest-numbered free one.
  JobSpec spec = SpecBuilder()
                     .Add(TaskBuilder("c0").Us(100))
                     .Add(TaskBuilder("c1").Us(50))
                     .Add(TaskBuilder("s0", "send").Vector().Bytes(1 << 20).Inputs({"c0"}))
                     .Add(TaskBuilder("s1", "send").Vector().Bytes(1 << 20).Inputs({"c1"}));
  {
    const std::string policy = "hmpmd";
    SimOptions o;
    o.policy = policy;
    o.pool = MakePoolSpec(2);
    auto sim = Simulator::Create(o);
    ASSERT_TRUE(sim.ok());
    auto id = (*sim)->Submit(BuildGraph(spec));
    ASSERT_TRUE(id.ok());
    ASSERT_TRUE((*sim)->Run().ok());
    const JobRun& job = *(*sim)->scheduler().job(*id);
    const ResourcePool& pool = (*sim)->scheduler().pool();
    for (int i = 0; i < 2; ++i) {
      EXPECT_EQ(pool.core(job.runs[2 + i].core).device, pool.core(job.runs[i].core).device)
          << "s" << i;
      EXPECT_EQ(pool.core(job.runs[2 + i].core).kind, CoreKind::kVector);
    }
    EXPECT_NE(pool.core(job.runs[0].core).device, pool.core(job.runs[1].core).device);
  }
}

TEST(Simulator, GangMembersStartAndEndTogether) {
  SpecBuilder b;
  b.Add(TaskBuilder("a", "spin").Us(100));
  b.Add(TaskBuilder("b", "spin").Us(300));
  b.Add(TaskBuilder("c", "spin").Us(500));
  for (const char* in : {"a", "b", "c"}) {
    b.Add(TaskBuilder(std::string("ar_") + in, "allreduce")
              .Vector()
              .Inputs({in})
              .Collective("g", "allreduce", 1 << 20));
  }
  JobSpec spec = b.Build();
  for (const std::string& policy : PolicyNames()) {
    Outcome o = Simulate(spec, policy, MakePoolSpec(3));
    ASSERT_EQ(o.state, JobState::kSucceeded) << policy;
    std::set<CoreId> cores;
    for (int i = 3; i < 6; ++i) {
      EXPECT_EQ(o.runs[i].start, o.runs[3].start) << policy;
      EXPECT_EQ(o.runs[i].end, o.runs[3].end) << policy;
      cores.insert(o.runs[i].core);
    }
    EXPECT_GE(o.runs[3].start, 500) << policy;  // waits for the slowest input
    EXPECT_EQ(cores.size(), 3u) << policy;
    // Ring all-reduce of 1 MiB among 3 devices of one node.
    PoolSpec pool = MakePoolSpec(3);
    double want = CollectiveUs("allreduce", 1 << 20, 3, pool.links[1]);
    EXPECT_NEAR(static_cast<double>(o.runs[3].end - o.runs[3].start), want, 1.0) << policy;
  }
}

// Members of a gang that run compute kernels (`spin` tasks with a
// `collective` field) take their own kernel's time, as on workers, which run
// them as plain spins that move nothing: the gang ends after its longest
// member. Before, it was timed as a bare 16-byte all-reduce (5 us for
// 100 ms spins). A gang of collective kernels still takes its transfer.
TEST(Simulator, GangOfComputeKernelsTakesItsMembersOwnTime) {
  const PoolSpec pool = MakePoolSpec(2);
  SpecBuilder b;
  b.Add(TaskBuilder("a", "spin").Us(100000).Collective("g", "allreduce", 16));
  b.Add(TaskBuilder("b", "spin").Us(60000).Collective("g", "allreduce", 16));
  b.Add(
      TaskBuilder("r0", "allreduce").Vector().Inputs({"a"}).Collective("r", "allreduce", 1 << 20));
  b.Add(
      TaskBuilder("r1", "allreduce").Vector().Inputs({"b"}).Collective("r", "allreduce", 1 << 20));
  const JobSpec spec = b.Build();
  const double ring = CollectiveUs("allreduce", 1 << 20, 2, pool.links[1]);
  for (const std::string& policy : PolicyNames()) {
    Outcome o = Simulate(spec, policy, pool);
    ASSERT_EQ(o.state, JobState::kSucceeded) << policy;
    for (int i : {0, 1}) EXPECT_EQ(o.runs[i].end - o.runs[i].start, 100000) << policy;
    for (int i : {2, 3}) {
      EXPECT_NEAR(static_cast<double>(o.runs[i].end - o.runs[i].start), ring, 1.0) << policy;
    }
    EXPECT_NEAR(o.metrics.makespan_s * 1e6, 100000 + ring, 1.0) << policy;
  }
}

TEST(Simulator, GangLargerThanThePoolIsRefusedAtSubmission) {
  SpecBuilder b;
  for (int i = 0; i < 3; ++i) {
    b.Add(TaskBuilder("ar" + std::to_string(i), "allreduce")
              .Vector()
              .Collective("g", "allreduce", 64));
  }
  SimOptions o;
  o.pool = MakePoolSpec(2);
  auto sim = Simulator::Create(o);
  ASSERT_TRUE(sim.ok());
  auto id = (*sim)->Submit(BuildGraph(b.Build()));
  ASSERT_FALSE(id.ok());
  EXPECT_NE(id.status().message().find("group 'g' has 3 members, which need distinct devices; "
                                       "devices that run 'allreduce' on a vector core: 2"),
            std::string::npos)
      << id.status().message();
}

TEST(Simulator, DeterministicAcrossRuns) {
  auto spec = MakeWorkload("moe", 64, 3);
  ASSERT_TRUE(spec.ok());
  Outcome a = Simulate(*spec, "hmpmd", MakePoolSpec(64));
  Outcome b = Simulate(*spec, "hmpmd", MakePoolSpec(64));
  ASSERT_EQ(a.runs.size(), b.runs.size());
  for (size_t i = 0; i < a.runs.size(); ++i) {
    EXPECT_EQ(a.runs[i].core, b.runs[i].core);
    EXPECT_EQ(a.runs[i].start, b.runs[i].start);
  }
}

TEST(Simulator, TaskTimesFollowThePool) {
  PoolSpec pool = MakePoolSpec(1);
  pool.flops_per_us = {1e6, 1e5};
  SpecBuilder b;
  b.Add(TaskBuilder("g", "gemm").Flops(2e9));                                // 2000 us on cube
  b.Add(TaskBuilder("s", "spin").Us(70).Inputs({"g"}));                      // its own us
  b.Add(TaskBuilder("x", "send").Vector().Bytes(5.6e4 * 10).Inputs({"s"}));  // node tier
  Outcome o = Simulate(b.Build(), "fifo", pool);
  ASSERT_EQ(o.state, JobState::kSucceeded);
  EXPECT_EQ(o.runs[0].end - o.runs[0].start, 2000);
  EXPECT_EQ(o.runs[1].end - o.runs[1].start, 70);
  EXPECT_EQ(o.runs[2].end - o.runs[2].start,
            static_cast<TimeUs>(std::lround(pool.links[1].latency_us + 10)));
}

TEST(Simulator, ATaskLongerThanTheTimeLimitFailsTheRunNamingIt) {
  // 1e40 flops: ~1e32 us, far past any TimeUs; the run must fail, not wrap.
  SpecBuilder b;
  b.Add(TaskBuilder("short", "gemm").Flops(2e9));
  b.Add(TaskBuilder("huge", "gemm").Flops(1e40).Inputs({"short"}));
  for (const std::string& policy : PolicyNames()) {
    Outcome o = Simulate(b.Build(), policy, MakePoolSpec(2));
    EXPECT_EQ(o.status.code(), StatusCode::kResourceExhausted) << policy;
    EXPECT_NE(o.status.message().find("'huge'"), std::string::npos) << o.status.message();
  }
}

TEST(Simulator, ATaskThatEndsPastTheTimeLimitLateInAChainIsNotSaidToRunPastItAlone) {
  // Each spin is exactly the limit (86,400 s): the second starts at the
  // limit and ends past it; it used to be reported as running past it
  // "alone".
  SpecBuilder b;
  b.Add(TaskBuilder("h0", "spin").Us(86400e6));
  b.Add(TaskBuilder("h1", "spin").Us(86400e6).Inputs({"h0"}));
  Outcome o = Simulate(b.Build(), "fifo", MakePoolSpec(1));
  EXPECT_EQ(o.status.code(), StatusCode::kResourceExhausted);
  const std::string& m = o.status.message();
  EXPECT_NE(m.find("task 'h1' starts at 86400.000000 s and takes 86400 s, ending past it"),
            std::string::npos)
      << m;
  EXPECT_EQ(m.find("alone"), std::string::npos) << m;
}

TEST(Simulator, RejectsBadPoolAndPolicy) {
  SimOptions o;
  o.pool.nodes = 0;
  auto sim = Simulator::Create(o);
  ASSERT_FALSE(sim.ok());
  EXPECT_NE(sim.status().message().find("nodes"), std::string::npos);
  SimOptions p;
  p.policy = "nope";
  auto sim2 = Simulator::Create(p);
  ASSERT_FALSE(sim2.ok());
  EXPECT_NE(sim2.status().message().find("nope"), std::string::npos);
}

TEST(CollectiveUs, RingFormulas) {
  LinkSpec l{1000, 10};
  EXPECT_EQ(CollectiveUs("allreduce", 1e6, 1, l), 0);
  EXPECT_NEAR(CollectiveUs("allreduce", 8000, 4, l), 2 * 3 * 10 + 2 * 0.75 * 8, 1e-9);
  EXPECT_NEAR(CollectiveUs("allgather", 8000, 4, l), 3 * 10 + 0.75 * 8, 1e-9);
  EXPECT_NEAR(CollectiveUs("alltoall", 8000, 4, l), 3 * 10 + 0.75 * 8, 1e-9);
  EXPECT_NEAR(CollectiveUs("broadcast", 8000, 4, l), 2 * 10 + 8, 1e-9);
  EXPECT_NEAR(TransferUs(8000, l), 18, 1e-9);
}

// Live, the cost model follows what it sees: the estimate converges on the
// observed duration and later decisions use it.
TEST(CostModelCalibration, EstimateConvergesOnObservedDurations) {
  CostModel m;
  TaskSpec t = TaskBuilder("k", "mykernel").Flops(1e6);
  double prior = m.Estimate(t, CoreKind::kCube);
  const double truth = 4 * prior + 100;
  double last_error = std::abs(prior - truth);
  for (int i = 0; i < 40; ++i) {
    m.Observe(t, truth * (i % 2 == 0 ? 1.1 : 0.9));  // noisy around the truth
    double err = std::abs(m.Estimate(t, CoreKind::kCube) - truth);
    if (i >= 1) {
      EXPECT_LE(err, 0.11 * truth);
    }
    last_error = err;
  }
  EXPECT_LT(last_error, 0.11 * truth);
  EXPECT_EQ(m.Samples(t), 40u);
}

}  // namespace
}  // namespace hmpmd

namespace hmpmd {
namespace {

// Two jobs of equal work, weights 3 and 1: while both run, the heavier gets
// about three quarters of the cores.
TEST(Simulator, HmpmdSharesThePoolByJobWeight) {
  auto make = [](const std::string& name, uint32_t weight) {
    SpecBuilder b;
    b.Name(name);
    for (int i = 0; i < 400; ++i) b.Add(TaskBuilder(name + std::to_string(i), "spin").Us(100));
    JobSpec spec = b.Build();
    spec.weight = weight;
    return BuildGraph(spec);
  };
  SimOptions o;
  o.pool = MakePoolSpec(4);
  o.pool.cores = {1, 0};
  auto sim = Simulator::Create(o);
  ASSERT_TRUE(sim.ok());
  auto heavy = (*sim)->Submit(make("h", 3));
  auto light = (*sim)->Submit(make("l", 1));
  ASSERT_TRUE(heavy.ok() && light.ok());
  ASSERT_TRUE((*sim)->Run().ok());
  const JobRun& h = *(*sim)->scheduler().job(*heavy);
  const JobRun& l = *(*sim)->scheduler().job(*light);
  TimeUs both_until = std::min(h.finished, l.finished);
  auto served = [&](const JobRun& j) {
    uint64_t n = 0;
    for (const TaskRecord& r : j.runs) n += r.start < both_until ? 1 : 0;
    return static_cast<double>(n);
  };
  double ratio = served(h) / served(l);
  EXPECT_GT(ratio, 2.5) << ratio;
  EXPECT_LT(ratio, 3.5) << ratio;
}

}  // namespace
}  // namespace hmpmd
