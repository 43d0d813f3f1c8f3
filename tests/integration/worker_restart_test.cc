// A worker process that hangs mid-job (stopped) and is started again under
// the same --name registers as a new process (RegisterMsg::instance). The controller must
// not take it for the old one: the old process's running tasks and stored
// outputs are gone with it. The heartbeat time-out here is far longer than
// the job, so only restart detection can end the job in time: without it
// the old entry stays alive, its tasks "run" on a dead process until the
// time-out, and the pool counts one worker too many.
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <thread>

#include "cluster_fixture.h"
#include "hmpmd/api/live_metrics.h"

namespace hmpmd::testing {
namespace {

class WorkerRestartTest : public ClusterTest {
 protected:
  template <typename F>
  auto OnLoop(F fn) {
    return cluster_->Call(std::move(fn));
  }
  // The state of the only job, or kQueued while there is none.
  JobState OnlyJobState() {
    return OnLoop([&] {
      const auto& jobs = cluster_->controller().scheduler().jobs();
      return jobs.empty() ? JobState::kQueued : jobs.begin()->second.state;
    });
  }
};

TEST_F(WorkerRestartTest, AWorkerRestartedUnderItsNameIsANewWorkerAndTheOldOneIsLost) {
  ControllerOptions c;
  c.heartbeat_ms = 50;
  c.worker_timeout_ms = 120'000;  // far beyond the test: only a restart can be noticed
  // A consumer fetching from the dead process gives up (lost input) soon.
  extra_worker_args_ = {"--peer-timeout-ms", "3000"};
  StartCluster(2, "cube=1,vector=1", c);
  // Producers whose outputs stay in their worker's store, each read by a
  // slow consumer: when the victim dies it holds outputs and a running task.
  nlohmann::json tasks = nlohmann::json::array();
  for (int i = 0; i < 6; ++i) {
    const std::string p = "p" + std::to_string(i);
    tasks.push_back({{"id", p}, {"kernel", "scale"}, {"args", {{"n", 4096}, {"factor", 2.0}}}});
    tasks.push_back({{"id", "c" + std::to_string(i)},
                     {"kernel", "sleep"},
                     {"inputs", {p}},
                     {"args", {{"us", 300'000}}}});
  }
  ASSERT_TRUE(Submit(nlohmann::json{{"tasks", tasks}}.dump()).ok());

  // local-0 is the first process LocalCluster started.
  const pid_t victim = cluster_->workers().pids().front();
  const std::string endpoint = OnLoop([&] { return cluster_->controller().endpoint(); });
  // Kill it once it runs a task (bounded wait, by progress).
  bool running_there = false;
  for (int i = 0; i < 5000 && !running_there; ++i) {
    running_there = OnLoop([&] {
      const Controller& ctl = cluster_->controller();
      for (const auto& [id, job] : ctl.scheduler().jobs()) {
        for (const TaskRecord& rec : job.runs) {
          if (rec.state != TaskState::kRunning) continue;
          const DeviceId d = ctl.scheduler().pool().core(rec.core).device;
          if (ctl.workers().OfDevice(d)->pid == static_cast<uint32_t>(victim)) return true;
        }
      }
      return false;
    });
    if (!running_there) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  ASSERT_TRUE(running_there) << "the victim never ran a task";
  // Hung, not gone: its connection stays open, so only the new process
  // under its name can end its entry (a closed connection would, 1.5
  // heartbeats later, and race the restart). Killed below.
  ASSERT_EQ(kill(victim, SIGSTOP), 0);

  // The same name, a new process (stopped by PID in TearDown with the rest).
  ASSERT_TRUE(cluster_->workers()
                  .Start(HMPMD_WORKER_BIN,
                         {"--controller", endpoint, "--cores", "cube=1,vector=1", "--name",
                          "local-0", "--log-level", "warn", "--peer-timeout-ms", "3000"})
                  .ok());

  // The job ends long before the heartbeat time-out could end the old entry.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  JobState state = OnlyJobState();
  while (!IsTerminal(state) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    state = OnlyJobState();
  }
  ASSERT_EQ(state, JobState::kSucceeded) << "the job did not end after the restart";
  ASSERT_EQ(kill(victim, SIGKILL), 0);
  std::string exited;
  for (int i = 0; i < 2500 && exited.empty(); ++i) {
    exited = cluster_->workers().Exited();  // reaps it
    if (exited.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  EXPECT_NE(exited.find(std::to_string(victim)), std::string::npos) << exited;

  OnLoop([&] {
    const Controller& ctl = cluster_->controller();
    EXPECT_EQ(ctl.workers().alive_count(), 2u) << "the restarted worker counted twice";
    EXPECT_EQ(ctl.counters().worker_restarts, 1u);
    LiveMetrics metrics(&ctl);
    EXPECT_NE(metrics.PrometheusText(0, "").find("\nhmpmd_worker_restarts_total 1\n"),
              std::string::npos);
    size_t named = 0;
    for (const WorkerInfo& w : ctl.workers()) {
      if (w.name != "local-0") continue;
      ++named;
      if (w.pid == static_cast<uint32_t>(victim)) {
        EXPECT_FALSE(w.alive);
        EXPECT_NE(w.left_reason.find("restarted"), std::string::npos) << w.left_reason;
      } else {
        EXPECT_TRUE(w.alive);
        EXPECT_NE(w.instance, 0u);
      }
    }
    EXPECT_EQ(named, 2u);
    // Every consumer read its producer's output (wherever it was rebuilt).
    for (const auto& [id, job] : ctl.scheduler().jobs()) {
      for (const TaskRecord& rec : job.runs) EXPECT_EQ(rec.state, TaskState::kDone);
    }
  });
}

}  // namespace
}  // namespace hmpmd::testing
