// A task dispatched early (InputRef::kAhead: its producer is queued ahead of
// it on the same lane) runs its kernel only when that producer ran there and
// succeeded; otherwise it reports the input lost and runs nothing.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>

#include "worker_fixture.h"

namespace hmpmd::worker {
namespace {

using ::testing::HasSubstr;
using testing::Key;
using testing::Task;

class LaneAheadTest : public testing::WorkerFixture {
 protected:
  LaneAheadTest() {
    // Counts its runs and the buffers it was given; returns nothing.
    extra_kernels_.push_back(
        {"count", [this](const KernelArgs&, std::span<const Buffer> in) -> std::vector<Buffer> {
           runs_.fetch_add(1);
           buffers_.fetch_add(static_cast<int>(in.size()));
           return {};
         }});
    extra_kernels_.push_back(
        {"boom", [](const KernelArgs&, std::span<const Buffer>) -> std::vector<Buffer> {
           throw std::runtime_error("boom");
         }});
  }
  // `task` reads run `producer` of job 1, produced ahead on its lane.
  static TaskAssign Behind(uint32_t task, uint32_t producer, std::string kernel = "count") {
    TaskAssign a = Task(1, task, std::move(kernel), CoreKind::kCube, 0);
    InputRef in;
    in.run = producer;
    in.bytes = InputRef::kAhead;
    a.inputs.push_back(in);
    a.reads = TaskAssign::kDropOutputs;
    return a;
  }
  std::atomic<int> runs_{0};
  std::atomic<int> buffers_{0};
};

TEST_F(LaneAheadTest, ReadsWhatItsProducerLeftOnTheLane) {
  ASSERT_NO_FATAL_FAILURE(StartRegistered());
  TaskAssign producer = Task(1, 0, "scale", CoreKind::kCube, 0, {{"n", int64_t{64}}});
  producer.reads = 1;  // its one consumer reads it
  // A producer without outputs (noop): its consumer reads nothing.
  TaskAssign empty = Task(1, 2, "noop", CoreKind::kCube, 0);
  controller_.Send(AssignBatch{{producer, Behind(1, 0), empty, Behind(3, 2)}});
  auto results = CollectResults(4);
  ASSERT_EQ(results.size(), 4u);
  for (const auto& [key, r] : results)
    EXPECT_TRUE(r.ok) << "task " << key.second << ": " << r.error;
  EXPECT_EQ(runs_.load(), 2);
  EXPECT_EQ(buffers_.load(), 1) << "the scale's tensor, then nothing";
}

TEST_F(LaneAheadTest, AFailedOrMissingProducerRunsNoKernel) {
  ASSERT_NO_FATAL_FAILURE(StartRegistered());
  // Run 0 fails; run 5 never ran on this worker.
  controller_.Send(
      AssignBatch{{Task(1, 0, "boom", CoreKind::kCube, 0), Behind(1, 0), Behind(2, 5)}});
  auto results = CollectResults(3);
  ASSERT_EQ(results.size(), 3u);
  EXPECT_FALSE(results[Key(1, 0)].ok);
  for (uint32_t t : {1u, 2u}) {
    const TaskResult& r = results[Key(1, t)];
    EXPECT_FALSE(r.ok);
    EXPECT_THAT(r.error, HasSubstr("did not succeed there"));
    ASSERT_EQ(r.lost_inputs.size(), 1u);
    EXPECT_EQ(r.lost_inputs[0], t == 1 ? 0u : 5u);
  }
  EXPECT_EQ(runs_.load(), 0) << "no kernel ran without its input";
}

}  // namespace
}  // namespace hmpmd::worker
