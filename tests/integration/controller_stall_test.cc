// A controller that was stopped (SIGSTOP, as a VM pause, swapping or an
// fsync stall would) for longer than the worker timeout blames no worker
// for its own silence once it runs again: the workers stay the same live
// devices and every task runs exactly once (counted from the workers' exec
// logs). Before StallClock, every worker was declared dead on resume and
// the runs they held ran again.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <map>
#include <string>
#include <thread>
#include <tuple>

#include "process_cluster_fixture.h"

namespace hmpmd::testing {
namespace {

class ControllerStallTest : public ProcessClusterFixture {
 protected:
  ControllerStallTest() : ProcessClusterFixture("hmpmd-stall") {}
};

TEST_F(ControllerStallTest, AStoppedControllerBlamesNoWorkerAndRunsNothingTwice) {
  // The fixture's controller: heartbeats every 100 ms, workers dead after
  // 1 s of silence. The workers give up on the controller after 3 s.
  ASSERT_TRUE(cluster_->StartController().ok());
  constexpr size_t kWorkers = 4;
  for (size_t i = 0; i < kWorkers; ++i) ASSERT_TRUE(cluster_->StartWorker().ok());
  ASSERT_TRUE(cluster_->WaitWorkers(kWorkers, 20000));
  constexpr int kTasks = 160;
  std::string spec = R"({"name":"stall","tasks":[)";
  for (int i = 0; i < kTasks; ++i) {
    spec += std::string(i ? "," : "") + R"({"id":"t)" + std::to_string(i) +
            R"(","kernel":"sleep","args":{"us":50000}})";
  }
  spec += "]}";
  auto id = cluster_->Submit(spec);
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  WaitDone(*id, 4);

  // The whole host paused (a VM pause): workers and controller stopped for
  // 1.5 times the worker timeout. The controller resumes first, the
  // workers 100 ms later, so no heartbeat waits for it: silence counted
  // over the pause would find every worker dead at once.
  for (int pause = 0; pause < 2; ++pause) {
    for (size_t i = 0; i < kWorkers; ++i) ASSERT_EQ(::kill(cluster_->worker_pid(i), SIGSTOP), 0);
    ASSERT_EQ(::kill(cluster_->controller_pid(), SIGSTOP), 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    ASSERT_EQ(::kill(cluster_->controller_pid(), SIGCONT), 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    for (size_t i = 0; i < kWorkers; ++i) ASSERT_EQ(::kill(cluster_->worker_pid(i), SIGCONT), 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }

  nlohmann::json job = cluster_->WaitJob(*id, 60000);
  EXPECT_EQ(job.value("state", ""), "succeeded") << job.dump();
  nlohmann::json pool = cluster_->Get("/api/v1/pool");
  ASSERT_TRUE(pool.is_object());
  EXPECT_EQ(pool["devices"].size(), kWorkers) << "a worker was declared dead and joined again";
  for (const auto& d : pool["devices"]) EXPECT_TRUE(d.value("alive", false)) << d.dump();
  std::map<uint32_t, int> runs;
  for (const auto& e : cluster_->ReadExecLog()) {
    if (e.job == *id) ++runs[e.task];
  }
  EXPECT_EQ(runs.size(), size_t{kTasks});
  for (const auto& [task, n] : runs) EXPECT_EQ(n, 1) << "task " << task << " ran " << n << " times";
}

// A controller restarted on its store waits a recovery grace for the
// workers that held tasks to register again before dispatching. Stopped
// during that grace for longer than the grace, it must not judge the grace
// over on resume before reading the registrations waiting for it: it would
// start the tasks the workers still run a second time.
TEST_F(ControllerStallTest, AControllerStoppedDuringItsRecoveryGraceRunsNothingTwice) {
  cluster_->set_recovery_grace_ms(1000);
  ASSERT_TRUE(cluster_->StartController().ok());
  constexpr size_t kWorkers = 4;
  for (size_t i = 0; i < kWorkers; ++i) ASSERT_TRUE(cluster_->StartWorker().ok());
  ASSERT_TRUE(cluster_->WaitWorkers(kWorkers, 20000));
  // Data chains: a link's output is read by the next, so outputs of
  // finished runs live on the workers when the controller dies.
  constexpr int kChains = 8, kLinks = 6;
  constexpr int kTasks = kChains * (1 + 2 * kLinks);
  std::string spec = R"({"name":"grace","tasks":[)";
  for (int c = 0; c < kChains; ++c) {
    const std::string x = "c" + std::to_string(c) + "x";
    const std::string nap = "c" + std::to_string(c) + "s";
    spec +=
        std::string(c ? "," : "") + R"({"id":")" + x + R"(0","kernel":"scale","args":{"n":1024}})";
    for (int k = 1; k <= kLinks; ++k) {
      const std::string prev = x + std::to_string(k - 1);
      spec += R"(,{"id":")" + nap + std::to_string(k) +
              R"(","kernel":"sleep","core":"vector","args":{"us":200000},"inputs":[")" + prev +
              R"("]})";
      spec += R"(,{"id":")" + x + std::to_string(k) + R"(","kernel":"scale","inputs":[")" + prev +
              R"(",")" + nap + std::to_string(k) + R"("]})";
    }
  }
  spec += "]}";
  auto id = cluster_->Submit(spec);
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  WaitDone(*id, 24);
  cluster_->KillController();
  ASSERT_TRUE(cluster_->StartController().ok());
  // Its grace is open; the workers' registrations wait in the kernel.
  ASSERT_EQ(::kill(cluster_->controller_pid(), SIGSTOP), 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(2000));
  ASSERT_EQ(::kill(cluster_->controller_pid(), SIGCONT), 0);

  nlohmann::json job = cluster_->WaitJob(*id, 120000);
  EXPECT_EQ(job.value("state", ""), "succeeded") << job.dump();
  std::map<uint32_t, int> runs;
  for (const auto& e : cluster_->ReadExecLog()) {
    if (e.job == *id) ++runs[e.task];
  }
  EXPECT_EQ(runs.size(), size_t{kTasks});
  for (const auto& [task, n] : runs) EXPECT_EQ(n, 1) << "task " << task << " ran " << n << " times";
}

}  // namespace
}  // namespace hmpmd::testing
