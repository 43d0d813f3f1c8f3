// A controller loop held up after it read its socket (here busy in posted
// work; a SIGSTOP or a starved thread landing there is the same) has not
// read the heartbeats the workers sent meanwhile. Silence is counted up to
// its last read, so it blames no worker for its own delay: before, every
// worker was declared dead at once (seen in fault_run seed 11, a SIGSTOP
// landing between the read and the liveness check).
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "cluster_fixture.h"

namespace hmpmd::testing {
namespace {

TEST_F(ClusterTest, ALoopBusyAfterItReadBlamesNoWorkerForItsOwnDelay) {
  ControllerOptions c;
  c.heartbeat_ms = 100;
  c.worker_timeout_ms = 800;
  ASSERT_NO_FATAL_FAILURE(StartCluster(2, "cube=1,vector=1", c));
  // Three times the worker timeout, twice.
  for (int i = 0; i < 2; ++i) {
    cluster_->controller().Post(
        [] { std::this_thread::sleep_for(std::chrono::milliseconds(2400)); });
    std::this_thread::sleep_for(std::chrono::milliseconds(2700));
  }
  const auto [devices, alive] = cluster_->Call([this] {
    const ResourcePool& pool = cluster_->controller().scheduler().pool();
    return std::pair{pool.device_count(), pool.alive_device_count()};
  });
  EXPECT_EQ(alive, 2u);
  EXPECT_EQ(devices, 2u) << "a worker was declared dead and registered again";
  // And the pool still runs work.
  JobResult r = RunSpec(R"({"name":"after","tasks":[{"id":"a","kernel":"noop"}]})");
  EXPECT_EQ(r.state, JobState::kSucceeded);
}

}  // namespace
}  // namespace hmpmd::testing
