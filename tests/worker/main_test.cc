// The hmpmd-worker binary: exit codes, error lines and signals.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <string>

#include "fake_controller.h"

namespace hmpmd::worker {
namespace {

using testing::FakeController;
using ::testing::HasSubstr;

struct Outcome {
  int exit_code = -1;
  std::string output;  // stdout and stderr
};

// A running hmpmd-worker; `timeout` bounds it even when a test fails.
class Binary {
 public:
  explicit Binary(const std::string& args) {
    const std::string command =
        "timeout 20 " + std::string(HMPMD_WORKER_BINARY) + " " + args + " 2>&1";
    pipe_ = popen(command.c_str(), "r");
  }
  ~Binary() {
    if (pipe_ != nullptr) Finish();
  }
  // Reads the output to the end and waits for the exit.
  Outcome Finish() {
    Outcome o;
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof(buf), pipe_)) > 0) o.output.append(buf, n);
    const int status = pclose(pipe_);
    pipe_ = nullptr;
    if (WIFEXITED(status)) o.exit_code = WEXITSTATUS(status);
    return o;
  }

 private:
  FILE* pipe_ = nullptr;
};

int Lines(const std::string& s) { return static_cast<int>(std::count(s.begin(), s.end(), '\n')); }

TEST(WorkerBinaryTest, HelpExitsZeroAndListsTheFlags) {
  Outcome o = Binary("--help").Finish();
  EXPECT_EQ(o.exit_code, 0);
  for (const char* flag : {"--controller", "--cores", "--memory-mb", "--name", "--device",
                           "--label", "--token-file", "--log-level"}) {
    EXPECT_THAT(o.output, HasSubstr(flag));
  }
}

TEST(WorkerBinaryTest, BadFlagValuesExitTwoWithOneLineNamingTheFlag) {
  const std::pair<const char*, const char*> cases[] = {
      {"--controller tcp://127.0.0.1:1 --cores cube=abc", "--cores"},
      {"--controller tcp://127.0.0.1:1 --cores gpu=1", "--cores"},
      {"--cores cube=1", "--controller"},
      {"--controller nowhere", "--controller"},
      {"--controller tcp://127.0.0.1:1 --log-level loud", "--log-level"},
      {"--controller tcp://127.0.0.1:1 --memory-mb lots", "--memory-mb"},
      {"--controller tcp://127.0.0.1:1 --token-file /nonexistent/token", "--token-file"},
      {"--controller tcp://127.0.0.1:1 --device /nonexistent/device.json", "--device"},
      {"--controller tcp://127.0.0.1:1 --label accel", "--label: expected KEY=VALUE"},
      {"--controller tcp://127.0.0.1:1 --label =910c", "--label: key: empty"},
      {"--controller tcp://127.0.0.1:1 --label a=1 --label a=2", "--label: a=2 conflicts with a=1"},
  };
  for (const auto& [args, flag] : cases) {
    Outcome o = Binary(args).Finish();
    EXPECT_EQ(o.exit_code, 2) << args;
    EXPECT_THAT(o.output, HasSubstr(flag)) << args;
    EXPECT_EQ(Lines(o.output), 1) << args << ": " << o.output;
  }
}

TEST(WorkerBinaryTest, RegistersAndExitsZeroOnShutdown) {
  FakeController controller;
  Binary worker("--controller " + controller.endpoint() +
                " --cores cube=2,vector=3 --memory-mb 512 --name bin-test --log-level warn");
  std::optional<RegisterMsg> reg = controller.WaitFor<RegisterMsg>();
  ASSERT_TRUE(reg) << "the binary did not register";
  EXPECT_EQ(reg->name, "bin-test");
  EXPECT_EQ(reg->memory_mb, 512u);
  EXPECT_EQ(reg->cores, (std::vector<CoreGroup>{{CoreKind::kCube, 2}, {CoreKind::kVector, 3}}));
  controller.Send(RegisterAck{1, 50});
  controller.Send(Shutdown{"done"});
  Outcome o = worker.Finish();
  EXPECT_EQ(o.exit_code, 0) << o.output;
}

TEST(WorkerBinaryTest, DeviceFileDescribesTheDeviceAndFlagsOverrideIt) {
  const std::string path = ::testing::TempDir() + "hmpmd_worker_main_device.json";
  {
    std::ofstream out(path);
    out << R"({"name": "from-file", "cores": {"cube": 3, "vector": 1}, "memory_mb": 4096})";
  }
  FakeController controller;
  Binary worker("--controller " + controller.endpoint() + " --device " + path +
                " --memory-mb 2048 --log-level warn");
  std::optional<RegisterMsg> reg = controller.WaitFor<RegisterMsg>();
  ASSERT_TRUE(reg) << "the binary did not register";
  EXPECT_EQ(reg->name, "from-file");
  EXPECT_EQ(reg->memory_mb, 2048u) << "--memory-mb overrides the file";
  EXPECT_EQ(reg->cores, (std::vector<CoreGroup>{{CoreKind::kCube, 3}, {CoreKind::kVector, 1}}));
  controller.Send(RegisterAck{1, 50});
  controller.Send(Shutdown{"done"});
  Outcome o = worker.Finish();
  EXPECT_EQ(o.exit_code, 0) << o.output;
  std::remove(path.c_str());
}

TEST(WorkerBinaryTest, LabelsFromTheDeviceFileAndFlagsTravelInTheRegistration) {
  const std::string path = ::testing::TempDir() + "hmpmd_worker_main_labels.json";
  {
    std::ofstream out(path);
    out << R"({"labels": {"accel": "910b", "zone": "a"}})";
  }
  FakeController controller;
  Binary worker("--controller " + controller.endpoint() + " --device " + path +
                " --label accel=910c --label rack=r1 --log-level warn");
  std::optional<RegisterMsg> reg = controller.WaitFor<RegisterMsg>();
  ASSERT_TRUE(reg) << "the binary did not register";
  EXPECT_EQ(reg->labels, (Labels{{"accel", "910c"}, {"rack", "r1"}, {"zone", "a"}}))
      << "--label overrides the file's key and adds its own";
  controller.Send(RegisterAck{1, 50});
  controller.Send(Shutdown{"done"});
  Outcome o = worker.Finish();
  EXPECT_EQ(o.exit_code, 0) << o.output;
  std::remove(path.c_str());
}

TEST(WorkerBinaryTest, BadDeviceFileExitsTwoWithOneLine) {
  const std::string path = ::testing::TempDir() + "hmpmd_worker_main_bad_device.json";
  {
    std::ofstream out(path);
    out << R"({"cores": {"gpu": 1}})";
  }
  Outcome o = Binary("--controller tcp://127.0.0.1:1 --device " + path).Finish();
  EXPECT_EQ(o.exit_code, 2);
  EXPECT_THAT(o.output, HasSubstr("--device: " + path + ": field 'cores.gpu'"));
  EXPECT_EQ(Lines(o.output), 1) << o.output;
  std::remove(path.c_str());
}

TEST(WorkerBinaryTest, ExitsZeroOnSigterm) {
  FakeController controller;
  Binary worker("--controller " + controller.endpoint() + " --log-level warn");
  std::optional<RegisterMsg> reg = controller.WaitFor<RegisterMsg>();
  ASSERT_TRUE(reg);
  ASSERT_EQ(kill(static_cast<pid_t>(reg->pid), SIGTERM), 0);
  Outcome o = worker.Finish();
  EXPECT_EQ(o.exit_code, 0) << o.output;
}

TEST(WorkerBinaryTest, ExitsOneWhenRejected) {
  FakeController controller;
  Binary worker("--controller " + controller.endpoint() + " --log-level warn");
  ASSERT_TRUE(controller.WaitFor<RegisterMsg>());
  controller.Send(Reject{"wrong token", false});
  Outcome o = worker.Finish();
  EXPECT_EQ(o.exit_code, 1);
  EXPECT_THAT(o.output, HasSubstr("wrong token"));
}

}  // namespace
}  // namespace hmpmd::worker
