// WorkerFixture: a Worker on its own thread against a FakeController, with
// helpers to register it, build tasks and collect results. Every wait is
// bounded by FakeController::kDeadline.
//
// Thread-safety: the test thread owns the fixture; the worker runs on the
// thread RunningWorker starts.
#pragma once

#include <gtest/gtest.h>

#include <future>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "fake_controller.h"
#include "hmpmd/worker/worker.h"

namespace hmpmd::worker::testing {

inline constexpr WorkerId kWorkerId = 7;
inline constexpr uint32_t kHeartbeatMs = 20;

// Results are keyed by (job, task).
using Key = std::pair<JobId, uint32_t>;

// A task of attempt 1.
TaskAssign Task(JobId job, uint32_t task, std::string kernel, CoreKind core, uint32_t lane,
                Args args = {});

// Runs a Worker on its own thread; Stop()s and joins it on destruction.
class RunningWorker {
 public:
  explicit RunningWorker(Worker* worker);
  ~RunningWorker();
  // Run()'s status, or nullopt when it has not returned within `timeout`.
  std::optional<Status> Wait(std::chrono::milliseconds timeout = FakeController::kDeadline);

 private:
  Worker* worker_;
  std::promise<Status> promise_;
  std::future<Status> future_ = promise_.get_future();
  std::thread thread_;
};

class WorkerFixture : public ::testing::Test {
 protected:
  WorkerFixture();
  void TearDown() override;

  // Starts the worker; does not answer its registration.
  void Start();
  // Starts the worker, accepts its registration and returns once a
  // heartbeat shows it registered. An attempt the worker gave up on before
  // the ack came is answered again.
  void StartRegistered();
  // Results from DoneBatches until `want` distinct (job, task) pairs have
  // one, or the deadline passes.
  std::map<Key, TaskResult> CollectResults(size_t want);

  FakeController controller_;
  WorkerOptions options_;
  std::vector<std::pair<std::string, Kernel>> extra_kernels_;  // registered by Start()
  std::unique_ptr<Worker> worker_;
  std::unique_ptr<RunningWorker> running_;
};

}  // namespace hmpmd::worker::testing
