// What a worker does for a controller's recovery: a task whose input cannot
// be read fails naming it (and its kernel never runs), and a registration
// after a controller restart reports the outputs the worker still keeps.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>

#include "worker_fixture.h"

namespace hmpmd::worker {
namespace {

using std::chrono::milliseconds;
using testing::kHeartbeatMs;
using testing::kWorkerId;
using testing::Task;

class WorkerRecoveryTest : public testing::WorkerFixture {};

TEST_F(WorkerRecoveryTest, AnInputThatCannotBeReadFailsTheTaskNamingIt) {
  static std::atomic<int> kernel_runs{0};
  kernel_runs = 0;
  extra_kernels_.push_back({"count", [](const KernelArgs&, std::span<const Buffer>) {
                              ++kernel_runs;
                              return std::vector<Buffer>{};
                            }});
  options_.controller_timeout_ms = 60'000;  // the fake answers no heartbeat
  ASSERT_NO_FATAL_FAILURE(StartRegistered());
  AssignBatch batch;
  // No location known for run 4; run 6 on a peer that is not there.
  TaskAssign nowhere = Task(2, 5, "count", CoreKind::kCube, 0);
  nowhere.inputs = {InputRef{3, "", 0}, InputRef{4, "", 64}};
  TaskAssign dead_peer = Task(2, 7, "count", CoreKind::kCube, 0);
  dead_peer.inputs = {InputRef{6, "tcp://127.0.0.1:1", 64}};
  // A producer of 0 bytes has nothing to read: the kernel runs.
  TaskAssign empty = Task(2, 9, "count", CoreKind::kCube, 0);
  empty.inputs = {InputRef{8, "", 0}};
  batch.tasks = {nowhere, dead_peer, empty};
  controller_.Send(batch);
  auto results = CollectResults(3);
  ASSERT_EQ(results.size(), 3u);
  const TaskResult& a = results[{2, 5}];
  EXPECT_FALSE(a.ok);
  EXPECT_EQ(a.lost_inputs, std::vector<uint32_t>{4});
  EXPECT_NE(a.error.find("job 2 run 4"), std::string::npos) << a.error;
  const TaskResult& b = results[{2, 7}];
  EXPECT_FALSE(b.ok);
  EXPECT_EQ(b.lost_inputs, std::vector<uint32_t>{6});
  EXPECT_NE(b.error.find("job 2 run 6"), std::string::npos) << b.error;
  const TaskResult& c = results[{2, 9}];
  EXPECT_TRUE(c.ok) << c.error;
  EXPECT_TRUE(c.lost_inputs.empty());
  EXPECT_EQ(kernel_runs.load(), 1) << "kernels never run on a missing input";
}

TEST_F(WorkerRecoveryTest, ReRegistrationReportsTheOutputsItKeeps) {
  options_.controller_timeout_ms = 60'000;
  ASSERT_NO_FATAL_FAILURE(StartRegistered());
  AssignBatch batch;
  TaskAssign read_once = Task(3, 0, "scale", CoreKind::kCube, 0, {{"n", int64_t{64}}});
  read_once.reads = 1;
  TaskAssign final_output = Task(3, 1, "scale", CoreKind::kCube, 0, {{"n", int64_t{32}}});
  final_output.reads = 0;
  TaskAssign dropped = Task(3, 2, "scale", CoreKind::kCube, 0, {{"n", int64_t{16}}});
  dropped.reads = TaskAssign::kDropOutputs;
  batch.tasks = {read_once, final_output, dropped};
  controller_.Send(batch);
  auto results = CollectResults(3);
  ASSERT_EQ(results.size(), 3u);
  for (const auto& [key, r] : results) ASSERT_TRUE(r.ok) << r.error;
  // The controller restarted: it asks the worker to register again.
  controller_.Send(Reject{"unknown worker; register again", true});
  std::optional<RegisterMsg> reg = controller_.WaitFor<RegisterMsg>({}, milliseconds(3000));
  ASSERT_TRUE(reg);
  EXPECT_EQ(reg->outputs, (std::vector<HeldOutput>{{3, 0, 64 * 4, 1}, {3, 1, 32 * 4, 1}}));
  EXPECT_EQ(reg->held.size(), 3u) << "the finished tasks, whose results it sends again";
  controller_.Send(RegisterAck{kWorkerId, kHeartbeatMs});
  EXPECT_TRUE(controller_.WaitFor<Heartbeat>());
}

// A controller restarted without its store (or with another one) knows
// other jobs under the same ids. Its RegisterAck names another epoch, and
// the worker drops what it held; otherwise the new controller would adopt
// the old job's running task and outputs as its own job's (wrong data).
TEST_F(WorkerRecoveryTest, AControllerOfAnotherEpochGetsNothingOfTheOldJobs) {
  options_.controller_timeout_ms = 60'000;
  ASSERT_NO_FATAL_FAILURE(StartRegistered());  // epoch 0
  TaskAssign kept = Task(3, 1, "scale", CoreKind::kCube, 0, {{"n", int64_t{32}}});
  kept.reads = 0;  // a final output: stays in the store
  controller_.Send(AssignBatch{{kept}});
  ASSERT_EQ(CollectResults(1).size(), 1u);
  TaskAssign running = Task(3, 2, "sleep", CoreKind::kCube, 0, {{"us", int64_t{60'000'000}}});
  controller_.Send(AssignBatch{{running}});
  controller_.Send(Reject{"unknown worker; register again", true});
  std::optional<RegisterMsg> reg = controller_.WaitFor<RegisterMsg>({}, milliseconds(3000));
  ASSERT_TRUE(reg);
  EXPECT_EQ(reg->epoch, 0u);
  EXPECT_EQ(reg->outputs.size(), 1u);
  EXPECT_EQ(reg->held.size(), 2u);
  // Another controller answers.
  controller_.Send(RegisterAck{kWorkerId, kHeartbeatMs, 7});
  controller_.Send(Reject{"unknown worker; register again", true});
  reg = controller_.WaitFor<RegisterMsg>({}, milliseconds(3000));
  ASSERT_TRUE(reg);
  EXPECT_EQ(reg->epoch, 7u);
  EXPECT_TRUE(reg->outputs.empty()) << "the old job's outputs are freed";
  EXPECT_TRUE(reg->held.empty()) << "the old job's tasks are dropped";
  controller_.Send(RegisterAck{kWorkerId, kHeartbeatMs, 7});
  // The next task on the same lane runs once the sleep was cancelled; no
  // result of the old job (the sleep's, or the scale's sent again) comes
  // before it.
  controller_.Send(AssignBatch{{Task(5, 0, "noop", CoreKind::kCube, 0)}});
  auto results = CollectResults(1);
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results.begin()->first, (testing::Key{5, 0}));
}

}  // namespace
}  // namespace hmpmd::worker
