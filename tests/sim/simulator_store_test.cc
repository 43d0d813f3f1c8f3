// The simulator's device memory (sim/simulator.cc, Simulator::End and
// LoadStateUs): the pool spec's memory_mb caps each device's store as a
// worker's --memory-mb does. Outputs that fit no store fail the job naming
// the sizes, as the worker's store fails the task; outputs that fit only
// apart are placed apart. Sub-model state parts share that memory: they
// are loaded where their tasks run, at the link's cost, and evicted least
// recently used first to make room.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "hmpmd/sim/simulator.h"
#include "sim_run.h"
#include "test_builders.h"

namespace hmpmd {
namespace {

using test::SimRun;
using test::Simulate;
using test::SpecBuilder;
using test::TaskBuilder;

// `n` devices of one cube core each, with a store of `memory_mb`.
PoolSpec CubeOnly(uint32_t n, uint64_t memory_mb) {
  PoolSpec p = MakePoolSpec(n);
  p.cores = {1, 0};
  p.memory_mb = memory_mb;
  return p;
}

// A `scale` of n floats stores 4n bytes.
TaskBuilder Scale(std::string id, int64_t n) {
  return TaskBuilder(std::move(id), "scale").Arg("n", n).Arg("factor", 2.0);
}

// QA 05: a 4 MB output on devices with a 1 MiB store. `hmpmd run
// --memory-mb 1` fails it; the simulation said "succeeded".
TEST(SimulatorStore, OutputsNoStoreHoldsFailTheJobNamingTheSizes) {
  SpecBuilder b;
  b.Add(Scale("x", 1'000'000));
  b.Add(TaskBuilder("y", "send").Inputs({"x"}).Bytes(4e6));
  const JobSpec spec = b.Build();
  for (const std::string& policy : PolicyNames()) {
    SimRun r = Simulate(spec, policy, CubeOnly(2, 1));
    ASSERT_TRUE(r.status.ok()) << policy << ": " << r.status.message();
    EXPECT_EQ(r.state, JobState::kFailed) << policy;
    EXPECT_NE(r.error.find("task 'x' failed: object store: outputs of job 1 run 0 need 4000000 "
                           "bytes; 0 of the 1048576 allowed (the pool's memory_mb)"),
              std::string::npos)
        << policy << ": " << r.error;
    // The same job on stores that hold it runs.
    EXPECT_EQ(Simulate(spec, policy, CubeOnly(2, 8)).state, JobState::kSucceeded) << policy;
  }
}

// Two 600 KB outputs do not fit one 1 MiB store together. `a` stays held
// for `d`; `c` would follow its input `b` onto `a`'s device, and goes to the
// other device, whose store has room. `d` adds them where it reads `a` for
// the last time, which frees it.
TEST(SimulatorStore, OutputsThatFitOnlyApartArePlacedApart) {
  SpecBuilder b;
  b.Add(Scale("a", 150'000));
  b.Add(TaskBuilder("b", "spin").Us(10).Inputs({"a"}));
  b.Add(Scale("c", 150'000).Inputs({"b"}));
  b.Add(TaskBuilder("d", "add").Inputs({"a", "c"}));
  const JobSpec spec = b.Build();
  SimRun r = Simulate(spec, "hmpmd", CubeOnly(2, 1));
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  ASSERT_EQ(r.state, JobState::kSucceeded) << r.error;
  EXPECT_NE(r.runs[2].output_device, r.runs[0].output_device) << "c beside a's 600 KB";
  EXPECT_EQ(r.runs[2].output_bytes, 600'000u);
  EXPECT_EQ(r.runs[3].output_bytes, 600'000u);
}

// A 100 us spin of sub-model `sm`.
TaskBuilder StateSpin(std::string id, std::string sm, std::initializer_list<std::string> in = {}) {
  return TaskBuilder(std::move(id), "spin").Us(100).Submodel(std::move(sm)).Inputs(in);
}

// Every kind may hold state: a pipeline stage's part is loaded onto the
// device that runs it, once, costing the part's bytes over the link.
TEST(SimulatorStore, AStagesStatePartIsLoadedOnceWhereItRunsAtTheLinksCost) {
  SpecBuilder b;
  b.Submodel("llm0", SubmodelKind::kPipelineStage);
  b.Add(StateSpin("a", "llm0").Arg("shard", int64_t{0}));
  b.Add(StateSpin("b", "llm0", {"a"}).Arg("shard", int64_t{0}));
  b.Add(StateSpin("c", "llm0", {"b"}).Arg("shard", int64_t{1}));
  JobSpec spec = b.Build();
  spec.submodels[0].state_bytes = 2e9;
  spec.submodels[0].state_shards = 2;
  const PoolSpec pool = CubeOnly(1, 0);
  SimRun r = Simulate(spec, "fifo", pool);
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.state, JobState::kSucceeded) << r.error;
  EXPECT_EQ(r.loads, 2u) << "part 0 once for a and b, part 1 for c";
  const LinkSpec& link = pool.links[1];  // one node
  EXPECT_DOUBLE_EQ(r.load_us, 2 * std::round(link.latency_us + 1e9 / link.bytes_per_us))
      << "in whole us, as the simulator times a load";
  SimRun free = Simulate(spec, "fifo", pool, /*charge=*/false);
  EXPECT_EQ(free.loads, 0u);
  EXPECT_LT(free.metrics.makespan_s, r.metrics.makespan_s);
}

// Two experts' states that do not fit one device together take turns: the
// least recently used is evicted and loaded again when needed.
TEST(SimulatorStore, StatesThatDoNotFitTogetherAreEvictedAndLoadedAgain) {
  SpecBuilder b;
  b.Submodel("e0", SubmodelKind::kExpert).Submodel("e1", SubmodelKind::kExpert);
  b.Add(StateSpin("a", "e0"));
  b.Add(StateSpin("b", "e1", {"a"}));
  b.Add(StateSpin("c", "e0", {"b"}));
  JobSpec spec = b.Build();
  spec.submodels[0].state_bytes = 600'000;
  spec.submodels[1].state_bytes = 600'000;
  SimRun tight = Simulate(spec, "fifo", CubeOnly(1, 1));  // 1 MiB holds one
  ASSERT_TRUE(tight.status.ok()) << tight.status.message();
  EXPECT_EQ(tight.state, JobState::kSucceeded) << tight.error;
  EXPECT_EQ(tight.loads, 3u) << "e0, e1 in its place, e0 again";
  SimRun roomy = Simulate(spec, "fifo", CubeOnly(1, 2));
  EXPECT_EQ(roomy.loads, 2u) << "2 MiB hold both";
  // fifo prefetches nothing, so every load is exposed. The bound counts
  // only what residency makes unavoidable: the first part's load before
  // the chain starts (a prefetch could hide e1's under a, on the load
  // lane), not the third load this memory forced.
  const double load = TransferUs(600'000, CubeOnly(1, 1).links[1]);
  EXPECT_NEAR(tight.metrics.makespan_s, (300 + 3 * load) / 1e6, 3e-6);
  EXPECT_NEAR(tight.metrics.lower_bound_s, (300 + load) / 1e6, 3e-6);
  // spmd-1f1b prefetches the parts of the tasks its plan pins (by shard):
  // with room for both, e1's load hides under a and the schedule reaches
  // the bound.
  for (TaskSpec& t : spec.tasks) t.args.push_back({"shard", int64_t{0}});
  SimRun ahead = Simulate(spec, "spmd-1f1b", CubeOnly(1, 2));
  EXPECT_EQ(ahead.loads, 2u);
  EXPECT_NEAR(ahead.metrics.lower_bound_s, ahead.metrics.makespan_s, 3e-6) << "no load exposed";
}

// Outputs and resident state share the device's memory: outputs that fit
// only without the state their task ran with fail, naming both.
TEST(SimulatorStore, OutputsThatDoNotFitBesideTheirTasksStateFailNamingIt) {
  SpecBuilder b;
  b.Submodel("enc", SubmodelKind::kEncoder);
  b.Add(Scale("x", 100'000).Submodel("enc"));  // 400,000 bytes of outputs
  b.Add(TaskBuilder("y", "send").Inputs({"x"}).Bytes(4e5));
  JobSpec spec = b.Build();
  spec.submodels[0].state_bytes = 700'000;
  SimRun r = Simulate(spec, "fifo", CubeOnly(1, 1));
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.state, JobState::kFailed);
  EXPECT_NE(r.error.find("outputs of job 1 run 0 need 400000 bytes; 700000 of the 1048576 "
                         "allowed (the pool's memory_mb) are in use on device"),
            std::string::npos)
      << r.error;
  EXPECT_NE(r.error.find("700000 of them its sub-model's state"), std::string::npos) << r.error;
  spec.submodels[0].state_bytes = 600'000;
  EXPECT_EQ(Simulate(spec, "fifo", CubeOnly(1, 1)).state, JobState::kSucceeded);
}

// A state part that cannot fit beside the outputs its device holds, even
// with every other part evicted, fails its task at once, naming the
// figures, instead of running past the memory.
TEST(SimulatorStore, AStatePartThatCannotFitFailsItsTaskNamingTheFigures) {
  SpecBuilder b;
  b.Submodel("enc", SubmodelKind::kEncoder);
  b.Add(Scale("x", 200'000));  // 800,000 bytes held until y reads them
  b.Add(StateSpin("s", "enc"));
  b.Add(TaskBuilder("y", "send").Inputs({"x", "s"}).Bytes(8e5));
  JobSpec spec = b.Build();
  spec.submodels[0].state_bytes = 600'000;
  SimRun r = Simulate(spec, "fifo", CubeOnly(1, 1));
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.state, JobState::kFailed);
  EXPECT_NE(r.error.find("task 's' failed: state of sub-model 'enc' on device"), std::string::npos)
      << r.error;
  EXPECT_NE(r.error.find("600000 bytes of state do not fit: 800000 bytes of outputs held, "
                         "1048576 of memory (memory_mb)"),
            std::string::npos)
      << r.error;
  EXPECT_EQ(r.loads, 0u);
}

}  // namespace
}  // namespace hmpmd
