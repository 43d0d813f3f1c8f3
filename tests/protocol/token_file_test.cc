#include "hmpmd/protocol/token_file.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

namespace hmpmd {
namespace {

using ::testing::HasSubstr;

std::string FreshDir(const char* name) {
  const std::string dir = ::testing::TempDir() + name;
  std::filesystem::remove_all(dir);
  return dir;
}

mode_t ModeOf(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return st.st_mode & 0777;
}

TEST(LoopbackTest, OnlyAddressesNoOtherMachineReachesAreLoopback) {
  for (const char* local :
       {"tcp://127.0.0.1:5555", "tcp://127.1.2.3:0", "tcp://localhost:1", "tcp://LocalHost:1",
        "tcp://[::1]:5555", "tcp://lo:5555", "ipc:///tmp/hmpmd.sock", "inproc://x"}) {
    EXPECT_TRUE(IsLoopbackEndpoint(local)) << local;
  }
  for (const char* open :
       {"tcp://*:5555", "tcp://0.0.0.0:5555", "tcp://10.0.0.1:5555", "tcp://[::]:5555",
        "tcp://eth0:5555", "tcp://127.0.0.1.nip.io:1", "tcp://127.x.0.1:1",
        "tcp://localhost.example:1", "udp://127.0.0.1:1", "tcp://127.0.0.1"}) {
    EXPECT_FALSE(IsLoopbackEndpoint(open)) << open;
  }
  EXPECT_TRUE(IsLoopbackHostPort("127.0.0.1:8080"));
  EXPECT_TRUE(IsLoopbackHostPort("[::1]:8080"));
  EXPECT_FALSE(IsLoopbackHostPort("0.0.0.0:8080"));
  EXPECT_FALSE(IsLoopbackHostPort(":8080"));
  EXPECT_FALSE(IsLoopbackHostPort("8080"));
}

TEST(DefaultTokenPathTest, TheEnvironmentNamesIt) {
  ::setenv("HMPMD_TOKEN_FILE", "/x/token", 1);
  EXPECT_EQ(DefaultTokenPath(), "/x/token");
  ::unsetenv("HMPMD_TOKEN_FILE");
  ::setenv("XDG_CONFIG_HOME", "/cfg", 1);
  EXPECT_EQ(DefaultTokenPath(), "/cfg/hmpmd/token");
  ::unsetenv("XDG_CONFIG_HOME");
  const char* home = std::getenv("HOME");
  const std::string saved = home ? home : "";
  ::setenv("HOME", "/home/u", 1);
  EXPECT_EQ(DefaultTokenPath(), "/home/u/.config/hmpmd/token");
  ::unsetenv("HOME");
  EXPECT_EQ(DefaultTokenPath(), "");
  EXPECT_EQ(*ReadDefaultToken(), "");
  if (!saved.empty()) ::setenv("HOME", saved.c_str(), 1);
}

TEST(LoadOrMakeTokenTest, MakesAPrivateFileOnceAndReadsItAfter) {
  const std::string dir = FreshDir("hmpmd_token_make");
  const std::string path = dir + "/a/b/token";
  bool made = false;
  Result<std::string> first = LoadOrMakeToken(path, &made);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_TRUE(made);
  EXPECT_THAT(*first, ::testing::MatchesRegex("[0-9a-f]{64}"));
  EXPECT_EQ(ModeOf(path), 0600u);
  EXPECT_EQ(ModeOf(dir + "/a/b"), 0700u);
  EXPECT_EQ(ModeOf(dir + "/a"), 0700u);

  Result<std::string> again = LoadOrMakeToken(path, &made);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(made);
  EXPECT_EQ(*again, *first);

  ::setenv("HMPMD_TOKEN_FILE", path.c_str(), 1);
  EXPECT_EQ(*ReadDefaultToken(), *first);
  ::setenv("HMPMD_TOKEN_FILE", (dir + "/missing").c_str(), 1);
  EXPECT_EQ(*ReadDefaultToken(), "");
  ::unsetenv("HMPMD_TOKEN_FILE");

  // Another token made elsewhere differs.
  Result<std::string> other = LoadOrMakeToken(dir + "/other", &made);
  ASSERT_TRUE(other.ok());
  EXPECT_NE(*other, *first);
}

// Two controllers starting at once, and a worker started beside them that
// reads the file as soon as it exists: all see one whole token (the file
// was once made and then written, so a reader could find it empty, and a
// second controller then failed: "the token file is empty").
TEST(LoadOrMakeTokenTest, RacersAndReadersAllSeeOneWholeToken) {
  const std::string dir = FreshDir("hmpmd_token_race");
  for (int round = 0; round < 50; ++round) {
    const std::string path = dir + "/" + std::to_string(round) + "/token";
    std::atomic<bool> go{false}, done{false};
    std::vector<std::string> got(2);
    std::vector<int> made(2, 0);
    std::atomic<int> empty_reads{0};
    std::vector<std::thread> threads;
    for (int i = 0; i < 2; ++i) {
      threads.emplace_back([&, i] {
        while (!go) std::this_thread::yield();
        bool m = false;
        Result<std::string> t = LoadOrMakeToken(path, &m);
        got[i] = t.ok() ? *t : "error: " + t.status().message();
        made[i] = m;
      });
    }
    threads.emplace_back([&] {
      while (!go) std::this_thread::yield();
      for (int i = 0; i < 100000 && !done; ++i) {
        if (!std::filesystem::exists(path)) continue;
        Result<std::string> t = ReadTokenFile(path);
        if (t.ok() && t->empty()) ++empty_reads;
      }
    });
    go = true;
    threads[0].join();
    threads[1].join();
    done = true;
    threads[2].join();
    EXPECT_EQ(got[0], got[1]) << "round " << round;
    EXPECT_THAT(got[0], ::testing::MatchesRegex("[0-9a-f]{64}")) << "round " << round;
    EXPECT_EQ(made[0] + made[1], 1) << "round " << round;
    EXPECT_EQ(empty_reads.load(), 0) << "round " << round;
  }
  // No temporary file is left beside the token.
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    if (e.is_regular_file()) {
      EXPECT_EQ(e.path().filename(), "token") << e.path();
    }
  }
}

TEST(LoadOrMakeTokenTest, RefusesAFileEveryUserMayReadAndOneItCannotMake) {
  const std::string dir = FreshDir("hmpmd_token_refuse");
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/token";
  { std::ofstream(path) << "s3cret\n"; }
  ::chmod(path.c_str(), 0644);
  bool made = true;
  Result<std::string> open = LoadOrMakeToken(path, &made);
  EXPECT_FALSE(made);
  EXPECT_THAT(open.status().message(), HasSubstr(path + ": every user of this host may read"));
  ::chmod(path.c_str(), 0640);  // a service group may share it
  EXPECT_EQ(*LoadOrMakeToken(path, &made), "s3cret");

  EXPECT_THAT(LoadOrMakeToken("", &made).status().message(),
              HasSubstr("neither HMPMD_TOKEN_FILE nor HOME is set"));
  EXPECT_THAT(LoadOrMakeToken("/proc/none/token", &made).status().message(),
              HasSubstr("/proc/none: cannot make the folder"));
}

TEST(TokenFileReadTest, TakesTheFirstLineAndNamesWhatIsWrong) {
  const std::string dir = FreshDir("hmpmd_token_read");
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/token";
  { std::ofstream(path) << "abc \t\r\nsecond line\n"; }
  EXPECT_EQ(*ReadTokenFile(path), "abc");
  { std::ofstream(path) << "\n"; }
  EXPECT_THAT(ReadTokenFile(path).status().message(), HasSubstr("the token file is empty"));
  EXPECT_THAT(ReadTokenFile("/dev/zero").status().message(), HasSubstr("larger than the limit"));
  EXPECT_THAT(ReadTokenFile(dir).status().message(), HasSubstr("is a directory"));
}

}  // namespace
}  // namespace hmpmd
