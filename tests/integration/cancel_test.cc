// `DELETE /api/v1/jobs/ID` (hmpmd cancel) stops a running job: its queued
// tasks are dropped and its running kernels see KernelArgs::cancelled() and
// stop, so the lanes are free for the next job at once.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "process_cluster.h"

namespace hmpmd::testing {
namespace {

TEST(CancelTest, CancelledJobStopsItsRunningKernelsAndFreesTheLanes) {
  auto dir =
      std::filesystem::temp_directory_path() / ("hmpmd-cancel-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  {
    ProcessCluster cluster(dir.string());
    ASSERT_TRUE(cluster.StartController().ok());
    ASSERT_TRUE(cluster.StartWorker().ok());  // one cube and one vector lane
    // An hour of sleep on every lane: if cancel did not stop them, the next
    // job could not run before the test's timeout.
    const std::string spec = R"({"tasks":[
        {"id":"a","kernel":"sleep","args":{"us":3600000000}},
        {"id":"b","kernel":"spin","core":"vector","args":{"us":3600000000}},
        {"id":"c","kernel":"sleep","args":{"us":3600000000}}]})";
    auto id = cluster.Submit(spec);
    ASSERT_TRUE(id.ok()) << id.status().ToString();
    bool running = false;
    for (int i = 0; i < 500 && !running; ++i) {
      auto j = cluster.Get("/api/v1/jobs/" + std::to_string(*id));
      running = j.is_object() && j.value("running", 0) >= 2;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ASSERT_TRUE(running);
    auto cancel = cluster.Call("DELETE", "/api/v1/jobs/" + std::to_string(*id), "");
    ASSERT_TRUE(cancel.ok());
    EXPECT_EQ(cancel->status, 200) << cancel->body;
    EXPECT_EQ(cluster.WaitJob(*id, 5000).value("state", ""), "cancelled");

    auto next = cluster.Submit(
        R"({"tasks":[{"id":"x","kernel":"noop"},{"id":"y","kernel":"noop","core":"vector"}]})");
    ASSERT_TRUE(next.ok());
    EXPECT_EQ(cluster.WaitJob(*next, 30000).value("state", ""), "succeeded");
    for (const auto& e : cluster.ReadExecLog())
      EXPECT_NE(e.job, *id) << "a cancelled task ran to the end";
  }
  std::filesystem::remove_all(dir);
}

TEST(CancelTest, AnAnsweredCancelSurvivesAControllerKilledRightAfter) {
  auto dir = std::filesystem::temp_directory_path() /
             ("hmpmd-cancel-durable-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  {
    ProcessCluster cluster(dir.string());
    ASSERT_TRUE(cluster.StartController().ok());
    ASSERT_TRUE(cluster.StartWorker().ok());
    // Several rounds: before the cancel waited for the store, most lost it.
    for (int round = 0; round < 3; ++round) {
      SCOPED_TRACE("round " + std::to_string(round));
      auto id =
          cluster.Submit(R"({"tasks":[{"id":"a","kernel":"sleep","args":{"us":3600000000}}]})");
      ASSERT_TRUE(id.ok()) << id.status().ToString();
      auto cancel = cluster.Call("DELETE", "/api/v1/jobs/" + std::to_string(*id), "");
      ASSERT_TRUE(cancel.ok());
      ASSERT_EQ(cancel->status, 200) << cancel->body;
      cluster.KillController();
      ASSERT_TRUE(cluster.StartController().ok());
      EXPECT_EQ(cluster.Get("/api/v1/jobs/" + std::to_string(*id)).value("state", ""), "cancelled");
    }
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace hmpmd::testing
