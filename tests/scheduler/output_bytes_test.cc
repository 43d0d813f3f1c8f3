// GuessOutputBytes: what a built-in kernel stores, from its arguments and
// its inputs' sizes, as the worker's kernels make them.
#include "hmpmd/scheduler/output_bytes.h"

#include <gtest/gtest.h>

#include <vector>

#include "hmpmd/scheduler/learned_outputs.h"
#include "test_builders.h"

namespace hmpmd::test {
namespace {

OutputGuess Guess(TaskBuilder b, std::vector<uint64_t> inputs = {}, uint32_t group = 0) {
  return GuessOutputBytes(b.spec(), inputs, group);
}

TEST(OutputBytesTest, BuiltInKernelsFromTheirArguments) {
  EXPECT_EQ(Guess(TaskBuilder("g", "gemm").Arg("m", 3.0).Arg("n", 5.0).Arg("k", 7.0)).bytes, 60u);
  EXPECT_FALSE(Guess(TaskBuilder("g", "gemm").Flops(1e6)).known) << "sized by cost.flops alone";
  EXPECT_EQ(Guess(TaskBuilder("s", "scale").Arg("n", 10.0)).bytes, 40u);
  EXPECT_EQ(Guess(TaskBuilder("s", "scale")).bytes, 4096u) << "1024 floats by default";
  EXPECT_EQ(Guess(TaskBuilder("s", "send").Arg("bytes", 100.0)).bytes, 100u);
  EXPECT_EQ(Guess(TaskBuilder("s", "send")).bytes, 4096u);
  const OutputGuess put =
      Guess(TaskBuilder("p", std::string(kPutKernel)).Arg("bytes", int64_t{640}));
  EXPECT_TRUE(put.known);
  EXPECT_EQ(put.bytes, 640u) << "a driver's put keeps what it put";
  EXPECT_FALSE(Guess(TaskBuilder("p", std::string(kPutKernel))).known);
  for (const char* k : {"noop", "spin", "sleep"}) {
    OutputGuess g = Guess(TaskBuilder("x", k));
    EXPECT_TRUE(g.known) << k;
    EXPECT_EQ(g.bytes, 0u) << k;
  }
  EXPECT_FALSE(Guess(TaskBuilder("x", "mine")).known) << "a worker's own kernel";
}

TEST(OutputBytesTest, KernelsThatReadTheirInputsTakeTheirSizes) {
  EXPECT_EQ(Guess(TaskBuilder("a", "add").Arg("n", 8.0), {400, 400}).bytes, 400u);
  EXPECT_EQ(Guess(TaskBuilder("a", "add").Arg("n", 8.0), {400, 0}).bytes, 32u)
      << "unequal inputs order only: n floats";
  EXPECT_EQ(Guess(TaskBuilder("a", "add").Arg("n", 8.0), {400}, 0).bytes, 32u);
  EXPECT_EQ(Guess(TaskBuilder("a", "add"), {400}, 0).bytes, 4096u);
  EXPECT_EQ(Guess(TaskBuilder("s", "scale").Arg("n", 8.0), {400}).bytes, 400u);
  EXPECT_EQ(Guess(TaskBuilder("s", "scale").Arg("n", 8.0), {0}).bytes, 32u);
  EXPECT_EQ(Guess(TaskBuilder("s", "send"), {100, 200}).bytes, 300u);
  EXPECT_EQ(Guess(TaskBuilder("s", "send"), {0}).bytes, 4096u);
  EXPECT_FALSE(Guess(TaskBuilder("s", "send"), {UINT64_MAX}).known) << "an input not done";
}

TEST(OutputBytesTest, CollectivesKeepWhatTheirOpGives) {
  EXPECT_EQ(Guess(TaskBuilder("r", "allreduce").Arg("n", 100.0), {}, 4).bytes, 400u);
  EXPECT_EQ(Guess(TaskBuilder("r", "allreduce"), {800}, 4).bytes, 800u);
  EXPECT_EQ(Guess(TaskBuilder("r", "allgather").Arg("n", 100.0), {}, 4).bytes, 1600u);
  EXPECT_EQ(Guess(TaskBuilder("r", "reduce_scatter").Arg("n", 100.0), {}, 4).bytes, 100u);
  EXPECT_EQ(Guess(TaskBuilder("r", "broadcast").Arg("bytes", 64.0), {}, 2).bytes, 64u);
  EXPECT_EQ(Guess(TaskBuilder("r", "alltoall"), {}, 2).bytes, 4096u);
}

TEST(LearnedOutputsTest, GuessesFromTheRunsOfTheSameKernel) {
  LearnedOutputs learned;
  EXPECT_FALSE(learned.Guess(7, 100).has_value()) << "no run seen";
  learned.Observe(7, 1000, 4000);
  learned.Observe(7, 0, 64);
  learned.Observe(8, 1000, 10);
  EXPECT_EQ(learned.Guess(7, 1000), 4000u) << "the same input bytes";
  EXPECT_EQ(learned.Guess(7, 0), 64u);
  EXPECT_EQ(learned.Guess(7, 2000), 8000u) << "the nearest size, scaled";
  EXPECT_EQ(learned.Guess(7, 3), 64u) << "nearest is the run without inputs: not scaled";
  EXPECT_EQ(learned.Guess(8, 1000), 10u) << "kernels apart";
  learned.Observe(7, 1000, 5000);
  EXPECT_EQ(learned.Guess(7, 1000), 5000u) << "the latest run of a size speaks for it";
  EXPECT_EQ(learned.Guess(7, UINT64_MAX / 4), UINT64_MAX / 2) << "scaling is bounded";
  // Bounded memory: the oldest size gives way.
  for (uint64_t i = 1; i <= LearnedOutputs::kSizesKept; ++i) learned.Observe(9, i * 10, i * i);
  EXPECT_EQ(learned.Guess(9, 10), 1u);
  learned.Observe(9, 1'000'000, 5);
  EXPECT_EQ(learned.Guess(9, 10), 2u) << "size 10 forgotten: 20's run (4 bytes), scaled to 10 in";
}

}  // namespace
}  // namespace hmpmd::test
