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
#include "hmpmd/store/in_memory_job_store.h"

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

// The same for a restarted controller's recovery window: held up after a
// read for three times its grace, it must not judge the grace over (and
// rebuild what the workers still hold) before it has read the
// registrations that came meanwhile; seen in controller_stall_test under
// load, a SIGSTOP landing between the read and the window's check.
TEST_F(ClusterTest, ALoopBusyAfterItReadKeepsItsRecoveryWindowOpen) {
  auto store = std::make_shared<InMemoryJobStore>();
  std::vector<StoreRecord> records;
  records.push_back(
      JobSubmittedRecord{1, "j", R"({"name":"j","tasks":[{"id":"a","kernel":"noop"}]})", 1});
  records.push_back(WorkerRecord{"gone|1|tcp://127.0.0.1:1", true});  // expected back
  ASSERT_TRUE(store->Write(records).ok());
  ControllerOptions c;
  c.store = store;
  c.recovery_grace_ms = 500;
  ASSERT_NO_FATAL_FAILURE(StartCluster(0, "cube=1", c));
  cluster_->controller().Post([] { std::this_thread::sleep_for(std::chrono::milliseconds(1500)); });
  std::this_thread::sleep_for(std::chrono::milliseconds(1600));
  EXPECT_TRUE(cluster_->Call([this] { return cluster_->controller().recovery().open(); }))
      << "the window closed on time the loop did not read its socket";
}

}  // namespace
}  // namespace hmpmd::testing
