// A worker's message for a failed task, as the controller passes it on: a
// fake worker on the controller's socket fails a task with a message of
// several lines, terminal escapes and 10 kB; the job's error (REST, CLI,
// logs and the store all read it) is one line of bounded length.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <thread>
#include <zmq.hpp>

#include "fake_worker_wire.h"
#include "hmpmd/protocol/codec.h"
#include "hmpmd/protocol/control_auth.h"
#include "process_cluster.h"

namespace hmpmd::testing {
namespace {

TEST(KernelErrorTest, AFailedTasksMessageBecomesOneLineOfBoundedLength) {
  auto dir =
      std::filesystem::temp_directory_path() / ("hmpmd-kernel-error-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  {
    ProcessCluster cluster(dir.string());
    ASSERT_TRUE(cluster.StartController().ok());
    zmq::context_t ctx(1);
    zmq::socket_t fake(ctx, zmq::socket_type::dealer);
    fake.set(zmq::sockopt::linger, 0);
    SetControlCredentials(fake, "");
    fake.connect(cluster.zmq_endpoint());
    RegisterMsg reg;
    reg.name = "fake";
    reg.pid = static_cast<uint32_t>(::getpid());
    reg.cores = {CoreGroup{CoreKind::kCube, 1}, CoreGroup{CoreKind::kVector, 1}};
    reg.kernels = {"noop"};
    reg.instance = 7;
    Send(fake, Message(reg));
    auto ack = Next(fake, MsgType::kRegisterAck);
    ASSERT_TRUE(ack.has_value()) << "no RegisterAck";
    const WorkerId me = std::get<RegisterAck>(*ack).worker_id;

    auto id = cluster.Submit(R"({"name":"e","tasks":[{"id":"x","kernel":"noop"}]})");
    ASSERT_TRUE(id.ok()) << id.status().ToString();
    auto assign = Next(fake, MsgType::kAssignBatch);
    ASSERT_TRUE(assign.has_value()) << "no task assigned";
    const TaskAssign& t = std::get<AssignBatch>(*assign).tasks.at(0);
    TaskResult r;
    r.job = t.job;
    r.task = t.task;
    r.attempt = t.attempt;
    r.ok = false;
    r.error = "first line\nsecond \x1b[31mred\x1b[0m\ttab\r" + std::string(10000, 'L');
    Send(fake, Message(DoneBatch{me, {r}, 1}));

    nlohmann::json job;
    for (int i = 0; i < 100; ++i) {
      auto got = cluster.Call("GET", "/api/v1/jobs/" + std::to_string(*id), "");
      ASSERT_TRUE(got.ok());
      job = nlohmann::json::parse(got->body);
      if (job["state"] == "failed") break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ASSERT_EQ(job["state"], "failed") << job.dump();
    const std::string error = job["error"];
    EXPECT_EQ(error.find_first_of("\n\r\t\x1b"), std::string::npos) << error.substr(0, 80);
    EXPECT_NE(error.find(R"(first line\nsecond \x1b[31mred\x1b[0m\ttab\r)"), std::string::npos)
        << error.substr(0, 120);
    EXPECT_LT(error.size(), 4400u);
    EXPECT_NE(error.find("more bytes)"), std::string::npos) << error.substr(error.size() - 60);
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace hmpmd::testing
