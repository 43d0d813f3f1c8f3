// spmd-zb-h1 against the ZB-H1 paper (Qi et al., ICLR 2024, section 2.1):
// its order keeps 1F1B's activation memory, its bubble on uniform stages
// is (p-1)(T_F + T_B - T_W) per stage, and it obeys residency as the other
// static baselines do.
#include "hmpmd/scheduler/zb_h1_policy.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>

#include "hmpmd/sim/simulator.h"
#include "hmpmd/sim/workloads.h"
#include "sim_run.h"
#include "test_builders.h"

namespace hmpmd {
namespace {

using test::SimRun;
using test::Simulate;

PoolSpec ComputeOnly(uint32_t devices) {
  PoolSpec p = MakePoolSpec(devices);
  p.cores = {1, 0};
  return p;
}

std::string Render(const std::vector<PipeOp>& order) {
  std::string s;
  for (const PipeOp& op : order) {
    s += op.pass == PipePass::kForward ? "F" : op.pass == PipePass::kBackward ? "B" : "W";
    s += std::to_string(op.mb) + " ";
  }
  return s;
}

TEST(SpmdZbH1, OrderDefersEachStagesWeightGradientsByItsIndex) {
  // 4 stages, 6 micro-batches. Stage 0: 1F1B's forwards and backwards,
  // each W right after its B; the last stage holds 3 W back to the end.
  EXPECT_EQ(Render(ZbH1Order(0, 4, 6)), "F0 F1 F2 F3 B0 W0 F4 B1 W1 F5 B2 W2 B3 W3 B4 W4 B5 W5 ");
  EXPECT_EQ(Render(ZbH1Order(3, 4, 6)), "F0 B0 F1 B1 F2 B2 F3 B3 W0 F4 B4 W1 F5 B5 W2 W3 W4 W5 ");
  // 1F1B, for comparison: W just before its B.
  EXPECT_EQ(Render(OneFOneBOrder(3, 4, 3)), "F0 W0 B0 F1 W1 B1 F2 W2 B2 ");
}

TEST(SpmdZbH1, EveryPassOnceAndNoMoreInFlightThanOneFOneBsFirstStage) {
  for (uint32_t p : {1u, 2u, 4u, 8u}) {
    for (uint32_t m : {1u, 3u, 8u, 33u}) {
      for (uint32_t i = 0; i < p; ++i) {
        const std::vector<PipeOp> order = ZbH1Order(i, p, m);
        ASSERT_EQ(order.size(), 3u * m);
        std::set<std::pair<uint32_t, PipePass>> seen;
        int in_flight = 0, peak = 0;   // forwards whose W has not run
        std::map<uint32_t, int> done;  // per micro-batch: passes run, in F, B, W order
        for (const PipeOp& op : order) {
          ASSERT_LT(op.mb, m);
          EXPECT_TRUE(seen.insert({op.mb, op.pass}).second) << "p=" << p << " m=" << m;
          EXPECT_EQ(done[op.mb]++, static_cast<int>(op.pass)) << "F, then B, then W";
          in_flight += op.pass == PipePass::kForward ? 1 : op.pass == PipePass::kWeight ? -1 : 0;
          peak = std::max(peak, in_flight);
        }
        EXPECT_LE(peak, static_cast<int>(std::min(p, m))) << "p=" << p << " m=" << m << " i=" << i;
      }
    }
  }
}

// The published bubble: with m >= p a stage idles (p-1)(T_F + T_B - T_W)
// per step, so the step is m(T_F + T_B + T_W) + (p-1)(T_F + T_B - T_W);
// with equal passes the bubble ratio is (p-1)/(3m+p-1).
TEST(SpmdZbH1, ReproducesThePublishedBubbleOnUniformStages) {
  for (auto [p, m] : {std::pair{4u, 8u}, {4u, 16u}, {8u, 32u}, {2u, 5u}, {4u, 4u}}) {
    for (auto [f, b, w] : {std::tuple{1000.0, 1000.0, 1000.0}, {1000.0, 1500.0, 700.0}}) {
      SimRun r = Simulate(PipelineWorkload(p, m, f, b, w), "spmd-zb-h1", ComputeOnly(p));
      ASSERT_TRUE(r.status.ok()) << r.status.message();
      ASSERT_EQ(r.state, JobState::kSucceeded) << r.error;
      const double idle = (p - 1) * (f + b - w), step = m * (f + b + w) + idle;
      EXPECT_NEAR(r.metrics.makespan_s, step * 1e-6, 2e-6) << "p=" << p << " m=" << m;
      EXPECT_NEAR(r.metrics.bubble_ratio, idle / step, 1e-3) << "p=" << p << " m=" << m;
      if (f == b && b == w) {
        EXPECT_NEAR(r.metrics.bubble_ratio, (p - 1.0) / (3.0 * m + p - 1.0), 1e-3);
      }
      // 1F1B on the same tasks: (p-1)(T_F + T_B + T_W) idle.
      SimRun one = Simulate(PipelineWorkload(p, m, f, b, w), "spmd-1f1b", ComputeOnly(p));
      ASSERT_EQ(one.state, JobState::kSucceeded) << one.error;
      EXPECT_NEAR(one.metrics.makespan_s, (m + p - 1) * (f + b + w) * 1e-6, 2e-6);
    }
  }
}

// Without W tasks (a spec whose backward is one task) the order is 1F1B's.
TEST(SpmdZbH1, ABackwardWithoutWeightTasksRunsAsOneFOneB) {
  const JobSpec spec = PipelineWorkload(4, 8, 1000, 2000);
  SimRun zb = Simulate(spec, "spmd-zb-h1", ComputeOnly(4));
  SimRun one = Simulate(spec, "spmd-1f1b", ComputeOnly(4));
  ASSERT_EQ(zb.state, JobState::kSucceeded) << zb.error;
  EXPECT_EQ(zb.metrics.makespan_s, one.metrics.makespan_s);
}

// Residency: each stage's state part is loaded on the one device that runs
// it, before any of its runs there, under both pipeline schedules; where a
// device holds one stage's state only, no stage runs elsewhere.
TEST(SpmdZbH1, BothSchedulesRunEachStageOnlyWhereItsStateIs) {
  const uint32_t p = 4, m = 8;
  JobSpec spec = PipelineWorkload(p, m, 1000, 1000, 1000);
  for (SubmodelSpec& sm : spec.submodels) sm.state_bytes = 3e9;  // 2.8 GiB
  PoolSpec pool = ComputeOnly(p);
  pool.memory_mb = 4096;  // one stage's state a device
  for (const std::string policy : {"spmd-1f1b", "spmd-zb-h1"}) {
    SimOptions o;
    o.policy = policy;
    o.pool = pool;
    auto sim = Simulator::Create(o);
    ASSERT_TRUE(sim.ok());
    auto id = (*sim)->Submit(test::BuildGraph(spec));
    ASSERT_TRUE(id.ok());
    ASSERT_TRUE((*sim)->Run().ok());
    const JobRun& job = *(*sim)->scheduler().job(*id);
    ASSERT_EQ(job.state, JobState::kSucceeded) << policy << ": " << job.error;
    const ResourcePool& rp = (*sim)->scheduler().pool();
    const StateLoadTimes* loads = (*sim)->LoadsOf(*id);
    ASSERT_NE(loads, nullptr);
    EXPECT_EQ((*sim)->state_loads(), p) << policy << ": one load per stage";
    std::map<uint32_t, DeviceId> stage_device;
    for (uint32_t i = 0; i < job.runs.size(); ++i) {
      const uint32_t sm = job.graph->task(i).submodel;
      const DeviceId d = rp.core(job.runs[i].core).device;
      auto [it, fresh] = stage_device.emplace(sm, d);
      EXPECT_EQ(it->second, d) << policy << ": " << spec.tasks[i].id;
      // A run's record starts when it was dispatched; its kernel starts
      // once the load it waited for (run_us, part of its time) ended.
      const double kernel_start = static_cast<double>(job.runs[i].start) + loads->run_us[i];
      bool loaded = false;
      for (const auto& slice : loads->slices) {
        loaded |= slice.device == d && slice.submodel == sm &&
                  static_cast<double>(slice.end) <= kernel_start + 1e-6;
      }
      EXPECT_TRUE(loaded) << policy << ": " << spec.tasks[i].id << " ran before its state";
    }
    const ScheduleMetrics metrics = ComputeMetrics(job, rp, loads);
    EXPECT_GE(metrics.makespan_s, metrics.lower_bound_s * (1 - 1e-9)) << policy;
  }
}

}  // namespace
}  // namespace hmpmd
