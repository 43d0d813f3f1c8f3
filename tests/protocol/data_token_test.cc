// DataToken: drawn, compared, written as hex and read back.
#include "hmpmd/protocol/data_token.h"

#include <gtest/gtest.h>

#include "hmpmd/protocol/data_frames.h"

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
}

}  // namespace
}  // namespace hmpmd
