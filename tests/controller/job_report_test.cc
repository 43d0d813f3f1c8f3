// A job's summary as REST gives it (JobSummaryJson), from a controller that
// is never Run: its jobs are never dispatched.
#include "hmpmd/controller/job_report.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "hmpmd/controller/controller.h"
#include "hmpmd/controller/job_spec_parser.h"
#include "hmpmd/protocol/json_text.h"
#include "hmpmd/sim/pool_spec.h"
#include "hmpmd/sim/simulator.h"

namespace hmpmd {
namespace {

TEST(JobReportTest, AJobNotStartedOrNotEndedHasNullTimes) {
  ControllerOptions o;
  o.listen = "tcp://127.0.0.1:0";
  Controller c(o);
  auto id = c.Submit({R"({"name":"j","tasks":[{"id":"a","kernel":"noop"}]})"});
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

// TraceText writes the trace event by event (no document of about 2 KB a
// run): the same text as TraceJson's dump, and valid JSON.
TEST(JobReportTest, TraceTextIsTraceJsonsText) {
  SimOptions so;
  so.pool = MakePoolSpec(4);
  auto sim = Simulator::Create(so);
  ASSERT_TRUE(sim.ok()) << sim.status().ToString();
  auto spec = ParseJobSpec(R"({"name":"j","repeat":3,"tasks":[
      {"id":"a","kernel":"spin","args":{"us":100}},
      {"id":"b","kernel":"spin","args":{"us":50},"inputs":["a"],"core":"vector"},
      {"id":"\u00e9","kernel":"noop","inputs":["a","b"]}]})");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  auto graph = JobGraph::Build(std::move(spec).value());
  ASSERT_TRUE(graph.ok()) << graph.status().ToString();
  auto id = (*sim)->Submit(std::move(graph).value());
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  ASSERT_TRUE((*sim)->Run().ok());
  const JobRun& job = *(*sim)->scheduler().job(*id);
  const ResourcePool& pool = (*sim)->scheduler().pool();
  const std::string text = TraceText(job, pool);
  EXPECT_EQ(text, JsonText(TraceJson(job, pool)));
  const nlohmann::json parsed = nlohmann::json::parse(text);
  int complete = 0;
  for (const auto& e : parsed["traceEvents"]) complete += e["ph"] == "X";
  EXPECT_EQ(complete, 9);
}

}  // namespace
}  // namespace hmpmd
