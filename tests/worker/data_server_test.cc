// The data socket serves only requests that carry an accepted data token:
// a wrong one gets a fetch refused (with a message), a take-read or a
// collective frame dropped. Requests go over one raw DEALER, in order, so
// a fetch with the right token that comes back means every frame sent
// before it was handled.
#include "data_server.h"

#include <gtest/gtest.h>

#include <string>

#include "data_frames.h"
#include "data_producer.h"
#include "data_tokens.h"
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
  DataServerTokenTest() : producer_(&ctx_), dealer_(ctx_, zmq::socket_type::dealer) {
    EXPECT_TRUE(producer_.store.Put(kJob, kSyncRun, {Values(16, 99)}, 0).ok());
    dealer_.set(zmq::sockopt::linger, 0);
    dealer_.set(zmq::sockopt::rcvtimeo, 10'000);
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
  EXPECT_EQ(producer_.server.refused(), 2u);
  // The refused fetches counted no read: the one read is still there.
  Result<BufferList> got = FetchFromPeer(&ctx_, endpoint, kTestDataToken, kJob, 3, 10'000'000);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_TRUE(SameValues((*got)[0], 500, 3));
  EXPECT_EQ(producer_.store.Peek(kJob, 3), nullptr) << "its one read was taken";
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
