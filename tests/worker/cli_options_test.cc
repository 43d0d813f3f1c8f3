#include "cli_options.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <string>
#include <vector>

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

TEST(CheckWorkerNameTest, RefusesControlCharactersAndOverlongNames) {
  // Names are printed in `hmpmd pool` listings and logs, one line each.
  EXPECT_TRUE(CheckWorkerName("gpu-node-7 視覚", "--name:").ok());
  EXPECT_EQ(CheckWorkerName("evil\nname", "--name:").message(),
            "--name: contains the control character U+000A");
  EXPECT_THAT(CheckWorkerName("a\x1b[31m", "--name:").message(), HasSubstr("U+001B"));
  EXPECT_THAT(CheckWorkerName(std::string(256, 'x'), "--name:").message(),
              HasSubstr("1 to 255 characters"));
  EXPECT_FALSE(CheckWorkerName("", "--name:").ok());
  // JSON answers must be UTF-8: such a name would abort the controller.
  EXPECT_EQ(CheckWorkerName("bad\xffname", "--name:").message(), "--name: is not valid UTF-8");
}

TEST(CheckControllerEndpointTest, AcceptsTcpAndIpcOnly) {
  EXPECT_TRUE(CheckControllerEndpoint("tcp://10.0.0.1:5555").ok());
  EXPECT_TRUE(CheckControllerEndpoint("ipc:///tmp/hmpmd").ok());
  EXPECT_FALSE(CheckControllerEndpoint("tcp://host").ok());
  EXPECT_FALSE(CheckControllerEndpoint("host:5555").ok());
  EXPECT_THAT(CheckControllerEndpoint("x").message(), HasSubstr("--controller"));
  EXPECT_TRUE(CheckControllerEndpoint("tcp://[::1]:65535").ok());
  // Ports ZeroMQ would wrap (99999 -> 34463) or that name nothing.
  EXPECT_THAT(CheckControllerEndpoint("tcp://127.0.0.1:99999").message(),
              HasSubstr("port '99999' is not a number from 1 to 65535"));
  EXPECT_FALSE(CheckControllerEndpoint("tcp://127.0.0.1:0").ok());
  EXPECT_FALSE(CheckControllerEndpoint("tcp://127.0.0.1:").ok());
  EXPECT_FALSE(CheckControllerEndpoint("tcp://127.0.0.1:http").ok());
  EXPECT_THAT(CheckControllerEndpoint("tcp://:5555").message(), HasSubstr("has no host"));
}

// A primary and its standbys: each is checked.
TEST(CheckControllerEndpointTest, TakesSeveralSeparatedByCommas) {
  EXPECT_TRUE(CheckControllerEndpoint("tcp://10.0.0.1:5555,tcp://10.0.0.2:5555").ok());
  EXPECT_THAT(CheckControllerEndpoint("tcp://10.0.0.1:5555,tcp://10.0.0.2:99999").message(),
              HasSubstr("port '99999'"));
  EXPECT_FALSE(CheckControllerEndpoint("tcp://10.0.0.1:5555,").ok());
  EXPECT_FALSE(CheckControllerEndpoint(",tcp://10.0.0.1:5555").ok());
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

TEST(ParseDeviceDescriptionTest, SetsTheFieldsItNames) {
  WorkerOptions o;
  ASSERT_TRUE(
      ParseDeviceDescription(
          R"({"name": "node7-npu0", "cores": {"cube": 2, "vector": 4}, "memory_mb": 65536})",
          "d.json", &o)
          .ok());
  EXPECT_EQ(o.name, "node7-npu0");
  EXPECT_EQ(o.cube_cores, 2u);
  EXPECT_EQ(o.vector_cores, 4u);
  EXPECT_EQ(o.memory_mb, 65536u);

  WorkerOptions p;
  p.name = "kept";
  ASSERT_TRUE(ParseDeviceDescription(R"({"cores": {"vector": 3}})", "d.json", &p).ok());
  EXPECT_EQ(p.name, "kept") << "a field the file leaves out keeps its value";
  EXPECT_EQ(p.memory_mb, 1024u);
  EXPECT_EQ(p.cube_cores, 0u) << "cores lists the device completely, as --cores does";
  EXPECT_EQ(p.vector_cores, 3u);
  ASSERT_TRUE(ParseDeviceDescription("{}", "d.json", &p).ok());
}

// "memory_mb": 0 means no cap, as --memory-mb 0 does: a device file (what
// the deploy units use) could not describe an uncapped store before.
TEST(ParseDeviceDescriptionTest, MemoryMbZeroMeansNoCapAsTheFlagDoes) {
  WorkerOptions o;
  Status s = ParseDeviceDescription(R"({"memory_mb": 0})", "d.json", &o);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(o.memory_mb, 0u);
}

TEST(ParseDeviceDescriptionTest, BadFilesGiveOneLineNamingFileAndFieldAndChangeNothing) {
  const std::pair<const char*, const char*> cases[] = {
      {"", "not valid JSON"},
      {"{\"name\": \"a\",}", "not valid JSON"},
      {"[1, 2]", "expected a JSON object"},
      {R"({"nmae": "x"})", "unknown field 'nmae'"},
      {R"({"name": "a", "name": "b"})", "field 'name' given twice"},
      {R"({"cores": {"cube": 1, "cube": 2}})", "cores: field 'cube' given twice"},
      {R"({"name": 7})", "field 'name'"},
      {R"({"name": ""})", "field 'name'"},
      {R"({"memory_mb": -1})", "field 'memory_mb'"},
      {R"({"memory_mb": 1.5})", "field 'memory_mb'"},
      {R"({"memory_mb": "64G"})", "field 'memory_mb'"},
      {R"({"cores": "cube=1"})", "field 'cores'"},
      {R"({"cores": {"gpu": 1}})", "field 'cores.gpu'"},
      {R"({"cores": {"cube": 257}})", "field 'cores.cube'"},
      {R"({"cores": {"vector": true}})", "field 'cores.vector'"},
      {R"({"cores": {"cube": 0, "vector": 0}})", "at least one core"},
      {R"({"cores": {}})", "at least one core"},
      {R"({"labels": ["accel=910c"]})", "field 'labels' must be an object"},
      {R"({"labels": {"accel": 910}})", "field 'labels': values must be strings"},
      {R"({"labels": {"": "910c"}})", "field 'labels': key: empty"},
      {R"({"labels": {"accel": "9\u00071"}})",
       "field 'labels': value: contains the control character U+0007"},
  };
  for (const auto& [text, want] : cases) {
    WorkerOptions o;
    o.name = "before";
    Status s = ParseDeviceDescription(text, "/etc/hmpmd/device.json", &o);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << text;
    EXPECT_THAT(s.message(), HasSubstr("--device: /etc/hmpmd/device.json: ")) << text;
    EXPECT_THAT(s.message(), HasSubstr(want)) << text;
    EXPECT_EQ(s.message().find('\n'), std::string::npos) << s.message();
    EXPECT_EQ(o.name, "before") << text;
    EXPECT_EQ(o.cube_cores, 1u) << text;
    EXPECT_EQ(o.vector_cores, 1u) << text;
    EXPECT_EQ(o.memory_mb, 1024u) << text;
  }
}

TEST(ParseDeviceDescriptionTest, LabelsAreAnObjectOfStrings) {
  WorkerOptions o;
  ASSERT_TRUE(
      ParseDeviceDescription(R"({"labels": {"zone": "a", "accel": "910c"}})", "d.json", &o).ok());
  EXPECT_EQ(o.labels, (std::map<std::string, std::string>{{"accel", "910c"}, {"zone", "a"}}));
}

TEST(ParseLabelsTest, FlagsAddToTheFileAndWinOnAKeyItGave) {
  WorkerOptions o;
  o.labels = {{"accel", "910b"}, {"zone", "a"}};
  ASSERT_TRUE(ParseLabels({"accel=910c", "rack=r1", "rack=r1"}, &o).ok());
  EXPECT_EQ(o.labels,
            (std::map<std::string, std::string>{{"accel", "910c"}, {"rack", "r1"}, {"zone", "a"}}));
}

TEST(ParseLabelsTest, BadFlagsNameTheFlagAndLeaveOptionsAlone) {
  const std::pair<std::vector<std::string>, const char*> cases[] = {
      {{"accel"}, "--label: expected KEY=VALUE, found no '='"},
      {{"=910c"}, "--label: key: empty"},
      {{"accel="}, "--label: value: empty"},
      {{"accel=9\t1"}, "--label: value: contains the control character U+0009"},
      {{"accel=" + std::string(256, 'x')}, "--label: value: longer than the limit of 255 bytes"},
      {{"accel=910b", "accel=910c"}, "--label: accel=910c conflicts with accel=910b"},
  };
  for (const auto& [flags, want] : cases) {
    WorkerOptions o;
    o.labels = {{"zone", "a"}};
    Status s = ParseLabels(flags, &o);
    EXPECT_EQ(s.message(), want);
    EXPECT_EQ(o.labels.size(), 1u);
  }
}

TEST(LoadDeviceFileTest, ReadsTheFileAndReportsMissingOnes) {
  const std::string path = ::testing::TempDir() + "hmpmd_worker_device_test.json";
  {
    std::ofstream out(path);
    out << R"({"cores": {"cube": 8, "vector": 2}, "memory_mb": 32768})"
        << "\n";
  }
  WorkerOptions o;
  Status s = LoadDeviceFile(path, &o);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(o.cube_cores, 8u);
  EXPECT_EQ(o.memory_mb, 32768u);
  std::remove(path.c_str());
  EXPECT_THAT(LoadDeviceFile(path, &o).message(),
              HasSubstr("--device: " + path + ": cannot open: No such file"));
}

TEST(LoadDeviceFileTest, RefusesADirectoryAndAnEndlessFile) {
  // A directory opened as a file read as empty text ("invalid JSON: the
  // text is empty"); /dev/zero was read until memory ran out.
  WorkerOptions o;
  EXPECT_EQ(LoadDeviceFile(::testing::TempDir(), &o).message(),
            "--device: " + ::testing::TempDir() + ": is a directory, not a file");
  EXPECT_THAT(LoadDeviceFile("/dev/zero", &o).message(),
              HasSubstr("--device: /dev/zero: larger than the limit"));
  EXPECT_THAT(ReadTokenFile(::testing::TempDir()).status().message(),
              HasSubstr("--token-file: " + ::testing::TempDir() + ": is a directory"));
  EXPECT_THAT(ReadTokenFile("/dev/zero").status().message(),
              HasSubstr("--token-file: /dev/zero: larger than the limit"));
}

}  // namespace
}  // namespace hmpmd::worker
