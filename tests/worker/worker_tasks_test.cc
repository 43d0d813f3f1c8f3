// Worker against a fake controller on a real ROUTER socket: tasks on the
// core lanes, kernel failures, cancellation and malformed frames.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <future>
#include <random>
#include <stdexcept>

#include "hmpmd/protocol/data_frames.h"
#include "worker_fixture.h"

namespace hmpmd::worker {
namespace {

using testing::FakeController;
using ::testing::HasSubstr;
using testing::Key;
using testing::kWorkerId;
using testing::Task;

class WorkerTasksTest : public testing::WorkerFixture {
 protected:
  // Runs one task per kernel, in order, as job 1 tasks 0.. on cube lane 0,
  // and returns their results.
  std::map<testing::Key, TaskResult> RunOnCube(const std::vector<std::string>& kernels) {
    AssignBatch batch;
    for (uint32_t i = 0; i < kernels.size(); ++i) {
      batch.tasks.push_back(testing::Task(1, i, kernels[i], CoreKind::kCube, 0));
    }
    controller_.Send(batch);
    return CollectResults(kernels.size());
  }
  // Registers a kernel "gate" that holds its lane until OpenGate() (at
  // most 5 s), so that tasks queue behind it.
  void AddGate() {
    extra_kernels_.push_back({"gate", [this, release = gate_release_.get_future().share()](
                                          const KernelArgs&, std::span<const Buffer>) {
                                gate_started_.set_value();
                                release.wait_for(std::chrono::seconds(5));
                                return std::vector<Buffer>{};
                              }});
  }
  bool GateStarted() {
    return gate_started_.get_future().wait_for(FakeController::kDeadline) ==
           std::future_status::ready;
  }
  void OpenGate() { gate_release_.set_value(); }
  // Results until `last` has one (each wait bounded by the deadline).
  std::map<Key, TaskResult> ResultsUntil(Key last) {
    std::map<Key, TaskResult> got;
    while (!got.contains(last)) {
      std::optional<DoneBatch> batch = controller_.WaitFor<DoneBatch>();
      if (!batch) {
        ADD_FAILURE() << "no result of job " << last.first << " task " << last.second;
        break;
      }
      for (const TaskResult& r : batch->results) got[Key(r.job, r.task)] = r;
    }
    return got;
  }

 private:
  std::promise<void> gate_started_;
  std::promise<void> gate_release_;
};

TEST_F(WorkerTasksTest, RunsTasksOnCubeAndVectorLanes) {
  ASSERT_NO_FATAL_FAILURE(StartRegistered());
  AssignBatch batch;
  batch.tasks.push_back(Task(1, 0, "noop", CoreKind::kCube, 0));
  batch.tasks.push_back(Task(1, 1, "add", CoreKind::kVector, 0, {{"n", int64_t{64}}}));
  batch.tasks.push_back(Task(1, 2, "gemm", CoreKind::kCube, 0,
                             {{"m", int64_t{16}}, {"n", int64_t{8}}, {"k", int64_t{4}}}));
  batch.tasks.push_back(Task(1, 3, "scale", CoreKind::kVector, 0, {{"factor", 2.5}}));
  controller_.Send(batch);

  auto results = CollectResults(4);
  ASSERT_EQ(results.size(), 4u);
  for (const auto& [key, r] : results) {
    EXPECT_TRUE(r.ok) << "task " << key.second << ": " << r.error;
    EXPECT_EQ(r.attempt, 1u);
    EXPECT_LE(r.start_us, r.end_us);
    EXPECT_GT(r.start_us, 0);
  }
}

TEST_F(WorkerTasksTest, SpinsOnDifferentCoresOverlapAndOnOneLaneDoNot) {
  ASSERT_NO_FATAL_FAILURE(StartRegistered());
  const Args spin = {{"us", int64_t{100'000}}};
  AssignBatch batch;
  batch.tasks.push_back(Task(1, 0, "spin", CoreKind::kCube, 0, spin));
  batch.tasks.push_back(Task(1, 1, "spin", CoreKind::kVector, 0, spin));
  batch.tasks.push_back(Task(1, 2, "spin", CoreKind::kCube, 0, spin));
  controller_.Send(batch);

  auto results = CollectResults(3);
  ASSERT_EQ(results.size(), 3u);
  const TaskResult& cube_a = results[Key(1, 0)];
  const TaskResult& vector_a = results[Key(1, 1)];
  const TaskResult& cube_b = results[Key(1, 2)];
  for (const TaskResult* r : {&cube_a, &vector_a, &cube_b}) {
    ASSERT_TRUE(r->ok) << r->error;
    EXPECT_GE(r->end_us - r->start_us, 100'000);
  }
  // Different cores: the intervals intersect.
  EXPECT_LT(std::max(cube_a.start_us, vector_a.start_us), std::min(cube_a.end_us, vector_a.end_us));
  // One lane runs one task at a time, in order.
  EXPECT_LE(cube_a.end_us, cube_b.start_us);
}

Buffer OneByte(std::string dtype, std::vector<int64_t> shape) {
  Buffer b;
  b.data = {std::byte{1}};
  b.shape = std::move(shape);
  b.dtype = std::move(dtype);
  return b;
}

TEST_F(WorkerTasksTest, OutputsNoPeerCouldFetchFailTheirTask) {
  // Were they stored as done, every reader on another worker would fail
  // ("data meta: bad buffer count") and rerun the producer to no end.
  extra_kernels_.push_back(
      {"many", [](const KernelArgs&, std::span<const Buffer>) -> std::vector<Buffer> {
         return std::vector<Buffer>(kMaxOutputBuffers + 1, OneByte("u8", {1}));
       }});
  extra_kernels_.push_back(
      {"long_dtype", [](const KernelArgs&, std::span<const Buffer>) -> std::vector<Buffer> {
         return {OneByte(std::string(kMaxDtypeBytes + 1, 'z'), {1})};
       }});
  extra_kernels_.push_back(
      {"deep", [](const KernelArgs&, std::span<const Buffer>) -> std::vector<Buffer> {
         return {OneByte("u8", std::vector<int64_t>(kMaxRank + 1, 1))};
       }});
  extra_kernels_.push_back(
      {"at_bounds", [](const KernelArgs&, std::span<const Buffer>) -> std::vector<Buffer> {
         return {OneByte(std::string(kMaxDtypeBytes, 'z'), std::vector<int64_t>(kMaxRank, 1))};
       }});
  ASSERT_NO_FATAL_FAILURE(StartRegistered());
  auto results = RunOnCube({"many", "long_dtype", "deep", "at_bounds"});
  ASSERT_EQ(results.size(), 4u);
  EXPECT_EQ(results[Key(1, 0)].error,
            "kernel 'many' returned 65537 output buffers, over the 65536 a task may return");
  EXPECT_EQ(results[Key(1, 1)].error,
            "kernel 'long_dtype' returned outputs[0]: a dtype of 65 bytes, over the 64 allowed");
  EXPECT_EQ(results[Key(1, 2)].error,
            "kernel 'deep' returned outputs[0]: a shape of 33 dimensions, over the 32 allowed");
  EXPECT_TRUE(results[Key(1, 3)].ok) << results[Key(1, 3)].error;
}

TEST_F(WorkerTasksTest, ThrowingKernelFailsItsTaskAndWorkerKeepsServing) {
  extra_kernels_.push_back(
      {"boom", [](const KernelArgs&, std::span<const Buffer>) -> std::vector<Buffer> {
         throw std::runtime_error("boom: bad input");
       }});
  extra_kernels_.push_back(
      {"odd", [](const KernelArgs&, std::span<const Buffer>) -> std::vector<Buffer> { throw 42; }});
  ASSERT_NO_FATAL_FAILURE(StartRegistered());
  auto results = RunOnCube({"boom", "odd", "noop"});
  ASSERT_EQ(results.size(), 3u);
  EXPECT_FALSE(results[Key(1, 0)].ok);
  EXPECT_EQ(results[Key(1, 0)].error, "boom: bad input");
  EXPECT_FALSE(results[Key(1, 1)].ok);
  EXPECT_THAT(results[Key(1, 1)].error, HasSubstr("non-standard exception"));
  EXPECT_TRUE(results[Key(1, 2)].ok) << results[Key(1, 2)].error;
  // Still serving after the failures.
  controller_.Send(AssignBatch{{Task(2, 0, "noop", CoreKind::kCube, 0)}});
  EXPECT_TRUE(CollectResults(1)[Key(2, 0)].ok);
}

TEST_F(WorkerTasksTest, UnknownKernelOrLaneFailsTheTaskAtOnce) {
  ASSERT_NO_FATAL_FAILURE(StartRegistered());
  AssignBatch batch;
  batch.tasks.push_back(Task(1, 0, "nope", CoreKind::kCube, 0));
  batch.tasks.push_back(Task(1, 1, "noop", CoreKind::kVector, 5));
  batch.tasks.push_back(Task(1, 2, "noop", CoreKind::kVector, 0));
  controller_.Send(batch);

  auto results = CollectResults(3);
  ASSERT_EQ(results.size(), 3u);
  EXPECT_FALSE(results[Key(1, 0)].ok);
  EXPECT_THAT(results[Key(1, 0)].error, HasSubstr("unknown kernel 'nope'"));
  EXPECT_FALSE(results[Key(1, 1)].ok);
  EXPECT_THAT(results[Key(1, 1)].error, HasSubstr("lane 5 out of range"));
  EXPECT_TRUE(results[Key(1, 2)].ok);
}

TEST_F(WorkerTasksTest, MalformedFramesAreDroppedAndCounted) {
  ASSERT_NO_FATAL_FAILURE(StartRegistered());
  const uint32_t seed = 20240611;
  SCOPED_TRACE("random frames seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  auto random_bytes = [&rng](size_t n) {
    std::string s(n, '\0');
    for (char& c : s) c = static_cast<char>(rng() & 0xff);
    return s;
  };
  EncodedFrames good = Encode(AssignBatch{{Task(9, 0, "noop", CoreKind::kCube, 0)}});
  std::string wrong_version = good.header;
  wrong_version[2] = static_cast<char>(kProtocolVersion + 1);

  controller_.SendRaw({random_bytes(37)});                                        // one frame
  controller_.SendRaw({good.header, good.body.substr(0, good.body.size() / 2)});  // truncated
  controller_.SendRaw({wrong_version, good.body});                                // wrong version
  controller_.SendRaw({random_bytes(4), random_bytes(64)});                       // random pair
  controller_.SendRaw({good.header, good.body, random_bytes(3)});                 // extra frame
  constexpr uint64_t kBad = 5;

  // Still serving: a good batch after the garbage runs.
  controller_.Send(AssignBatch{{Task(1, 0, "noop", CoreKind::kCube, 0)}});
  auto results = CollectResults(1);
  ASSERT_EQ(results.size(), 1u);
  EXPECT_TRUE(results.begin()->second.ok);
  EXPECT_EQ(results.begin()->first, Key(1, 0));

  std::optional<Heartbeat> hb =
      controller_.WaitFor<Heartbeat>([](const Heartbeat& h) { return h.dropped_frames > 0; });
  ASSERT_TRUE(hb) << "no heartbeat reported dropped frames";
  EXPECT_EQ(hb->dropped_frames, kBad);
  EXPECT_EQ(hb->worker_id, kWorkerId);
}

TEST_F(WorkerTasksTest, RandomFramesNeverStopTheWorker) {
  ASSERT_NO_FATAL_FAILURE(StartRegistered());
  const uint32_t seed = 7771;
  SCOPED_TRACE("random frames seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  auto random_bytes = [&rng](size_t n) {
    std::string s(n, '\0');
    for (char& c : s) c = static_cast<char>(rng() & 0xff);
    return s;
  };
  constexpr int kMessages = 500;
  for (int i = 0; i < kMessages; ++i) {
    // Half carry a valid header of a random type, so the body decoder runs.
    std::string header = random_bytes(4);
    if (i % 2 == 0) header = EncodeHeader(static_cast<MsgType>(rng() % 12));
    std::vector<std::string> frames = {header};
    const size_t extra = rng() % 4;
    for (size_t f = 0; f < extra; ++f) frames.push_back(random_bytes(8 + rng() % 57));
    controller_.SendRaw(frames);
  }
  controller_.Send(AssignBatch{{Task(1, 0, "noop", CoreKind::kCube, 0)}});
  auto results = CollectResults(1);
  ASSERT_EQ(results.size(), 1u) << "the worker stopped serving";
  EXPECT_TRUE(results[Key(1, 0)].ok);
  std::optional<Heartbeat> hb = controller_.WaitFor<Heartbeat>();
  ASSERT_TRUE(hb);
  EXPECT_EQ(hb->dropped_frames, uint64_t{kMessages});
}

TEST_F(WorkerTasksTest, CancelJobDropsQueuedTasksOnly) {
  AddGate();
  ASSERT_NO_FATAL_FAILURE(StartRegistered());
  controller_.Send(AssignBatch{{Task(1, 0, "gate", CoreKind::kCube, 0)}});
  ASSERT_TRUE(GateStarted());

  AssignBatch queued;
  for (uint32_t t = 1; t <= 3; ++t) queued.tasks.push_back(Task(1, t, "noop", CoreKind::kCube, 0));
  queued.tasks.push_back(Task(2, 0, "noop", CoreKind::kCube, 0));
  controller_.Send(queued);
  controller_.Send(CancelJob{1});
  // The heartbeat counts the running gate and job 2's task once the cancel is in.
  EXPECT_TRUE(controller_.WaitFor<Heartbeat>([](const Heartbeat& h) { return h.running == 2; }));
  OpenGate();

  // Job 2's task sits behind job 1's on the lane: once it is done, any
  // result of a cancelled task would have come.
  std::map<Key, TaskResult> got = ResultsUntil(Key(2, 0));
  ASSERT_TRUE(got.contains(Key(2, 0))) << "job 2's task never finished";
  EXPECT_TRUE(got[Key(1, 0)].ok);
  EXPECT_EQ(got.size(), 2u) << "a cancelled task ran";
  EXPECT_TRUE(controller_.WaitFor<Heartbeat>([](const Heartbeat& h) { return h.running == 0; }));
}

// A gang member dispatched behind a busy lane, whose gang starts over (or
// whose job fails) before it starts: the controller's CancelRuns drops it
// from the queue. It must never run, or it would hold the lane waiting for
// peers that moved on, for the whole peer time-out.
TEST_F(WorkerTasksTest, CancelRunsDropsAQueuedGangMemberBeforeItWaitsForPeers) {
  options_.peer_timeout_ms = 60'000;  // far beyond the deadline of every wait here
  AddGate();
  ASSERT_NO_FATAL_FAILURE(StartRegistered());
  controller_.Send(AssignBatch{{Task(1, 0, "gate", CoreKind::kVector, 0)}});
  ASSERT_TRUE(GateStarted());

  // Rank 0 of a gang whose rank 1 never answers; queued behind the gate.
  TaskAssign member = Task(1, 1, "allreduce", CoreKind::kVector, 0, {{"n", int64_t{16}}});
  member.gang = GangInfo{0, {"tcp://127.0.0.1:1", "tcp://127.0.0.1:2"}, 77};
  controller_.Send(AssignBatch{{member, Task(2, 0, "noop", CoreKind::kVector, 0)}});
  controller_.Send(CancelRuns{1, {1}});
  EXPECT_TRUE(controller_.WaitFor<Heartbeat>([](const Heartbeat& h) { return h.running == 2; }))
      << "the queued member was not dropped";
  OpenGate();

  // Job 2's task is behind the member on the lane: it finishes within the
  // deadline only if the member never ran.
  std::map<Key, TaskResult> got = ResultsUntil(Key(2, 0));
  ASSERT_TRUE(got.contains(Key(2, 0))) << "the lane is held by the cancelled gang member";
  EXPECT_TRUE(got[Key(1, 0)].ok);
  EXPECT_FALSE(got.contains(Key(1, 1))) << "the cancelled member ran";
}

// A running run the controller cancels (CancelRuns: it ended the run, or
// gave it to another worker) sends no result, nor is it reported as held
// or started: a "cancelled" failure sent later, to a controller restarted
// meanwhile that adopted the run from this worker, would fail it.
TEST_F(WorkerTasksTest, ARunningRunTheControllerCancelsSendsNoResult) {
  AddGate();
  ASSERT_NO_FATAL_FAILURE(StartRegistered());
  controller_.Send(AssignBatch{{Task(1, 0, "gate", CoreKind::kCube, 0)}});
  ASSERT_TRUE(GateStarted());
  controller_.Send(CancelRuns{1, {0}});
  controller_.Send(AssignBatch{{Task(2, 0, "noop", CoreKind::kCube, 0)}});
  EXPECT_TRUE(controller_.WaitFor<Heartbeat>([](const Heartbeat& h) {
    return h.started.empty() || h.started[0].job != 1;
  })) << "the cancelled run is still reported started";
  OpenGate();
  std::map<Key, TaskResult> got = ResultsUntil(Key(2, 0));
  ASSERT_TRUE(got.contains(Key(2, 0))) << "job 2's task never finished";
  EXPECT_FALSE(got.contains(Key(1, 0))) << "the cancelled run's result was sent";
}

// A restarted controller numbers attempts from 0 again: it may place a run
// here under the very (job, run, attempt) of one it cancelled that still
// lingers on another lane (a cancelled collective waits out its sockets'
// linger). The new one's result is sent, the lingering one's is not.
TEST_F(WorkerTasksTest, ACancelledRunsResultIsDroppedNotTheNextOneUnderItsAttempt) {
  AddGate();
  ASSERT_NO_FATAL_FAILURE(StartRegistered());
  controller_.Send(AssignBatch{{Task(1, 0, "gate", CoreKind::kCube, 0)}});
  ASSERT_TRUE(GateStarted());
  controller_.Send(CancelRuns{1, {0}});
  controller_.Send(AssignBatch{{Task(1, 0, "noop", CoreKind::kVector, 0)}});
  std::map<Key, TaskResult> got = ResultsUntil(Key(1, 0));
  ASSERT_TRUE(got.contains(Key(1, 0))) << "the run placed again sent no result";
  EXPECT_TRUE(got[Key(1, 0)].ok) << got[Key(1, 0)].error;

  OpenGate();
  controller_.Send(AssignBatch{{Task(2, 0, "noop", CoreKind::kCube, 0)}});
  got = ResultsUntil(Key(2, 0));
  EXPECT_FALSE(got.contains(Key(1, 0))) << "the cancelled run's result was sent";
  EXPECT_TRUE(controller_.WaitFor<Heartbeat>([](const Heartbeat& h) { return h.running == 0; }))
      << "the dropped result was not counted as ended";
}

}  // namespace
}  // namespace hmpmd::worker
