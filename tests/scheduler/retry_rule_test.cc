// Tests for retry_rule.h and the engine's use of it: a task whose kernel
// fails runs again while its max_retries last and its error matches
// retry_on, then fails saying how many attempts it made; retries are not
// worker-death attempts (max_attempts), and a bad rule is refused at
// admission with one line.
#include "hmpmd/scheduler/retry_rule.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "hmpmd/scheduler/job_graph.h"
#include "scheduler_fixture.h"
#include "test_builders.h"

namespace hmpmd {
namespace {

using test::Device;
using test::SpecBuilder;
using test::TaskBuilder;

TaskSpec Retrying(uint32_t max_retries, std::vector<std::string> retry_on = {}) {
  TaskSpec t = TaskBuilder("t").Us(100);
  t.max_retries = max_retries;
  t.retry_on = std::move(retry_on);
  return t;
}

TEST(RetryRuleTest, AnyErrorIsRetriedWhenRetryOnIsEmpty) {
  const TaskSpec t = Retrying(2);
  EXPECT_TRUE(ShouldRetry(t, 0, "anything"));
  EXPECT_TRUE(ShouldRetry(t, 1, ""));
  EXPECT_FALSE(ShouldRetry(t, 2, "anything")) << "out of retries";
}

TEST(RetryRuleTest, OnlyErrorsContainingAnEntryOfRetryOnAreRetried) {
  const TaskSpec t = Retrying(3, {"ValueError", "timeout"});
  EXPECT_TRUE(ShouldRetry(t, 0, "ValueError: bad shape"));
  EXPECT_TRUE(ShouldRetry(t, 0, "fetch: timeout after 5 s"));
  EXPECT_FALSE(ShouldRetry(t, 0, "KeyError: 'x'"));
  EXPECT_FALSE(ShouldRetry(t, 0, "valueerror: lower case")) << "case-sensitive";
}

TEST(RetryRuleTest, NoRetriesByDefault) {
  EXPECT_FALSE(ShouldRetry(TaskBuilder("t").spec(), 0, "boom"));
}

TEST(RetryRuleTest, BadRulesAreRefusedNamingTheField) {
  auto message = [](const TaskSpec& t) { return CheckRetryRule(t, "tasks[0] 't'").message(); };
  EXPECT_TRUE(CheckRetryRule(Retrying(kMaxTaskRetries, {"x"}), "w").ok());
  EXPECT_EQ(message(Retrying(kMaxTaskRetries + 1)),
            "tasks[0] 't': max_retries: 101 is over the limit of 100");
  EXPECT_EQ(message(Retrying(1, {"ok", ""})), "tasks[0] 't': retry_on[1]: empty");
  EXPECT_EQ(message(Retrying(1, {std::string(kMaxRetryOnBytes + 1, 'x')})),
            "tasks[0] 't': retry_on[0]: longer than the limit of 256");
  EXPECT_EQ(message(Retrying(1, std::vector<std::string>(kMaxRetryOn + 1, "x"))),
            "tasks[0] 't': retry_on: more than 32 entries");
  TaskSpec member = Retrying(1);
  member.collective = CollectiveSpec{"g", "allreduce", 0};
  EXPECT_NE(message(member).find("max_retries: not for a member of a collective group"),
            std::string::npos);
}

TEST(RetryRuleTest, JobGraphRefusesABadRuleAtAdmission) {
  JobSpec spec = SpecBuilder().Add(Retrying(1, {""}));
  auto g = JobGraph::Build(spec);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().message(), "tasks[0] 't': retry_on[0]: empty");
}

class RetryEngineTest : public test::SchedulerTest {
 protected:
  void SetUp() override {
    Make();
    sched_->AddDevice(Device("d0", 1));
  }
  // Dispatches the one ready run and returns its dispatch.
  Dispatch Next(TimeUs now) {
    std::vector<Dispatch> out = ScheduleAt(now);
    EXPECT_EQ(out.size(), 1u);
    return out.empty() ? Dispatch{} : out[0];
  }
};

TEST_F(RetryEngineTest, AFailingKernelRunsAgainUntilItSucceeds) {
  JobId id = Add(SpecBuilder().Add(Retrying(2)).Add(TaskBuilder("after").Inputs({"t"}).Us(10)));
  for (uint32_t attempt = 0; attempt < 2; ++attempt) {
    Dispatch d = Next(attempt * 100);
    EXPECT_EQ(d.attempt, attempt);
    ASSERT_TRUE(sched_->OnTaskFailed(id, d.run, d.attempt, "boom", /*retryable=*/false,
                                     attempt * 100 + 50));
    EXPECT_EQ(Job(id).state, JobState::kRunning);
    EXPECT_EQ(Job(id).runs[d.run].retries, attempt + 1);
    // A late second report of the failed attempt is stale.
    EXPECT_FALSE(sched_->OnTaskFailed(id, d.run, d.attempt, "boom", false, attempt * 100 + 60));
  }
  Dispatch d = Next(200);
  EXPECT_EQ(d.attempt, 2u);
  ASSERT_TRUE(sched_->OnTaskDone(id, d.run, d.attempt, 200, 300, 300));
  Dispatch after = Next(300);
  ASSERT_TRUE(sched_->OnTaskDone(id, after.run, after.attempt, 300, 310, 310));
  EXPECT_EQ(Job(id).state, JobState::kSucceeded);
}

TEST_F(RetryEngineTest, OutOfRetriesTheTaskFailsWithItsLastErrorAndItsAttempts) {
  JobId id = Add(SpecBuilder().Add(Retrying(2)));
  for (uint32_t attempt = 0; attempt < 3; ++attempt) {
    Dispatch d = Next(attempt * 100);
    ASSERT_TRUE(sched_->OnTaskFailed(id, d.run, d.attempt, "boom " + std::to_string(attempt), false,
                                     attempt * 100 + 50));
  }
  EXPECT_EQ(Job(id).state, JobState::kFailed);
  EXPECT_EQ(Job(id).error, "task 't' failed after 3 attempts: boom 2");
}

TEST_F(RetryEngineTest, AnErrorRetryOnDoesNotMatchFailsAtOnce) {
  JobId id = Add(SpecBuilder().Add(Retrying(5, {"ValueError"})));
  Dispatch d = Next(0);
  ASSERT_TRUE(sched_->OnTaskFailed(id, d.run, d.attempt, "KeyError: 'x'", false, 50));
  EXPECT_EQ(Job(id).state, JobState::kFailed);
  EXPECT_EQ(Job(id).error, "task 't' failed: KeyError: 'x'");
  EXPECT_EQ(Job(id).runs[d.run].retries, 0u);
}

TEST_F(RetryEngineTest, RetriesLeaveTheWorkerDeathAttemptsWhole) {
  opts_.max_attempts = 2;
  Make();
  sched_->AddDevice(Device("d0", 1));
  JobId id = Add(SpecBuilder().Add(Retrying(3)));
  for (uint32_t attempt = 0; attempt < 3; ++attempt) {
    Dispatch d = Next(attempt * 100);
    ASSERT_TRUE(sched_->OnTaskFailed(id, d.run, d.attempt, "boom", false, attempt * 100 + 50));
  }
  // Three retries made; its worker dies under it: that costs one of its
  // max_attempts, not a fourth retry, and it runs again.
  Dispatch d = Next(300);
  EXPECT_EQ(d.attempt, 3u);
  ASSERT_TRUE(sched_->OnTaskFailed(id, d.run, d.attempt, "worker died", /*retryable=*/true, 350));
  EXPECT_EQ(Job(id).state, JobState::kRunning);
  d = Next(400);
  ASSERT_TRUE(sched_->OnTaskDone(id, d.run, d.attempt, 400, 500, 500));
  EXPECT_EQ(Job(id).state, JobState::kSucceeded);
}

TEST_F(RetryEngineTest, ACancelledJobIsNotRetried) {
  JobId id = Add(SpecBuilder().Add(Retrying(2)));
  Dispatch d = Next(0);
  ASSERT_TRUE(sched_->CancelJob(id, "by the user", 10).ok());
  EXPECT_FALSE(sched_->OnTaskFailed(id, d.run, d.attempt, "cancelled", false, 20));
  EXPECT_EQ(Job(id).state, JobState::kCancelled);
  EXPECT_TRUE(ScheduleAt(30).empty());
}

}  // namespace
}  // namespace hmpmd
