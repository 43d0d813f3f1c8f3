// Retries and task logs through a real controller: a fake worker on the
// controller's socket fails a task twice, with log lines, and then runs it;
// the job succeeds with max_retries 2, REST's task table counts the
// retries, and GET /api/v1/jobs/{id}/logs returns each attempt's lines and
// error. An error retry_on does not match fails the job at once, and bad
// inputs are one-line 4xx errors.
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

using json = nlohmann::json;

class TaskRetryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ =
        std::filesystem::temp_directory_path() / ("hmpmd-task-retry-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    cluster_ = std::make_unique<ProcessCluster>(dir_.string());
    ASSERT_TRUE(cluster_->StartController().ok());
    fake_.set(zmq::sockopt::linger, 0);
    SetControlCredentials(fake_, "");
    fake_.connect(cluster_->zmq_endpoint());
    RegisterMsg reg;
    reg.name = "fake";
    reg.pid = static_cast<uint32_t>(::getpid());
    reg.cores = {CoreGroup{CoreKind::kCube, 1}, CoreGroup{CoreKind::kVector, 1}};
    reg.kernels = {"noop"};
    reg.instance = 7;
    Send(fake_, Message(reg));
    auto ack = Next(fake_, MsgType::kRegisterAck);
    ASSERT_TRUE(ack.has_value()) << "no RegisterAck";
    me_ = std::get<RegisterAck>(*ack).worker_id;
  }
  void TearDown() override {
    fake_.close();
    cluster_.reset();  // stops the controller by PID
    std::filesystem::remove_all(dir_);
  }
  // Waits for the one task the controller assigns next.
  TaskAssign NextAssign() {
    auto m = Next(fake_, MsgType::kAssignBatch);
    EXPECT_TRUE(m.has_value()) << "no task assigned";
    return m ? std::get<AssignBatch>(*m).tasks.at(0) : TaskAssign{};
  }
  void Report(const TaskAssign& t, bool ok, std::string error, std::vector<std::string> log) {
    TaskResult r;
    r.job = t.job;
    r.task = t.task;
    r.attempt = t.attempt;
    r.ok = ok;
    r.error = std::move(error);
    r.log = std::move(log);
    Send(fake_, Message(DoneBatch{me_, {r}, ++seq_}));
  }
  json Get(const std::string& path, int want_status = 200) {
    auto got = cluster_->Call("GET", path, "");
    EXPECT_TRUE(got.ok());
    if (!got.ok()) return json();
    EXPECT_EQ(got->status, want_status) << path << ": " << got->body;
    return json::parse(got->body);
  }
  json WaitEnded(uint32_t id) {
    json job;
    for (int i = 0; i < 200; ++i) {
      job = Get("/api/v1/jobs/" + std::to_string(id));
      if (job["state"] != "queued" && job["state"] != "running") break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return job;
  }

  std::filesystem::path dir_;
  std::unique_ptr<ProcessCluster> cluster_;
  zmq::context_t ctx_{1};
  zmq::socket_t fake_{ctx_, zmq::socket_type::dealer};
  WorkerId me_ = 0;
  int64_t seq_ = 0;
};

TEST_F(TaskRetryTest, AKernelThatFailsTwiceSucceedsWithTwoRetriesAndItsLogsAreKept) {
  auto id = cluster_->Submit(
      R"({"name":"r","tasks":[{"id":"x","kernel":"noop","max_retries":2,"retry_on":["flaky"]}]})");
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  for (uint32_t attempt = 0; attempt < 2; ++attempt) {
    TaskAssign t = NextAssign();
    ASSERT_EQ(t.attempt, attempt);
    Report(t, false, "flaky: attempt " + std::to_string(attempt),
           {"starting attempt " + std::to_string(attempt)});
  }
  TaskAssign t = NextAssign();
  ASSERT_EQ(t.attempt, 2u);
  Report(t, true, "", {"starting attempt 2", "done"});
  json job = WaitEnded(*id);
  ASSERT_EQ(job["state"], "succeeded") << job.dump();

  const std::string base = "/api/v1/jobs/" + std::to_string(*id);
  json tasks = Get(base + "/tasks");
  ASSERT_EQ(tasks["tasks"].size(), 1u);
  EXPECT_EQ(tasks["tasks"][0]["retries"], 2);
  EXPECT_EQ(tasks["tasks"][0]["max_retries"], 2);
  EXPECT_EQ(tasks["tasks"][0]["attempt"], 2);

  json logs = Get(base + "/logs?task=x");
  EXPECT_EQ(logs["task"], "x");
  EXPECT_EQ(logs["state"], "done");
  EXPECT_EQ(logs["retries"], 2);
  ASSERT_EQ(logs["attempts"].size(), 3u) << logs.dump();
  EXPECT_EQ(logs["attempts"][0]["ok"], false);
  EXPECT_EQ(logs["attempts"][0]["error"], "flaky: attempt 0");
  EXPECT_EQ(logs["attempts"][0]["lines"], json::array({"starting attempt 0"}));
  EXPECT_EQ(logs["attempts"][1]["error"], "flaky: attempt 1");
  EXPECT_EQ(logs["attempts"][2]["ok"], true);
  EXPECT_EQ(logs["attempts"][2]["lines"], json::array({"starting attempt 2", "done"}));
}

TEST_F(TaskRetryTest, AnErrorRetryOnDoesNotMatchFailsTheJobAtOnce) {
  auto id = cluster_->Submit(
      R"({"name":"r","tasks":[{"id":"x","kernel":"noop","max_retries":5,"retry_on":["flaky"]}]})");
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  TaskAssign t = NextAssign();
  Report(t, false, "KeyError: 'k'", {});
  json job = WaitEnded(*id);
  ASSERT_EQ(job["state"], "failed") << job.dump();
  EXPECT_EQ(job["error"], "task 'x' failed: KeyError: 'k'");
  json logs = Get("/api/v1/jobs/" + std::to_string(*id) + "/logs?task=x");
  EXPECT_EQ(logs["retries"], 0);
  ASSERT_EQ(logs["attempts"].size(), 1u);
  EXPECT_EQ(logs["attempts"][0]["error"], "KeyError: 'k'");
}

TEST_F(TaskRetryTest, OutOfRetriesTheJobFailsSayingHowManyAttemptsItMade) {
  auto id =
      cluster_->Submit(R"({"name":"r","tasks":[{"id":"x","kernel":"noop","max_retries":1}]})");
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  Report(NextAssign(), false, "boom 0", {});
  Report(NextAssign(), false, "boom 1", {});
  json job = WaitEnded(*id);
  ASSERT_EQ(job["state"], "failed") << job.dump();
  EXPECT_EQ(job["error"], "task 'x' failed after 2 attempts: boom 1");
}

TEST_F(TaskRetryTest, BadInputsAreOneLineErrors) {
  auto bad =
      cluster_->Call("POST", "/api/v1/jobs",
                     R"({"name":"r","tasks":[{"id":"x","kernel":"noop","max_retries":-1}]})");
  ASSERT_TRUE(bad.ok());
  EXPECT_EQ(bad->status, 400);
  EXPECT_EQ(json::parse(bad->body)["error"],
            "tasks[0] 'x': max_retries: must be between 0 and 100");
  bad = cluster_->Call("POST", "/api/v1/jobs",
                       R"({"name":"r","tasks":[{"id":"x","kernel":"noop","retry_on":[1]}]})");
  ASSERT_TRUE(bad.ok());
  EXPECT_EQ(bad->status, 400);
  EXPECT_EQ(json::parse(bad->body)["error"],
            "tasks[0] 'x': retry_on[0]: expected a string, got an integer");

  auto id = cluster_->Submit(R"({"name":"r","tasks":[{"id":"x","kernel":"noop"}]})");
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  const std::string base = "/api/v1/jobs/" + std::to_string(*id);
  EXPECT_EQ(Get(base + "/logs?task=nope", 404)["error"],
            "job " + std::to_string(*id) + ": no task 'nope'");
  EXPECT_EQ(Get(base + "/logs", 400)["error"],
            "query: task is required: GET /api/v1/jobs/{id}/logs?task=ID");
  EXPECT_EQ(Get(base + "/logs?task=x&step=1", 400)["error"],
            "query: step 1 is past the job's 1 step(s)");
  EXPECT_EQ(Get(base + "/logs?task=x&step=-1", 400)["error"],
            "query: step is a whole number, not '-1'");
  // Nothing ran yet: no attempts, not an error.
  EXPECT_EQ(Get(base + "/logs?task=x")["attempts"], json::array());
}

}  // namespace
}  // namespace hmpmd::testing
