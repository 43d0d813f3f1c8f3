#include "hmpmd/protocol/types.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace hmpmd {
namespace {

using ::testing::HasSubstr;

TEST(ParseCoreCountsTest, CountsTheKindsItNames) {
  Result<CoreCounts> c = ParseCoreCounts("vector=3,cube=2");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->count[static_cast<int>(CoreKind::kCube)], 2u);
  EXPECT_EQ(c->count[static_cast<int>(CoreKind::kVector)], 3u);
  c = ParseCoreCounts("cube=256");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->count[static_cast<int>(CoreKind::kVector)], 0u) << "a kind left out has none";
}

TEST(ParseCoreCountsTest, NamesTheItemThatIsWrong) {
  EXPECT_THAT(ParseCoreCounts("cube=1000").status().message(), HasSubstr("'1000' of cube"));
  EXPECT_THAT(ParseCoreCounts("gpu=1").status().message(), HasSubstr("'gpu'"));
  EXPECT_THAT(ParseCoreCounts("cube=1,cube=1").status().message(), HasSubstr("twice"));
  EXPECT_THAT(ParseCoreCounts("cube=0").status().message(), HasSubstr("at least one core"));
  EXPECT_THAT(ParseCoreCounts("cube").status().message(), HasSubstr("KIND=COUNT"));
  EXPECT_FALSE(ParseCoreCounts("").ok());
}

TEST(CheckEndpointTest, TakesTcpWithAPortInRangeAndIpc) {
  for (const char* good : {"tcp://127.0.0.1:5555", "tcp://*:1", "tcp://host:65535",
                           "tcp://[::1]:80", "ipc:///tmp/x"}) {
    EXPECT_TRUE(CheckEndpoint(good, /*bind=*/false).ok()) << good;
    EXPECT_TRUE(CheckEndpoint(good, /*bind=*/true).ok()) << good;
  }
  // Any free port: only where the endpoint is bound.
  for (const char* any : {"tcp://127.0.0.1:0", "tcp://127.0.0.1:*"}) {
    EXPECT_TRUE(CheckEndpoint(any, /*bind=*/true).ok()) << any;
    EXPECT_FALSE(CheckEndpoint(any, /*bind=*/false).ok()) << any;
  }
}

TEST(CheckEndpointTest, RefusesWhatZeromqWouldMisreadOrRefuseLater) {
  // ZeroMQ binds tcp://HOST:99999 to a random port instead of failing.
  for (const char* bad :
       {"", "garbage", "tcp://", "tcp://host", "tcp://host:", "tcp://:5555", "tcp://host:99999",
        "tcp://host:-1", "tcp://host:80x", "ipc://", "udp://host:5"}) {
    Status s = CheckEndpoint(bad, /*bind=*/true);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(s.message(), HasSubstr("'" + std::string(bad) + "'"));
  }
}

}  // namespace
}  // namespace hmpmd
