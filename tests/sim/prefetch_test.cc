// State prefetch (sim/simulator.cc, Simulator::Prefetch): a policy's
// intents load a part on the device's load lane before its task runs, so
// the load hides under the compute before it; a task waits only for what
// compute did not hide; a prefetch never over-commits memory.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "hmpmd/sim/simulator.h"
#include "hmpmd/sim/workloads.h"
#include "sim_run.h"
#include "test_builders.h"

namespace hmpmd {
namespace {

using test::SimRun;
using test::Simulate;
using test::SpecBuilder;
using test::TaskBuilder;

PoolSpec OneDevice(uint64_t memory_mb) {
  PoolSpec p = MakePoolSpec(1);
  p.cores = {1, 0};
  p.memory_mb = memory_mb;
  return p;
}

TaskBuilder Spin(std::string id, std::string sm, double us,
                 std::initializer_list<std::string> in = {}) {
  return TaskBuilder(std::move(id), "spin")
      .Us(us)
      .Submodel(std::move(sm))
      .Arg("shard", int64_t{0})
      .Inputs(in);
}

// The load of `bytes` on a one-node pool, rounded as the simulator times it.
double LoadUs(double bytes) { return std::round(TransferUs(bytes, OneDevice(0).links[1])); }

// A stateless 100 ms task, then a task of an encoder whose 2 GB part loads
// in 36 ms: both policies that foresee the placement load it under the
// first task, so nothing waits and the step takes what it takes without
// state.
TEST(Prefetch, ALoadShorterThanTheComputeBeforeItIsHiddenWhole) {
  SpecBuilder b;
  b.Submodel("pre").Submodel("enc", SubmodelKind::kEncoder);
  b.Add(Spin("a", "pre", 100'000));
  b.Add(Spin("b", "enc", 100, {"a"}));
  JobSpec spec = b.Build();
  spec.submodels[1].state_bytes = 2e9;
  const double load = LoadUs(2e9);
  ASSERT_LT(load, 100'000);
  for (const std::string policy : {"hmpmd", "spmd-1f1b"}) {
    SimRun r = Simulate(spec, policy, OneDevice(0));
    ASSERT_TRUE(r.status.ok()) << policy << ": " << r.status.message();
    ASSERT_EQ(r.state, JobState::kSucceeded) << policy << ": " << r.error;
    EXPECT_EQ(r.loads, 1u) << policy;
    EXPECT_EQ(r.prefetches, 1u) << policy;
    EXPECT_DOUBLE_EQ(r.load_us, load) << policy;
    EXPECT_EQ(r.exposed_us, 0) << policy;
    EXPECT_DOUBLE_EQ(r.hidden_us / r.load_us, 1.0) << policy;
    EXPECT_NEAR(r.metrics.makespan_s, 100'100 / 1e6, 1e-9) << policy << ": as without state";
  }
  // fifo cannot tell which device of a set will run a part: on demand.
  SimRun fifo = Simulate(spec, "fifo", OneDevice(0));
  EXPECT_EQ(fifo.prefetches, 0u);
  EXPECT_DOUBLE_EQ(fifo.exposed_us, load);
  EXPECT_EQ(fifo.hidden_us, 0);
}

// The first task of a stateful sub-model has no compute before it: its
// load is exposed whole, prefetched or not.
TEST(Prefetch, TheFirstTasksLoadCannotBeHidden) {
  SpecBuilder b;
  b.Submodel("enc", SubmodelKind::kEncoder);
  b.Add(Spin("b", "enc", 100));
  JobSpec spec = b.Build();
  spec.submodels[0].state_bytes = 2e9;
  const double load = LoadUs(2e9);
  for (const std::string& policy : PolicyNames()) {
    SimRun r = Simulate(spec, policy, OneDevice(0));
    ASSERT_EQ(r.state, JobState::kSucceeded) << policy << ": " << r.error;
    EXPECT_EQ(r.loads, 1u) << policy;
    EXPECT_DOUBLE_EQ(r.exposed_us, load) << policy;
    EXPECT_EQ(r.hidden_us, 0) << policy;
    EXPECT_NEAR(r.metrics.makespan_s, (load + 100) / 1e6, 1e-9) << policy;
    EXPECT_LE(r.metrics.lower_bound_s, r.metrics.makespan_s + 1e-9) << policy;
  }
}

// Two experts' 600 KB parts on a 1 MiB device: the second prefetch would
// have to evict the first before its task ran, so it is not started and
// its task loads on demand; memory is never over-committed. With 2 MiB
// both prefetches start and the second hides under the first task.
TEST(Prefetch, APrefetchThatDoesNotFitIsNotStarted) {
  SpecBuilder b;
  b.Submodel("e0", SubmodelKind::kExpert).Submodel("e1", SubmodelKind::kExpert);
  b.Add(Spin("a", "e0", 1000));
  b.Add(Spin("b", "e1", 100, {"a"}));
  b.Add(Spin("c", "e0", 100, {"b"}));
  JobSpec spec = b.Build();
  spec.submodels[0].state_bytes = 600'000;
  spec.submodels[1].state_bytes = 600'000;
  const double load = LoadUs(600'000);
  SimRun tight = Simulate(spec, "spmd-1f1b", OneDevice(1));
  ASSERT_EQ(tight.state, JobState::kSucceeded) << tight.error;
  EXPECT_EQ(tight.prefetches, 1u) << "e1's would evict e0 before a ran";
  EXPECT_EQ(tight.loads, 3u) << "e0 ahead, e1 on demand, e0 again";
  EXPECT_DOUBLE_EQ(tight.exposed_us, 3 * load);
  SimRun roomy = Simulate(spec, "spmd-1f1b", OneDevice(2));
  ASSERT_EQ(roomy.state, JobState::kSucceeded) << roomy.error;
  EXPECT_EQ(roomy.prefetches, 2u);
  EXPECT_EQ(roomy.loads, 2u);
  EXPECT_DOUBLE_EQ(roomy.exposed_us, load) << "only a's, the first";
  EXPECT_DOUBLE_EQ(roomy.hidden_us, load) << "e1's under a";
  EXPECT_NEAR(roomy.metrics.makespan_s, (load + 1200) / 1e6, 1e-9);
}

// Same seed, same figures, loads and their split included.
TEST(Prefetch, FiguresAreDeterministic) {
  auto spec = MakeWorkload("multimodal", 64, 1);
  ASSERT_TRUE(spec.ok());
  for (const std::string& policy : PolicyNames()) {
    SimRun a = Simulate(*spec, policy, MakePoolSpec(64));
    SimRun b = Simulate(*spec, policy, MakePoolSpec(64));
    ASSERT_EQ(a.state, JobState::kSucceeded) << policy << ": " << a.error;
    EXPECT_EQ(a.metrics.makespan_s, b.metrics.makespan_s) << policy;
    EXPECT_EQ(a.loads, b.loads) << policy;
    EXPECT_EQ(a.prefetches, b.prefetches) << policy;
    EXPECT_EQ(a.exposed_us, b.exposed_us) << policy;
    EXPECT_EQ(a.hidden_us, b.hidden_us) << policy;
  }
}

}  // namespace
}  // namespace hmpmd
