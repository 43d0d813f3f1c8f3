// The data socket serves only requests that carry an accepted data token:
// a wrong one gets a fetch refused (with a message), a take-read or a
// collective frame dropped. Requests go over one raw DEALER, in order, so
// a fetch with the right token that comes back means every frame sent
// before it was handled.
#include "data_server.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>
#include <zmq_addon.hpp>

#include "data_producer.h"
#include "data_tokens.h"
#include "hmpmd/protocol/data_auth.h"
#include "hmpmd/protocol/data_frames.h"
#include "peer_fetch.h"
#include "test_data_token.h"

namespace hmpmd::worker {
namespace {

using ::hmpmd::testing::kOtherDataToken;
using ::hmpmd::testing::kTestDataToken;
using testing::Producer;
using testing::SameValues;
using testing::Values;

constexpr JobId kJob = 4;
constexpr uint32_t kSyncRun = 1000;  // kept: fetched by Sync() at will

class DataServerTokenTest : public ::testing::Test {
 protected:
  DataServerTokenTest() : producer_(), dealer_(ctx_, zmq::socket_type::dealer) {
    EXPECT_TRUE(producer_.store.Put(kJob, kSyncRun, {Values(16, 99)}, 0).ok());
    dealer_.set(zmq::sockopt::linger, 0);
    dealer_.set(zmq::sockopt::rcvtimeo, 10'000);
    testing::PresentToken(dealer_);
    dealer_.connect(producer_.server.endpoint());
  }

  // Sends a header (and `payload`, for a collective frame) over dealer_.
  void Send(DataOp op, uint64_t key, uint64_t run, const DataToken& token,
            const std::string* payload = nullptr) {
    DataHeader h;
    h.op = static_cast<uint8_t>(op);
    h.key = key;
    h.run = run;
    h.token = token;
    dealer_.send(zmq::buffer(&h, sizeof(h)),
                 payload ? zmq::send_flags::sndmore : zmq::send_flags::none);
    if (payload) dealer_.send(zmq::buffer(*payload), zmq::send_flags::none);
  }

  // A right-token peek over dealer_, and its reply read: what was sent
  // before it has been handled.
  void Sync() {
    Send(DataOp::kFetchPeek, kJob, kSyncRun, kTestDataToken);
    std::vector<zmq::message_t> parts;
    do {
      zmq::message_t m;
      ASSERT_TRUE(dealer_.recv(m)) << "no reply to the sync fetch";
      parts.push_back(std::move(m));
    } while (parts.back().more());
    ASSERT_GE(parts.size(), 2u);
    Result<DataHeader> h = ParseDataHeader(parts[0].data(), parts[0].size());
    ASSERT_TRUE(h.ok());
    ASSERT_EQ(h->op, static_cast<uint8_t>(DataOp::kFetchReply));
    ASSERT_EQ(h->run, kSyncRun);
  }

  zmq::context_t ctx_{1};
  Producer producer_;
  zmq::socket_t dealer_;
};

TEST_F(DataServerTokenTest, AFetchWithAWrongTokenIsRefusedSayingSoAndARightOneIsServed) {
  ASSERT_TRUE(producer_.store.Put(kJob, 3, {Values(500, 3)}, 1).ok());
  const std::string endpoint = producer_.server.endpoint();
  Result<BufferList> refused = FetchFromPeer(&ctx_, endpoint, kOtherDataToken, kJob, 3, 10'000'000);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kPermissionDenied) << refused.status().ToString();
  EXPECT_NE(refused.status().message().find("refused: wrong data token"), std::string::npos)
      << refused.status().message();
  // No token at all is refused the same way.
  Result<BufferList> none = FetchFromPeer(&ctx_, endpoint, DataToken{}, kJob, 3, 10'000'000);
  EXPECT_EQ(none.status().code(), StatusCode::kPermissionDenied) << none.status().ToString();
  // Both were refused in the handshake: not one frame came through.
  EXPECT_GE(producer_.server.refused_connections(), 2u);
  EXPECT_EQ(producer_.server.refused(), 0u);
  // The refused fetches counted no read: the one read is still there.
  Result<BufferList> got = FetchFromPeer(&ctx_, endpoint, kTestDataToken, kJob, 3, 10'000'000);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_TRUE(SameValues((*got)[0], 500, 3));
  EXPECT_EQ(producer_.store.Peek(kJob, 3), nullptr) << "its one read was taken";
}

// A peer without an accepted token cannot stream an endless message (one
// that never sends its last frame) into the worker's memory: libzmq would
// buffer it whole before the server read a header, but the handshake
// refuses the peer first, so nothing it sends leaves its own socket. The
// attacker's monitor tells: its first handshake event is a failure, never
// a success. Bounded: 200 frames of 1 MiB, sent zero-copy from one buffer.
TEST_F(DataServerTokenTest, APeerWithoutTheTokenCannotConnectToStreamAnEndlessMessage) {
  static const std::string kMiB(1 << 20, 'x');
  struct Attacker {
    const char* name;
    bool plain;  // PLAIN credentials (else none: the NULL mechanism)
    DataToken token;
  };
  const Attacker attackers[] = {
      {"no credentials", false, {}},
      {"a wrong token", true, kOtherDataToken},
      {"the empty token", true, DataToken{}},
  };
  for (const Attacker& a : attackers) {
    SCOPED_TRACE(a.name);
    zmq::socket_t attacker(ctx_, zmq::socket_type::dealer);
    attacker.set(zmq::sockopt::linger, 0);
    if (a.plain) SetDataCredentials(attacker, a.token);
    zmq::socket_t events = MonitorHandshakes(ctx_, attacker);
    attacker.connect(producer_.server.endpoint());
    DataHeader h;
    h.op = static_cast<uint8_t>(DataOp::kCollective);
    h.key = 0x66;
    h.token = a.token;
    ASSERT_TRUE(attacker.send(zmq::buffer(&h, sizeof(h)), zmq::send_flags::sndmore));
    for (int i = 0; i < 200; ++i) {
      zmq::message_t frame(const_cast<char*>(kMiB.data()), kMiB.size(), nullptr, nullptr);
      // Queued here, or refused (EAGAIN) once the queue is full: never sent.
      if (!attacker.send(frame, zmq::send_flags::sndmore | zmq::send_flags::dontwait)) break;
    }
    // The first handshake event, which comes within moments; 30 s only
    // bounds a broken run.
    const int event = NextMonitorEvent(events, 30'000);
    EXPECT_NE(event, ZMQ_EVENT_HANDSHAKE_SUCCEEDED) << "the data socket let the attacker in";
    EXPECT_TRUE(event == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH ||
                event == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL ||
                event == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL)
        << "event " << event << ", not a failed handshake";
  }
  // The server is unharmed and served no frame of theirs.
  Sync();
  EXPECT_EQ(producer_.inbox.queued(), 0u);
  EXPECT_EQ(producer_.server.refused(), 0u);
  EXPECT_GE(producer_.server.refused_connections(), 2u) << "the PLAIN attackers were not refused";
}

// Connections are let in with the current or the previous token, as frames
// are: a rotation does not break peers that still hold the old one, and a
// second rotation shuts it out at connect time, with PermissionDenied.
TEST_F(DataServerTokenTest, ThePreviousTokenConnectsAfterARotationAndNotAfterTwo) {
  ASSERT_TRUE(producer_.store.Put(kJob, 6, {Values(32, 6)}, 0).ok());
  const std::string endpoint = producer_.server.endpoint();
  producer_.tokens.Set(kOtherDataToken);
  Result<BufferList> old_token =
      FetchFromPeer(&ctx_, endpoint, kTestDataToken, kJob, 6, 10'000'000);
  ASSERT_TRUE(old_token.ok()) << old_token.status().ToString();
  EXPECT_TRUE(SameValues((*old_token)[0], 32, 6));
  Result<BufferList> new_token =
      FetchFromPeer(&ctx_, endpoint, kOtherDataToken, kJob, 6, 10'000'000);
  ASSERT_TRUE(new_token.ok()) << new_token.status().ToString();
  producer_.tokens.Set(DataToken{3, 3});
  Result<BufferList> stale = FetchFromPeer(&ctx_, endpoint, kTestDataToken, kJob, 6, 10'000'000);
  EXPECT_EQ(stale.status().code(), StatusCode::kPermissionDenied) << stale.status().ToString();
  EXPECT_NE(stale.status().message().find("refused: wrong data token"), std::string::npos)
      << stale.status().message();
  // Kept connections follow the rotation: one let in with an older token is
  // not reused, and a fresh one with the current token is opened.
  DataTokens mine(kOtherDataToken);
  PeerConnections connections(&ctx_, &mine);
  ASSERT_TRUE(connections.Fetch(endpoint, kJob, 6, 10'000'000, /*peek=*/true).ok());
  mine.Set(DataToken{3, 3});
  Result<BufferList> after = connections.Fetch(endpoint, kJob, 6, 10'000'000, /*peek=*/true);
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  EXPECT_EQ(connections.stats().opened, 2u);
  EXPECT_EQ(connections.stats().reused, 0u);
}

// A kept-connection fetch (as workers fetch inputs) with a wrong token
// fails with PermissionDenied from the handshake, and keeps nothing.
TEST_F(DataServerTokenTest, AKeptConnectionFetchWithAWrongTokenIsPermissionDenied) {
  DataTokens wrong(kOtherDataToken);
  PeerConnections connections(&ctx_, &wrong);
  Result<BufferList> got =
      connections.Fetch(producer_.server.endpoint(), kJob, kSyncRun, 60'000'000, /*peek=*/true);
  EXPECT_EQ(got.status().code(), StatusCode::kPermissionDenied) << got.status().ToString();
  EXPECT_EQ(connections.stats().idle, 0u);
}

TEST_F(DataServerTokenTest, ATakeReadWithAWrongTokenLeavesTheOutputsReads) {
  ASSERT_TRUE(producer_.store.Put(kJob, 5, {Values(64, 5)}, 1).ok());
  Send(DataOp::kTakeRead, kJob, 5, kOtherDataToken);
  Sync();
  EXPECT_NE(producer_.store.Peek(kJob, 5), nullptr) << "a wrong token took the last read";
  EXPECT_EQ(producer_.server.refused(), 1u);
  Send(DataOp::kTakeRead, kJob, 5, kTestDataToken);
  Sync();
  EXPECT_EQ(producer_.store.Peek(kJob, 5), nullptr) << "the right token's read was not taken";
}

TEST_F(DataServerTokenTest, ACollectiveFrameWithAWrongTokenIsNotQueued) {
  const std::string payload(4096, 'x');
  Send(DataOp::kCollective, 0x77, 0, kOtherDataToken, &payload);
  Sync();
  EXPECT_EQ(producer_.inbox.queued(), 0u);
  EXPECT_EQ(producer_.inbox.queued_bytes(), 0u);
  EXPECT_EQ(producer_.server.refused(), 1u);
  Send(DataOp::kCollective, 0x77, 0, kTestDataToken, &payload);
  Sync();
  EXPECT_EQ(producer_.inbox.queued(), 1u);
  EXPECT_EQ(producer_.inbox.queued_bytes(), payload.size());
}

// A job's own token (what a tenant's client holds) opens that job's
// outputs, at connect and per request, and no other job's; it carries no
// collective frame (gangs take the cluster's token).
TEST_F(DataServerTokenTest, AJobsOwnTokenOpensThatJobsOutputsOnly) {
  constexpr JobId kOther = kJob + 1;
  ASSERT_TRUE(producer_.store.Put(kJob, 3, {Values(500, 3)}, 1).ok());
  ASSERT_TRUE(producer_.store.Put(kOther, 3, {Values(64, 7)}, 1).ok());
  const std::string endpoint = producer_.server.endpoint();
  const DataToken mine = JobDataToken(kTestDataToken, kJob);
  Result<BufferList> got = FetchFromPeer(&ctx_, endpoint, mine, kJob, 3, 10'000'000);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_TRUE(SameValues((*got)[0], 500, 3));
  // Another job's outputs: refused in the handshake (the token is for
  // job 4, the request says job 5).
  Result<BufferList> other = FetchFromPeer(&ctx_, endpoint, mine, kOther, 3, 10'000'000);
  EXPECT_EQ(other.status().code(), StatusCode::kPermissionDenied) << other.status().ToString();
  // ... and per request, on a connection let in for job 4.
  zmq::socket_t s(ctx_, zmq::socket_type::dealer);
  s.set(zmq::sockopt::linger, 0);
  s.set(zmq::sockopt::rcvtimeo, 10'000);
  SetDataCredentials(s, mine, kJob);
  s.connect(endpoint);
  DataHeader h;
  h.op = static_cast<uint8_t>(DataOp::kFetch);
  h.key = kOther;
  h.run = 3;
  h.token = mine;
  s.send(zmq::buffer(&h, sizeof(h)), zmq::send_flags::none);
  std::vector<zmq::message_t> reply;
  ASSERT_TRUE(zmq::recv_multipart(s, std::back_inserter(reply)));
  std::vector<FrameView> frames;
  for (const zmq::message_t& m : reply) frames.push_back({m.data(), m.size()});
  Result<std::vector<Buffer>> decoded = DecodeFetchReply(frames, "fetch");
  EXPECT_EQ(decoded.status().code(), StatusCode::kPermissionDenied) << decoded.status().ToString();
  EXPECT_NE(producer_.store.Peek(kOther, 3), nullptr) << "job 5's read was taken";
  const uint64_t refused = producer_.server.refused();
  EXPECT_GE(refused, 1u);
  // A collective frame with a job's token is not queued either.
  const std::string payload(64, 'x');
  Send(DataOp::kCollective, kJob, 0, mine, &payload);
  Sync();
  EXPECT_EQ(producer_.inbox.queued(), 0u);
  EXPECT_EQ(producer_.server.refused(), refused + 1);
}

TEST_F(DataServerTokenTest, AMalformedHeaderIsCountedAndDropped) {
  const char junk[7] = {1, 2, 3, 4, 5, 6, 7};
  dealer_.send(zmq::buffer(junk, sizeof(junk)), zmq::send_flags::none);
  Sync();
  EXPECT_EQ(producer_.server.malformed(), 1u);
  EXPECT_EQ(producer_.server.refused(), 0u);
}

TEST(DataTokensTest, ThePreviousTokenIsAcceptedUntilTheNextChange) {
  DataTokens tokens;
  EXPECT_FALSE(tokens.Accepts(DataToken{}));
  EXPECT_FALSE(tokens.Accepts(kTestDataToken)) << "nothing is accepted before the first Set";
  tokens.Set(kTestDataToken);
  EXPECT_TRUE(tokens.Accepts(kTestDataToken));
  EXPECT_FALSE(tokens.Accepts(DataToken{}));
  tokens.Set(kOtherDataToken);  // a rotation: peers may still send the old one
  EXPECT_EQ(tokens.current(), kOtherDataToken);
  EXPECT_TRUE(tokens.Accepts(kTestDataToken));
  EXPECT_TRUE(tokens.Accepts(kOtherDataToken));
  tokens.Set(kOtherDataToken);  // the same again changes nothing
  EXPECT_TRUE(tokens.Accepts(kTestDataToken));
  const DataToken third{3, 3};
  tokens.Set(third);
  EXPECT_FALSE(tokens.Accepts(kTestDataToken));
  EXPECT_TRUE(tokens.Accepts(kOtherDataToken));
  EXPECT_TRUE(tokens.Accepts(third));
}

}  // namespace
}  // namespace hmpmd::worker
