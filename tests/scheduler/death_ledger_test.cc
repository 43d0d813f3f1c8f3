// DeathLedger (scheduler/death_ledger.cc): which runs a device's death is
// charged to, from what its worker last said its lanes run, or else the
// run each lane was next to start; and when a run stops being retried.
#include "hmpmd/scheduler/death_ledger.h"

#include <gtest/gtest.h>

#include <map>
#include <utility>
#include <vector>

#include "test_builders.h"

namespace hmpmd {
namespace {

using Blame = std::vector<std::pair<JobId, uint32_t>>;

class DeathLedgerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    device_ = pool_.AddDevice(test::Device("w0", 1, 1));
    cube_ = pool_.device(device_).cores[0];
    vector_ = pool_.device(device_).cores[1];
    JobRun& job = jobs_[1];
    job.id = 1;
    job.state = JobState::kRunning;
    job.runs.resize(4);
  }
  // Run `run` of job 1 running on `core`, dispatched `seq`-th.
  void Running(uint32_t run, CoreId core, uint64_t seq, uint32_t attempt = 0) {
    JobRun& job = jobs_[1];
    TaskRecord& rec = job.runs[run];
    rec.state = TaskState::kRunning;
    rec.core = core;
    rec.lane_seq = seq;
    rec.attempt = attempt;
    ++job.running;
  }
  StartedRun Started(uint32_t run, CoreKind kind, uint32_t attempt = 0) {
    return StartedRun{1, run, attempt, kind, 0};
  }

  ResourcePool pool_{PoolOptions{}};
  std::map<JobId, JobRun> jobs_;
  DeathLedger ledger_;
  DeviceId device_ = 0;
  CoreId cube_ = 0, vector_ = 0;
};

TEST_F(DeathLedgerTest, ARunTheWorkerNamedStartedIsBlamedNotTheRunsQueuedBehindIt) {
  Running(0, cube_, 1);
  Running(1, cube_, 2);  // queued behind run 0
  const StartedRun s[] = {Started(0, CoreKind::kCube)};
  ledger_.Report(device_, s, 2);
  EXPECT_EQ(ledger_.Blamed(device_, pool_, jobs_), (Blame{{1, 0}}));
}

TEST_F(DeathLedgerTest, ALaneThatNamedNoneBlamesTheRunItWasNextToStart) {
  Running(2, cube_, 7);
  Running(1, cube_, 5);  // dispatched first: the lane's next
  Running(3, vector_, 6);
  EXPECT_EQ(ledger_.Blamed(device_, pool_, jobs_), (Blame{{1, 1}, {1, 3}}));
}

TEST_F(DeathLedgerTest, AStaleWordAndAnAdoptedRunOfUnknownOrderBlameNone) {
  Running(0, cube_, 0);  // adopted after a restart: order unknown
  Running(1, vector_, 3, /*attempt=*/2);
  // The word names attempt 1 of run 1: a result came since.
  const StartedRun s[] = {Started(1, CoreKind::kVector, 1)};
  ledger_.Report(device_, s, 2);
  // The cube lane holds a run of unknown order; the vector lane's word is
  // stale, so its next run (run 1, attempt 2) is blamed.
  EXPECT_EQ(ledger_.Blamed(device_, pool_, jobs_), (Blame{{1, 1}}));
}

TEST_F(DeathLedgerTest, AReportKeepsOneRunPerLaneAndForgetClearsIt) {
  Running(0, cube_, 1);
  Running(2, cube_, 3);
  Running(1, vector_, 2);
  Running(3, vector_, 4);
  const StartedRun s[] = {Started(2, CoreKind::kCube), Started(3, CoreKind::kVector)};
  ledger_.Report(device_, s, 1);  // one lane's worth: run 3 is cut
  EXPECT_EQ(ledger_.Blamed(device_, pool_, jobs_), (Blame{{1, 2}, {1, 1}}));
  ledger_.Report(device_, s, 2);
  EXPECT_EQ(ledger_.Blamed(device_, pool_, jobs_), (Blame{{1, 2}, {1, 3}}));
  ledger_.Forget(device_);
  EXPECT_EQ(ledger_.Blamed(device_, pool_, jobs_), (Blame{{1, 0}, {1, 1}}));
}

TEST_F(DeathLedgerTest, ARunIsNotRetriedOnceItSawMaxWorkerDeaths) {
  const DeviceId other = pool_.AddDevice(test::Device("w1", 1));
  JobRun& job = jobs_[1];
  bool retryable = true;
  EXPECT_EQ(DeathLedger::Charge(job, 0, device_, pool_, 0, 3, 2, &retryable),
            "its worker (w0) died");
  EXPECT_TRUE(retryable);
  const std::string second = DeathLedger::Charge(job, 0, other, pool_, 1, 3, 2, &retryable);
  EXPECT_FALSE(retryable);
  EXPECT_EQ(second,
            "it killed 2 workers (w0, w1): each died while running it, so it is not run again "
            "(max_worker_deaths 2)");
}

TEST_F(DeathLedgerTest, OutOfAttemptsOrNoLimitLeavesTheOrdinaryError) {
  JobRun& job = jobs_[1];
  bool retryable = true;
  DeathLedger::Charge(job, 0, device_, pool_, 0, 3, 0, &retryable);
  DeathLedger::Charge(job, 0, device_, pool_, 1, 3, 0, &retryable);
  EXPECT_TRUE(retryable);  // 0: no limit
  job.worker_deaths.clear();
  DeathLedger::Charge(job, 1, device_, pool_, 0, 3, 2, &retryable);
  // Its last attempt: running out of attempts says why, not this.
  EXPECT_EQ(DeathLedger::Charge(job, 1, device_, pool_, 2, 3, 2, &retryable),
            "its worker (w0) died");
  EXPECT_TRUE(retryable);
}

}  // namespace
}  // namespace hmpmd
