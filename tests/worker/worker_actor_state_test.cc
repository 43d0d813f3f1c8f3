// A Worker against a fake controller: a kernel stores into its sub-model's
// actor state, and later tasks of the same job and sub-model (on another
// lane) read it; other sub-models and jobs do not, and FreeJob drops it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "data_producer.h"
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

  // info: reports what KernelArgs::task() says, as the error of a task
  // that fails on purpose (the one string a result carries).
  // keep: keeps its inputs' keeper and a view of inputs[0] past the call;
  // check: fails unless the kept view still reads the bytes it saw.
  void AddKeeperKernels() {
    extra_kernels_.push_back(
        {"info", [](const KernelArgs& args, std::span<const Buffer>) -> std::vector<Buffer> {
           const TaskInfo* t = args.task();
           if (t == nullptr) throw std::runtime_error("no task info");
           throw std::runtime_error(
               "job " + std::to_string(t->job) + " run " + std::to_string(t->run) + " attempt " +
               std::to_string(t->attempt) + " id " + std::string(t->task_id) + " kernel " +
               std::string(t->kernel) + " submodel " + std::string(t->submodel) + " core " +
               std::string(CoreKindName(t->core)) + " lane " + std::to_string(t->lane));
         }});
    auto kept = std::make_shared<std::pair<std::shared_ptr<const void>, const Buffer*>>();
    auto seen = std::make_shared<std::vector<std::byte>>();
    extra_kernels_.push_back(
        {"keep", [kept, seen](const KernelArgs& args, std::span<const Buffer> inputs) {
           if (inputs.empty()) throw std::runtime_error("keep: no input");
           if (args.inputs_keeper() == nullptr) {
             throw std::runtime_error("keep: no keeper");
           }
           *kept = {args.inputs_keeper(), &inputs[0]};
           *seen = inputs[0].data;
           return std::vector<Buffer>{};
         }});
    extra_kernels_.push_back({"check", [kept, seen](const KernelArgs&, std::span<const Buffer>) {
                                if (kept->first == nullptr || kept->second->data != *seen) {
                                  throw std::runtime_error("check: the kept input changed");
                                }
                                kept->first.reset();
                                return std::vector<Buffer>{};
                              }});
  }

  // `holder`, another worker's data socket, keeps `bytes` under "x" in
  // the state of `submodel` of job 1 (what "get" returns).
  static void Hold(testing::Producer& holder, const std::string& submodel, size_t bytes) {
    Buffer x;
    x.dtype = "u8";
    x.data.resize(bytes);
    x.shape = {static_cast<int64_t>(bytes)};
    holder.states.For(1, submodel)->Put("x", std::move(x));
  }

  // Task `run` of job 1, `kernel` of `submodel`, whose state `holder` has.
  static TaskAssign FromHolder(uint32_t run, const std::string& kernel, const std::string& submodel,
                               const testing::Producer& holder) {
    TaskAssign t = Of(testing::Task(1, run, kernel, CoreKind::kCube, 0), submodel);
    t.keeps_state = true;
    t.state_from = holder.server.endpoint();
    return t;
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

TEST_F(WorkerActorStateTest, AStateIsLoadedFromItsHolderBeforeTheKernelRuns) {
  testing::Producer holder;  // another worker's data socket, holding the state
  Hold(holder, "actor", 7);
  ASSERT_NO_FATAL_FAILURE(StartRegistered());
  TaskAssign get = FromHolder(0, "get", "actor", holder);
  controller_.Send(AssignBatch{{get}});
  auto first = CollectResults(1);
  const TaskResult& r = first[Key(1, 0)];
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.output_bytes, 7u);  // the kernel saw the holder's "x"
  EXPECT_TRUE(r.state_held);
  EXPECT_GE(r.state_load_bytes, 7u);
  // Begun when the task arrived, which may be before its lane took it.
  EXPECT_GT(r.state_load_start_us, 0);
  EXPECT_GE(r.state_load_end_us, r.state_load_start_us);
  EXPECT_LE(r.state_load_end_us, r.end_us);

  // Held now: a later task names the holder again and loads nothing.
  get.task = 1;
  controller_.Send(AssignBatch{{get}});
  auto second = CollectResults(1);
  ASSERT_TRUE(second[Key(1, 1)].ok) << second[Key(1, 1)].error;
  EXPECT_EQ(second[Key(1, 1)].state_load_end_us, 0);
  EXPECT_EQ(second[Key(1, 1)].state_load_bytes, 0u);
}

TEST_F(WorkerActorStateTest, AStateLoadsWhileTheTaskAheadOnItsLaneRuns) {
  testing::Producer holder;
  Hold(holder, "stage", 5);
  ASSERT_NO_FATAL_FAILURE(StartRegistered());
  // A 300 ms task first on the lane, then a task that needs the state: its
  // load is begun when it arrives, not when the lane gets to it.
  TaskAssign get = FromHolder(1, "get", "stage", holder);
  controller_.Send(AssignBatch{
      {testing::Task(1, 0, "sleep", CoreKind::kCube, 0, {{"us", int64_t{300'000}}}), get}});
  auto got = CollectResults(2);
  const TaskResult& r = got[Key(1, 1)];
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.output_bytes, 5u);
  EXPECT_GT(r.state_load_bytes, 0u);
  // Begun before the sleep ended and done before the lane started the
  // task: hidden under the sleep. (It may begin before the lane stamps the
  // sleep's start: both arrive in one batch.)
  EXPECT_LE(r.state_load_end_us, r.start_us);
  EXPECT_LT(r.state_load_start_us, got[Key(1, 0)].end_us);
}

TEST_F(WorkerActorStateTest, AKernelNeverRunsWithoutTheStateItsHolderCouldNotGive) {
  testing::Producer holder;  // holds no state of job 1
  ASSERT_NO_FATAL_FAILURE(StartRegistered());
  TaskAssign put = FromHolder(0, "put", "actor", holder);
  put.args = {{"n", int64_t{3}}};
  controller_.Send(AssignBatch{{put}});
  auto got = CollectResults(1);
  const TaskResult& r = got[Key(1, 0)];
  EXPECT_FALSE(r.ok);
  EXPECT_TRUE(r.retryable);  // the controller runs it again (another holder, or elsewhere)
  EXPECT_THAT(r.error, HasSubstr("state of sub-model 'actor'"));
  EXPECT_THAT(r.error, HasSubstr("no state"));
  // The kernel did not run: no state was made here.
  TaskAssign get = Of(testing::Task(1, 1, "get", CoreKind::kCube, 0), "actor");
  get.keeps_state = true;
  controller_.Send(AssignBatch{{get}});
  auto after = CollectResults(1);
  EXPECT_FALSE(after[Key(1, 1)].ok);
  EXPECT_THAT(after[Key(1, 1)].error, HasSubstr("nothing stored"));
}

TEST_F(WorkerActorStateTest, AStateThatWouldOverfillTheWorkersMemoryIsNotLoaded) {
  testing::Producer holder;
  Hold(holder, "stage", size_t{2} << 20);  // 2 MiB of state
  options_.memory_mb = 1;
  ASSERT_NO_FATAL_FAILURE(StartRegistered());
  TaskAssign get = FromHolder(0, "get", "stage", holder);
  controller_.Send(AssignBatch{{get}});
  auto got = CollectResults(1);
  const TaskResult& r = got[Key(1, 0)];
  EXPECT_FALSE(r.ok);
  EXPECT_TRUE(r.retryable);  // another worker may have the room
  EXPECT_THAT(r.error, HasSubstr("would exceed this worker's memory (1048576 bytes"));
  EXPECT_FALSE(r.state_held);
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

TEST_F(WorkerActorStateTest, AKernelKnowsItsTaskRun) {
  AddKeeperKernels();
  ASSERT_NO_FATAL_FAILURE(StartRegistered());
  TaskAssign t = Of(testing::Task(4, 7, "info", CoreKind::kVector, 0), "enc");
  t.attempt = 2;
  t.task_id = "vision/3";
  controller_.Send(AssignBatch{{t}});
  auto got = CollectResults(1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[Key(4, 7)].error,
            "job 4 run 7 attempt 2 id vision/3 kernel info submodel enc core vector lane 0");
}

TEST_F(WorkerActorStateTest, InputsStayValidWhileTheKernelKeepsTheirKeeper) {
  AddKeeperKernels();
  ASSERT_NO_FATAL_FAILURE(StartRegistered());
  // scale makes 64 floats; keep reads them (its last reader: the store
  // frees them) and keeps a view; a later task checks the view.
  controller_.Send(AssignBatch{
      {testing::Task(1, 0, "scale", CoreKind::kCube, 0, {{"n", int64_t{64}}, {"factor", 2.0}})}});
  ASSERT_TRUE(CollectResults(1)[Key(1, 0)].ok);
  TaskAssign keep = testing::Task(1, 1, "keep", CoreKind::kCube, 0);
  // Produced on this lane: read from the local store (as early dispatch does).
  keep.inputs.push_back(InputRef{0, "", InputRef::kAhead});
  controller_.Send(AssignBatch{{keep}});
  auto kept = CollectResults(1);
  ASSERT_TRUE(kept[Key(1, 1)].ok) << kept[Key(1, 1)].error;
  controller_.Send(FreeJob{1});
  controller_.Send(AssignBatch{{testing::Task(2, 0, "check", CoreKind::kCube, 0)}});
  auto checked = CollectResults(1);
  EXPECT_TRUE(checked[Key(2, 0)].ok) << checked[Key(2, 0)].error;
}

}  // namespace
}  // namespace hmpmd::worker
