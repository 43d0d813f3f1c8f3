// Fetching a task's inputs: every producer at once, ahead of a queued task
// while the lane runs another, within the store's cap, freed when the task
// is dropped; values checked element by element. Producers are real data
// sockets (DataServer) or raw ROUTERs of this process, on 127.0.0.1.
#include <gtest/gtest.h>
#include <spdlog/logger.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "completion_queue.h"
#include "data_plane.h"
#include "data_producer.h"
#include "data_server.h"
#include "hmpmd/protocol/data_frames.h"
#include "input_fetcher.h"
#include "lane.h"
#include "peer_fetch.h"
#include "wakeup_fd.h"

namespace hmpmd::worker {
namespace {

using std::chrono::milliseconds;
constexpr JobId kJob = 5;

// Polls `done` every 2 ms for at most 10 s.
bool WaitUntil(const std::function<bool()>& done) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!done()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(milliseconds(2));
  }
  return true;
}

using ::hmpmd::testing::kTestDataToken;
using testing::Producer;
using testing::SameValues;
using testing::Values;

// Keeps Values(n, seed) as the outputs of run `run` for `reads` reads.
InputRef Keep(Producer& p, uint32_t run, size_t n, uint32_t seed, uint32_t reads = 1) {
  EXPECT_TRUE(p.store.Put(kJob, run, {Values(n, seed)}, reads).ok());
  return InputRef{run, p.server.endpoint(), n * sizeof(float)};
}

TEST(InputFetcherTest, FetchesFromEveryProducerAtOnce) {
  // Three producers that answer only once all three requests are in: a
  // fetcher that asked one after another would never get an answer.
  zmq::context_t ctx(1);
  testing::AdmitAll admit(&ctx);
  std::vector<zmq::socket_t> routers;
  std::vector<InputRef> inputs;
  for (uint32_t i = 0; i < 3; ++i) {
    routers.emplace_back(ctx, zmq::socket_type::router);
    routers.back().set(zmq::sockopt::linger, 0);
    testing::MakeFakeDataSocket(routers.back());
    routers.back().bind("tcp://127.0.0.1:*");
    inputs.push_back(
        InputRef{10 + i, routers.back().get(zmq::sockopt::last_endpoint), 256 * sizeof(float)});
  }
  ObjectStore mine(0);
  DataTokens tokens(kTestDataToken);
  InputFetcher fetcher(&ctx, &mine, &tokens, InputFetcherOptions{0, 1 << 20, 5'000'000});
  PrefetchedInputs ahead = fetcher.Begin(kJob, inputs, "tcp://127.0.0.1:0");
  ASSERT_TRUE(ahead);
  std::vector<std::vector<zmq::message_t>> requests(3);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  size_t seen = 0;
  while (seen < 3 && std::chrono::steady_clock::now() < deadline) {
    for (size_t i = 0; i < 3; ++i) {
      if (!requests[i].empty()) continue;
      zmq::message_t part;
      if (!routers[i].recv(part, zmq::recv_flags::dontwait)) continue;
      requests[i].push_back(std::move(part));
      while (requests[i].back().more()) {
        zmq::message_t next;
        ASSERT_TRUE(routers[i].recv(next));
        requests[i].push_back(std::move(next));
      }
      ++seen;
    }
    std::this_thread::sleep_for(milliseconds(1));
  }
  ASSERT_EQ(seen, 3u) << "the producers were not asked at once";
  for (size_t i = 0; i < 3; ++i) {
    ASSERT_EQ(requests[i].size(), 2u);
    DataHeader reply;
    reply.op = static_cast<uint8_t>(DataOp::kFetchReply);
    reply.key = kJob;
    reply.run = inputs[i].run;
    const BufferList outputs = {Values(256, static_cast<uint32_t>(i + 1))};
    routers[i].send(requests[i][0], zmq::send_flags::sndmore);
    routers[i].send(zmq::buffer(&reply, sizeof(reply)), zmq::send_flags::sndmore);
    routers[i].send(zmq::buffer(EncodeMeta(outputs)), zmq::send_flags::sndmore);
    routers[i].send(zmq::buffer(outputs[0].data.data(), outputs[0].data.size()),
                    zmq::send_flags::none);
  }
  ASSERT_TRUE(ahead.WaitAll(nullptr));
  for (size_t i = 0; i < 3; ++i) {
    std::optional<Result<BufferList>> got = ahead.Take(i);
    ASSERT_TRUE(got.has_value());
    ASSERT_TRUE(got->ok()) << got->status().ToString();
    ASSERT_EQ((*got)->size(), 1u);
    EXPECT_TRUE(SameValues((**got)[0], 256, static_cast<uint32_t>(i + 1)));
  }
  EXPECT_EQ(fetcher.held_bytes(), 0u);
}

TEST(InputFetcherTest, ADroppedTaskFreesWhatWasFetchedAhead) {
  zmq::context_t ctx(1);
  Producer producer;
  const InputRef in = Keep(producer, 3, 4096, 3);
  ObjectStore mine(0);
  DataTokens tokens(kTestDataToken);
  InputFetcher fetcher(&ctx, &mine, &tokens, InputFetcherOptions{0, 1 << 20, 5'000'000});
  {
    PrefetchedInputs ahead = fetcher.Begin(kJob, {in}, "tcp://127.0.0.1:0");
    ASSERT_TRUE(WaitUntil([&] { return fetcher.fetches_done() == 1; }));
    EXPECT_EQ(fetcher.fetched_ahead(), 1u);
    EXPECT_EQ(fetcher.held_bytes(), in.bytes) << "fetched, waiting for its task";
    EXPECT_EQ(producer.store.entries(), 1u) << "fetched without taking its one read";
    EXPECT_EQ(fetcher.batches(), 1u);
  }  // the task is dropped before it ran
  EXPECT_EQ(fetcher.held_bytes(), 0u);
  EXPECT_EQ(fetcher.batches(), 0u);
  EXPECT_EQ(fetcher.reads_taken(), 0u);
  // The task runs elsewhere: that worker's fetch finds the output and
  // takes its read.
  Result<BufferList> there =
      FetchFromPeer(&ctx, in.endpoint, kTestDataToken, kJob, in.run, 5'000'000);
  ASSERT_TRUE(there.ok()) << there.status().ToString();
  EXPECT_TRUE(SameValues((*there)[0], 4096, 3));
  EXPECT_EQ(producer.store.entries(), 0u);
}

TEST(InputFetcherTest, AFetchInFlightOfADroppedTaskIsFreedWhenItReturns) {
  zmq::context_t ctx(1);
  testing::AdmitAll admit(&ctx);
  zmq::socket_t silent(ctx, zmq::socket_type::router);  // takes the request, answers late
  silent.set(zmq::sockopt::linger, 0);
  testing::MakeFakeDataSocket(silent);
  silent.bind("tcp://127.0.0.1:*");
  const InputRef in{4, silent.get(zmq::sockopt::last_endpoint), 1024};
  ObjectStore mine(0);
  DataTokens tokens(kTestDataToken);
  InputFetcher fetcher(&ctx, &mine, &tokens, InputFetcherOptions{0, 1 << 20, 5'000'000});
  {
    PrefetchedInputs ahead = fetcher.Begin(kJob, {in}, "tcp://127.0.0.1:0");
    zmq::message_t id, header;
    ASSERT_TRUE(silent.recv(id));
    ASSERT_TRUE(silent.recv(header));
    EXPECT_EQ(fetcher.held_bytes(), in.bytes) << "counted while in flight";
    // Dropped now; the answer below comes for nobody.
    ahead = PrefetchedInputs();
    EXPECT_EQ(fetcher.batches(), 0u);
    DataHeader reply;
    reply.op = static_cast<uint8_t>(DataOp::kFetchReply);
    reply.key = kJob;
    reply.run = in.run;
    const BufferList outputs = {Values(256, 4)};
    silent.send(id, zmq::send_flags::sndmore);
    silent.send(zmq::buffer(&reply, sizeof(reply)), zmq::send_flags::sndmore);
    silent.send(zmq::buffer(EncodeMeta(outputs)), zmq::send_flags::sndmore);
    silent.send(zmq::buffer(outputs[0].data.data(), outputs[0].data.size()), zmq::send_flags::none);
  }
  ASSERT_TRUE(WaitUntil([&] { return fetcher.fetches_done() == 1; }));
  EXPECT_EQ(fetcher.held_bytes(), 0u);
}

TEST(InputFetcherTest, NothingIsFetchedAheadWithAZeroBudget) {
  zmq::context_t ctx(1);
  Producer producer;
  const InputRef in = Keep(producer, 3, 512, 3);
  ObjectStore mine(0);
  DataTokens tokens(kTestDataToken);
  InputFetcher fetcher(&ctx, &mine, &tokens, InputFetcherOptions{0, 0, 5'000'000});
  PrefetchedInputs ahead = fetcher.Begin(kJob, {in}, "tcp://127.0.0.1:0");
  std::this_thread::sleep_for(milliseconds(100));
  EXPECT_EQ(fetcher.fetches_done(), 0u);
  EXPECT_EQ(producer.store.entries(), 1u);
  // The task starts: fetched now, whatever the budget.
  ASSERT_TRUE(ahead.WaitAll(nullptr));
  std::optional<Result<BufferList>> got = ahead.Take(0);
  ASSERT_TRUE(got.has_value() && got->ok());
  EXPECT_TRUE(SameValues((**got)[0], 512, 3));
  EXPECT_EQ(fetcher.fetched_ahead(), 0u);
}

class DataPlaneInputsTest : public ::testing::Test {
 protected:
  DataPlaneInputsTest() = default;
  void SetUp() override {
    plane_.SetDataToken(kTestDataToken);
    ASSERT_TRUE(plane_.Start().ok());
  }
  TaskAssign Consumer(uint32_t task, std::vector<InputRef> inputs) {
    TaskAssign a;
    a.job = kJob;
    a.task = task;
    a.attempt = 1;
    a.kernel = "record";
    a.inputs = std::move(inputs);
    return a;
  }

  spdlog::logger log_{"test"};
  zmq::context_t ctx_{1};
  Producer producer_;
  // A 1 MiB store; fetches time out after 500 ms.
  DataPlane plane_{DataPlaneOptions{"127.0.0.1", 1 << 20, 500'000, 1 << 20}, &log_};
};

TEST_F(DataPlaneInputsTest, FetchesAheadStayWithinTheStoreCap) {
  // 768 KiB of outputs held: a 512 KiB input does not fit beside them.
  ASSERT_TRUE(plane_.store().Put(kJob, 100, {Values(196608, 9)}, 0).ok());
  const InputRef in = Keep(producer_, 1, 131072, 1);
  PrefetchedInputs ahead = plane_.PrefetchInputs(Consumer(2, {in}));
  ASSERT_TRUE(ahead);
  std::this_thread::sleep_for(milliseconds(100));
  EXPECT_EQ(plane_.fetcher().fetches_done(), 0u) << "fetched ahead past the cap";
  EXPECT_EQ(plane_.fetcher().held_bytes(), 0u);
  EXPECT_EQ(producer_.store.entries(), 1u);
  // Room again (the outputs were read): now it is fetched ahead.
  plane_.store().FreeRun(kJob, 100);
  ASSERT_TRUE(WaitUntil([&] { return plane_.fetcher().fetches_done() == 1; }));
  EXPECT_EQ(plane_.fetcher().fetched_ahead(), 1u);
  EXPECT_LE(plane_.store().used_bytes() + plane_.fetcher().held_bytes(), uint64_t{1} << 20);
  std::vector<uint32_t> lost;
  Result<InputSet> got = plane_.GatherInputs(kJob, {in}, &ahead, nullptr, &lost);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ(got->buffers().size(), 1u);
  EXPECT_TRUE(SameValues(got->buffers()[0], 131072, 1));
  EXPECT_EQ(plane_.fetcher().held_bytes(), 0u);
}

TEST_F(DataPlaneInputsTest, AStartingTaskFetchesPastTheCap) {
  ASSERT_TRUE(plane_.store().Put(kJob, 100, {Values(196608, 9)}, 0).ok());
  const InputRef in = Keep(producer_, 1, 131072, 1);
  PrefetchedInputs ahead = plane_.PrefetchInputs(Consumer(2, {in}));
  Result<InputSet> got = plane_.GatherInputs(kJob, {in}, &ahead);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_TRUE(SameValues(got->buffers()[0], 131072, 1));
  EXPECT_EQ(plane_.fetcher().fetched_ahead(), 0u);
}

TEST_F(DataPlaneInputsTest, InputsComeInInputOrderAndOneLocalListIsNotCopied) {
  // Local run 7 (two buffers, read twice), remote runs 1 and 2.
  ASSERT_TRUE(plane_.store().Put(kJob, 7, {Values(100, 7), Values(50, 8)}, 2).ok());
  const InputRef local{7, plane_.endpoint(), 150 * sizeof(float)};
  const InputRef a = Keep(producer_, 1, 300, 1), b = Keep(producer_, 2, 200, 2);
  Result<InputSet> got = plane_.GatherInputs(kJob, {a, local, InputRef{9, "", 0}, b});
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  const std::span<const Buffer> all = got->buffers();
  ASSERT_EQ(all.size(), 4u);
  EXPECT_TRUE(SameValues(all[0], 300, 1));
  EXPECT_TRUE(SameValues(all[1], 100, 7));
  EXPECT_TRUE(SameValues(all[2], 50, 8));
  EXPECT_TRUE(SameValues(all[3], 200, 2));
  // A single local input: the kernel gets the stored list itself.
  ASSERT_TRUE(plane_.store().Put(kJob, 8, {Values(64, 8)}, 2).ok());
  std::shared_ptr<const BufferList> kept = plane_.store().Read(kJob, 8);
  ASSERT_NE(kept, nullptr);
  ASSERT_NE(plane_.store().Read(kJob, 7), nullptr);  // run 7's last read
  Result<InputSet> one = plane_.GatherInputs(kJob, {InputRef{8, plane_.endpoint(), 256}});
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  EXPECT_EQ(one->buffers().data(), kept->data()) << "a single local input was copied";
  EXPECT_EQ(plane_.store().entries(), 0u) << "both runs read to the end and freed";
}

TEST_F(DataPlaneInputsTest, AnInputFetchedBeforeItsProducerFinishedIsFetchedAgain) {
  // Fetched ahead while the producer held nothing yet (a task dispatched
  // early): the producer answers "no outputs"; by the time the task runs
  // it has them.
  const InputRef in{6, producer_.server.endpoint(), 64 * sizeof(float)};
  PrefetchedInputs ahead = plane_.PrefetchInputs(Consumer(2, {in}));
  ASSERT_TRUE(WaitUntil([&] { return plane_.fetcher().fetches_done() == 1; }));
  Keep(producer_, 6, 64, 6);
  std::vector<uint32_t> lost;
  Result<InputSet> got = plane_.GatherInputs(kJob, {in}, &ahead, nullptr, &lost);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_TRUE(lost.empty());
  EXPECT_TRUE(SameValues(got->buffers()[0], 64, 6));
}

TEST_F(DataPlaneInputsTest, EveryLostInputIsNamedAndLocalOnesAreNotRead) {
  ASSERT_TRUE(plane_.store().Put(kJob, 7, {Values(10, 7)}, 1).ok());
  const InputRef dead{1, "tcp://127.0.0.1:1", 64}, nowhere{2, "", 64},
      local{7, plane_.endpoint(), 40}, fine = Keep(producer_, 3, 16, 3);
  std::vector<uint32_t> lost;
  Result<InputSet> got =
      plane_.GatherInputs(kJob, {local, dead, fine, nowhere}, nullptr, nullptr, &lost);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(lost, (std::vector<uint32_t>{1, 2}));
  EXPECT_NE(got.status().message().find("job 5 run 1"), std::string::npos)
      << got.status().message();
  EXPECT_EQ(plane_.store().entries(), 1u) << "a doomed task took a read of its local input";
}

TEST_F(DataPlaneInputsTest, EveryMissingLocalInputIsNamedAndThePresentOnesAreNotRead) {
  // Two local inputs gone, one there: all gone ones are named at once, and
  // the one there keeps its read for the rerun (a task that took it lost
  // it on its next attempt, one input per attempt).
  ASSERT_TRUE(plane_.store().Put(kJob, 7, {Values(10, 7)}, 1).ok());
  const InputRef there{7, plane_.endpoint(), 40}, gone_a{8, plane_.endpoint(), 40},
      gone_b{9, plane_.endpoint(), 40};
  std::vector<uint32_t> lost;
  Result<InputSet> got =
      plane_.GatherInputs(kJob, {there, gone_a, gone_b}, nullptr, nullptr, &lost);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(lost, (std::vector<uint32_t>{8, 9}));
  EXPECT_NE(plane_.store().Peek(kJob, 7), nullptr) << "a doomed task took a read of run 7";
}

TEST_F(DataPlaneInputsTest, AFetchedInputIsReadOnlyOnceItsTaskRuns) {
  const InputRef in = Keep(producer_, 20, 300, 20);  // one read
  PrefetchedInputs ahead = plane_.PrefetchInputs(Consumer(4, {in}));
  ASSERT_TRUE(WaitUntil([&] { return plane_.fetcher().fetches_done() == 1; }));
  EXPECT_EQ(producer_.store.entries(), 1u) << "read taken by the fetch ahead";
  Result<InputSet> got = plane_.GatherInputs(kJob, {in}, &ahead);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_TRUE(SameValues(got->buffers()[0], 300, 20));
  EXPECT_EQ(plane_.fetcher().reads_taken(), 1u);
  EXPECT_TRUE(WaitUntil([&] { return producer_.store.entries() == 0; }))
      << "the task ran and its input's last read was not taken";
}

TEST_F(DataPlaneInputsTest, ATaskShortOfAnInputTakesNoReadOfItsFetchedOnes) {
  const InputRef fine = Keep(producer_, 21, 300, 21), dead{22, "tcp://127.0.0.1:1", 64};
  std::vector<uint32_t> lost;
  Result<InputSet> got = plane_.GatherInputs(kJob, {fine, dead}, nullptr, nullptr, &lost);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(lost, std::vector<uint32_t>{22});
  EXPECT_EQ(plane_.fetcher().reads_taken(), 0u);
  // The rerun, here or elsewhere, finds the fetched input where it was.
  Result<BufferList> rerun =
      FetchFromPeer(&ctx_, fine.endpoint, kTestDataToken, kJob, fine.run, 5'000'000);
  ASSERT_TRUE(rerun.ok()) << rerun.status().ToString();
  EXPECT_TRUE(SameValues((*rerun)[0], 300, 21));
  EXPECT_EQ(producer_.store.entries(), 0u);
}

TEST_F(DataPlaneInputsTest, ALaneFetchesQueuedTasksAheadAndFreesACancelledOnesInputs) {
  // cube0 runs `gate` until the test opens it; behind it wait `cancelled`
  // and `kept`, each with a remote input. Both inputs arrive while the
  // gate runs; dropping `cancelled` frees its input at once.
  static std::atomic<bool> open{false};
  static std::atomic<bool> entered{false};
  static std::vector<Buffer> recorded;
  open = false;
  entered = false;
  recorded.clear();
  const Kernel gate = [](const KernelArgs&, std::span<const Buffer>) {
    entered = true;
    for (int i = 0; i < 10'000 && !open.load(); ++i) std::this_thread::sleep_for(milliseconds(1));
    return BufferList{};
  };
  const Kernel record = [](const KernelArgs&, std::span<const Buffer> in) {
    recorded.assign(in.begin(), in.end());
    return BufferList{};
  };
  WakeupFd wake;
  CompletionQueue done(&wake);
  auto lane = std::make_unique<Lane>(CoreKind::kCube, 0, &done, &plane_, &log_);
  TaskAssign first = Consumer(1, {});
  first.kernel = "gate";
  lane->Push(LaneTask{first, &gate, plane_.PrefetchInputs(first)});
  ASSERT_TRUE(WaitUntil([] { return entered.load(); }));
  const InputRef a = Keep(producer_, 10, 32768, 10), b = Keep(producer_, 11, 65536, 11);
  const TaskAssign cancelled = Consumer(2, {a}), kept = Consumer(3, {b});
  lane->Push(LaneTask{cancelled, &record, plane_.PrefetchInputs(cancelled)});
  lane->Push(LaneTask{kept, &record, plane_.PrefetchInputs(kept)});
  ASSERT_TRUE(WaitUntil([&] { return plane_.fetcher().fetches_done() == 2; }))
      << "queued tasks' inputs were not fetched while the lane was busy";
  EXPECT_EQ(plane_.fetcher().fetched_ahead(), 2u);
  EXPECT_EQ(plane_.fetcher().held_bytes(), a.bytes + b.bytes);
  EXPECT_EQ(lane->CancelRun(kJob, 2), 1u);
  EXPECT_EQ(plane_.fetcher().held_bytes(), b.bytes) << "the cancelled task's input was kept";
  EXPECT_EQ(plane_.fetcher().batches(), 1u);
  open = true;
  std::vector<TaskResult> results;
  ASSERT_TRUE(WaitUntil([&] {
    done.TakeAll(&results);
    return results.size() >= 2;
  }));
  ASSERT_EQ(results.size(), 2u) << "the cancelled task ran";
  EXPECT_EQ(results[0].task, 1u);
  EXPECT_EQ(results[1].task, 3u);
  EXPECT_TRUE(results[1].ok) << results[1].error;
  ASSERT_EQ(recorded.size(), 1u);
  EXPECT_TRUE(SameValues(recorded[0], 65536, 11));
  EXPECT_EQ(plane_.fetcher().held_bytes(), 0u);
  lane.reset();
  EXPECT_EQ(plane_.fetcher().batches(), 0u);
}

}  // namespace
}  // namespace hmpmd::worker
