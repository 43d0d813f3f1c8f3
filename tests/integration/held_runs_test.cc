// --max-held-runs (ControllerOptions::max_held_runs) bounds the task runs
// a controller holds over all its jobs: a new job first makes room by
// forgetting the oldest ended jobs; one that still does not fit is refused
// (503, try later), and one larger than the bound on its own is refused
// for good (413): jobs each under --max-runs cannot add up until the
// controller runs out of memory.
#include <gtest/gtest.h>

#include "cluster_fixture.h"

namespace hmpmd::testing {
namespace {

// `runs` task runs: one `noop` task repeated.
std::string NoopJob(int runs) {
  return R"({"name":"n","repeat":)" + std::to_string(runs) +
         R"(,"tasks":[{"id":"t","kernel":"noop"}]})";
}

class HeldRunsTest : public ClusterTest {
 protected:
  void SetUp() override {
    ControllerOptions opts;
    opts.max_held_runs = 10;
    StartCluster(1, "cube=1,vector=1", opts);
  }

  uint64_t Held() {
    return cluster_->Call([&] { return cluster_->controller().HeldRuns(); });
  }
  bool Known(JobId id) {
    return cluster_->Call([&] { return cluster_->controller().scheduler().job(id) != nullptr; });
  }
};

TEST_F(HeldRunsTest, AJobLargerThanTheBoundIsRefusedForGood) {
  Status st = Submit(NoopJob(11));
  EXPECT_EQ(st.code(), StatusCode::kResourceExhausted) << st.ToString();
  EXPECT_NE(st.message().find("--max-held-runs"), std::string::npos) << st.message();
  EXPECT_EQ(Held(), 0u);
}

TEST_F(HeldRunsTest, EndedJobsAreForgottenOldestFirstToMakeRoom) {
  const JobResult first = RunSpec(NoopJob(4));
  const JobResult second = RunSpec(NoopJob(4));
  ASSERT_EQ(first.state, JobState::kSucceeded) << first.error;
  ASSERT_EQ(second.state, JobState::kSucceeded) << second.error;
  EXPECT_EQ(Held(), 8u);
  // 8 + 4 > 10: the oldest ended job goes, the newer one stays.
  const JobResult third = RunSpec(NoopJob(4));
  ASSERT_EQ(third.state, JobState::kSucceeded) << third.error;
  EXPECT_FALSE(Known(first.id));
  EXPECT_TRUE(Known(second.id));
  EXPECT_EQ(Held(), 8u);
}

TEST_F(HeldRunsTest, RunsOfJobsNotEndedAreNeverForgottenTheNewJobWaits) {
  // A job that runs until cancelled holds 6 runs.
  auto running = cluster_->Call([&] {
    return cluster_->controller().Submit(
        {R"({"name":"long","repeat":6,"tasks":[{"id":"t","kernel":"sleep","args":{"us":60000000}}]})"});
  });
  ASSERT_TRUE(running.ok()) << running.status().ToString();
  Status st = Submit(NoopJob(5));
  EXPECT_EQ(st.code(), StatusCode::kUnavailable) << st.ToString();
  EXPECT_NE(st.message().find("try again once some end"), std::string::npos) << st.message();
  EXPECT_TRUE(Known(*running));
  EXPECT_EQ(Held(), 6u);
  // Within the bound it is admitted beside it.
  EXPECT_TRUE(Submit(NoopJob(4)).ok());
  Status cancel = cluster_->Call([&] { return cluster_->controller().Cancel(*running); });
  EXPECT_TRUE(cancel.ok()) << cancel.ToString();
}

}  // namespace
}  // namespace hmpmd::testing
