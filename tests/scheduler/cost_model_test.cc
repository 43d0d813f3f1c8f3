// Tests for CostModel: priors from hints and EWMA calibration from samples
// (scheduler/cost_model.{h,cc}).
#include "hmpmd/scheduler/cost_model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "test_builders.h"

namespace hmpmd {
namespace {

using test::TaskBuilder;

class CostModelTest : public ::testing::Test {
 protected:
  CostModelOptions opts_;  // defaults: cube 2e4 flops/us, vector 5e3, 2000 B/us, 30 us
  CostModel Model() const { return CostModel(opts_); }
};

TEST_F(CostModelTest, SpinAndSleepCostTheirUsArgument) {
  CostModel m = Model();
  EXPECT_DOUBLE_EQ(m.Prior(TaskBuilder("a", "spin").Us(250), CoreKind::kCube), 250);
  EXPECT_DOUBLE_EQ(m.Prior(TaskBuilder("a", "sleep").Us(1500), CoreKind::kVector), 1500);
  EXPECT_DOUBLE_EQ(m.Prior(TaskBuilder("a", "spin").Arg("us", 12.5), CoreKind::kCube), 12.5);
  // Flops hints do not override the explicit duration.
  EXPECT_DOUBLE_EQ(m.Prior(TaskBuilder("a", "spin").Us(40).Flops(1e12), CoreKind::kCube), 40);
}

TEST_F(CostModelTest, SpinWithoutDurationCostsAtLeastOneMicrosecond) {
  CostModel m = Model();
  EXPECT_DOUBLE_EQ(m.Prior(TaskBuilder("a", "spin"), CoreKind::kCube), 1);
  EXPECT_DOUBLE_EQ(m.Prior(TaskBuilder("a", "sleep").Us(-5), CoreKind::kCube), 1);
}

TEST_F(CostModelTest, GemmCostsTwoMnkFlopsOverTheCoreThroughput) {
  CostModel m = Model();
  TaskSpec g =
      TaskBuilder("g", "gemm").Arg("m", int64_t{100}).Arg("n", int64_t{100}).Arg("k", int64_t{100});
  // 2 * 1e6 flops at 2e4 flops/us on a cube core, 5e3 on a vector core.
  EXPECT_DOUBLE_EQ(m.Prior(g, CoreKind::kCube), 100);
  EXPECT_DOUBLE_EQ(m.Prior(g, CoreKind::kVector), 400);
}

TEST_F(CostModelTest, GemmFlopsHintOverridesItsShape) {
  CostModel m = Model();
  TaskSpec g = TaskBuilder("g", "gemm")
                   .Arg("m", int64_t{100})
                   .Arg("n", int64_t{100})
                   .Arg("k", int64_t{100})
                   .Flops(4e6);
  EXPECT_DOUBLE_EQ(m.Prior(g, CoreKind::kCube), 200);
}

TEST_F(CostModelTest, FlopsHintUsesTheCoreKindThroughput) {
  opts_.cube_flops_per_us = 1000;
  opts_.vector_flops_per_us = 250;
  CostModel m = Model();
  TaskSpec t = TaskBuilder("t", "add").Flops(5e5);
  EXPECT_DOUBLE_EQ(m.Prior(t, CoreKind::kCube), 500);
  EXPECT_DOUBLE_EQ(m.Prior(t, CoreKind::kVector), 2000);
}

TEST_F(CostModelTest, BytesHintCostsLatencyPlusBandwidth) {
  CostModel m = Model();
  // 30 us latency + 2e6 B / 2000 B/us.
  EXPECT_DOUBLE_EQ(m.Prior(TaskBuilder("x", "send").Bytes(2e6), CoreKind::kVector), 1030);
  // Flops and bytes add.
  EXPECT_DOUBLE_EQ(m.Prior(TaskBuilder("x", "send").Bytes(2e6).Flops(2e5), CoreKind::kCube),
                   1030 + 10);
}

TEST_F(CostModelTest, CollectiveBytesTakeTheLargerHint) {
  CostModel m = Model();
  EXPECT_DOUBLE_EQ(
      m.Prior(TaskBuilder("r", "allreduce").Collective("g", "allreduce", 4e6).Bytes(1e6),
              CoreKind::kVector),
      30 + 2000);
  EXPECT_DOUBLE_EQ(
      m.Prior(TaskBuilder("r", "allreduce").Collective("g", "allreduce", 1e3).Bytes(2e6),
              CoreKind::kVector),
      30 + 1000);
}

TEST_F(CostModelTest, KernelWithoutHintCostsDefault) {
  opts_.default_us = 7;
  CostModel m = Model();
  EXPECT_DOUBLE_EQ(m.Prior(TaskBuilder("n", "noop"), CoreKind::kCube), 7);
  EXPECT_DOUBLE_EQ(m.Prior(TaskBuilder("n", "mystery"), CoreKind::kVector), 7);
}

TEST_F(CostModelTest, TinyHintIsClampedToOneMicrosecond) {
  CostModel m = Model();
  EXPECT_DOUBLE_EQ(m.Prior(TaskBuilder("t", "add").Flops(10), CoreKind::kCube), 1);
}

TEST_F(CostModelTest, EstimateIsThePriorUntilASampleArrives) {
  CostModel m = Model();
  TaskSpec t = TaskBuilder("a", "spin").Us(300);
  EXPECT_EQ(m.Samples(t), 0u);
  EXPECT_DOUBLE_EQ(m.Estimate(t, CoreKind::kCube), 300);
  m.Observe(TaskBuilder("other", "gemm").Arg("m", int64_t{8}), 5000);  // another bucket
  EXPECT_DOUBLE_EQ(m.Estimate(t, CoreKind::kCube), 300);
}

TEST_F(CostModelTest, FirstSampleReplacesPriorThenEwmaFolds) {
  opts_.ewma_alpha = 0.25;
  CostModel m = Model();
  TaskSpec t = TaskBuilder("a", "spin").Us(300);
  m.Observe(t, 1000);
  EXPECT_EQ(m.Samples(t), 1u);
  EXPECT_DOUBLE_EQ(m.Estimate(t, CoreKind::kCube), 1000);
  m.Observe(t, 2000);
  EXPECT_DOUBLE_EQ(m.Estimate(t, CoreKind::kCube), 1250);  // 1000 + 0.25 * 1000
  m.Observe(t, 250);
  EXPECT_DOUBLE_EQ(m.Estimate(t, CoreKind::kCube), 1000);  // 1250 + 0.25 * -1000
  EXPECT_EQ(m.Samples(t), 3u);
  // The prior is still available on its own.
  EXPECT_DOUBLE_EQ(m.Prior(t, CoreKind::kCube), 300);
}

TEST_F(CostModelTest, NegativeAndNanSamplesAreIgnored) {
  CostModel m = Model();
  TaskSpec t = TaskBuilder("a", "spin").Us(300);
  m.Observe(t, -1);
  m.Observe(t, std::numeric_limits<double>::quiet_NaN());
  EXPECT_EQ(m.Samples(t), 0u);
  EXPECT_DOUBLE_EQ(m.Estimate(t, CoreKind::kCube), 300);
  m.Observe(t, 0);
  EXPECT_EQ(m.Samples(t), 1u);
  EXPECT_DOUBLE_EQ(m.Estimate(t, CoreKind::kCube), 1) << "estimates stay at least 1 us";
}

TEST_F(CostModelTest, SizesWithinAFactorOfTwoShareABucket) {
  CostModel m = Model();
  m.Observe(TaskBuilder("a", "spin").Us(1100), 5000);
  EXPECT_EQ(m.Samples(TaskBuilder("b", "spin").Us(1500)), 1u);
  EXPECT_DOUBLE_EQ(m.Estimate(TaskBuilder("b", "spin").Us(1500), CoreKind::kCube), 5000);
  // Ten times larger: another bucket, still the prior.
  EXPECT_EQ(m.Samples(TaskBuilder("c", "spin").Us(11000)), 0u);
  EXPECT_DOUBLE_EQ(m.Estimate(TaskBuilder("c", "spin").Us(11000), CoreKind::kCube), 11000);
  // Same size, other kernel: another bucket.
  EXPECT_EQ(m.Samples(TaskBuilder("d", "sleep").Us(1100)), 0u);
}

TEST_F(CostModelTest, EstimateConvergesToTheTrueDurationFromAFarPrior) {
  constexpr uint64_t kSeed = 4242;
  test::LogSeed("cost_noise", kSeed);
  std::mt19937_64 rng(kSeed);
  // The spec says 1000 us; the machine takes 3000 +- 5%.
  TaskSpec t = TaskBuilder("a", "spin").Us(1000);
  constexpr double kTrue = 3000;
  std::uniform_real_distribution<double> noise(-0.05, 0.05);
  CostModel m = Model();
  ASSERT_GT(std::abs(m.Estimate(t, CoreKind::kCube) - kTrue) / kTrue, 0.5)
      << "prior must be far off";
  constexpr int kWarmup = 30, kSamples = 500;
  for (int i = 0; i < kSamples; ++i) {
    m.Observe(t, kTrue * (1 + noise(rng)));
    if (i + 1 >= kWarmup) {
      double err = std::abs(m.Estimate(t, CoreKind::kCube) - kTrue) / kTrue;
      ASSERT_LT(err, 0.05) << "after " << i + 1 << " samples, seed " << kSeed;
    }
  }
  EXPECT_EQ(m.Samples(t), static_cast<uint64_t>(kSamples));
}

TEST_F(CostModelTest, EstimateTracksAShiftInTheMachine) {
  constexpr uint64_t kSeed = 99;
  test::LogSeed("cost_shift", kSeed);
  std::mt19937_64 rng(kSeed);
  std::uniform_real_distribution<double> noise(-0.05, 0.05);
  TaskSpec t = TaskBuilder("x", "send").Bytes(1e6);
  CostModel m = Model();
  for (int i = 0; i < 100; ++i) m.Observe(t, 500 * (1 + noise(rng)));
  EXPECT_NEAR(m.Estimate(t, CoreKind::kVector), 500, 25);
  // The link gets four times slower; within 40 samples the estimate follows.
  for (int i = 0; i < 40; ++i) m.Observe(t, 2000 * (1 + noise(rng)));
  EXPECT_NEAR(m.Estimate(t, CoreKind::kVector), 2000, 100);
}

TEST_F(CostModelTest, PerDeviceEstimatesConvergeOnEachDevicesSpeed) {
  constexpr uint64_t kSeed = 7;
  test::LogSeed("cost_devices", kSeed);
  std::mt19937_64 rng(kSeed);
  std::uniform_real_distribution<double> noise(-0.05, 0.05);
  // Device 0 runs the gemm in 1000 us, device 1 (an older machine) in 2500;
  // a second kernel only ever runs on device 0 at first.
  TaskSpec gemm = TaskBuilder("g", "gemm").Flops(1e7);
  TaskSpec add = TaskBuilder("a", "add").Flops(4e6);
  const double kTrue[2] = {1000, 2500};
  CostModel m = Model();
  constexpr int kWarmup = 40, kRounds = 300;
  for (int i = 0; i < kRounds; ++i) {
    for (uint32_t d : {0u, 1u}) m.Observe(gemm, kTrue[d] * (1 + noise(rng)), d);
    m.Observe(add, 400 * (1 + noise(rng)), 0);
    if (i + 1 < kWarmup) continue;
    for (uint32_t d : {0u, 1u}) {
      double err = std::abs(m.Estimate(gemm, CoreKind::kCube, d) - kTrue[d]) / kTrue[d];
      ASSERT_LT(err, 0.06) << "device " << d << " after " << i + 1 << " rounds";
    }
  }
  EXPECT_NEAR(m.DeviceFactor(1) / m.DeviceFactor(0), 2.5, 0.15);
  // What device 1 learnt from the gemm carries over to the other kernel.
  EXPECT_NEAR(m.Estimate(add, CoreKind::kCube, 0), 400, 25);
  EXPECT_NEAR(m.Estimate(add, CoreKind::kCube, 1), 1000, 80);
  // A device that never reported keeps factor 1 (the per-kernel means).
  EXPECT_DOUBLE_EQ(m.DeviceFactor(9), 1.0);
}

TEST_F(CostModelTest, TimersAndCommunicationDoNotMoveADevicesFactor) {
  CostModel m = Model();
  TaskSpec spin = TaskBuilder("s", "spin").Us(100);
  TaskSpec send = TaskBuilder("x", "send").Bytes(1e6);
  for (int i = 0; i < 50; ++i) {
    m.Observe(spin, 100, 0);
    m.Observe(spin, 300, 1);  // a loaded machine stretches timers; not its speed
    m.Observe(send, 500, 0);
    m.Observe(send, 900, 1);
  }
  EXPECT_DOUBLE_EQ(m.DeviceFactor(0), 1.0);
  EXPECT_DOUBLE_EQ(m.DeviceFactor(1), 1.0);
  EXPECT_DOUBLE_EQ(m.Estimate(spin, CoreKind::kCube, 1), m.Estimate(spin, CoreKind::kCube));
}

// Sub-microsecond kernels (noop) measured as 0 or 1 us: the device factor
// and the mean once fed each other until the estimate overflowed, and the
// live lookahead (estimated work queued on a core) stopped queueing them.
TEST_F(CostModelTest, SubMicrosecondKernelsKeepASmallEstimate) {
  constexpr uint64_t kSeed = 11;
  test::LogSeed("cost_noop", kSeed);
  std::mt19937_64 rng(kSeed);
  CostModel m = Model();
  TaskSpec noop = TaskBuilder("n", "noop");
  for (int i = 0; i < 20000; ++i) {
    m.Observe(noop, static_cast<double>(rng() % 3 == 0), static_cast<uint32_t>(rng() % 2));
    ASSERT_LE(m.Estimate(noop, CoreKind::kCube, 0), 5.0) << "after " << i + 1 << " samples";
    ASSERT_LE(m.Estimate(noop, CoreKind::kCube, 1), 5.0) << "after " << i + 1 << " samples";
  }
}

}  // namespace
}  // namespace hmpmd
