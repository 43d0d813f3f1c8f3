// Collective failures that are not a dead worker, with real worker
// processes: a member that is stopped (SIGSTOP) so its peers' collective
// times out (hmpmd-worker --peer-timeout-ms), and jobs cancelled while a
// gang waits in its collective or for devices. A timed-out collective runs
// its whole gang again (one attempt of the gang's, bounded by max_attempts);
// a cancelled job stops every member at once, not after the time-out.
//
// The controller's worker time-out is far above the collective time-out,
// so a stopped worker is never declared dead here: what restarts the gang
// is the time-out its peers report.
#include <signal.h>

#include <nlohmann/json.hpp>
#include <thread>

#include "cluster_fixture.h"

namespace hmpmd::testing {
namespace {

// Polls `done` on the controller loop every 2 ms, at most `tries` times.
template <typename F>
bool WaitOnLoop(LocalCluster& c, F done, int tries = 15000) {
  for (int i = 0; i < tries; ++i) {
    if (c.Call(done)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return false;
}

class GangTimeoutTest : public ClusterTest {
 protected:
  // An all-reduce gang of `members` on vector cores, each member reducing
  // `n` generated floats; with `pre_us`, behind a sleep of that long on a
  // cube core (else there are no inputs and the gang is dispatched at once).
  static std::string GangSpec(int members, int n = 1 << 12, int64_t pre_us = 0) {
    nlohmann::json tasks = nlohmann::json::array();
    if (pre_us > 0) {
      tasks.push_back({{"id", "pre"}, {"kernel", "sleep"}, {"args", {{"us", pre_us}}}});
    }
    for (int i = 0; i < members; ++i) {
      nlohmann::json t = {{"id", "ar" + std::to_string(i)},
                          {"kernel", "allreduce"},
                          {"core", "vector"},
                          {"args", {{"n", n}}},
                          {"collective", {{"group", "g"}, {"op", "allreduce"}, {"bytes", n * 4}}}};
      if (pre_us > 0) t["inputs"] = {"pre"};
      tasks.push_back(std::move(t));
    }
    return nlohmann::json{{"tasks", tasks}}.dump();
  }
  // Workers with one vector core each (a gang of three takes three); the
  // collective times out after `peer_timeout_ms`. By default a worker is
  // never declared dead within a test.
  void StartThree(int peer_timeout_ms, int workers = 3, uint32_t worker_timeout_ms = 120000) {
    extra_worker_args_ = {"--peer-timeout-ms", std::to_string(peer_timeout_ms)};
    ControllerOptions c;
    c.heartbeat_ms = 50;
    c.worker_timeout_ms = worker_timeout_ms;
    StartCluster(workers, "cube=1,vector=1", c);
  }
  JobId SubmitOrFail(const std::string& spec) {
    Result<JobId> id = cluster_->Call([&] { return cluster_->controller().Submit({spec}); });
    EXPECT_TRUE(id.ok()) << id.status().ToString();
    return id.ok() ? *id : 0;
  }
  // The job's state once it ended (its error in `*error`), or kRunning when
  // it did not end within the bounded wait.
  JobState WaitEnd(JobId id, std::string* error, int tries = 15000) {
    JobState state = JobState::kRunning;
    WaitOnLoop(
        *cluster_,
        [&] {
          const JobRun* job = cluster_->controller().scheduler().job(id);
          if (job == nullptr || !IsTerminal(job->state)) return false;
          state = job->state;
          *error = job->error;
          return true;
        },
        tries);
    return state;
  }
  uint32_t GangRetries(JobId id) {
    return cluster_->Call([&]() -> uint32_t {
      const JobRun* job = cluster_->controller().scheduler().job(id);
      return job == nullptr || job->gang_retries.empty() ? 0 : job->gang_retries[0];
    });
  }
  // Stops worker 0 (SIGSTOP) and remembers it, so that TearDown resumes it.
  pid_t StopOneWorker() {
    stopped_ = cluster_->workers().pids().at(0);
    kill(stopped_, SIGSTOP);
    return stopped_;
  }
  void Resume() {
    if (stopped_ > 0) kill(stopped_, SIGCONT);
    stopped_ = -1;
  }
  void TearDown() override {
    Resume();  // never left stopped
    ClusterTest::TearDown();
  }

  pid_t stopped_ = -1;
};

// A member that times out does not fail the job ("collective: nothing from
// rank ..."): the gang runs again; once the stopped member is back, the new
// attempt succeeds and its sum is right.
TEST_F(GangTimeoutTest, AMemberThatTimesOutRestartsTheGangInsteadOfFailingTheJob) {
  StartThree(1000);
  StopOneWorker();
  const JobId id = SubmitOrFail(GangSpec(3));
  ASSERT_NE(id, 0u);
  const bool retried = WaitOnLoop(*cluster_, [&] {
    const JobRun* job = cluster_->controller().scheduler().job(id);
    return job != nullptr && (IsTerminal(job->state) || job->gang_retries[0] >= 1);
  });
  Resume();
  ASSERT_TRUE(retried) << "no member of the gang timed out";
  std::string error;
  ASSERT_EQ(WaitEnd(id, &error), JobState::kSucceeded) << error;
  EXPECT_GE(GangRetries(id), 1u);
  // The time-out path: a member reported the failure (a worker declared
  // dead reports nothing). The count of live workers would not tell: once
  // running again, a stopped worker may re-register as a new one.
  EXPECT_GE(cluster_->Call([&] { return cluster_->controller().counters().tasks_failed; }), 1u)
      << "no member reported a failure: not the time-out path";
  // Every member holds the sum over the three ranks of (i % 251) * 0.5 + rank.
  for (uint32_t run = 0; run < 3; ++run) {
    std::vector<Buffer> out = FetchOutputs(id, run);
    ASSERT_EQ(out.size(), 1u);
    const std::vector<float> got = Floats(out[0]);
    ASSERT_EQ(got.size(), size_t{1} << 12);
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_FLOAT_EQ(got[i], static_cast<float>(i % 251) * 1.5f + 3.0f) << "run " << run;
    }
  }
}

// A member that never comes back within the job's attempts fails the job,
// once, with an error that names the task, the attempts and the cause;
// then the lanes are free for the next gang.
TEST_F(GangTimeoutTest, AGangThatKeepsTimingOutFailsTheJobNamingTheTaskAndTheCause) {
  StartThree(300);
  StopOneWorker();
  const JobId id = SubmitOrFail(GangSpec(3));
  ASSERT_NE(id, 0u);
  std::string error;
  const JobState state = WaitEnd(id, &error);
  Resume();
  ASSERT_EQ(state, JobState::kFailed) << error;
  EXPECT_NE(error.find("task 'ar"), std::string::npos) << error;
  EXPECT_NE(error.find("after 3 attempts of its collective group 'g'"), std::string::npos) << error;
  EXPECT_NE(error.find("collective: nothing from rank"), std::string::npos) << error;
  EXPECT_NE(error.find("within 300 ms"), std::string::npos) << error;
  EXPECT_EQ(GangRetries(id), 2u) << "three gang attempts in all";
  // The resumed worker drops the attempts it was sent meanwhile (all stale
  // or of a failed job): a new gang on the same three lanes succeeds.
  const JobId next = SubmitOrFail(GangSpec(3));
  ASSERT_NE(next, 0u);
  ASSERT_EQ(WaitEnd(next, &error), JobState::kSucceeded) << error;
}

// A member whose kernel fails outright (a bad argument: not worth running
// again) fails the job at once, and its peers, waiting for it in the
// collective, are stopped there. With a ten-minute time-out, peers left
// waiting would keep their workers busy past this test's bounded wait.
TEST_F(GangTimeoutTest, AMemberThatFailsOutrightStopsItsPeersAndFailsTheJob) {
  StartThree(600000);
  // a2a0's counts sum to 300, but its input has 100 elements: only its
  // worker can tell (the spec check follows sizes through gemm, send and
  // gangs, not through a scale of real data).
  nlohmann::json tasks = nlohmann::json::array();
  tasks.push_back({{"id", "pre0"}, {"kernel", "scale"}, {"args", {{"n", 100}}}});
  tasks.push_back({{"id", "pre"}, {"kernel", "scale"}, {"inputs", {"pre0"}}});
  for (int i = 0; i < 3; ++i) {
    nlohmann::json t = {{"id", "a2a" + std::to_string(i)},
                        {"kernel", "alltoall"},
                        {"core", "vector"},
                        {"args", {{"n", 300}}},
                        {"collective", {{"group", "g"}, {"op", "alltoall"}, {"bytes", 1200}}}};
    if (i == 0) {
      t["inputs"] = {"pre"};
      t["args"] = {{"sizes", "100,100,100"}};
    }
    tasks.push_back(std::move(t));
  }
  const JobId id = SubmitOrFail(nlohmann::json{{"tasks", tasks}}.dump());
  ASSERT_NE(id, 0u);
  std::string error;
  ASSERT_EQ(WaitEnd(id, &error), JobState::kFailed);
  EXPECT_NE(error.find("task 'a2a0' failed: alltoall: argument 'sizes'"), std::string::npos)
      << error;
  EXPECT_EQ(GangRetries(id), 0u) << "a bad argument is not retried";
  // The next gang lands on the same three lanes: behind a peer left
  // waiting, it would not end within WaitEnd's bound.
  const JobId next = SubmitOrFail(GangSpec(3));
  ASSERT_NE(next, 0u);
  ASSERT_EQ(WaitEnd(next, &error), JobState::kSucceeded) << error;
}

// Cancelling a job whose gang waits in the collective (for a stopped
// member) stops the members there at once. With a ten-minute time-out, a
// member left waiting would hold its lane past this test's bounded wait,
// and the next gang, placed on the same lanes, would not finish.
TEST_F(GangTimeoutTest, CancellingAJobStopsTheMembersWaitingInTheCollective) {
  StartThree(600000);
  const pid_t victim = StopOneWorker();
  const JobId id = SubmitOrFail(GangSpec(3));
  ASSERT_NE(id, 0u);
  // The two live workers hold their member (their heartbeats say so): with
  // an idle lane and no inputs, it is waiting in the collective.
  ASSERT_TRUE(WaitOnLoop(*cluster_, [&] {
    int holding = 0;
    for (const WorkerInfo& w : cluster_->controller().workers()) {
      holding += w.alive && static_cast<pid_t>(w.pid) != victim && w.in_flight >= 1;
    }
    return holding == 2;
  })) << "the live members never started";
  ASSERT_TRUE(cluster_->Call([&] { return cluster_->controller().Cancel(id); }).ok());
  std::string error;
  EXPECT_EQ(WaitEnd(id, &error), JobState::kCancelled) << error;
  Resume();
  // Both live workers report their lanes empty again.
  EXPECT_TRUE(WaitOnLoop(*cluster_, [&] {
    for (const WorkerInfo& w : cluster_->controller().workers()) {
      if (w.alive && w.in_flight != 0) return false;
    }
    return true;
  })) << "a member kept waiting in the cancelled collective";
  const JobId next = SubmitOrFail(GangSpec(3));
  ASSERT_NE(next, 0u);
  ASSERT_EQ(WaitEnd(next, &error), JobState::kSucceeded) << error;
}

// A gang left with fewer live devices than members (a worker died while
// its input ran) waits for workers; cancelling that job ends it at once,
// stops its running input, and leaves nothing queued behind.
TEST_F(GangTimeoutTest, CancellingAJobWhoseGangWaitsForDevicesEndsIt) {
  StartThree(60000, 3, /*worker_timeout_ms=*/400);
  const JobId id = SubmitOrFail(GangSpec(3, 1 << 12, /*pre_us=*/3'600'000'000));
  ASSERT_NE(id, 0u);
  pid_t busy = -1;  // the worker sleeping in `pre`
  ASSERT_TRUE(WaitOnLoop(*cluster_, [&] {
    const JobRun* job = cluster_->controller().scheduler().job(id);
    if (job == nullptr || job->runs[0].state != TaskState::kRunning) return false;
    const DeviceId d = cluster_->controller().scheduler().pool().core(job->runs[0].core).device;
    busy = static_cast<pid_t>(cluster_->controller().workers().OfDevice(d)->pid);
    return true;
  }));
  pid_t victim = -1;
  for (pid_t p : cluster_->workers().pids()) {
    if (p != busy) victim = p;
  }
  ASSERT_GT(victim, 0);
  kill(victim, SIGKILL);
  ASSERT_TRUE(WaitOnLoop(*cluster_, [&] {
    const JobRun* job = cluster_->controller().scheduler().job(id);
    return job != nullptr && !job->waiting.empty();
  })) << "a gang of three on two devices should wait";
  ASSERT_TRUE(cluster_->Call([&] { return cluster_->controller().Cancel(id); }).ok());
  std::string error;
  EXPECT_EQ(WaitEnd(id, &error), JobState::kCancelled) << error;
  EXPECT_TRUE(WaitOnLoop(*cluster_, [&] {
    return cluster_->controller().scheduler().ready_count(CoreKind::kVector) == 0;
  })) << "the cancelled gang is still queued";
  // The hour-long `pre` was stopped: its worker reports nothing in flight.
  EXPECT_TRUE(WaitOnLoop(*cluster_, [&] {
    for (const WorkerInfo& w : cluster_->controller().workers()) {
      if (w.alive && w.in_flight != 0) return false;
    }
    return true;
  })) << "the cancelled job's input still runs";
  const JobId gang = SubmitOrFail(GangSpec(2));
  ASSERT_NE(gang, 0u);
  ASSERT_EQ(WaitEnd(gang, &error), JobState::kSucceeded) << error;
}

}  // namespace
}  // namespace hmpmd::testing
