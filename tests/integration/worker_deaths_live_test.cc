// A task whose kernel aborts its worker process, with real processes: three
// workers (crash_worker, which has the `abort` kernel); the task kills the
// worker it runs on, is retried once on another, kills that one too, and is
// not retried again (SchedulerOptions::max_worker_deaths, default 2): the
// job fails naming the task and the two workers, and the third survives.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>

#include "process_cluster_fixture.h"

namespace hmpmd::testing {
namespace {

class WorkerDeathsLiveTest : public ProcessClusterFixture {
 protected:
  WorkerDeathsLiveTest() : ProcessClusterFixture("hmpmd-worker-deaths") {}
};

TEST_F(WorkerDeathsLiveTest, ATaskThatKillsTwoWorkersFailsTheJobAndTheThirdSurvives) {
  ASSERT_TRUE(cluster_->StartController().ok());
  cluster_->set_worker_bin(HMPMD_CRASH_WORKER_BIN);
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(cluster_->StartWorker({"--name", "crash" + std::to_string(i)}).ok());
  }
  ASSERT_TRUE(cluster_->WaitWorkers(3, 20000));
  auto id = cluster_->Submit(R"({"name":"kills","tasks":[{"id":"boom","kernel":"abort"}]})");
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  // Each death is noticed within the worker timeout (1 s): well under 30 s.
  nlohmann::json job = cluster_->WaitJob(*id, 30000);
  EXPECT_EQ(job.value("state", ""), "failed") << job.dump();
  const std::string error = job.value("error", "");
  EXPECT_NE(error.find("task 'boom'"), std::string::npos) << error;
  EXPECT_NE(error.find("killed 2 workers"), std::string::npos) << error;
  int running = 0;
  for (size_t i = 0; i < 3; ++i) running += cluster_->WorkerRunning(i) ? 1 : 0;
  EXPECT_EQ(running, 1) << "two workers died, the third survives";
  nlohmann::json pool = cluster_->Get("/api/v1/pool");
  ASSERT_TRUE(pool.is_object());
  EXPECT_EQ(pool.value("alive_devices", size_t{0}), 1u) << pool.dump();
  // The survivor still serves: a job of the built-in kernels succeeds on it.
  auto ok = cluster_->Submit(R"({"name":"after","tasks":[{"id":"n","kernel":"noop"}]})");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(cluster_->WaitJob(*ok, 20000).value("state", ""), "succeeded");
  // The fixture's ProcessCluster kills (SIGKILL) and reaps every process it
  // started, by pid; the dead ones are reaped here already.
}

}  // namespace
}  // namespace hmpmd::testing
