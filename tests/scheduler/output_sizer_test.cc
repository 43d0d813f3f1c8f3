// Tests for OutputSizer (scheduler/output_sizer.{h,cc}), on hand-made job
// records: a built-in kernel's outputs follow its inputs' reported sizes; a
// worker's own kernel is unknown until a run of it stored something, then
// guessed from what it stored; an input whose size is not reported leaves
// the size unknown and teaches nothing.
#include "hmpmd/scheduler/output_sizer.h"

#include <gtest/gtest.h>

#include "test_builders.h"

namespace hmpmd {
namespace {

using test::SpecBuilder;
using test::TaskBuilder;

class OutputSizerTest : public ::testing::Test {
 protected:
  // a (a worker's own kernel) -> send; a -> mine (another own kernel).
  OutputSizerTest() {
    job_.graph = test::BuildGraph(SpecBuilder()
                                      .Add(TaskBuilder("a", "load"))
                                      .Add(TaskBuilder("s", "send").Inputs({"a"}))
                                      .Add(TaskBuilder("m", "mine").Inputs({"a"})));
    job_.runs.resize(job_.graph->total_runs());
    job_.kernel_ids = {7, 8, 9};
  }
  // Run `run` is done and its worker reported `bytes` of outputs.
  void Stored(uint32_t run, uint64_t bytes) {
    TaskRecord& rec = job_.runs[run];
    rec.state = TaskState::kDone;
    rec.output_device = 0;
    rec.output_bytes = bytes;
  }

  JobRun job_;
  OutputSizer sizer_;
};

TEST_F(OutputSizerTest, ABuiltInKernelFollowsItsInputsReportedSizes) {
  EXPECT_FALSE(sizer_.Guess(job_, 1).known) << "its input's size is not reported yet";
  Stored(0, 1000);
  const OutputGuess g = sizer_.Guess(job_, 1);
  EXPECT_TRUE(g.known);
  EXPECT_EQ(g.bytes, 1000u) << "send hands its input on";
}

TEST_F(OutputSizerTest, AWorkersOwnKernelIsLearnedFromItsRuns) {
  EXPECT_FALSE(sizer_.Guess(job_, 0).known) << "no run of it seen";
  Stored(0, 1000);
  sizer_.Observe(job_, 0, 1000);
  OutputGuess g = sizer_.Guess(job_, 0);
  EXPECT_TRUE(g.known);
  EXPECT_EQ(g.bytes, 1000u);
  // Another own kernel learns from its own runs only, by its input bytes.
  EXPECT_FALSE(sizer_.Guess(job_, 2).known);
  sizer_.Observe(job_, 2, 3000);
  g = sizer_.Guess(job_, 2);
  EXPECT_TRUE(g.known);
  EXPECT_EQ(g.bytes, 3000u);
}

TEST_F(OutputSizerTest, NothingIsLearnedWhileAnInputsSizeIsUnknown) {
  sizer_.Observe(job_, 2, 3000);  // input a not reported yet
  EXPECT_FALSE(sizer_.Guess(job_, 2).known);
  Stored(0, 1000);
  EXPECT_FALSE(sizer_.Guess(job_, 2).known);
}

}  // namespace
}  // namespace hmpmd
