// Fetch connections kept per producer (PeerConnections): fetches from many
// threads at once share them and each gets its own output, element by
// element; a producer that dies mid-fetch or between fetches fails the
// fetch (the input is reported lost), and its connection is not kept.
// Producers are real data sockets (DataServer) or raw ROUTERs of this
// process, on 127.0.0.1.
#include <gtest/gtest.h>
#include <spdlog/logger.h>

#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "data_plane.h"
#include "data_producer.h"
#include "data_server.h"
#include "hmpmd/protocol/data_frames.h"
#include "peer_fetch.h"

namespace hmpmd::worker {
namespace {

constexpr JobId kJob = 9;

using ::hmpmd::testing::kTestDataToken;
using testing::Producer;
using testing::Values;

// Element by element: `got` holds exactly one buffer, Values(n, seed).
::testing::AssertionResult SameValues(const BufferList& got, size_t n, uint32_t seed) {
  if (got.size() != 1) return ::testing::AssertionFailure() << got.size() << " buffers";
  return testing::SameValues(got[0], n, seed);
}

// Elements of run `run`: small ones, and two larger than a reply chunk.
size_t ElementsOf(uint32_t run) {
  if (run == 0) return (size_t{3} << 20) / sizeof(float) + 5;  // 3 MiB and a bit
  if (run == 1) return (size_t{1} << 20) / sizeof(float);      // exactly 1 MiB
  return 1000 + 37 * run;
}

TEST(PeerConnectionsTest, ConcurrentFetchesShareConnectionsAndGetTheirOwnOutputs) {
  zmq::context_t ctx(1);
  Producer a, b;
  constexpr uint32_t kRuns = 12;
  for (uint32_t run = 0; run < kRuns; ++run) {
    // Kept (0 reads): every fetch reads them again.
    ASSERT_TRUE(a.store.Put(kJob, run, {Values(ElementsOf(run), run)}, 0).ok());
    ASSERT_TRUE(b.store.Put(kJob, run, {Values(ElementsOf(run), 100 + run)}, 0).ok());
  }
  DataTokens tokens(kTestDataToken);
  PeerConnections connections(&ctx, &tokens);
  constexpr int kThreads = 8, kFetches = 24;
  std::vector<std::string> errors(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kFetches; ++i) {
        const bool from_a = (t + i) % 2 == 0;
        const uint32_t run = static_cast<uint32_t>(t * 5 + i * 7) % kRuns;
        Result<BufferList> got =
            connections.Fetch((from_a ? a : b).server.endpoint(), kJob, run, 10'000'000);
        if (!got.ok()) {
          errors[t] = got.status().ToString();
          return;
        }
        ::testing::AssertionResult same =
            SameValues(*got, ElementsOf(run), from_a ? run : 100 + run);
        if (!same) {
          errors[t] = "run " + std::to_string(run) + ": " + same.message();
          return;
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(errors[t], "") << "thread " << t;
  const PeerConnections::Stats s = connections.stats();
  // A thread holds one connection at a time: at most one per thread and
  // producer was ever opened; every other fetch reused one.
  EXPECT_GE(s.opened, 2u);
  EXPECT_LE(s.opened, 2u * kThreads);
  EXPECT_EQ(s.opened + s.reused, uint64_t{kThreads} * kFetches);
  EXPECT_EQ(s.closed, 0u);
  EXPECT_EQ(s.idle, s.opened);
}

TEST(PeerConnectionsTest, AProducerGoneBetweenFetchesFailsTheNextOneAndIsNotKept) {
  zmq::context_t ctx(1);
  DataTokens tokens(kTestDataToken);
  PeerConnections connections(&ctx, &tokens);
  auto producer = std::make_unique<Producer>();
  ASSERT_TRUE(producer->store.Put(kJob, 3, {Values(500, 3)}, 0).ok());
  const std::string endpoint = producer->server.endpoint();
  Result<BufferList> first = connections.Fetch(endpoint, kJob, 3, 2'000'000);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_TRUE(SameValues(*first, 500, 3));
  EXPECT_EQ(connections.stats().idle, 1u);
  producer.reset();  // its socket closes: the kept connection's peer is gone
  Result<BufferList> second = connections.Fetch(endpoint, kJob, 3, 500'000);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), StatusCode::kUnavailable) << second.status().ToString();
  EXPECT_NE(second.status().message().find("job 9 run 3"), std::string::npos);
  const PeerConnections::Stats s = connections.stats();
  EXPECT_EQ(s.idle, 0u);
  EXPECT_GE(s.closed, 1u);
}

TEST(PeerConnectionsTest, APeerThatDiesMidFetchFailsItAtOnce) {
  zmq::context_t ctx(1);
  DataTokens tokens(kTestDataToken);
  PeerConnections connections(&ctx, &tokens);
  testing::AdmitAll admit(&ctx);
  auto router = std::make_unique<zmq::socket_t>(ctx, zmq::socket_type::router);
  router->set(zmq::sockopt::linger, 0);
  testing::MakeFakeDataSocket(*router);
  router->bind("tcp://127.0.0.1:*");
  const std::string endpoint = router->get(zmq::sockopt::last_endpoint);
  Result<BufferList> got = Status::Internal("not run");
  // A long timeout: only the disconnect can end the fetch soon.
  std::thread fetch([&] { got = connections.Fetch(endpoint, kJob, 4, 60'000'000); });
  zmq::message_t id, header;
  router->set(zmq::sockopt::rcvtimeo, 10'000);
  ASSERT_TRUE(router->recv(id));
  ASSERT_TRUE(router->recv(header));
  router.reset();  // took the request, then died
  fetch.join();
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), StatusCode::kUnavailable) << got.status().ToString();
  EXPECT_NE(got.status().message().find("closed the connection"), std::string::npos)
      << got.status().message();
  EXPECT_EQ(connections.stats().idle, 0u);
}

TEST(PeerConnectionsTest, AnInputWhoseProducerDiesMidFetchIsReportedLost) {
  spdlog::logger log("test");
  zmq::context_t ctx(1);
  DataPlane plane(DataPlaneOptions{"127.0.0.1", 0, 60'000'000, 1 << 20}, &log);
  plane.SetDataToken(kTestDataToken);
  ASSERT_TRUE(plane.Start().ok());
  Producer fine;
  ASSERT_TRUE(fine.store.Put(kJob, 1, {Values(64, 1)}, 0).ok());
  // The same producer served a fetch before: its connection is kept.
  Result<InputSet> warm =
      plane.GatherInputs(kJob, {InputRef{1, fine.server.endpoint(), 64 * sizeof(float)}});
  ASSERT_TRUE(warm.ok()) << warm.status().ToString();
  testing::AdmitAll admit(&ctx);
  auto router = std::make_unique<zmq::socket_t>(ctx, zmq::socket_type::router);
  router->set(zmq::sockopt::linger, 0);
  testing::MakeFakeDataSocket(*router);
  router->bind("tcp://127.0.0.1:*");
  const InputRef dying{2, router->get(zmq::sockopt::last_endpoint), 4096};
  const InputRef kept{1, fine.server.endpoint(), 64 * sizeof(float)};
  std::vector<uint32_t> lost;
  Result<InputSet> got = Status::Internal("not run");
  std::thread task([&] { got = plane.GatherInputs(kJob, {kept, dying}, nullptr, nullptr, &lost); });
  zmq::message_t id, header;
  router->set(zmq::sockopt::rcvtimeo, 10'000);
  ASSERT_TRUE(router->recv(id));
  ASSERT_TRUE(router->recv(header));
  router.reset();
  task.join();
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), StatusCode::kUnavailable) << got.status().ToString();
  EXPECT_EQ(lost, std::vector<uint32_t>{2});
  EXPECT_GE(plane.fetcher().connections().stats().reused, 1u);
}

// A fetch reply as frames: header, meta, then `chunks` (views of `bytes`).
struct Reply {
  Reply(const BufferList& buffers, const std::vector<std::pair<size_t, size_t>>& chunks,
        const std::vector<std::byte>& bytes) {
    header.op = static_cast<uint8_t>(DataOp::kFetchReply);
    meta = EncodeMeta(buffers);
    frames = {{&header, sizeof(header)}, {meta.data(), meta.size()}};
    for (auto [off, n] : chunks) frames.push_back({bytes.data() + off, n});
  }
  DataHeader header;
  std::string meta;
  std::vector<FrameView> frames;
};

TEST(FetchReplyTest, ABufferMayComeInOneFrameOrInChunks) {
  const Buffer a = Values(3000, 1), b = Values(10, 2);
  std::vector<std::byte> bytes = a.data;
  bytes.insert(bytes.end(), b.data.begin(), b.data.end());
  const size_t na = a.data.size(), nb = b.data.size();
  // One frame per buffer (as a worker sends buffers up to kFetchChunkBytes).
  Result<BufferList> whole =
      DecodeFetchReply(Reply({a, b}, {{0, na}, {na, nb}}, bytes).frames, "t");
  ASSERT_TRUE(whole.ok()) << whole.status().ToString();
  EXPECT_TRUE(SameValues({(*whole)[0]}, 3000, 1));
  EXPECT_TRUE(SameValues({(*whole)[1]}, 10, 2));
  // Uneven chunks, a buffer's last one shorter.
  Result<BufferList> chunked = DecodeFetchReply(
      Reply({a, b}, {{0, 4096}, {4096, 4096}, {8192, na - 8192}, {na, 8}, {na + 8, nb - 8}}, bytes)
          .frames,
      "t");
  ASSERT_TRUE(chunked.ok()) << chunked.status().ToString();
  EXPECT_TRUE(SameValues({(*chunked)[0]}, 3000, 1));
  EXPECT_TRUE(SameValues({(*chunked)[1]}, 10, 2));
  // An empty buffer is one empty frame.
  Buffer empty;
  Result<BufferList> with_empty =
      DecodeFetchReply(Reply({empty, b}, {{0, 0}, {na, nb}}, bytes).frames, "t");
  ASSERT_TRUE(with_empty.ok()) << with_empty.status().ToString();
  EXPECT_TRUE((*with_empty)[0].data.empty());
  EXPECT_TRUE(SameValues({(*with_empty)[1]}, 10, 2));
}

TEST(FetchReplyTest, AWorkerSendsALargeBufferInChunks) {
  zmq::context_t ctx(1);
  Producer producer;
  const size_t n = ElementsOf(0);  // 3 MiB and 20 bytes
  ASSERT_TRUE(producer.store.Put(kJob, 0, {Values(n, 7), Buffer{}}, 0).ok());
  zmq::socket_t dealer(ctx, zmq::socket_type::dealer);
  dealer.set(zmq::sockopt::linger, 0);
  dealer.set(zmq::sockopt::rcvtimeo, 10'000);
  testing::PresentToken(dealer);
  dealer.connect(producer.server.endpoint());
  DataHeader h;
  h.op = static_cast<uint8_t>(DataOp::kFetch);
  h.key = kJob;
  h.run = 0;
  h.token = kTestDataToken;
  dealer.send(zmq::buffer(&h, sizeof(h)), zmq::send_flags::none);
  std::vector<zmq::message_t> parts;
  do {
    zmq::message_t m;
    ASSERT_TRUE(dealer.recv(m));
    parts.push_back(std::move(m));
  } while (parts.back().more());
  // header, meta, 4 chunks of the first buffer, 1 empty frame for the second
  ASSERT_EQ(parts.size(), 7u);
  for (size_t i = 2; i < 6; ++i) EXPECT_LE(parts[i].size(), kFetchChunkBytes) << "frame " << i;
  EXPECT_EQ(parts[6].size(), 0u);
  std::vector<FrameView> frames;
  for (const zmq::message_t& m : parts) frames.push_back({m.data(), m.size()});
  Result<BufferList> got = DecodeFetchReply(frames, "t");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ(got->size(), 2u);
  EXPECT_TRUE(SameValues({(*got)[0]}, n, 7));
  EXPECT_TRUE((*got)[1].data.empty());
}

TEST(FetchReplyTest, FramesThatDoNotAddUpAreCorruption) {
  const Buffer a = Values(3000, 1), b = Values(10, 2);
  std::vector<std::byte> bytes = a.data;
  bytes.insert(bytes.end(), b.data.begin(), b.data.end());
  const size_t na = a.data.size(), nb = b.data.size();
  const std::vector<std::vector<std::pair<size_t, size_t>>> bad = {
      {{0, na - 4}},                          // short, and no frame for b
      {{0, na + 4}, {na + 4, nb - 4}},        // a frame across two buffers
      {{0, na}, {na, nb}, {0, 4}},            // a frame too many
      {{0, 100}, {100, 0}, {100, na - 100}},  // an empty frame inside a buffer
  };
  for (size_t i = 0; i < bad.size(); ++i) {
    Result<BufferList> got = DecodeFetchReply(Reply({a, b}, bad[i], bytes).frames, "reply");
    ASSERT_FALSE(got.ok()) << "case " << i;
    EXPECT_EQ(got.status().code(), StatusCode::kCorruption) << "case " << i;
    EXPECT_EQ(got.status().message().rfind("reply: ", 0), 0u) << got.status().message();
  }
}

}  // namespace
}  // namespace hmpmd::worker
