// The async RL workload's DAG (staleness bound, sequential learner updates,
// bucketed all-reduce) and the simulator's state-load cost: charged once
// per device a stateful sub-model's task lands on without its state, never
// on a device that holds it, and no policy beats the lower bound with it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <set>
#include <string>

#include "hmpmd/sim/simulator.h"
#include "hmpmd/sim/workloads.h"
#include "sim_run.h"
#include "test_builders.h"

namespace hmpmd {
namespace {

using test::BuildGraph;
using test::SimRun;
using test::Simulate;
using test::SpecBuilder;
using test::TaskBuilder;

// Iteration of an id like "roll3_17" or "bc2_0" with the given prefix, or -1.
int Iteration(const std::string& id, const std::string& prefix) {
  if (id.rfind(prefix, 0) != 0 || id.size() == prefix.size()) return -1;
  if (!std::isdigit(static_cast<unsigned char>(id[prefix.size()]))) return -1;
  return std::stoi(id.substr(prefix.size()));
}

TEST(RlWorkload, NoRolloutUsesWeightsOlderThanTheStalenessBound) {
  for (uint32_t s : {0u, 1u, 2u}) {
    RlOptions o;
    o.devices = 64;
    o.iterations = 5;
    o.staleness = s;
    JobSpec spec = RlWorkload(o);
    uint32_t rollouts = 0;
    for (const TaskSpec& t : spec.tasks) {
      int it = Iteration(t.id, "roll");
      if (it < 0) continue;
      ++rollouts;
      if (it < static_cast<int>(s) + 1) {
        EXPECT_TRUE(t.inputs.empty()) << t.id << " (staleness " << s << ") has initial weights";
        continue;
      }
      ASSERT_EQ(t.inputs.size(), 1u) << t.id;
      EXPECT_EQ(Iteration(t.inputs[0], "bc"), it - static_cast<int>(s) - 1)
          << t.id << " (staleness " << s << ") uses " << t.inputs[0];
    }
    EXPECT_EQ(rollouts, o.iterations * RlShapeFor(o).rollouts);
  }
}

TEST(RlWorkload, LearnerUpdatesAreSequentialAndBucketsAllReduceAsAGang) {
  RlOptions o;
  o.devices = 64;
  o.iterations = 3;
  JobSpec spec = RlWorkload(o);
  const RlShape sh = RlShapeFor(o);
  std::map<std::string, std::set<std::string>> gangs;
  for (const TaskSpec& t : spec.tasks) {
    // The first bucket of a micro-batch of update t > 0 starts from the
    // weights of update t - 1 on its shard.
    int it = Iteration(t.id, "ln");
    if (it > 0 && t.id.back() == '0') {
      EXPECT_TRUE(std::any_of(t.inputs.begin(), t.inputs.end(), [&](const std::string& in) {
        return Iteration(in, "opt") == it - 1;
      })) << t.id;
    }
    if (t.collective && t.collective->op == "allreduce") gangs[t.collective->group].insert(t.id);
  }
  EXPECT_EQ(gangs.size(), o.iterations * o.micro_batches * o.buckets);
  for (const auto& [group, members] : gangs) EXPECT_EQ(members.size(), sh.learners) << group;
  auto graph = JobGraph::Build(spec);
  ASSERT_TRUE(graph.ok()) << graph.status().message();
}

TEST(RlWorkload, EveryRolloutStartsAfterTheBroadcastItNeedsUnderEveryPolicy) {
  RlOptions o;
  o.devices = 32;
  o.iterations = 4;
  JobSpec spec = RlWorkload(o);
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < spec.tasks.size(); ++i) index[spec.tasks[i].id] = i;
  for (const std::string& policy : PolicyNames()) {
    SimRun r = Simulate(spec, policy, MakePoolSpec(32));
    ASSERT_TRUE(r.status.ok()) << policy << ": " << r.status.message();
    ASSERT_EQ(r.state, JobState::kSucceeded) << policy;
    for (size_t i = 0; i < spec.tasks.size(); ++i) {
      for (const std::string& in : spec.tasks[i].inputs) {
        EXPECT_GE(r.runs[i].start, r.runs[index[in]].end) << policy << ": " << spec.tasks[i].id;
      }
    }
    EXPECT_GE(r.metrics.makespan_s, r.metrics.lower_bound_s * (1 - 1e-9)) << policy;
  }
}

constexpr double kState = 28e6;  // 500 us over the default node tier, + 2 us latency

JobSpec ThreeHops() {
  // Actor, reward, actor again on the one device the pinned sets share.
  JobSpec spec =
      SpecBuilder()
          .Submodel("actor", SubmodelKind::kActor, 1)
          .Submodel("reward", SubmodelKind::kReward, 1)
          .Submodel("free", SubmodelKind::kGeneric, 0)
          .Add(TaskBuilder("a0", "gemm").Submodel("actor").Flops(2.5e8 * 100))
          .Add(TaskBuilder("a1", "gemm").Submodel("actor").Flops(2.5e8 * 100).Inputs({"a0"}))
          .Add(TaskBuilder("r0", "gemm").Submodel("reward").Flops(2.5e8 * 100).Inputs({"a1"}))
          .Add(TaskBuilder("a2", "gemm").Submodel("actor").Flops(2.5e8 * 100).Inputs({"r0"}))
          .Add(TaskBuilder("g0", "gemm").Submodel("free").Flops(2.5e8 * 100).Inputs({"a2"}))
          .Add(TaskBuilder("s0", "send").Submodel("actor").Vector().Bytes(1e6).Inputs({"a2"}));
  spec.submodels[0].state_bytes = kState;
  spec.submodels[1].state_bytes = kState;  // "free" is stateless
  return spec;
}

TEST(SimulatorState, LoadIsChargedOnceOnADeviceWithoutTheStateAndNotAgain) {
  PoolSpec pool = MakePoolSpec(1);  // one device: every task shares it
  pool.nodes = 1;
  const double load = TransferUs(kState, pool.links[1]);
  SimRun r = Simulate(ThreeHops(), "hmpmd", pool);
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  auto dur = [&](size_t i) { return static_cast<double>(r.runs[i].end - r.runs[i].start); };
  EXPECT_NEAR(dur(0), 100 + load, 1) << "a0 loads the actor's state";
  EXPECT_NEAR(dur(1), 100, 1) << "a1: the device holds it";
  EXPECT_NEAR(dur(2), 100 + load, 1) << "r0 loads the reward model's";
  EXPECT_NEAR(dur(3), 100, 1) << "a2: the actor's state is kept beside it";
  EXPECT_NEAR(dur(4), 100, 1) << "a sub-model without state_bytes loads nothing";
  EXPECT_LT(dur(5), load) << "communication loads nothing";
  EXPECT_EQ(r.loads, 2u);
  EXPECT_NEAR(r.load_us, 2 * load, 2);
  EXPECT_EQ(r.loads_on[0], 2u);

  // A memory that holds one state: the reward model's evicts the actor's,
  // which a2 then loads again.
  PoolSpec small = pool;
  small.memory_mb = 40;  // kState is 28 MB
  SimRun one = Simulate(ThreeHops(), "hmpmd", small);
  ASSERT_TRUE(one.status.ok()) << one.status.message();
  EXPECT_NEAR(static_cast<double>(one.runs[3].end - one.runs[3].start), 100 + load, 1)
      << "a2: the actor's state was evicted";
  EXPECT_EQ(one.loads, 3u);

  SimRun free = Simulate(ThreeHops(), "hmpmd", pool, /*charge=*/false);
  EXPECT_EQ(free.loads, 0u);
  EXPECT_NEAR(static_cast<double>(free.runs[0].end - free.runs[0].start), 100, 1);
}

// On the RL workload: per device, a load for each stateful sub-model its
// compute runs belong to (the device's memory holds them all), no more.
TEST(SimulatorState, LoadsFollowDeviceMovesOnTheRlWorkload) {
  RlOptions o;
  o.devices = 32;
  JobSpec spec = RlWorkload(o);
  for (const std::string& policy : PolicyNames()) {
    SimRun r = Simulate(spec, policy, MakePoolSpec(32));
    ASSERT_TRUE(r.status.ok()) << policy << ": " << r.status.message();
    std::map<DeviceId, std::set<std::string>> held;
    for (size_t i = 0; i < spec.tasks.size(); ++i) {
      const TaskSpec& t = spec.tasks[i];
      if (t.collective || t.core != CoreKind::kCube || t.submodel == "data") continue;
      held[r.device[i]].insert(t.submodel);
    }
    uint64_t total = 0;
    for (const auto& [d, states] : held) {
      EXPECT_EQ(r.loads_on[d], states.size()) << policy << " device " << d;
      total += states.size();
    }
    EXPECT_EQ(r.loads, total) << policy;
    if (policy == "spmd-1f1b") {
      EXPECT_EQ(r.loads, held.size()) << "fixed sets: one load per device";
    }
  }
}

TEST(SimulatorState, NoPolicyBeatsTheBoundWithLoadsChargedOrFree) {
  RlOptions o;
  o.devices = 64;
  o.staleness = 2;
  o.iterations = 5;
  JobSpec spec = RlWorkload(o);
  for (bool charge : {true, false}) {
    for (const std::string& policy : PolicyNames()) {
      SimRun r = Simulate(spec, policy, MakePoolSpec(64), charge);
      ASSERT_TRUE(r.status.ok()) << policy << ": " << r.status.message();
      EXPECT_GE(r.metrics.makespan_s, r.metrics.lower_bound_s * (1 - 1e-9)) << policy;
      if (!charge) {
        EXPECT_EQ(r.loads, 0u);
      }
    }
  }
}

}  // namespace
}  // namespace hmpmd
