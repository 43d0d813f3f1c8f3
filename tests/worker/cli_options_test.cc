#include "cli_options.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

namespace hmpmd::worker {
namespace {

using ::testing::HasSubstr;

TEST(ParseCoresTest, SetsTheKindsItNamesAndLeavesOutTheOthers) {
  WorkerOptions o;
  ASSERT_TRUE(ParseCores("cube=2,vector=3", &o).ok());
  EXPECT_EQ(o.cube_cores, 2u);
  EXPECT_EQ(o.vector_cores, 3u);
  WorkerOptions p;
  ASSERT_TRUE(ParseCores("vector=4", &p).ok());
  EXPECT_EQ(p.cube_cores, 0u) << "a kind the flag leaves out has no cores";
  EXPECT_EQ(p.vector_cores, 4u);
  ASSERT_TRUE(ParseCores("cube=1", &p).ok());
  EXPECT_EQ(p.cube_cores, 1u);
  EXPECT_EQ(p.vector_cores, 0u);
}

TEST(ParseCoresTest, BadValuesNameTheFlagAndLeaveOptionsAlone) {
  for (const char* bad : {"", "cube", "cube=", "cube=x", "cube=-1", "cube=1.5", "cube=257", "gpu=1",
                          "cube=1,", "cube=1,cube=2", "cube=0,vector=0", "cube=1 "}) {
    WorkerOptions o;
    Status s = ParseCores(bad, &o);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << "'" << bad << "'";
    EXPECT_THAT(s.message(), HasSubstr("--cores")) << bad;
    EXPECT_EQ(o.cube_cores, 1u) << bad;
    EXPECT_EQ(o.vector_cores, 1u) << bad;
  }
}

TEST(ParseLogLevelTest, KnowsTheFiveLevels) {
  EXPECT_EQ(*ParseLogLevel("trace"), LogLevel::kTrace);
  EXPECT_EQ(*ParseLogLevel("debug"), LogLevel::kDebug);
  EXPECT_EQ(*ParseLogLevel("info"), LogLevel::kInfo);
  EXPECT_EQ(*ParseLogLevel("warn"), LogLevel::kWarn);
  EXPECT_EQ(*ParseLogLevel("error"), LogLevel::kError);
  EXPECT_THAT(ParseLogLevel("loud").status().message(), HasSubstr("--log-level"));
}

TEST(CheckControllerEndpointTest, AcceptsTcpAndIpcOnly) {
  EXPECT_TRUE(CheckControllerEndpoint("tcp://10.0.0.1:5555").ok());
  EXPECT_TRUE(CheckControllerEndpoint("ipc:///tmp/hmpmd").ok());
  EXPECT_FALSE(CheckControllerEndpoint("tcp://host").ok());
  EXPECT_FALSE(CheckControllerEndpoint("host:5555").ok());
  EXPECT_THAT(CheckControllerEndpoint("x").message(), HasSubstr("--controller"));
}

TEST(ReadTokenFileTest, StripsTrailingWhitespaceAndReportsMissingFiles) {
  const std::string path = ::testing::TempDir() + "hmpmd_worker_token_test";
  {
    std::ofstream out(path);
    out << "s3cret\n\n";
  }
  Result<std::string> token = ReadTokenFile(path);
  ASSERT_TRUE(token.ok()) << token.status().ToString();
  EXPECT_EQ(*token, "s3cret");
  std::remove(path.c_str());
  EXPECT_THAT(ReadTokenFile(path).status().message(), HasSubstr("--token-file"));
}

}  // namespace
}  // namespace hmpmd::worker
