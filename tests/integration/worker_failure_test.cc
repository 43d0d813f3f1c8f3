// A worker killed with SIGKILL mid-job is declared dead after missing
// heartbeats; its running tasks run again elsewhere and the job completes.
#include <signal.h>

#include <nlohmann/json.hpp>
#include <thread>

#include "cluster_fixture.h"

namespace hmpmd::testing {
namespace {

class WorkerFailureTest : public ClusterTest {};

TEST_F(WorkerFailureTest, KilledWorkerTasksRunAgainElsewhere) {
  ControllerOptions c;
  c.heartbeat_ms = 50;
  c.worker_timeout_ms = 400;
  StartCluster(3, "cube=1,vector=1", c);
  nlohmann::json tasks = nlohmann::json::array();
  for (int i = 0; i < 30; ++i) {
    tasks.push_back(
        {{"id", "s" + std::to_string(i)}, {"kernel", "sleep"}, {"args", {{"us", 20000}}}});
  }
  pid_t victim = cluster_->workers().pids().front();
  // Kill once a few tasks are done: mid-job by progress, not by a timer.
  std::thread killer([this, victim] {
    for (int i = 0; i < 2000; ++i) {
      uint64_t done = cluster_->Call([&] {
        uint64_t d = 0;
        for (const auto& [id, job] : cluster_->controller().scheduler().jobs()) d += job.done;
        return d;
      });
      if (done >= 3) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    kill(victim, SIGKILL);
  });
  JobResult r = RunSpec(nlohmann::json{{"tasks", tasks}}.dump());
  killer.join();
  ASSERT_EQ(r.state, JobState::kSucceeded) << r.error;
  ExpectValidSchedule(r);
  size_t alive = cluster_->Call([&] { return cluster_->controller().workers().alive_count(); });
  EXPECT_EQ(alive, 2u);
}

}  // namespace
}  // namespace hmpmd::testing
