// The simulator's object stores (sim/simulator.cc, Simulator::End):
// the pool spec's memory_mb caps each device's store as a worker's
// --memory-mb does. Outputs that fit no store fail the job naming the sizes,
// as the worker's store fails the task; outputs that fit only apart are
// placed apart. Before, the simulator parsed memory_mb and ignored it.
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace hmpmd
