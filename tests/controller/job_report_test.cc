// A job's summary as REST gives it (JobSummaryJson), from a controller that
// is never Run: its jobs are never dispatched.
#include "job_report.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "controller.h"

namespace hmpmd {
namespace {

TEST(JobReportTest, AJobNotStartedOrNotEndedHasNullTimes) {
  ControllerOptions o;
  o.listen = "tcp://127.0.0.1:0";
  Controller c(o);
  auto id = c.SubmitJson(R"({"name":"j","tasks":[{"id":"a","kernel":"noop"}]})");
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  const JobRun& job = *c.scheduler().job(*id);
  nlohmann::json j = JobSummaryJson(job, c.scheduler().pool(), false);
  EXPECT_TRUE(j["started_us"].is_null()) << j.dump();  // it said -1
  EXPECT_TRUE(j["finished_us"].is_null()) << j.dump();
  EXPECT_TRUE(j["submitted_us"].is_number_integer()) << j.dump();
  ASSERT_TRUE(c.Cancel(*id).ok());
  j = JobSummaryJson(job, c.scheduler().pool(), false);
  EXPECT_EQ(j["state"], "cancelled");
  EXPECT_TRUE(j["started_us"].is_null()) << j.dump();
  EXPECT_TRUE(j["finished_us"].is_number_integer()) << j.dump();
}

}  // namespace
}  // namespace hmpmd
