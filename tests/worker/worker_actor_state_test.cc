// A Worker against a fake controller: a kernel stores into its sub-model's
// actor state, and later tasks of the same job and sub-model (on another
// lane) read it; other sub-models and jobs do not, and FreeJob drops it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "hmpmd/worker/actor_state.h"
#include "worker_fixture.h"

namespace hmpmd::worker {
namespace {

using ::testing::HasSubstr;
using testing::Key;

class WorkerActorStateTest : public testing::WorkerFixture {
 protected:
  void SetUp() override {
    // put: stores a buffer of `n` bytes under "x". get: returns what "x"
    // holds, so the result's output_bytes shows what it found.
    extra_kernels_.push_back({"put", [](const KernelArgs& args, std::span<const Buffer>) {
                                Buffer b;
                                b.dtype = "u8";
                                b.data.resize(static_cast<size_t>(args.Int("n", 0)));
                                b.shape = {static_cast<int64_t>(b.data.size())};
                                args.state().Put("x", std::move(b));
                                return std::vector<Buffer>{};
                              }});
    extra_kernels_.push_back({"get", [](const KernelArgs& args, std::span<const Buffer>) {
                                std::shared_ptr<const Buffer> x = args.state().Get("x");
                                if (x == nullptr) throw std::runtime_error("get: nothing stored");
                                return std::vector<Buffer>{*x};
                              }});
  }

  static TaskAssign Of(TaskAssign t, std::string submodel) {
    t.submodel = std::move(submodel);
    return t;
  }
};

TEST_F(WorkerActorStateTest, LaterTasksOfTheSameSubmodelSeeTheState) {
  ASSERT_NO_FATAL_FAILURE(StartRegistered());
  controller_.Send(AssignBatch{
      {Of(testing::Task(1, 0, "put", CoreKind::kCube, 0, {{"n", int64_t{5}}}), "actor")}});
  auto first = CollectResults(1);
  ASSERT_TRUE(first[Key(1, 0)].ok) << first[Key(1, 0)].error;
  EXPECT_EQ(first[Key(1, 0)].output_bytes, 0u);

  AssignBatch later;
  later.tasks.push_back(Of(testing::Task(1, 1, "get", CoreKind::kVector, 0), "actor"));
  later.tasks.push_back(Of(testing::Task(1, 2, "get", CoreKind::kCube, 0), "learner"));
  later.tasks.push_back(Of(testing::Task(2, 0, "get", CoreKind::kCube, 0), "actor"));
  controller_.Send(later);
  auto got = CollectResults(3);
  ASSERT_EQ(got.size(), 3u);
  // Same job and sub-model, another lane: sees the 5 bytes.
  EXPECT_TRUE(got[Key(1, 1)].ok) << got[Key(1, 1)].error;
  EXPECT_EQ(got[Key(1, 1)].output_bytes, 5u);
  // Another sub-model, another job: nothing.
  EXPECT_FALSE(got[Key(1, 2)].ok);
  EXPECT_THAT(got[Key(1, 2)].error, HasSubstr("nothing stored"));
  EXPECT_FALSE(got[Key(2, 0)].ok);
}

TEST_F(WorkerActorStateTest, FreeJobDropsTheState) {
  ASSERT_NO_FATAL_FAILURE(StartRegistered());
  controller_.Send(AssignBatch{
      {Of(testing::Task(1, 0, "put", CoreKind::kCube, 0, {{"n", int64_t{3}}}), "actor")}});
  ASSERT_TRUE(CollectResults(1)[Key(1, 0)].ok);
  controller_.Send(FreeJob{1});
  // Messages are handled in order: the get runs after the free.
  controller_.Send(AssignBatch{{Of(testing::Task(1, 1, "get", CoreKind::kCube, 0), "actor")}});
  auto got = CollectResults(1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_FALSE(got[Key(1, 1)].ok);
  EXPECT_THAT(got[Key(1, 1)].error, HasSubstr("nothing stored"));
}

}  // namespace
}  // namespace hmpmd::worker
