// DataToken: drawn, compared, written as hex and read back.
#include "hmpmd/protocol/data_token.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "hmpmd/protocol/data_frames.h"
#include "hmpmd/protocol/siphash.h"

namespace hmpmd {
namespace {

TEST(DataTokenTest, NewTokensAreNeverEmptyAndDiffer) {
  const DataToken a = NewDataToken(), b = NewDataToken();
  EXPECT_FALSE(a.empty());
  EXPECT_FALSE(b.empty());
  EXPECT_NE(a, b);
}

TEST(DataTokenTest, SameDataTokenNeverAcceptsTheEmptyToken) {
  const DataToken a{1, 2};
  EXPECT_TRUE(SameDataToken(a, DataToken{1, 2}));
  EXPECT_FALSE(SameDataToken(a, DataToken{1, 3}));
  EXPECT_FALSE(SameDataToken(a, DataToken{0, 2}));
  EXPECT_FALSE(SameDataToken(DataToken{}, DataToken{}));
}

TEST(DataTokenTest, HexRoundTrips) {
  const DataToken t{0x0123456789abcdefULL, 0xfedcba9876543210ULL};
  EXPECT_EQ(DataTokenHex(t), "0123456789abcdeffedcba9876543210");
  Result<DataToken> back = ParseDataToken("0123456789ABCDEFfedcba9876543210");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, t);
  const DataToken fresh = NewDataToken();
  EXPECT_EQ(ParseDataToken(DataTokenHex(fresh)).value(), fresh);
}

// The paper's test vector (Appendix A): key 00..0f, message 00..0e.
TEST(SipHashTest, GivesThePapersTestVector) {
  std::string message;
  for (char c = 0; c < 15; ++c) message += c;
  EXPECT_EQ(SipHash24(0x0706050403020100ULL, 0x0f0e0d0c0b0a0908ULL, message),
            0xa129ca6149be45e5ULL);
  // Every length up to two blocks differs (the length is hashed too).
  std::set<uint64_t> seen;
  for (size_t n = 0; n <= 16; ++n) seen.insert(SipHash24(1, 2, std::string(n, '\0')));
  EXPECT_EQ(seen.size(), 17u);
}

TEST(DataTokenTest, AJobsTokenIsItsOwnAndComesFromTheClustersOnly) {
  const DataToken cluster = NewDataToken();
  const DataToken a = JobDataToken(cluster, 7);
  EXPECT_FALSE(a.empty());
  EXPECT_EQ(JobDataToken(cluster, 7), a) << "the same on every host";
  EXPECT_NE(JobDataToken(cluster, 8), a);
  EXPECT_NE(a, cluster);
  EXPECT_NE(JobDataToken(NewDataToken(), 7), a);
  EXPECT_TRUE(JobDataToken(DataToken{}, 7).empty());
  // Pinned: workers and controllers of different builds must agree. The
  // value comes from an independent Python SipHash-2-4 (checked against
  // the paper's vector) of "hmpmd-job-data", the id's 4 bytes
  // little-endian, and 0x01 (hi) or 0x02 (lo), under key (1, 2).
  EXPECT_EQ(DataTokenHex(JobDataToken(DataToken{1, 2}, 3)), "4f863670f1670b62a997681e50be0ff8");
}

TEST(DataTokenTest, BadHexIsRefusedNamingWhy) {
  EXPECT_NE(ParseDataToken("abc").status().message().find("3 characters"), std::string::npos);
  EXPECT_NE(
      ParseDataToken("0123456789abcdeffedcba987654321g").status().message().find("character 32"),
      std::string::npos);
  EXPECT_EQ(ParseDataToken(std::string(32, '0')).status().code(), StatusCode::kInvalidArgument);
}

TEST(DataTokenTest, ARefusalReplyIsPermissionDenied) {
  DataHeader h;
  h.op = static_cast<uint8_t>(DataOp::kFetchError);
  const std::string why(kWrongDataTokenMessage);
  Result<std::vector<Buffer>> got =
      DecodeFetchReply({{&h, sizeof(h)}, {why.data(), why.size()}}, "fetch");
  EXPECT_EQ(got.status().code(), StatusCode::kPermissionDenied) << got.status().ToString();
  EXPECT_NE(got.status().message().find("refused: wrong data token"), std::string::npos);
  const std::string missing = "no outputs of job 1 run 2 on this worker";
  got = DecodeFetchReply({{&h, sizeof(h)}, {missing.data(), missing.size()}}, "fetch");
  EXPECT_EQ(got.status().code(), StatusCode::kNotFound) << got.status().ToString();
  // A state its holder cannot copy: no other holder would do better.
  const std::string stuck = std::string(kStateNotCopyableMessage) + "object 'python': a lock";
  got = DecodeFetchReply({{&h, sizeof(h)}, {stuck.data(), stuck.size()}}, "load");
  EXPECT_EQ(got.status().code(), StatusCode::kInvalidArgument) << got.status().ToString();
}

TEST(DataTokenTest, AStateKeyIsFixedPerNameAndTellsNamesApart) {
  EXPECT_EQ(StateKey("actor"), StateKey("actor"));
  EXPECT_NE(StateKey("actor"), StateKey("learner"));
  EXPECT_NE(StateKey(""), StateKey("a"));
}

}  // namespace
}  // namespace hmpmd
